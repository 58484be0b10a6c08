#!/usr/bin/env python3
"""Regenerate ``recordings/`` from the demo agent, through the real proxy.

Each scenario runs the scripted demo client (``acp_proxy.demo.client --reconnect``) against
``acp-proxy --record DB -- python -m acp_proxy.demo.agent``: the client starts the proxy
twice, so the recording holds two connections (the second one takes the session back), and
the result is exported in the JSONL export format (``docs/export.md``) without redaction
(the demo carries no secrets; the script checks that a redacted export changes nothing).

Scenarios:

- ``v1-load.jsonl``: protocol 1; connection 2 uses ``session/load`` (full replay).
- ``v2-resume-replay.jsonl``: protocol 2; connection 2 uses ``session/resume`` with
  ``replayFrom: {"type": "start"}``.

Both contain live-only ``notice`` updates and an unknown ``_vendor_demo`` update.

Timestamps make byte-identical regeneration impossible, so by default the committed copies
are normalised (``--normalize-times``): every ``ts``/``started_at``/``ended_at`` is rewritten
to a fixed clock (2026-01-01T00:00:00Z plus 10 ms per event, in the original order) and
``mono_ns`` to the same 10 ms steps; process ids are dropped, the proxy's (temporary)
working directory becomes the client's and the interpreter path in ``agent_command``
becomes ``python``. Raw frame bytes are never touched. The order in which
the two directions interleave can still differ between runs (it is real concurrency). The
stdio proxy records a line just *after* forwarding it, so now and then a fast response is
numbered before its request; the script records again (up to 10 times) until every
response follows its request and no client request is numbered before the agent frame it
waited for (:func:`client_ran_ahead`), so the committed files are causally ordered.

Usage: ``python scripts/make_recordings.py [--out recordings] [--no-normalize-times]``
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from acp_proxy.formats.jsonl import export_recording  # noqa: E402
from acp_proxy.store.schema import connect  # noqa: E402

SCENARIOS = {
    "v1-load.jsonl": 1,
    "v2-resume-replay.jsonl": 2,
}
EPOCH = 1767225600.0  # 2026-01-01T00:00:00Z
STEP_S = 0.01
STEP_NS = 10_000_000
ATTEMPTS = 10


_IN_DIR = (
    "import os, sys; os.chdir(sys.argv[1]); "
    "os.execv(sys.executable, [sys.executable, '-m', 'acp_proxy', *sys.argv[2:]])"
)


def record_scenario(protocol: int, db: Path, cwd: str, timeout: float) -> str:
    """Run the demo client twice through the recording proxy; returns its transcript.

    The proxy and the agent run in a fresh directory holding the agent's ``--state`` file
    (named relatively, so the agent's stderr does not carry a temporary path); the client
    runs in ``cwd``, which is what its ``session/new`` sends.
    """
    agent = [sys.executable, "-m", "acp_proxy.demo.agent"]
    with tempfile.TemporaryDirectory() as state_dir:
        proxy = [sys.executable, "-c", _IN_DIR, state_dir, "--record", str(db), "--", *agent]
        client = [
            sys.executable, "-m", "acp_proxy.demo.client",
            "--protocol", str(protocol), "--reconnect", "--", *proxy,
        ]  # fmt: skip
        env = {
            **os.environ,
            "ACP_DEMO_STATE": "state.json",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
            ),
        }
        env.pop("ACP_PROXY_RECORD", None)
        done = subprocess.run(
            client, cwd=cwd, env=env, capture_output=True, timeout=timeout, check=False
        )
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode("utf-8", "replace"))
        raise SystemExit(f"make_recordings: the demo client failed ({done.returncode})")
    return done.stdout.decode("utf-8", "replace")


def unpaired_responses(db: Path) -> int:
    """Responses the indexer could not pair with an earlier request in the recording."""
    conn = connect(db, create=False)
    try:
        query = "SELECT count(*) FROM frames WHERE kind = 'response' AND method IS NULL"
        return int(conn.execute(query).fetchone()[0])
    finally:
        conn.close()


def client_ran_ahead(db: Path) -> int:
    """Client requests recorded before the agent frame they waited for.

    The scripted client sends one request at a time and, in v2, waits for the idle
    ``state_update`` that ends a turn. A request recorded while an earlier request of its
    connection is unanswered, or while a v2 turn is running, means the recorder numbered
    frames in another order than they crossed; a replay of such a file would withhold the
    awaited frame until the client sends the request that waits for it.
    """
    conn = connect(db, create=False)
    try:
        query = (
            "SELECT connection_id, direction, kind, rpc_id, update_kind, raw FROM frames "
            "ORDER BY connection_id, seq"
        )
        count = 0
        open_requests: dict[int, set[str]] = {}
        busy: dict[int, bool] = {}
        for cid, direction, kind, rpc_id, update_kind, raw in conn.execute(query):
            pending = open_requests.setdefault(cid, set())
            if direction == "c2a" and kind == "request":
                if pending or busy.get(cid):
                    count += 1
                pending.add(rpc_id)
            elif direction == "a2c" and kind == "response":
                pending.discard(rpc_id)
            elif direction == "a2c" and update_kind == "state_update":
                update = orjson.loads(raw)["params"]["update"]
                busy[cid] = update.get("state") in ("running", "requires_action")
        return count
    finally:
        conn.close()


def normalize(lines: list[bytes], cwd: str) -> list[bytes]:
    """Rewrite clocks and process details to fixed values; raw bytes stay as they are."""
    records: list[dict[str, Any]] = [orjson.loads(line) for line in lines]
    stamps: list[tuple[float, int, int, str]] = []  # (original ts, order, record, field)
    for i, rec in enumerate(records):
        for key in ("started_at", "ts", "ended_at"):
            value = rec.get(key)
            if isinstance(value, (int, float)):
                stamps.append((float(value), len(stamps), i, key))
    stamps.sort()
    for rank, (_, _, i, key) in enumerate(stamps, start=1):
        records[i][key] = round(EPOCH + rank * STEP_S, 2)
        if key == "ts" and "mono_ns" in records[i]:
            records[i]["mono_ns"] = rank * STEP_NS
    for rec in records:
        if rec.get("type") == "connection":
            for key in ("pid", "proxy_pid"):
                if key in rec:
                    rec[key] = None
            if "cwd" in rec:
                rec["cwd"] = cwd
            argv = rec.get("agent_command")
            if isinstance(argv, list) and argv and "python" in Path(str(argv[0])).name:
                rec["agent_command"] = ["python", *argv[1:]]
    return [
        orjson.dumps(r, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE) for r in records
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "recordings", help="output directory")
    parser.add_argument(
        "--normalize-times",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="rewrite clocks and pids to fixed values (default: on)",
    )
    parser.add_argument("--cwd", default="/", help="working directory of the demo client")
    parser.add_argument("--keep-db", action="store_true", help="also keep the .db recordings")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, protocol in SCENARIOS.items():
        with tempfile.TemporaryDirectory() as tmp:
            for attempt in range(1, ATTEMPTS + 1):
                db = Path(tmp) / f"demo{attempt}.db"
                record_scenario(protocol, db, args.cwd, args.timeout)
                unpaired = unpaired_responses(db)
                ahead = client_ran_ahead(db)
                if not unpaired and not ahead:
                    break
                if ahead:
                    print(
                        f"{name}: attempt {attempt}: {ahead} client request(s) recorded before "
                        "the agent frame they waited for; recording again",
                        file=sys.stderr,
                    )
                    continue
                print(
                    f"{name}: attempt {attempt}: {unpaired} response(s) recorded before their "
                    "request (the proxy records after forwarding); recording again",
                    file=sys.stderr,
                )
            conn = connect(db, create=False)
            try:
                plain = io.BytesIO()
                summary = export_recording(conn, plain, redact=False)
                redacted = io.BytesIO()
                if export_recording(conn, redacted, redact=True).redacted:
                    raise SystemExit(f"make_recordings: {name}: the demo produced secrets")
            finally:
                conn.close()
            lines = plain.getvalue().splitlines(keepends=True)
            if args.normalize_times:
                lines = normalize(lines, args.cwd)
            (args.out / name).write_bytes(b"".join(lines))
            if args.keep_db:
                (args.out / name.replace(".jsonl", ".db")).write_bytes(db.read_bytes())
            print(
                f"{args.out / name}: {summary.connections} connections, {summary.frames} frames, "
                f"{summary.stderr_lines} stderr lines, {summary.events} events"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
