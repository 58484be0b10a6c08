"""``acp-proxy stats DB``: counts, bytes and latencies per method; turns per session.

The numbers come from :func:`acp_proxy.analysis.connection.collect_stats`: per connection,
counts and bytes aggregated by the reader over the index columns; latencies and turns from
one streamed pass that reads raw bytes only for responses, prompts, state updates and
batches (:class:`~acp_proxy.acp.stats.StatsAccumulator`), so memory stays flat. Ended
connections' results are kept (:mod:`acp_proxy.analysis.aggregates`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
import orjson

from acp_proxy.analysis.connection import collect_stats
from acp_proxy.commands.common import (
    RECORDING_ARG,
    fmt_bytes,
    recording,
    single_option,
    terminal_options,
)
from acp_proxy.console import Terminal, arrow, table
from acp_proxy.store.reader import RecordingReader


def _fmt_ms(value: Any) -> str:
    if value is None:
        return "-"
    ms = float(value)
    return f"{ms:.1f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _table(
    terminal: Terminal,
    header: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    right: set[int],
    shrink: Sequence[int] = (0,),
) -> None:
    for line in table(header, rows, terminal.width, shrink, right=right):
        click.echo(line)


@click.command("stats")
@RECORDING_ARG
@single_option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as one JSON object.")
@click.option(
    "--recount",
    is_flag=True,
    help="Count from every frame, not from the totals kept for ended connections.",
)
@terminal_options()
def stats_command(
    recording_path: Path,
    connection_id: int | None,
    as_json: bool,
    recount: bool,
    terminal: Terminal,
) -> None:
    """Per method: counts, bytes, latency p50/p99/max. Per session: turns and durations.

    Requests are paired with responses per direction (both sides number their own
    requests). A turn runs from session/prompt to its v1 result or the v2 idle state
    update (an agent-initiated running..idle stretch counts too). dir: -> client to agent,
    <- agent to client. On a terminal the tables fit its width (--wide: whole).
    Ended connections' totals are derived once and kept in the recording (when it can be
    written), so only connections still recording are read again; --recount reads all.

    \b
    Examples:
      acp-proxy stats session.db
      acp-proxy stats session.db --json | jq '.methods[] | select(.method == "session/prompt")'
    """
    with recording(recording_path) as db:
        reader = RecordingReader(db)
        if connection_id is not None:
            reader.connection(connection_id, sizes=False)  # "no connection N" if there is none
        data = collect_stats(reader, connection_id, location=None if recount else recording_path)
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
            m["method"] or "(no method)",
            terminal.style(arrow(m["direction"]), bold=True),
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
    _table(terminal, header, rows, right={2, 3, 4, 5, 6, 7, 8, 9})
    if data["updates"]:
        click.echo()
        _table(
            terminal,
            ("session/update variant", "count", "bytes"),
            [
                (u["variant"] or "(none)", str(u["count"]), fmt_bytes(u["bytes"]))
                for u in data["updates"]
            ],
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
            terminal,
            ("session", "frames", "turns", "unfinished", "total", "p50", "max", "stop reasons"),
            srows,
            right={1, 2, 3, 4, 5, 6},
            shrink=(0, 7),
        )
