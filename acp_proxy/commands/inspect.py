"""``acp-proxy ls`` and ``acp-proxy dump``: the minimal readers of a recording."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from acp_proxy.commands.common import (
    RECORDING_ARG,
    fmt_bytes,
    fmt_duration,
    fmt_exit,
    fmt_frame_what,
    fmt_time,
    recording,
)
from acp_proxy.record.reader import get_connection, iter_frames, list_connections
from acp_proxy.wire.frame import C2A


def _agent_name(cmd: list[str] | None, info: object) -> str:
    if isinstance(info, dict):
        name = info.get("title") or info.get("name")
        if name:
            version = info.get("version")
            return f"{name} {version}" if version else str(name)
    if cmd:
        return " ".join(cmd)
    return "-"


@click.command("ls")
@RECORDING_ARG
@click.option("--json", "as_json", is_flag=True, help="One JSON object per connection.")
def ls_command(recording_path: Path, as_json: bool) -> None:
    """List the connections in a recording: when, which agent, frames, duration, exit code.

    One row per connection (one per proxied agent process or WebSocket connection): start
    time, duration ("running" while a proxy still records it), transport, negotiated
    protocol version, agent name, frames and bytes recorded, the agent's exit status and
    the frames the recorder had to drop.

    \b
    Examples:
      acp-proxy ls session.db
      acp-proxy ls session.db --json | jq .frame_count
    """
    import orjson

    with recording(recording_path) as db:
        rows = list_connections(db)
        if as_json:
            for r in rows:
                click.echo(orjson.dumps({k: getattr(r, k) for k in r.__slots__}).decode())
            return
        if not rows:
            click.echo(f"{recording_path}: no connections recorded yet")
            return
        header = (
            "#",
            "started",
            "duration",
            "transport",
            "v",
            "agent",
            "frames",
            "bytes",
            "exit",
            "dropped",
        )
        table = [
            (
                str(r.id),
                fmt_time(r.started_at),
                fmt_duration(r.duration),
                r.transport,
                str(r.protocol_version or "-"),
                _agent_name(r.agent_command, r.agent_info)[:40],
                str(r.frame_count),
                fmt_bytes(r.byte_count),
                fmt_exit(r.exit_status),
                str(r.frames_dropped),
            )
            for r in rows
        ]
        widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(header)]
        click.echo("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for t in table:
            click.echo("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)))


@click.command("dump")
@RECORDING_ARG
@click.option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
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
            get_connection(db, connection_id)
        stderr_rows: list[tuple[int, int, int, bytes]] = []
        if with_stderr:
            query = "SELECT connection_id, seq, mono_ns, raw FROM stderr_lines"
            args: list[object] = []
            if connection_id is not None:
                query += " WHERE connection_id = ?"
                args.append(connection_id)
            stderr_rows = [
                (r[0], r[1], r[2], bytes(r[3]))
                for r in db.execute(query + " ORDER BY connection_id, seq", args)
            ]
        current = None
        t0 = 0
        si = 0
        for f in iter_frames(db, connection_id=connection_id):
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
            offset = (f.mono_ns - t0) / 1e9
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
