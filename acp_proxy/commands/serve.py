"""``acp-proxy serve``: the RFD's ``/acp`` endpoint (Streamable HTTP and WebSocket) in front
of a stdio agent, one agent process per ACP connection, every connection recorded."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import click

from acp_proxy.commands.common import MIB, grace_option, parse_listen_option, queue_option
from acp_proxy.commands.otlp_live import LiveExport, otlp_live_options
from acp_proxy.commands.ws import (
    HEARTBEAT_OPTION,
    MAX_MESSAGE_OPTION,
    RECORD_OPTION,
    TOKEN_OPTION,
)
from acp_proxy.record.writer import Recorder
from acp_proxy.transport.address import is_loopback


@click.command("serve", context_settings={"allow_interspersed_args": False})
@click.option(
    "--listen",
    default="127.0.0.1:8765",
    show_default=True,
    metavar="HOST:PORT",
    callback=parse_listen_option,
    help="Address to listen on (port 0 picks a free port; the URL is printed on stderr).",
)
@click.option(
    "--upstream",
    metavar="URL",
    help="Relay to this ACP endpoint (http://HOST:PORT/acp) instead of starting an agent: "
    "POST/GET/DELETE as HTTP, WebSocket upgrades as WebSocket.",
)
@RECORD_OPTION
@click.option("--label", help="A label stored on every recorded connection.")
@TOKEN_OPTION
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Browser origin allowed to connect (repeatable; '*' allows any). Default: only pages "
    "served from localhost.",
)
@MAX_MESSAGE_OPTION
@HEARTBEAT_OPTION
@grace_option("Seconds an agent gets after its connection ends before SIGTERM (then SIGKILL).")
@queue_option(256)
@otlp_live_options
@click.argument("agent_command", nargs=-1, metavar="-- AGENT [ARGS]...")
def serve_command(
    listen: tuple[str, int],
    upstream: str | None,
    record: Path | None,
    label: str | None,
    token: str | None,
    allow_origins: tuple[str, ...],
    max_message: int,
    heartbeat: float,
    grace: float,
    queue_mb: int,
    spool_mb: int,
    agent_command: tuple[str, ...],
    otlp: LiveExport | None = None,
) -> None:
    """Serve ACP at http://HOST:PORT/acp: Streamable HTTP (POST + SSE) and WebSocket.

    Each ACP connection (an `initialize` POST, or a WebSocket upgrade) gets its own AGENT
    process over stdio. A POST body over --max-message-size is refused with 413, a WebSocket
    message over it closes with 1009. Binds 127.0.0.1 unless told otherwise; any other
    address requires --token (checked on every request).

    \b
    Examples:
      acp-proxy serve --record http.db -- python -m acp_proxy.demo.agent
      ACP_PROXY_TOKEN=s3cret acp-proxy serve --listen 0.0.0.0:8765 -- my-agent
      acp-proxy serve --upstream http://10.0.0.5:8000/acp --record remote.db
    """
    host, port = listen
    if upstream and agent_command:
        raise click.UsageError("give either --upstream URL or an agent command after --, not both")
    if not upstream and not agent_command:
        raise click.UsageError("no agent: put the agent command after -- (or use --upstream URL)")
    if upstream is not None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise click.UsageError(f"--upstream: not an http:// URL: {upstream!r}")
    if token is not None and not token.strip():
        raise click.UsageError("--token is empty")
    if not is_loopback(host) and token is None:
        raise click.UsageError(
            f"listening on {host} exposes the agent to the network: set a --token "
            "(or ACP_PROXY_TOKEN), or listen on 127.0.0.1"
        )
    if agent_command and "/" not in agent_command[0] and shutil.which(agent_command[0]) is None:
        click.echo(f"acp-proxy: agent command not found: {agent_command[0]}", err=True)
        sys.exit(127)
    from acp_proxy.transport.http_endpoint import AcpEndpoint, serve_endpoint  # aiohttp: lazily
    from acp_proxy.transport.ws_server import WsSettings

    with (otlp or LiveExport()).for_writer():
        recorder = Recorder(
            record, queue_bytes=queue_mb * MIB, spool_bytes=spool_mb * MIB, backend="process"
        )
    settings = WsSettings(
        recorder=recorder,
        agent_argv=list(agent_command) or None,
        upstream=upstream,
        token=token,
        allow_origins=allow_origins,
        max_message=max_message,
        heartbeat=heartbeat if heartbeat > 0 else None,
        grace=grace,
        label=label,
    )
    try:
        asyncio.run(serve_endpoint(AcpEndpoint(settings), host, port))
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        recorder.close()
