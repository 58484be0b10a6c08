"""The whole ``/acp`` endpoint of ``acp-proxy serve``: Streamable HTTP and WebSocket in one.

:class:`AcpEndpoint` is the WebSocket server of :mod:`acp_proxy.transport.ws.server` (a GET
with ``Upgrade: websocket`` is handled exactly as by ``acp-proxy ws``) with the HTTP half of
the RFD added: ``POST`` (``initialize`` starts an agent and answers 200 with its response and
``Acp-Connection-Id``; every other message answers 202 and its response follows on SSE),
``GET`` with ``Accept: text/event-stream`` (the connection's stream, or with
``Acp-Session-Id`` a session's), ``DELETE`` (202; the agent ends). Every request passes the
same checks as a WebSocket handshake: the Origin allowlist and, when set, the token
(constant-time), then the RFD's: 415, 406, 400 (missing id, bad body), 404 (unknown
connection or session), 413 (body over ``--max-message-size``), 501 (batch).

Served by aiohttp, HTTP/1.1 (see docs/http.md for why that is what SDK clients speak).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from acp_proxy.recorder.handle import ConnectionRecorder
from acp_proxy.transport.http.agent import AgentConnection, AgentEnded, HttpConnection
from acp_proxy.transport.http.rules import (
    ACP_PATH,
    ATTACH_METHODS,
    CONNECTION_ID_HEADER,
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_SSE,
    SESSION_ID_HEADER,
    Post,
    accepts_sse,
    classify_post,
    is_json_type,
)
from acp_proxy.transport.http.upstream import HttpUpstream
from acp_proxy.transport.process.agent import AgentStartError, spawn_agent_async
from acp_proxy.transport.process.pipes import agent_pipes
from acp_proxy.transport.server_limits import header_timeout
from acp_proxy.transport.ws.handshake import peer_of, refuse
from acp_proxy.transport.ws.rules import (
    headers_worth_keeping,
)
from acp_proxy.transport.ws.server import WsServer, serve
from acp_proxy.transport.ws.sockets import log

INITIALIZE_TIMEOUT_SECONDS = 120.0
"""How long an ``initialize`` POST waits for the agent's answer (then 504, agent ended)."""


