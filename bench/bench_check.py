"""Benchmark: ``acp-proxy check`` throughput on a generated recording (default 1M frames).

The recording is one v2 connection of realistic turns (prompt, running, user_message,
response, thought and message chunks of ~300 bytes, tool call updates, idle), written
straight into SQLite. The benchmark then runs the real ``acp-proxy check --json`` on it and
reports wall and CPU time, frames/s, MB/s and the command's peak RSS (its memory should not
grow with the recording), against the baseline of merely reading every frame's raw bytes
and parsing each once with orjson (same run, a fresh interpreter each: the ratios are
printed), plus the engine alone in process (no SQLite) per frame beside orjson's parse.

``--compare DIR`` (repeatable) also runs ``check`` with each other checkout ``DIR`` first on
``PYTHONPATH``, in the same rounds (``--rounds N``: baseline, this code, each DIR, N times
over; the best CPU of each is the figure); ``--recording DB`` checks an existing recording
of this shape instead of writing one.

Usage::

    python bench/bench_check.py [--frames 1000000] [--keep DIR] [--compare DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from acp_proxy.acp.conformance import ConnectionChecker
from acp_proxy.wire.frame import wire_key

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.acp.conformance.helpers import write_generated  # noqa: E402

SID = "sess_bench"

BASELINE = """
import sqlite3, sys, orjson
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
for (raw,) in conn.execute("SELECT raw FROM frames ORDER BY connection_id, seq"):
    orjson.loads(raw)
