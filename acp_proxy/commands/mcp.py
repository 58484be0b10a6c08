"""``acp-proxy mcp STORE``: serve a recording to coding agents as a read-only MCP server."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from acp_proxy.commands.common import RECORDING_ARG, serving
from acp_proxy.commands.options import parse_listen_option
from acp_proxy.store.schema import RecordingError
from acp_proxy.transport.address import check_listen

TOKEN_HELP = "Require this token on every HTTP request (Authorization: Bearer, or ?token=)."


@click.command("mcp")
@RECORDING_ARG
@click.option(
    "--listen",
    default=None,
    callback=parse_listen_option,
    metavar="HOST:PORT",
    help="Serve Streamable HTTP on this address (path /mcp) instead of stdio; anything but "
    "loopback needs --token. Port 0 picks a free port.",
)
@click.option("--token", envvar="ACP_PROXY_MCP_TOKEN", show_envvar=True, help=TOKEN_HELP)
def mcp_command(recording_path: Path, listen: tuple[str, int] | None, token: str | None) -> None:
    """Serve a recording (a file or a postgresql:// URL) as a read-only MCP server.

    Tools: list_connections, connection_summary, messages, message, search, findings,
    stats, diff, timeline. Nothing writes; a store still being recorded is read live.
    Over stdio by default (what Claude Code and Zed start); --listen for HTTP.

    \b
    Examples:
      claude mcp add acp-recordings -- acp-proxy mcp ~/acp/sessions.db
      acp-proxy mcp sessions.db --listen 127.0.0.1:8765   # http://127.0.0.1:8765/mcp
      acp-proxy mcp postgresql://acp@db/acp --listen 0.0.0.0:8765 --token "$TOKEN"
    """
    from acp_proxy.web import store

    try:
        from acp_proxy.mcp import server  # the MCP SDK is imported only for this command
    except ImportError as exc:
        raise click.ClickException(
            f"acp-proxy mcp needs the MCP SDK ({exc}): pip install 'acp-proxy[mcp]'"
        ) from None

    if listen is not None:
        try:
            check_listen(listen[0], token, what="the MCP server")
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    try:
        store.open_checked(recording_path)  # a bad STORE: one line, exit 1
    except RecordingError as exc:
        raise click.ClickException(str(exc)) from None
    if listen is None:
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_stdio(recording_path)
        return
    host, port = listen

    def ready(url: str) -> None:
        click.echo(
            f"acp-proxy: MCP server for {recording_path} on {url} (Ctrl-C to stop)", err=True
        )

    with serving(host, port):
        server.serve_http(recording_path, host, port, token=token, on_ready=ready)
