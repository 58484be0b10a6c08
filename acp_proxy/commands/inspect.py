"""``acp-proxy ls`` and ``acp-proxy dump``: the minimal readers of a recording."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import click

from acp_proxy.commands.common import (
    RECORDING_ARG,
    fmt_bytes,
    fmt_duration,
    fmt_frame_what,
    fmt_time,
    recording,
    single_option,
)
from acp_proxy.formats.jsonl import escape_strings, escape_surrogates
from acp_proxy.store.engine import location_name
from acp_proxy.store.reader import ConnectionRow, RecordingReader
from acp_proxy.wire.frame import C2A


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
def ls_command(recording_path: Path, as_json: bool, host: str | None, last: int | None) -> None:
    """List the connections in a recording: when, which agent and client, how it ended.

    One row per connection (one per proxied agent process or WebSocket connection): start
    time, duration, how it ended (``exit 0``, ``signal 9``, ``running`` while a proxy still
    records it, ``ended (unknown end)`` when the proxy or its recorder went away before the
    connection ended, e.g. a proxy killed with SIGKILL; --json's end_reason says which:
    proxy-lost, recorder-lost or none), transport, negotiated protocol version, agent
    and client (name and version from initialize), the --label, the host it was recorded on
    (when known), frames and bytes recorded, and the frames the recorder had to drop.

    \b
    Examples:
      acp-proxy ls session.db
      acp-proxy ls session.db --json | jq .frame_count
      acp-proxy ls postgresql://me@db.internal/acp --host agent-b --last 20
    """
    import orjson

    now = time.time()
    with recording(recording_path) as db:
        rows = RecordingReader(db).connections(now=now, host=host, last=last)
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
                    fmt_time(r.started_at),
                    fmt_duration(_duration(r, now)),
                    r.state_reason,
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
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(header)]
        click.echo("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
        for t in table:
            click.echo("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)).rstrip())


def _cell(text: object, width: int) -> str:
    """One table cell: one line, at most ``width`` characters (… when cut)."""
    flat = escape_surrogates(" ".join(str(text).split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@click.command("dump")
@RECORDING_ARG
@single_option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option("--full", is_flag=True, help="Print whole frames instead of one line each.")
@click.option("--stderr", "with_stderr", is_flag=True, help="Include the agent's stderr lines.")
def dump_command(
    recording_path: Path, connection_id: int | None, full: bool, with_stderr: bool
) -> None:
    """Print frames in order with direction arrows (-> client to agent, <- agent to client).

    Each line shows the frame's sequence number, its time since the connection started, the
    direction, its JSON-RPC kind, method, id and sessionUpdate variant, then the raw frame
    (cut to the terminal width unless --full). For the conversation itself use
    `acp-proxy show`.

    \b
    Examples:
      acp-proxy dump session.db
      acp-proxy dump session.db -c 2 --stderr      # one connection, with the agent's log
      acp-proxy dump session.db --full | less -S
    """
    width = shutil.get_terminal_size((160, 20)).columns
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
            arrow = "->" if f.direction == C2A else "<-"
            what = fmt_frame_what(f, id_mark="id=")
            both = isinstance(f.mono_ns, int) and isinstance(t0, int)
            offset = (f.mono_ns - t0) / 1e9 if both else math.nan  # (a hand-edited file)
            text = f.raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
            prefix = f"{f.seq:>6} {offset:>9.3f}s {arrow} {what}"
            if full:
                click.echo(prefix)
                click.echo(f"       {text}")
            else:
                room = max(20, width - len(prefix) - 3)
                body = text if len(text) <= room else text[: room - 1] + "…"
                click.echo(f"{prefix}  {body}")
        for s in stderr_rows[si:]:
            click.echo(f"   stderr  {s[3].decode('utf-8', 'replace').rstrip()}")
