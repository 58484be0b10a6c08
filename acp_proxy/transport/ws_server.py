"""The WebSocket server of ``acp-proxy ws`` (and ``replay --listen``): handshake, dispatch, run.

:class:`WsServer` answers ``GET /acp`` upgrades after the handshake checks (Origin, token,
upgrade) and hands each connection to its mode: an agent process per connection
(:mod:`acp_proxy.transport.ws_agent`), an upstream WebSocket per connection
(:mod:`acp_proxy.transport.ws_upstream`), or a pluggable :data:`SessionHandler` (replay).
:func:`serve` listens with the shared HTTP limits of :mod:`acp_proxy.transport.http_server`
until SIGINT/SIGTERM/SIGHUP, then closes every connection (1001) and waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from acp_proxy.record.writer import ConnectionRecorder, Recorder
from acp_proxy.transport.http_server import app_runner
from acp_proxy.transport.process import DEFAULT_GRACE_SECONDS
from acp_proxy.transport.tls import scheme_for
from acp_proxy.transport.ws_agent import serve_agent
from acp_proxy.transport.ws_bridge import (
    ACP_PATH,
    CLOSE_GOING_AWAY,
    CONNECTION_ID_HEADER,
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_MESSAGE,
    headers_worth_keeping,
    origin_allowed,
    token_from,
    token_ok,
)
from acp_proxy.transport.ws_io import ServerWebSocket, client_ws_class, close_quietly, log
from acp_proxy.transport.ws_upstream import serve_upstream

# -- the server -----------------------------------------------------------------------------


SessionHandler = Callable[[web.Request, "WsServer", str], Awaitable[web.StreamResponse]]
"""A pluggable per-connection handler: ``(request, server, connection_id) -> response``.

