"""``acp-proxy ws`` (a recording WebSocket server) and ``acp-proxy connect`` (stdio bridge)."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from acp_proxy.commands.common import run_stdio_bridge
from acp_proxy.commands.metrics_options import (
    check_metrics_option,
    live_check_for_writer,
    metrics_options,
    start_metrics_option,
)
from acp_proxy.commands.options import (
    MIB,
    RECORD_PATH,
    grace_option,
    parse_listen_option,
    queue_option,
)
from acp_proxy.commands.otlp_live import LiveExport, otlp_live_options
from acp_proxy.commands.redact_options import redact_options
from acp_proxy.commands.tls_options import cafile_option, peer_tls, server_tls, tls_server_options
from acp_proxy.commands.ui import start_ui, ui_options
from acp_proxy.recorder.handle import Recorder
from acp_proxy.transport.address import ListenError, is_loopback, parse_listen
from acp_proxy.transport.ws.rules import (
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_MESSAGE,
    ws_url_ok,
)

if TYPE_CHECKING:
    import ssl

    from acp_proxy.formats.redact import RedactRules
    from acp_proxy.replay.engine import ReplayEngine
    from acp_proxy.transport.ws.handshake import WsSettings

_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class ByteSize(click.ParamType):  # type: ignore[type-arg]
    """A byte count: ``1048576``, ``512K``, ``256M``, ``1G`` (binary units)."""

    name = "SIZE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        match = _SIZE.match(str(value))
        if not match:
            self.fail(f"{value!r} is not a size (examples: 1048576, 512K, 256M, 1G)", param, ctx)
        number = int(match.group(1))
        unit = (match.group(2) or "").lower()[:1]
        size = number * _UNITS[unit]
        if size < 1:
            self.fail("the size must be at least 1 byte", param, ctx)
        return size


RECORD_OPTION = click.option(
    "--record",
    type=RECORD_PATH,
    envvar="ACP_PROXY_RECORD",
    show_envvar=True,
    help="SQLite file (created 0600 if missing) or postgresql:// URL to record into. One row "
    "per ACP connection (a WebSocket connection, or a Streamable HTTP connection from its "
    "initialize).",
)
MAX_MESSAGE_OPTION = click.option(
    "--max-message-size",
    "max_message",
    type=ByteSize(),
    default=f"{DEFAULT_MAX_MESSAGE // 2**20}M",  # (read as --max-message-size 256M would be)
    show_default=True,
    help="Largest WebSocket message accepted; a bigger one closes the connection with 1009.",
)
HEARTBEAT_OPTION = click.option(
    "--heartbeat",
    type=click.FloatRange(min=0),
    default=DEFAULT_HEARTBEAT,
    show_default=True,
    help="Seconds between keepalive pings; a peer that misses the pong is dropped. 0: off.",
)
TOKEN_OPTION = click.option(
    "--token",
    envvar="ACP_PROXY_TOKEN",
    show_envvar=True,
    help="Shared secret (prefer the environment variable: command lines are visible to others).",
)


@click.command(
    "ws",
    context_settings={"allow_interspersed_args": False},
)
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
    help="Proxy to this WebSocket (ws://HOST:PORT/acp) instead of starting an agent.",
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
@grace_option("Seconds an agent gets after its connection closes before SIGTERM (then SIGKILL).")
@queue_option(256)
@otlp_live_options
@redact_options(stored=True)
@ui_options
@metrics_options
@tls_server_options
@cafile_option
@click.argument("agent_command", nargs=-1, metavar="[-- AGENT [ARGS]...]")
def ws_command(
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
    ui: tuple[str, int] | None,
    ui_token: str | None,
    agent_command: tuple[str, ...],
    otlp: LiveExport | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    cafile: str | None = None,
    redact: RedactRules | None = None,
    metrics: tuple[str, int] | None = None,
    metrics_token: str | None = None,
) -> None:
    """Serve ACP over WebSocket at ws://HOST:PORT/acp, recording every connection.

    Each WebSocket connection gets its own AGENT process over stdio (one text frame = one
    line), or with --upstream its own connection to another ACP WebSocket server. Binds
    127.0.0.1 unless told otherwise; any other address requires --token.

    \b
    Examples:
      acp-proxy ws --record ws.db -- python -m acp_proxy.demo.agent
      acp-proxy ws --listen 127.0.0.1:0 --upstream ws://10.0.0.5:8765/acp --record up.db
      ACP_PROXY_TOKEN=s3cret acp-proxy ws --listen 0.0.0.0:8765 -- my-agent
    """
    host, port = listen
    check_server_options(
        host, upstream, agent_command, token, ws_url_ok(upstream) if upstream else None
    )
    tls, upstream_tls = server_tls(tls_cert, tls_key), peer_tls(cafile)
    from acp_proxy.transport.ws.server import WsServer, serve  # aiohttp: lazily

    inspector = start_ui(ui, ui_token, record)
    try:
        run_recording_server(
            lambda settings: serve(WsServer(settings), host, port),
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
    finally:
        if inspector is not None:
            inspector.stop()


@click.command("connect")
@click.argument("url")
@RECORD_OPTION
@click.option("--label", help="A label stored on the recorded connection.")
@TOKEN_OPTION
@click.option(
    "--header",
    "-H",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="Extra handshake header (repeatable), e.g. -H 'Cookie: affinity=abc'.",
)
@MAX_MESSAGE_OPTION
@HEARTBEAT_OPTION
@grace_option("After stdin ends, seconds to wait for answers to requests still pending.")
@queue_option(256)
@otlp_live_options
@redact_options(stored=True)
@cafile_option
def connect_command(
    url: str,
    record: Path | str | None,
    label: str | None,
    token: str | None,
    headers: tuple[str, ...],
    max_message: int,
    heartbeat: float,
    grace: float,
    queue_mb: int,
    spool_mb: int,
    otlp: LiveExport | None = None,
    cafile: str | None = None,
    redact: RedactRules | None = None,
) -> None:
    """Bridge stdio to an ACP agent: stdin lines -> messages -> stdout lines.

    ws:// and wss:// URLs: WebSocket (one text frame per line). http:// and https:// URLs:
    Streamable HTTP (POST per line, SSE streams to stdout; see docs/http.md).

    For editors that only launch stdio agents: configure `acp-proxy connect URL` as the
    agent command. Exits 0 when stdin ends or the server closes normally, 1 otherwise.

    \b
    Examples:
      acp-proxy connect ws://127.0.0.1:8765/acp
      ACP_PROXY_TOKEN=s3cret acp-proxy connect ws://build-box:8765/acp --record remote.db
    """
    problem = ws_url_ok(url)
    if problem:
        raise click.UsageError(problem)
    pairs: list[tuple[str, str]] = []
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise click.UsageError(f"bad --header {header!r}: use 'Name: value'")
        pairs.append((name.strip(), value.strip()))
    tls = peer_tls(cafile)
    from acp_proxy.transport.ws.connect import ConnectSettings, run_connect  # aiohttp: lazily

    with (otlp or LiveExport()).for_writer():
        recorder = Recorder(
            record,
            queue_bytes=queue_mb * MIB,
            spool_bytes=spool_mb * MIB,
            backend="process",
            redact=redact,
        )
    if url.lower().startswith(("http://", "https://")):  # Streamable HTTP (docs/http.md)
        from acp_proxy.commands.connect_http import connect_http

        connect_http(url, recorder, pairs, token, max_message, label, grace, tls)
    run_stdio_bridge(
        run_connect(
            ConnectSettings(
                url=url,
                recorder=recorder,
                headers=pairs,
                token=token,
                max_message=max_message,
                heartbeat=heartbeat if heartbeat > 0 else None,
                label=label,
                grace=grace,
                tls=tls,
            )
        ),
        recorder,
    )


def serve_replay_listen(
    listen: str,
    new_engine: Callable[[], ReplayEngine],
    *,
    answer_timeout: float,
    record: Path | str | None = None,
    tls: ssl.SSLContext | None = None,
    metrics: tuple[str, int] | None = None,
    metrics_token: str | None = None,
) -> None:
    """``acp-proxy replay RECORDING --listen HOST:PORT``: the replay over WebSocket.

    The same handshake rules as ``acp-proxy ws``: 127.0.0.1 unless ``ACP_PROXY_TOKEN`` is set
    (then the token is required on every upgrade), browser origins limited to localhost.
    """
    import os

    try:
        host, port = parse_listen(listen)
    except ListenError as exc:
        raise click.UsageError(str(exc)) from None
    token = os.environ.get("ACP_PROXY_TOKEN") or None
    if not is_loopback(host) and token is None:
        raise click.UsageError(
            f"listening on {host} exposes the replay to the network: set ACP_PROXY_TOKEN, or "
            "listen on 127.0.0.1"
        )
    from acp_proxy.transport.http.replay import serve_replay_both  # both halves of /acp

    check_metrics_option(metrics, metrics_token)
    with live_check_for_writer(metrics):
        recorder = Recorder(record, backend="process")
    exporter = None
    try:
        exporter = start_metrics_option(metrics, metrics_token, recorder, tls=tls)
        serve_replay_both(
            new_engine,
            host,
            port,
            recorder=recorder,
            token=token,
            answer_timeout=answer_timeout,
            tls=tls,
        )
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        recorder.close()
        if exporter is not None:
            exporter.stop()


def check_server_options(
    host: str,
    upstream: str | None,
    agent_command: tuple[str, ...],
    token: str | None,
    upstream_problem: str | None,
) -> None:
    """The usage checks ``ws`` and ``serve`` share: one agent source, a usable --upstream
    (``upstream_problem`` says what is wrong with it), a token off loopback, a findable agent.
    """
    if upstream and agent_command:
        raise click.UsageError("give either --upstream URL or an agent command after --, not both")
    if not upstream and not agent_command:
        raise click.UsageError("no agent: put the agent command after -- (or use --upstream URL)")
    if upstream_problem:
        raise click.UsageError(f"--upstream: {upstream_problem}")
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


def run_recording_server(
    serve_with: Callable[[WsSettings], Coroutine[Any, Any, None]],
    *,
    record: Path | str | None,
    queue_mb: int,
    spool_mb: int,
    otlp: LiveExport | None,
    agent_command: tuple[str, ...],
    upstream: str | None,
    token: str | None,
    allow_origins: tuple[str, ...],
    max_message: int,
    heartbeat: float,
    grace: float,
    label: str | None,
    tls: ssl.SSLContext | None = None,
    upstream_tls: ssl.SSLContext | None = None,
    redact: RedactRules | None = None,
    metrics: tuple[str, int] | None = None,
    metrics_token: str | None = None,
) -> None:
    """Open the recording, run ``serve_with(settings)`` until Ctrl-C, close the recording.

    The server half ``ws`` and ``serve`` share; a bind error is one ``Error:`` line.
    ``--metrics`` is served (with the server's TLS) for as long as the recording is open.
    """
    from acp_proxy.transport.ws.handshake import WsSettings  # aiohttp: lazily

    check_metrics_option(metrics, metrics_token)

    with (otlp or LiveExport()).for_writer(), live_check_for_writer(metrics):
        recorder = Recorder(
            record,
            queue_bytes=queue_mb * MIB,
            spool_bytes=spool_mb * MIB,
            backend="process",
            redact=redact,
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
        tls=tls,
        upstream_tls=upstream_tls,
    )
    exporter = None
    try:
        exporter = start_metrics_option(metrics, metrics_token, recorder, tls=tls)
        asyncio.run(serve_with(settings))
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        recorder.close()
        if exporter is not None:
            exporter.stop()
