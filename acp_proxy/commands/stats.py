"""``acp-proxy stats DB``: counts, bytes and latencies per method; turns per session.

Counts and bytes come from SQL aggregation over the index columns; latencies and turns
from one streamed pass that reads raw bytes only for responses, prompts, state updates and
batches (:class:`~acp_proxy.acp.stats.StatsAccumulator`), so memory stays flat.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import orjson

from acp_proxy.acp.stats import NEEDS_PAYLOAD_SQL, StatsAccumulator
from acp_proxy.commands.common import RECORDING_ARG, fmt_bytes, recording
from acp_proxy.record.schema import RecordingError
from acp_proxy.wire.jsonrpc import parse_json


def _where(connection_id: int | None) -> tuple[str, list[Any]]:
    if connection_id is None:
        return "", []
    return "WHERE connection_id = ?", [connection_id]


def collect(db: sqlite3.Connection, connection_id: int | None = None) -> dict[str, Any]:
    """All statistics of a recording (or one connection) as plain data."""
    where, args = _where(connection_id)
    overview = db.execute(
        f"SELECT count(*), coalesce(sum(size), 0), count(DISTINCT connection_id), "
        f"count(DISTINCT session_id) FROM frames {where}",
        args,
    ).fetchone()
    methods = [
        {
            "method": r[0],
            "direction": r[1],
            "requests": r[2],
            "notifications": r[3],
            "responses": r[4],
            "frames": r[5],
            "bytes": r[6],
        }
        for r in db.execute(
            f"""SELECT coalesce(method, '(' || kind || ')'),
                       CASE WHEN kind = 'response'
                            THEN CASE direction WHEN 'c2a' THEN 'a2c' ELSE 'c2a' END
                            ELSE direction END AS dir,
                       sum(kind = 'request'), sum(kind = 'notification'), sum(kind = 'response'),
                       count(*), sum(size)
                FROM frames {where} GROUP BY 1, 2 ORDER BY count(*) DESC, 1""",
            args,
        )
    ]
    updates = [
        {"variant": r[0], "count": r[1], "bytes": r[2]}
        for r in db.execute(
            f"SELECT update_kind, count(*), sum(size) FROM frames "
            f"{where + ' AND' if where else 'WHERE'} update_kind IS NOT NULL "
            f"GROUP BY update_kind ORDER BY count(*) DESC, update_kind",
            args,
        )
    ]
    acc = StatsAccumulator()
    cur = db.execute(
        f"SELECT connection_id, direction, kind, rpc_id, method, session_id, update_kind, "
        f"mono_ns, CASE WHEN {NEEDS_PAYLOAD_SQL} THEN raw END, size FROM frames {where} "
        f"ORDER BY connection_id, seq",
        args,
    )
    for r in cur:
        payload = parse_json(bytes(r[8]))[0] if r[8] is not None else None
        acc.feed(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], payload, r[9])
    acc.finish()
    derived = acc.to_json()
    latency = {(x["method"], x["direction"]): x for x in derived["latency"]}
    for m in methods:
        lat = latency.get((m["method"], m["direction"]))
        if lat is not None:
            m.update({k: v for k, v in lat.items() if k not in ("method", "direction")})
    sessions = derived["sessions"]  # by lineage, with their frames and bytes
    return {
        "frames": overview[0],
        "bytes": overview[1],
        "connections": overview[2],
        "sessions": sessions,
        "methods": methods,
        "updates": updates,
    }


def _fmt_ms(value: Any) -> str:
    if value is None:
        return "-"
    ms = float(value)
    return f"{ms:.1f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], right: set[int]) -> None:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    click.echo(line(header))
    for r in rows:
        click.echo(line(r))


@click.command("stats")
@RECORDING_ARG
@click.option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as one JSON object.")
def stats_command(recording_path: Path, connection_id: int | None, as_json: bool) -> None:
    """Per method: counts, bytes, latency p50/p99/max. Per session: turns and durations.

    Requests are paired with responses per direction (both sides number their own
    requests). A turn runs from session/prompt to its v1 result or the v2 idle state
    update (an agent-initiated running..idle stretch counts too).

    \b
    Examples:
      acp-proxy stats session.db
      acp-proxy stats session.db --json | jq '.methods[] | select(.method == "session/prompt")'
    """
    with recording(recording_path) as db:
        if (
            connection_id is not None
            and not db.execute("SELECT 1 FROM connections WHERE id = ?", [connection_id]).fetchone()
        ):
            raise RecordingError(f"no connection {connection_id} in this recording")
        data = collect(db, connection_id)
    if as_json:
        click.echo(orjson.dumps(data).decode())
        return
    click.echo(
        f"{data['connections']} connection(s), {len(data['sessions'])} session(s), "
        f"{data['frames']} frames, {fmt_bytes(data['bytes'])}"
    )
    click.echo()
    rows = [
        (
            m["method"],
            "->" if m["direction"] == "c2a" else "<-",
            str(m["requests"]),
            str(m["notifications"]),
            str(m["responses"]),
            str(m.get("errors", 0)),
            fmt_bytes(m["bytes"]),
            _fmt_ms(m.get("p50Ms")),
            _fmt_ms(m.get("p99Ms")),
            _fmt_ms(m.get("maxMs")),
        )
        for m in data["methods"]
    ]
    header = ("method", "dir", "req", "notif", "resp", "err", "bytes", "p50", "p99", "max")
    _table(header, rows, right={2, 3, 4, 5, 6, 7, 8, 9})
    if data["updates"]:
        click.echo()
        _table(
            ("session/update variant", "count", "bytes"),
            [(u["variant"], str(u["count"]), fmt_bytes(u["bytes"])) for u in data["updates"]],
            right={1, 2},
        )
    if data["sessions"]:
        click.echo()
        srows = [
            (
                f"{s['sessionId']} (conn {','.join(map(str, s['connections']))})",
                str(s["frames"]),
                str(s["turns"]),
                str(s.get("unfinished", 0)),
                _fmt_ms(s.get("totalMs")),
                _fmt_ms(s.get("p50Ms")),
                _fmt_ms(s.get("maxMs")),
                ", ".join(f"{k} x{v}" for k, v in (s.get("stopReasons") or {}).items()),
            )
            for s in data["sessions"]
        ]
        _table(
            ("session", "frames", "turns", "unfinished", "total", "p50", "max", "stop reasons"),
            srows,
            right={1, 2, 3, 4, 5, 6},
        )