Used for modes other than agent and upstream (``acp-proxy replay --listen``). The handler
does the upgrade itself with :meth:`WsServer.accept` and returns the WebSocket.
"""


@dataclass
class WsSettings:
    """Everything a :class:`WsServer` needs besides its socket."""

    recorder: Recorder
    agent_argv: Sequence[str] | None = None
    upstream: str | None = None
    handler: SessionHandler | None = None
    token: str | None = None
    allow_origins: Sequence[str] = ()
    max_message: int = DEFAULT_MAX_MESSAGE
    heartbeat: float | None = DEFAULT_HEARTBEAT
    grace: float = DEFAULT_GRACE_SECONDS
    label: str | None = None
    tls: ssl.SSLContext | None = None  # listen with TLS (https:// / wss://)
    upstream_tls: ssl.SSLContext | None = None  # verify an https:// / wss:// --upstream


@dataclass
class WsServer:
    """An aiohttp application serving ACP over WebSocket at ``/acp``."""

    settings: WsSettings
    active: set[web.WebSocketResponse] = field(default_factory=set)
    _session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024)
        app.router.add_get(ACP_PATH, self._handle)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        app.on_shutdown.append(self._on_shutdown)
        app.on_cleanup.append(self._on_cleanup)
        return app

    # -- handshake ------------------------------------------------------------------------

    def _peer(self, request: web.Request) -> str:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if isinstance(peer, tuple) and len(peer) >= 2:
            host = str(peer[0])
            return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
        return str(request.remote or "?")

    def refuse(self, request: web.Request, status: int, why: str, **headers: str) -> web.Response:
        log(
            f"refused {self._peer(request)} {request.method} {request.path_qs.split('?')[0]}: "
            f"{status} {why}"
        )
        return web.Response(status=status, text=why + "\n", headers=headers)

    async def _not_found(self, request: web.Request) -> web.Response:
        if request.path == ACP_PATH:
            return self.refuse(request, 405, "use GET with a WebSocket upgrade", Allow="GET")
        return self.refuse(request, 404, f"no endpoint here; ACP over WebSocket is at {ACP_PATH}")

    def check_access(self, request: web.Request) -> web.Response | None:
        """Origin and token checks every request passes; an HTTP error response, or ``None``."""
        s = self.settings
        origin = request.headers.get("Origin")
        if not origin_allowed(origin, s.allow_origins):
            return self.refuse(request, 403, f"origin {origin} is not allowed (see --allow-origin)")
        if s.token is not None and not token_ok(
            token_from(request.headers, request.query), s.token
        ):
            return self.refuse(
                request,
                401,
                "missing or wrong token (Authorization: Bearer TOKEN)",
                **{"WWW-Authenticate": 'Bearer realm="acp-proxy"'},
            )
        return None

    def check_handshake(self, request: web.Request) -> web.Response | None:
        """Origin, token and upgrade checks; an HTTP error response, or ``None`` to accept."""
        refused = self.check_access(request)
        if refused is not None:
            return refused
        ws = web.WebSocketResponse()
        if not ws.can_prepare(request).ok:
            return self.refuse(
                request,
                426,
                "expected a WebSocket upgrade (ACP over WebSocket)",
                **{"Upgrade": "websocket", "Connection": "Upgrade"},
            )
        return None

    def websocket(self, protocols: Sequence[str] = ()) -> ServerWebSocket:
        """A server WebSocket with this server's limits, not yet prepared."""
        return ServerWebSocket(
            max_msg_size=self.settings.max_message,
            heartbeat=self.settings.heartbeat,
            protocols=protocols,
            decode_text=False,
        )

    async def accept(
        self,
        request: web.Request,
        connection_id: str,
        protocols: Sequence[str] = (),
        extra_headers: Sequence[tuple[str, str]] = (),
    ) -> ServerWebSocket:
        """Complete the upgrade with ``Acp-Connection-Id`` (and ``extra_headers``)."""
        ws = self.websocket(protocols)
        for name, value in extra_headers:
            ws.headers.add(name, value)
        if CONNECTION_ID_HEADER not in ws.headers:
            ws.headers[CONNECTION_ID_HEADER] = connection_id
        await ws.prepare(request)
        request["acp_proxy.ws"] = ws
        self.active.add(ws)
        return ws

    def record_connection(
        self, transport: str, request: web.Request, ws: web.WebSocketResponse, **fields: Any
    ) -> ConnectionRecorder:
        s = self.settings
        headers = headers_worth_keeping(request.headers.items(), ws.headers.items())
        return s.recorder.connection(
            transport, peer=self._peer(request), headers=headers, label=s.label, **fields
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        refused = self.check_handshake(request)
        if refused is not None:
            return refused
        connection_id = uuid.uuid4().hex
        s = self.settings
        try:
            if s.handler is not None:
                return await s.handler(request, self, connection_id)
            if s.upstream is not None:
                return await serve_upstream(self, request, connection_id)
            return await serve_agent(self, request, connection_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one connection's bug never takes the server down
            log(f"connection {connection_id}: internal error: {type(exc).__name__}: {exc}")
            ws = request.get("acp_proxy.ws")
            if isinstance(ws, web.WebSocketResponse):  # already upgraded: close it instead
                self.active.discard(ws)
                await close_quietly(ws, 1011, "internal error in acp-proxy")
                return ws
            return web.Response(status=500, text="internal error\n")

    def client_session(self) -> aiohttp.ClientSession:
        """The client session upstream connections share (made on first use)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                ws_response_class=client_ws_class(self.settings.max_message),
                timeout=aiohttp.ClientTimeout(total=None, connect=30),
                connector=aiohttp.TCPConnector(ssl=self.settings.upstream_tls or True),
            )
        return self._session

    # -- lifecycle ------------------------------------------------------------------------

    async def _on_shutdown(self, app: web.Application) -> None:
        for ws in list(self.active):
            await close_quietly(ws, CLOSE_GOING_AWAY, "acp-proxy is shutting down")

    async def _on_cleanup(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()


# -- running a server -----------------------------------------------------------------------


def format_url(host: str, port: int, scheme: str = "ws") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}{ACP_PATH}"


async def serve(
    server: WsServer,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Listen on ``host:port`` until SIGINT/SIGTERM (or ``stop`` is set), then shut down.

    The listening URL, with the real port when ``port`` is 0, goes to ``on_ready`` (default:
    one line on stderr).
    """
    runner = app_runner(server.app(), shutdown_timeout=30)
    await runner.setup()
    tls = server.settings.tls
    site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=tls)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = runner.addresses[0]
    shown = host if host not in ("", "0.0.0.0", "::") else str(bound[0])
    url = format_url(shown, int(bound[1]), scheme_for("ws", tls))
    if on_ready is not None:
        on_ready(url)
    else:
        log(f"listening on {url}")
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
    try:
        await stop.wait()
    finally:
        try:
            await runner.cleanup()  # a second signal meanwhile is absorbed, not fatal
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
