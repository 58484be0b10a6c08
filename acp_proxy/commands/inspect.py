"""``acp-proxy ls`` and ``acp-proxy dump``: the minimal readers of a recording."""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import replace
from pathlib import Path

import click

from acp_proxy.analysis.aggregates import aggregates
from acp_proxy.commands.common import (
    RECORDING_ARG,
    fmt_bytes,
    fmt_duration,
    recording,
    single_option,
    terminal_options,
)
from acp_proxy.console import Terminal, arrow
from acp_proxy.console import table as table_lines
from acp_proxy.formats.jsonl import escape_strings, escape_surrogates
from acp_proxy.report.text import fmt_frame_what, fmt_time
from acp_proxy.store.engine import location_name
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import ConnectionRow


def _who(info: object) -> str | None:
    """``name version`` of a ``clientInfo``/``agentInfo`` object (its title if it has one)."""
    if not isinstance(info, dict):
        return None
    name = info.get("title") or info.get("name")
    if not name:
        return None
    version = info.get("version")
    return f"{name} {version}" if version else str(name)


def _agent_name(cmd: list[str] | None, info: object) -> str:
    who = _who(info)
    if who:
        return who
    if isinstance(cmd, list) and cmd:
        return " ".join(str(part) for part in cmd)
    return "-"


def _duration(row: ConnectionRow, now: float) -> float | None:
    """Start to end; to now while running; None when either end cannot be known."""
    end = now if row.state == "running" else row.state_ended_at
    if end is None or not math.isfinite(row.started_at):
        return None
    return end - row.started_at


@click.command("ls")
@RECORDING_ARG
@click.option("--json", "as_json", is_flag=True, help="One JSON object per connection.")
@click.option("--host", help="Only the connections recorded on this host (the host column).")
@click.option(
    "--last",
    type=click.IntRange(min=1),
    metavar="N",
    help="Only the newest N connections (of those --host keeps); quick on a big store.",
)
@click.option(
    "--recount",
    is_flag=True,
    help="Count every frame, not the totals kept for ended connections.",
)
@terminal_options()
def ls_command(
    recording_path: Path,
    as_json: bool,
    host: str | None,
    last: int | None,
    recount: bool,
    terminal: Terminal,
) -> None:
    """List the connections in a recording: when, which agent and client, how it ended.

    One row per connection (one per proxied agent process or WebSocket connection): start
    time, duration, how it ended (`exit 0`, `signal 9`, `running` while a proxy still
    records it, `ended (unknown end)` when the proxy or its recorder went away before the
    connection ended, e.g. a proxy killed with SIGKILL; --json's end_reason says which:
    proxy-lost, recorder-lost or none), transport, negotiated protocol version, agent
    and client (name and version from initialize), the --label, the host it was recorded on
    (when known), frames and bytes recorded, and the frames the recorder had to drop
    (counted once for an ended connection and kept in the recording; --recount: count again).
    On a terminal the table fits its width (names and labels cut with …, the start time
    shortened, a column with one value in every row left out); --wide or a pipe: all of it.

    \b
    Examples:
      acp-proxy ls session.db
      acp-proxy ls session.db --json | jq .frame_count
      acp-proxy ls postgresql://me@db.internal/acp --host agent-b --last 20
    """
    import orjson

    now = time.time()
    with recording(recording_path) as db:
        reader = RecordingReader(db)
        if recount:
            rows = reader.connections(now=now, host=host, last=last)
        else:
            rows = reader.connections(now=now, host=host, last=last, sizes=False, counts=False)
            totals = aggregates(recording_path, reader, rows, "size")
            rows = [
                replace(r, frame_count=totals[r.id].frames, byte_count=totals[r.id].bytes)
                for r in rows
            ]
        if as_json:
            for r in rows:
                obj = {k: getattr(r, k) for k in r.__slots__}
                obj["ended"] = obj.pop("state_reason")
                click.echo(orjson.dumps(escape_strings(obj), default=str).decode())
            return
        if not rows:
            if host is not None:
                click.echo(f"{location_name(recording_path)}: no connection recorded on {host}")
            else:
                click.echo(f"{location_name(recording_path)}: no connections recorded yet")
            return
        with_host = any(r.host for r in rows)
        header = [
            "#",
            "started",
            "duration",
            "ended",
            "transport",
            "v",
            "agent",
            "client",
            "label",
            *(["host"] if with_host else []),
            "frames",
            "bytes",
            "dropped",
        ]
        table = []
        for r in rows:
            table.append(
                [
                    str(r.id),
                    fmt_time(r.started_at) if terminal.width is None else _when(r.started_at),
                    fmt_duration(_duration(r, now)),
                    _state(terminal, r.state_reason),
                    str(r.transport),
                    str(r.protocol_version or "-"),
                    _cell(_agent_name(r.agent_command, r.agent_info), 40),
                    _cell(_who(r.client_info) or "-", 30),
                    _cell(r.label or "-", 24),
                    *([_cell(r.host or "-", 24)] if with_host else []),
                    str(r.frame_count),
                    fmt_bytes(r.byte_count),
                    str(r.frames_dropped),
                ]
            )
        # cut (to the terminal's width) the names and the label, never ids, times or counts
        names = ("agent", "client", "label", "host")
        shrink = [header.index(name) for name in names if name in header]
        # at a narrow terminal a column with one value in every row may go (host, dropped)
        maybe = [len(header) - 1, *([header.index("host")] if with_host else [])]
        spare = [i for i in maybe if len({t[i] for t in table}) == 1]
        for line in table_lines(header, table, terminal.width, shrink, spare=spare):
            click.echo(line)


