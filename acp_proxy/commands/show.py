"""``acp-proxy show DB``: a recording as a conversation a person can read.

Options and the choice of connections; the rendering is :mod:`acp_proxy.report.conversation`.
"""

from __future__ import annotations

from pathlib import Path

import click

from acp_proxy.commands.common import RECORDING_ARG, recording, single_option, terminal_options
from acp_proxy.console import Terminal
from acp_proxy.report.conversation import Renderer, print_conversation, print_json
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError


@click.command("show")
@RECORDING_ARG
@single_option("--session", "-s", "session_id", help="Only this session (across connections).")
@single_option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option(
    "--raw", is_flag=True, help="Print every frame as recorded (JSON text) instead of folding."
)
@click.option("--json", "as_json", is_flag=True, help="Print the reconstructed state as JSON.")
@terminal_options()
def show_command(
    recording_path: Path,
    session_id: str | None,
    connection_id: int | None,
    raw: bool,
    as_json: bool,
    terminal: Terminal,
) -> None:
    """Show the conversation: who said what, thoughts, tool calls, plans, notices, latencies.

    Messages and tool calls are rebuilt from their streamed updates (chunks appended,
    upserts replacing). Notices are marked live-only, updates this version does not know
    are printed as raw JSON in place, requests show their response and latency (-> client
    to agent, <- agent to client). On a terminal: colour, lines that fit its width (message
    text wrapped, the rest cut with …; --wide for whole lines) and a pager; piped: plain
    whole lines.

    \b
    Examples:
      acp-proxy show session.db
      acp-proxy show session.db --session sess_abc123 | less
      acp-proxy show session.db --connection 2 --json | jq '.connections[0].sessions'
    """
    with recording(recording_path) as db:
        reader = RecordingReader(db)
        rows = reader.connections(sizes=False)
        if connection_id is not None:
            rows = [r for r in rows if r.id == connection_id]
            if not rows:
                raise RecordingError(f"no connection {connection_id} in this recording")
        if session_id is not None:
            wanted = set(reader.session_connections(session_id))
            if not wanted:
                raise RecordingError(f"no session {session_id!r} in this recording")
            rows = [r for r in rows if r.id in wanted]
            if not rows:
                raise RecordingError(f"session {session_id!r} is not in connection {connection_id}")
        if as_json:
            print_json(reader, rows, session_id)
            return
        if not rows:
            click.echo(f"{recording_path}: no connections recorded yet")
            return
        renderer = Renderer(terminal, lambda line: click.echo(line, color=terminal.colour))
        print_conversation(renderer, reader, rows, session_id, raw=raw)
