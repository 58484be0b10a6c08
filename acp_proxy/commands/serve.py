"""``acp-proxy serve``: the RFD's ``/acp`` endpoint (Streamable HTTP and WebSocket) in front
of a stdio agent, one agent process per ACP connection, every connection recorded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import click

from acp_proxy.commands.metrics_options import metrics_options
from acp_proxy.commands.options import grace_option, parse_listen_option, queue_option
from acp_proxy.commands.otlp_live import LiveExport, otlp_live_options
from acp_proxy.commands.redact_options import redact_options
from acp_proxy.commands.tls_options import cafile_option, peer_tls, server_tls, tls_server_options
from acp_proxy.commands.ws import (
    HEARTBEAT_OPTION,
    MAX_MESSAGE_OPTION,
    RECORD_OPTION,
    TOKEN_OPTION,
    check_server_options,
    run_recording_server,
)

if TYPE_CHECKING:
    from acp_proxy.formats.redact import RedactRules


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
@redact_options(stored=True)
@metrics_options
@tls_server_options
@cafile_option
@click.argument("agent_command", nargs=-1, metavar="-- AGENT [ARGS]...")
def serve_command(
    listen: tuple[str, int],
    upstream: str | None,
    record: Path | str | None,
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
    tls_cert: str | None = None,
    tls_key: str | None = None,
    cafile: str | None = None,
    redact: RedactRules | None = None,
    metrics: tuple[str, int] | None = None,
    metrics_token: str | None = None,
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
    problem = None
    if upstream is not None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = f"not an http:// URL: {upstream!r}"
    check_server_options(host, upstream, agent_command, token, problem)
    tls, upstream_tls = server_tls(tls_cert, tls_key), peer_tls(cafile)
    from acp_proxy.transport.http.endpoint import AcpEndpoint, serve_endpoint  # aiohttp: lazily

    run_recording_server(
        lambda settings: serve_endpoint(AcpEndpoint(settings), host, port),
        record=record,
        queue_mb=queue_mb,
        spool_mb=spool_mb,
        otlp=otlp,
        agent_command=agent_command,
        upstream=upstream,
        token=token,
        allow_origins=allow_origins,
        max_message=max_message,
        heartbeat=heartbeat,
        grace=grace,
        label=label,
        tls=tls,
        upstream_tls=upstream_tls,
        redact=redact,
        metrics=metrics,
        metrics_token=metrics_token,
    )