def _when(ts: object) -> str:
    """A start time in a narrow table: ``12-02 14:05`` (the whole time when piped or --wide)."""
    full = fmt_time(ts)
    return full[5:16] if len(full) == 19 and full[4] == "-" else full


def _state(terminal: Terminal, reason: str) -> str:
    """How a connection ended, coloured: a clean exit green, running yellow, the rest red."""
    if reason == "exit 0":
        return terminal.style(reason, "green")
    if reason == "running":
        return terminal.style(reason, "yellow")
    return terminal.style(reason, "red")


def _cell(text: object, width: int) -> str:
    """One table cell: one line, at most ``width`` characters (… when cut)."""
    flat = escape_surrogates(" ".join(str(text).split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command("dump")
@RECORDING_ARG
@single_option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option("--full", is_flag=True, help="Print whole frames instead of one line each.")
@click.option("--stderr", "with_stderr", is_flag=True, help="Include the agent's stderr lines.")
@terminal_options(wide=False)
def dump_command(
    recording_path: Path,
    connection_id: int | None,
    full: bool,
    with_stderr: bool,
    terminal: Terminal,
) -> None:
    """Print frames in order with direction arrows (-> client to agent, <- agent to client).

    Each line shows the frame's sequence number, its time since the connection started, the
    direction, its JSON-RPC kind, method, id and sessionUpdate variant, then the raw frame
    (cut to the terminal's width unless --full or piped). For the conversation itself use
    `acp-proxy show`.

    \b
    Examples:
      acp-proxy dump session.db
      acp-proxy dump session.db -c 2 --stderr      # one connection, with the agent's log
      acp-proxy dump session.db --full | less -S
    """
    # (piped, a frame is still cut, at 160 columns: --full prints it whole)
    width = terminal.width or shutil.get_terminal_size((160, 20)).columns
    with recording(recording_path) as db:
        if connection_id is not None:
            RecordingReader(db).connection(connection_id)
        stderr_rows: list[tuple[int, int, int, bytes]] = []
        if with_stderr:
            stderr_rows = [
                (line.connection_id, line.seq, line.mono_ns, line.raw)
                for line in RecordingReader(db).stderr_lines(connection_id)
            ]
        current = None
        t0 = 0
        si = 0
        for f in RecordingReader(db).frames(connection_id=connection_id):
            if f.connection_id != current:
                current = f.connection_id
                t0 = f.mono_ns
                click.echo(f"== connection {current}")
            while si < len(stderr_rows) and (stderr_rows[si][0], stderr_rows[si][2]) <= (
                f.connection_id,
                f.mono_ns,
            ):
                s = stderr_rows[si]
                click.echo(f"   stderr  {s[3].decode('utf-8', 'replace').rstrip()}")
                si += 1
            what = fmt_frame_what(f, id_mark="id=")
            both = isinstance(f.mono_ns, int) and isinstance(t0, int)
            offset = (f.mono_ns - t0) / 1e9 if both else math.nan  # (a hand-edited file)
            text = f.raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
            prefix = f"{f.seq:>6} {offset:>9.3f}s {arrow(f.direction)} {what}"
            if full:
                click.echo(terminal.style(prefix, bold=True))
                click.echo(f"       {text}")
            else:
                room = max(20, width - len(prefix) - 3)
                body = text if len(text) <= room else text[: room - 1] + "…"
                click.echo(terminal.fit(f"{terminal.style(prefix, bold=True)}  {body}"))
        for s in stderr_rows[si:]:
            click.echo(f"   stderr  {s[3].decode('utf-8', 'replace').rstrip()}")