"""


def _line(obj: object) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _update(update: dict[str, object]) -> bytes:
    return _line(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": SID, "update": update},
        }
    )


def frames(total: int) -> Iterator[tuple[str, bytes]]:
    """``total`` frames (or a few more, to finish the last turn) of clean v2 traffic."""
    yield (
        "c2a",
        _line(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": 2, "capabilities": {}},
            }
        ),
    )
    yield (
        "a2c",
        _line(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {"protocolVersion": 2, "capabilities": {"session": {}}},
            }
        ),
    )
    yield (
        "c2a",
        _line(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/new",
                "params": {"cwd": "/work", "mcpServers": []},
            }
        ),
    )
    yield "a2c", _line({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}})
    n = 4
    rid = 2
    text = {"type": "text", "text": "lorem ipsum dolor sit amet " * 10}
    while n < total:
        mid, aid, tid = f"u{rid}", f"m{rid}", f"t{rid}"
        turn = [
            (
                "c2a",
                _line(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "method": "session/prompt",
                        "params": {"sessionId": SID, "prompt": [text]},
                    }
                ),
            ),
            ("a2c", _update({"sessionUpdate": "state_update", "state": "running"})),
            (
                "a2c",
                _update({"sessionUpdate": "user_message", "messageId": mid, "content": [text]}),
            ),
            ("a2c", _line({"jsonrpc": "2.0", "id": rid, "result": {"messageId": mid}})),
        ]
        thought = _update(
            {"sessionUpdate": "agent_thought_chunk", "messageId": aid, "content": text}
        )
        chunk = _update({"sessionUpdate": "agent_message_chunk", "messageId": aid, "content": text})
        turn += [("a2c", thought)] * 10 + [("a2c", chunk)] * 30
        turn += [
            (
                "a2c",
                _update(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": tid,
                        "status": "in_progress",
                        "kind": "read",
                    }
                ),
            ),
            (
                "a2c",
                _update(
                    {"sessionUpdate": "tool_call_update", "toolCallId": tid, "status": "completed"}
                ),
            ),
            (
                "a2c",
                _update(
                    {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
                ),
            ),
        ]
        yield from turn
        n += len(turn)
        rid += 1


def write(path: Path, total: int) -> tuple[int, int]:
    """Write the recording; return its frame count and raw size in bytes."""
    size = 0

    def sized() -> Iterator[tuple[str, bytes]]:
        nonlocal size
        for direction, raw in frames(total):
            size += len(raw)
            yield direction, raw

    count = write_generated(path, sized())  # type: ignore[arg-type]
    return count, size


def _timed(cmd: list[str], tree: str | None = None) -> tuple[float, float, float, bytes]:
    """Run ``cmd`` (with ``tree`` first on ``PYTHONPATH`` when given): its wall time, CPU time
    (user + system), peak RSS in MiB and stdout."""
    # bytecode written and read, as an installed package has it (PYTHONDONTWRITEBYTECODE
    # would time the compiling of every module at each start)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if tree is not None:
        rest = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, rest) if p)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    out = proc.stdout.read() if proc.stdout is not None else b""
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: check found errors
        raise SystemExit(f"{cmd[0]} failed: status {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="Write the recording here and keep it.")
    parser.add_argument("--recording", type=Path, help="Check this recording (written before).")
    parser.add_argument(
        "--compare", metavar="DIR", action="append", default=[], help="another checkout (A/B)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternated rounds (best CPU)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-check-"))
    path = args.recording or (args.keep or tmp) / "bench-check.db"
    try:
        t0 = time.perf_counter()
        if args.recording is None:
            count, size = write(path, args.frames)
        else:
            count = size = 0
            for _d, raw in frames(args.frames):
                count, size = count + 1, size + len(raw)
        written = "given" if args.recording else f"written in {time.perf_counter() - t0:.1f}s"
        print(f"recording: {count} frames, {size / 2**20:.1f} MiB raw, {written}")

        # The baseline: read every frame's raw bytes in order and parse each once with orjson
        # (a fresh interpreter, as check's); the target is check <= 2x its time. Wall time
        # and CPU time (user + system: steadier on a loaded machine) of each.
        exe = shutil.which("acp-proxy") or "acp-proxy"
        trees: list[str | None] = [None, *args.compare]
        write(tmp / "warm-up.db", 100)
        for tree in trees:  # (each checkout's bytecode written before the timed runs)
            _timed([exe, "check", str(tmp / "warm-up.db"), "--json"], tree)
        best: dict[str | None, float] = {}
        for _round in range(args.rounds):
            print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            base, base_cpu, _rss, _out = _timed([sys.executable, "-c", BASELINE, str(path)])
            best["baseline"] = min(best.get("baseline", base_cpu), base_cpu)
            print(
                f"read + orjson.loads every frame: {base:.2f}s ({base_cpu:.2f}s CPU), "
                f"{count / base:,.0f} frames/s"
            )
            for tree in trees:
                wall, cpu, rss, out = _timed([exe, "check", str(path), "--json"], tree)
                best[tree] = min(best.get(tree, cpu), cpu)
                summary = orjson.loads(out)["summary"]
                print(
                    f"acp-proxy check{f' @{tree}' if tree else ''}: {wall:.2f}s ({cpu:.2f}s CPU), "
                    f"{count / wall:,.0f} frames/s, {size / 2**20 / wall:.1f} MiB/s, "
                    f"peak RSS {rss:.0f} MiB, "
                    f"errors {summary['error']} warnings {summary['warning']}"
                )
                print(
                    f"check / (read + parse) = {wall / base:.2f} wall, {cpu / base_cpu:.2f} CPU "
                    "(target <= 2)"
                )
        if args.rounds > 1:
            for tree in trees:
                print(
                    f"best CPU of {args.rounds} rounds, check{f' @{tree}' if tree else ''}: "
                    f"{best[tree]:.2f}s, {best[tree] / best['baseline']:.2f}x the baseline's "
                    f"{best['baseline']:.2f}s"
                )

        rows = [(wire_key(seq, d, 0), raw) for seq, (d, raw) in enumerate(frames(args.frames), 1)]
        checker = ConnectionChecker(1, transport="stdio")
        t0 = time.process_time()
        checker.feed_rows(rows)  # type: ignore[arg-type]
        checker.finish()
        engine = time.process_time() - t0
        t0 = time.process_time()
        for _key, raw in rows:
            orjson.loads(raw)
        parse = time.process_time() - t0
        print(
            f"engine alone (rows in memory): {engine / count * 1e6:.2f} us CPU per frame, "
            f"of which orjson.loads {parse / count * 1e6:.2f}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
