"""What a WebSocket mode is handed for one connection, and the settings and refusals of a server.

A mode (agent, upstream, replay) never sees the server: as mitmproxy hands a layer a
``Context``, :class:`~acp_proxy.transport.ws.server.WsServer` hands each mode a
:class:`Handshake` for the upgrade request it checked, with the fields and callbacks the mode
needs and nothing more. Defined below the server and the modes, so neither imports the other.
:func:`refuse` and :func:`peer_of` are the HTTP refusal (one line on stderr) and the peer's
address every ``/acp`` server (WebSocket, Streamable HTTP, its relay) answers and records with.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from acp_proxy.recorder.handle import ConnectionRecorder, Recorder
from acp_proxy.transport.process.agent import DEFAULT_GRACE_SECONDS
from acp_proxy.transport.ws.rules import (
    CONNECTION_ID_HEADER,
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_MESSAGE,
    headers_worth_keeping,
)
from acp_proxy.transport.ws.sockets import ServerWebSocket, log

SessionHandler = Callable[["Handshake"], Awaitable[web.StreamResponse]]
"""A pluggable per-connection mode: ``(handshake) -> response``.

Used for modes other than agent and upstream (``acp-proxy replay --listen``). The handler
does the upgrade itself with :meth:`Handshake.accept` and returns the WebSocket.
"""


@dataclass
class WsSettings:
    """Everything a :class:`~acp_proxy.transport.ws.server.WsServer` needs besides its socket."""

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


def peer_of(request: web.Request) -> str:
    """The client's ``host:port`` (``[v6]:port``), as logged and recorded."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(request.remote or "?")


def refuse(request: web.Request, status: int, why: str, **headers: str) -> web.Response:
    """An HTTP error answer to ``request``, logged as one line on stderr."""
    path = request.path_qs.split("?")[0]
    log(f"refused {peer_of(request)} {request.method} {path}: {status} {why}")
    return web.Response(status=status, text=why + "\n", headers=headers)


@dataclass(frozen=True)
class Handshake:
    """One upgrade request that passed the server's checks, as its mode sees it.

    ``opened`` is the server's callback for a completed upgrade (it closes the WebSocket at
    shutdown); ``client_session`` its shared client session, for modes that dial out.
    """

    request: web.Request
    connection_id: str
    settings: WsSettings
    opened: Callable[[ServerWebSocket], None]
    client_session: Callable[[], aiohttp.ClientSession]

    def refuse(self, status: int, why: str, **headers: str) -> web.Response:
        """Answer the request with an HTTP error instead of upgrading (see :func:`refuse`)."""
        return refuse(self.request, status, why, **headers)

    async def accept(
        self, protocols: Sequence[str] = (), extra_headers: Sequence[tuple[str, str]] = ()
    ) -> ServerWebSocket:
        """Complete the upgrade with ``Acp-Connection-Id`` (and ``extra_headers``)."""
        s = self.settings
        ws = ServerWebSocket(
            max_msg_size=s.max_message,
            heartbeat=s.heartbeat,
            protocols=protocols,
            decode_text=False,
        )
        for name, value in extra_headers:
            ws.headers.add(name, value)
        if CONNECTION_ID_HEADER not in ws.headers:
            ws.headers[CONNECTION_ID_HEADER] = self.connection_id
        await ws.prepare(self.request)
        self.request["acp_proxy.ws"] = ws
        self.opened(ws)
        return ws

    def record_connection(
        self, transport: str, ws: web.WebSocketResponse, **fields: Any
    ) -> ConnectionRecorder:
        """Open the recorded connection: the peer, the headers worth keeping, the label."""
        s = self.settings
        headers = headers_worth_keeping(self.request.headers.items(), ws.headers.items())
        return s.recorder.connection(
            transport, peer=peer_of(self.request), headers=headers, label=s.label, **fields
        )