@dataclass
class AcpEndpoint(WsServer):
    """``/acp`` for both halves: the WebSocket server plus POST / SSE GET / DELETE."""

    connections: dict[str, HttpConnection] = field(default_factory=dict)
    ending: set[HttpConnection] = field(default_factory=set)
    relay: HttpUpstream | None = None
    http_backend: Callable[[str, ConnectionRecorder, str | None], HttpConnection] | None = None
    """What answers an HTTP connection instead of an agent process (the replay engine)."""

    def __post_init__(self) -> None:
        if self.settings.upstream is not None:
            self.relay = HttpUpstream(self.settings, self.settings.upstream)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1024)  # bodies are read (and capped) by hand
        app.router.add_route("GET", ACP_PATH, self._get)
        app.router.add_route("POST", ACP_PATH, self._post)
        app.router.add_route("DELETE", ACP_PATH, self._delete)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        app.on_shutdown.append(self._on_shutdown)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _not_found(self, request: web.Request) -> web.Response:
        if request.path == ACP_PATH:
            return refuse(request, 405, "use POST, GET or DELETE", Allow="GET, POST, DELETE")
        return refuse(request, 404, f"no endpoint here; ACP is at {ACP_PATH}")

    # -- checks every request passes ------------------------------------------------------

    def _connection(
        self, request: web.Request
    ) -> tuple[HttpConnection | None, web.Response | None]:
        connection_id = request.headers.get(CONNECTION_ID_HEADER)
        if not connection_id:
            return None, refuse(request, 400, f"missing {CONNECTION_ID_HEADER} header")
        conn = self.connections.get(connection_id)
        if conn is None:
            return None, refuse(request, 404, f"unknown {CONNECTION_ID_HEADER}")
        return conn, None

    def _note(
        self,
        conn: HttpConnection,
        request: web.Request,
        status: int,
        post: Post | None = None,
    ) -> None:
        """The ``http`` event of one request on a recorded connection."""
        detail: dict[str, Any] = {"method": request.method, "status": status}
        detail["connection"] = request.headers.get(CONNECTION_ID_HEADER) or conn.id
        session = request.headers.get(SESSION_ID_HEADER)
        if session is not None:
            detail["session"] = session
        if post is not None:
            if post.method is not None:
                detail["rpc"] = post.method
            if post.id is not None:
                detail["id"] = post.id
        conn.rec.event("http", detail)

    # -- POST -----------------------------------------------------------------------------

    async def _read_body(self, request: web.Request) -> bytes | web.Response:
        limit = self.settings.max_message
        too_big = f"the body is over the {limit}-byte limit (--max-message-size)"
        if request.content_length is not None and request.content_length > limit:
            return refuse(request, 413, too_big)
        content = request.content
        if content.is_eof():  # the whole body came with the headers: no wait, no timer
            body = content.read_nowait()
            if len(body) > limit:
                return refuse(request, 413, too_big, Connection="close")
            return body
        parts: list[bytes] = []
        size = 0
        stall = header_timeout()  # a body that stops coming is cut like a header that does
        while True:
            try:
                async with asyncio.timeout(stall):
                    chunk = await request.content.readany()
            except TimeoutError:
                why = f"the body stalled: nothing for {stall:g} s (ACP_PROXY_HEADER_TIMEOUT)"
                return refuse(request, 408, why, Connection="close")
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                return refuse(request, 413, too_big, Connection="close")
            parts.append(chunk)
        return b"".join(parts)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        refused = self.check_access(request)
        if refused is not None:
            return refused
        if self.relay is not None:  # --upstream: the upstream answers (after the size check)
            relayed = await self._read_body(request)
            if isinstance(relayed, web.Response):
                return relayed
            return await self.relay.post(request, relayed)
        known = self.connections.get(request.headers.get(CONNECTION_ID_HEADER) or "")
        if not is_json_type(request.headers.get("Content-Type")):
            if known is not None:
                self._note(known, request, 415)
            return refuse(request, 415, f"Content-Type must be {CONTENT_TYPE_JSON}")
        body = await self._read_body(request)
        if isinstance(body, web.Response):
            if known is not None:
                self._note(known, request, body.status)
            return body
        post = classify_post(body)
        if post.kind == "batch":
            status, why = 501, post.why
        elif post.kind == "invalid":
            status, why = 400, post.why
        elif post.is_initialize:
            return await self._initialize(request, post, body)
        else:
            conn, refused = self._connection(request)
            if refused is not None:
                return refused
            assert conn is not None
            return await self._message(request, conn, post, body)
        if known is not None:
            self._note(known, request, status, post)
        return refuse(request, status, why)

    async def _message(
        self, request: web.Request, conn: HttpConnection, post: Post, body: bytes
    ) -> web.Response:
        header = request.headers.get(SESSION_ID_HEADER)
        if post.session_scoped and header is None:
            self._note(conn, request, 400, post)
            return refuse(request, 400, f"{post.method} needs the {SESSION_ID_HEADER} header")
        attaching = post.method in ATTACH_METHODS and post.session_id == header
        if header is not None and not conn.knows_session(header) and not attaching:
            self._note(conn, request, 404, post)
            return refuse(request, 404, f"unknown {SESSION_ID_HEADER}")
        await conn.forward(post, body)
        self._note(conn, request, 202, post)
        return web.Response(status=202, headers={CONNECTION_ID_HEADER: conn.id})

    async def _initialize(self, request: web.Request, post: Post, body: bytes) -> web.Response:
        s = self.settings
        if self.http_backend is not None:
            connection_id = uuid.uuid4().hex
            rec = s.recorder.connection(
                "replay-http",
                peer=peer_of(request),
                headers=headers_worth_keeping(
                    request.headers.items(), [(CONNECTION_ID_HEADER, connection_id)]
                ),
                label=s.label,
            )
            return await self._open(
                request, post, body, self.http_backend(connection_id, rec, post.id)
            )
        assert s.agent_argv is not None
        try:
            agent = await spawn_agent_async(s.agent_argv, grace=s.grace)
        except AgentStartError as exc:
            return refuse(request, 502, f"cannot start the agent: {exc}")
        try:
            pipes = await agent_pipes(agent)
        except BaseException:
            await agent.end_tree_async(kill_now=True)
            raise
        connection_id = uuid.uuid4().hex
        rec = s.recorder.connection(
            "http",
            peer=peer_of(request),
            headers=headers_worth_keeping(
                request.headers.items(), [(CONNECTION_ID_HEADER, connection_id)]
            ),
            label=s.label,
            agent_command=list(s.agent_argv),
            cwd=os.getcwd(),
            pid=agent.pid,
        )
        return await self._open(
            request, post, body, AgentConnection(connection_id, agent, pipes, rec, post.id)
        )

    async def _open(
        self, request: web.Request, post: Post, body: bytes, conn: HttpConnection
    ) -> web.Response:
        """Start ``conn``, hand it ``initialize`` and answer with its response (200)."""
        connection_id = conn.id
        self.connections[connection_id] = conn
        conn.start()
        assert conn.task is not None
        conn.task.add_done_callback(lambda _: self.connections.pop(connection_id, None))
        await conn.forward(post, body)
        try:
            answer = await asyncio.wait_for(
                asyncio.shield(conn.initialized), INITIALIZE_TIMEOUT_SECONDS
            )
        except TimeoutError:
            self._note(conn, request, 504, post)
            conn.stop(by_client=False)
            return refuse(request, 504, "the agent did not answer initialize in time")
        except AgentEnded:
            self._note(conn, request, 502, post)
            return refuse(request, 502, "the agent ended before answering initialize")
        self._note(conn, request, 200, post)
        return web.Response(
            status=200,
            body=answer,
            content_type=CONTENT_TYPE_JSON,
            headers={CONNECTION_ID_HEADER: connection_id},
        )

    # -- GET ------------------------------------------------------------------------------

    async def _get(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._handle(request)  # the WebSocket half, as `acp-proxy ws`
        refused = self.check_access(request)
        if refused is not None:
            return refused
        if self.relay is not None:
            return await self.relay.get(request)
        if not accepts_sse(request.headers.get("Accept")):
            return refuse(request, 406, f"Accept must include {CONTENT_TYPE_SSE}")
        conn, refused = self._connection(request)
        if refused is not None:
            return refused
        assert conn is not None
        session = request.headers.get(SESSION_ID_HEADER)
        stream = conn.stream_for(session, hold=True)  # a load/resume of it may follow
        if stream is None:
            self._note(conn, request, 404)
            return refuse(request, 404, f"unknown {SESSION_ID_HEADER}")
        resp = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": CONTENT_TYPE_SSE,
                "Cache-Control": "no-cache",
                CONNECTION_ID_HEADER: conn.id,
            },
        )
        self._note(conn, request, 200)
        await resp.prepare(request)
        await stream.send(resp, conn.rec)
        return resp

    # -- DELETE ---------------------------------------------------------------------------

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        refused = self.check_access(request)
        if refused is not None:
            return refused
        if self.relay is not None:
            return await self.relay.delete(request)
        conn, refused = self._connection(request)
        if refused is not None:
            return refused
        assert conn is not None
        self._note(conn, request, 202)
        conn.rec.event("http_delete", {"connection": conn.id})
        self.connections.pop(conn.id, None)  # gone at once: later requests get 404
        self.ending.add(conn)
        assert conn.task is not None
        conn.task.add_done_callback(lambda _: self.ending.discard(conn))
        conn.stop()
        return web.Response(status=202)

    # -- lifecycle ------------------------------------------------------------------------

    async def _on_shutdown(self, app: web.Application) -> None:
        await super()._on_shutdown(app)
        if self.relay is not None:
            await self.relay.close()  # relayed SSE streams end with the client session
        conns = [*self.connections.values(), *self.ending]
        for conn in conns:
            conn.stop(by_client=False)
        for conn in conns:
            await conn.wait()


def http_url(ws_url: str) -> str:
    """The ``http://`` (``https://``) form of a ``ws://`` (``wss://``) URL from :func:`serve`."""
    return "http" + ws_url.removeprefix("ws")


async def serve_endpoint(
    endpoint: AcpEndpoint,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Listen with :func:`acp_proxy.transport.ws.server.serve`; announce both URLs."""

    def ready(ws_url: str) -> None:
        url = http_url(ws_url)
        if on_ready is not None:
            on_ready(url)
        else:
            log(f"listening on {url} (Streamable HTTP; WebSocket: {ws_url})")

    await serve(endpoint, host, port, on_ready=ready, stop=stop)
