"""The WebSocket transport: server (agent or upstream behind it) and the stdio bridge.

Built on aiohttp (server and client in one library, per-message size limit, ping/pong
heartbeat, close codes with reasons, ``decode_text=False`` so text payloads arrive as the exact
bytes that crossed). The decisions (handshake checks, newline rule, close relaying) come from
:mod:`acp_proxy.transport.ws_bridge`; this module only moves bytes and records copies.

* :class:`WsServer` answers ``GET /acp`` upgrades. Each connection gets its own agent process
  over stdio (``agent_argv``) or its own WebSocket to ``upstream``, and its own recorded
  connection. Every direction of every connection is one task that awaits the peer it writes
  to, so a slow reader slows only its own connection.
* :func:`run_connect` is ``acp-proxy connect``: stdin lines -> text frames, frames -> stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import WebSocketError, WSMsgType, web
from multidict import CIMultiDict

from acp_proxy.console import warn as warn_stderr
from acp_proxy.record.writer import ConnectionRecorder, Recorder
from acp_proxy.transport.chunks import CHUNK, ChunkReader
from acp_proxy.transport.process import (
    DEFAULT_GRACE_SECONDS,
    AgentStartError,
    spawn_agent,
)
from acp_proxy.transport.ws_bridge import (
    ACP_PATH,
    CLOSE_GOING_AWAY,
    CLOSE_TOO_BIG,
    CONNECTION_ID_HEADER,
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_MESSAGE,
    Ignore,
    PendingRequests,
    Refuse,
    ToLine,
    agent_exit_close,
    clip_reason,
    downstream_response_headers,
    headers_worth_keeping,
    line_to_message,
    message_to_line,
    origin_allowed,
    parse_subprotocols,
    relay_close,
    token_from,
    token_ok,
    too_big_reason,
    upstream_request_headers,
)
from acp_proxy.wire.frame import A2C, C2A, Direction
from acp_proxy.wire.framing import LineFramer

STDIN_QUEUE_CHUNKS = 8


log = warn_stderr
"""One line on the proxy's stderr."""


# -- aiohttp WebSocket objects that say why a message was too big ---------------------------


class _ServerWebSocket(web.WebSocketResponse):
    """aiohttp's server WebSocket, whose automatic 1009 close carries a readable reason."""

    def __init__(self, *, max_msg_size: int, **kwargs: Any) -> None:
        # aiohttp refuses a frame whose length is >= its limit: allow exactly ``limit`` bytes.
        super().__init__(max_msg_size=max_msg_size + 1, **kwargs)
        self.limit = max_msg_size

    async def receive(self, timeout: float | None = None) -> Any:
        msg = await super().receive(timeout)
        return await _too_big(self) if _over_limit(self, msg) else msg

    async def close(self, *, code: int = 1000, message: bytes = b"", drain: bool = True) -> bool:
        if code == CLOSE_TOO_BIG and not message:
            message = too_big_reason(self.limit).encode()
        return await super().close(code=code, message=message, drain=drain)


class _ClientWebSocket(aiohttp.ClientWebSocketResponse):
    """aiohttp's client WebSocket with a reasoned 1009 and the upgrade response's headers."""

    limit = DEFAULT_MAX_MESSAGE

    @property
    def response_headers(self) -> list[tuple[str, str]]:
        return list(self._response.headers.items())

    async def close(self, *, code: int = 1000, message: bytes = b"") -> bool:
        if code == CLOSE_TOO_BIG and not message:
            message = too_big_reason(self.limit).encode()
        return await super().close(code=code, message=message)

    async def receive(self, timeout: float | None = None) -> Any:
        msg = await super().receive(timeout)
        return await _too_big(self) if _over_limit(self, msg) else msg


def _client_ws_class(limit: int) -> type[_ClientWebSocket]:
    return type("ClientWebSocket", (_ClientWebSocket,), {"limit": limit})


def _over_limit(ws: _ServerWebSocket | _ClientWebSocket, msg: Any) -> bool:
    """The exact limit, also for compressed messages (aiohttp's check is off by one there).

    A plain function: the per-message check costs no coroutine; only a refusal awaits.
    """
    return msg.type in (WSMsgType.TEXT, WSMsgType.BINARY) and len(msg.data) > ws.limit


async def _too_big(ws: _ServerWebSocket | _ClientWebSocket) -> Any:
    """Close with 1009 and report the message as an error to the reader."""
    await ws.close(code=CLOSE_TOO_BIG)
    return aiohttp.WSMessage(
        WSMsgType.ERROR, WebSocketError(CLOSE_TOO_BIG, too_big_reason(ws.limit)), None
    )


AnyWebSocket = web.WebSocketResponse | aiohttp.ClientWebSocketResponse


@dataclass(slots=True)
class CloseInfo:
    """How one side of a connection ended: who, the close code (if any) and the reason."""

    by: str
    code: int | None
    reason: str


def close_info(msg: aiohttp.WSMessage, ws: AnyWebSocket, by: str) -> CloseInfo:
    if msg.type == WSMsgType.CLOSE:
        return CloseInfo(by, int(msg.data), str(msg.extra or ""))
    if msg.type == WSMsgType.ERROR:
        exc = msg.data
        code = getattr(exc, "code", None)
        return CloseInfo(by, int(code) if code is not None else 1006, str(exc))
    code = ws.close_code
    return CloseInfo(by, int(code) if code is not None else None, "")


def record_close(rec: ConnectionRecorder, by: str, code: int | None, reason: str) -> None:
    """The ``websocket_close`` event of a recorded connection."""
    rec.event("websocket_close", {"by": by, "code": code, "reason": reason})


async def close_quietly(ws: AnyWebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        await ws.close(code=code, message=clip_reason(reason).encode())


# -- agent processes, asynchronously -------------------------------------------------------


async def wait_exit(proc: subprocess.Popen[bytes], timeout: float | None) -> int | None:
    """Wait for ``proc`` without a thread (a pidfd, else polling); ``None`` on timeout."""
    if proc.poll() is not None:
        return proc.returncode
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = -1
    if fd < 0:
        deadline = None if timeout is None else loop.time() + timeout
        while proc.poll() is None:
            if deadline is not None and loop.time() >= deadline:
                return None
            await asyncio.sleep(0.05)
        return proc.returncode
    exited: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await asyncio.wait_for(exited, timeout)
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return proc.wait()


async def terminate_async(
    proc: subprocess.Popen[bytes], stdin: asyncio.StreamWriter | None, grace: float
) -> int:
    """:func:`acp_proxy.transport.process.terminate` for the event loop.

    The same close sequence: the agent's stdin is closed, it gets ``grace`` seconds, then
    SIGTERM, ``grace`` more seconds, then SIGKILL. Returns the exit status.
    """
    if stdin is not None:
        with contextlib.suppress(Exception):
            stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        code = await wait_exit(proc, None if sig == signal.SIGKILL else grace)
        if code is not None:
            return code
    return proc.wait()


async def _pipes(
    proc: subprocess.Popen[bytes],
) -> tuple[asyncio.StreamWriter, asyncio.StreamReader, asyncio.StreamReader]:
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    loop = asyncio.get_running_loop()
    out = asyncio.StreamReader(limit=CHUNK, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out, loop=loop), proc.stdout)
    err = asyncio.StreamReader(limit=CHUNK, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(err, loop=loop), proc.stderr)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), proc.stdin
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return writer, out, err


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

    def _refuse(self, request: web.Request, status: int, why: str, **headers: str) -> web.Response:
        log(
            f"refused {self._peer(request)} {request.method} {request.path_qs.split('?')[0]}: "
            f"{status} {why}"
        )
        return web.Response(status=status, text=why + "\n", headers=headers)

    async def _not_found(self, request: web.Request) -> web.Response:
        if request.path == ACP_PATH:
            return self._refuse(request, 405, "use GET with a WebSocket upgrade", Allow="GET")
        return self._refuse(request, 404, f"no endpoint here; ACP over WebSocket is at {ACP_PATH}")

    def check_handshake(self, request: web.Request) -> web.Response | None:
        """Origin, token and upgrade checks; an HTTP error response, or ``None`` to accept."""
        s = self.settings
        origin = request.headers.get("Origin")
        if not origin_allowed(origin, s.allow_origins):
            return self._refuse(
                request, 403, f"origin {origin} is not allowed (see --allow-origin)"
            )
        if s.token is not None and not token_ok(
            token_from(request.headers, request.query), s.token
        ):
            return self._refuse(
                request,
                401,
                "missing or wrong token (Authorization: Bearer TOKEN)",
                **{"WWW-Authenticate": 'Bearer realm="acp-proxy"'},
            )
        ws = web.WebSocketResponse()
        if not ws.can_prepare(request).ok:
            return self._refuse(
                request,
                426,
                "expected a WebSocket upgrade (ACP over WebSocket)",
                **{"Upgrade": "websocket", "Connection": "Upgrade"},
            )
        return None

    def websocket(self, protocols: Sequence[str] = ()) -> _ServerWebSocket:
        """A server WebSocket with this server's limits, not yet prepared."""
        return _ServerWebSocket(
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
    ) -> _ServerWebSocket:
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
                return await self._serve_upstream(request, connection_id)
            return await self._serve_agent(request, connection_id)
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

    # -- agent mode -----------------------------------------------------------------------

    async def _serve_agent(self, request: web.Request, connection_id: str) -> web.StreamResponse:
        s = self.settings
        assert s.agent_argv is not None
        try:
            proc = spawn_agent(s.agent_argv)
        except AgentStartError as exc:
            return self._refuse(request, 502, f"cannot start the agent: {exc}")
        ws: _ServerWebSocket | None = None
        try:
            stdin, stdout, stderr = await _pipes(proc)
            ws = await self.accept(request, connection_id)
        except BaseException:
            proc.kill()
            await wait_exit(proc, None)
            raise
        rec = self.record_connection(
            "websocket",
            request,
            ws,
            agent_command=list(s.agent_argv),
            cwd=os.getcwd(),
            pid=proc.pid,
        )
        try:
            await AgentBridge(ws, proc, stdin, stdout, stderr, rec, s).run()
        finally:
            self.active.discard(ws)
        return ws

    # -- upstream mode --------------------------------------------------------------------

    async def _serve_upstream(self, request: web.Request, connection_id: str) -> web.StreamResponse:
        s = self.settings
        assert s.upstream is not None
        if self._session is None:
            self._session = aiohttp.ClientSession(
                ws_response_class=_client_ws_class(s.max_message),
                timeout=aiohttp.ClientTimeout(total=None, connect=30),
            )
        headers = CIMultiDict(
            upstream_request_headers(
                request.headers.items(), strip_authorization=s.token is not None
            )
        )
        try:
            up = await self._session.ws_connect(
                s.upstream,
                headers=headers,
                protocols=parse_subprotocols(request.headers.get("Sec-WebSocket-Protocol")),
                heartbeat=s.heartbeat,
                max_msg_size=s.max_message + 1,
                decode_text=False,
            )
        except aiohttp.WSServerHandshakeError as exc:
            status = exc.status if 400 <= exc.status < 500 else 502
            return self._refuse(
                request,
                status,
                f"upstream refused the WebSocket handshake: {exc.status} {exc.message}",
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return self._refuse(
                request, 502, f"cannot reach upstream {s.upstream}: {exc or type(exc).__name__}"
            )
        assert isinstance(up, _ClientWebSocket)
        try:
            ws = await self.accept(
                request,
                connection_id,
                [up.protocol] if up.protocol else [],
                downstream_response_headers(up.response_headers),
            )
        except BaseException:
            await up.close(code=CLOSE_GOING_AWAY, message=b"client handshake failed")
            raise
        rec = self.record_connection("ws-upstream", request, ws, agent_command=[s.upstream])
        try:
            await relay_websockets(ws, up, rec)
        finally:
            self.active.discard(ws)
        return ws

    # -- lifecycle ------------------------------------------------------------------------

    async def _on_shutdown(self, app: web.Application) -> None:
        for ws in list(self.active):
            await close_quietly(ws, CLOSE_GOING_AWAY, "acp-proxy is shutting down")

    async def _on_cleanup(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()


class AgentBridge:
    """One WebSocket connection to one agent process over stdio.

    Text message -> ``payload + \\n`` on the agent's stdin; each agent stdout line -> one
    message (the line without its ``\\n``). Recorded frames hold the WebSocket payloads.
    """

    def __init__(
        self,
        ws: _ServerWebSocket,
        proc: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        rec: ConnectionRecorder,
        settings: WsSettings,
    ) -> None:
        self.ws = ws
        self.proc = proc
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.rec = rec
        self.settings = settings
        self.warned_binary = False
        self.client_gone = False
        self.too_big = False

    async def run(self) -> None:
        c2a = asyncio.create_task(self._client_to_agent())
        a2c = asyncio.create_task(self._agent_to_client())
        err = asyncio.create_task(self._stderr())
        grace = self.settings.grace
        returncode: int | None = None
        try:
            done, _ = await asyncio.wait({c2a, a2c}, return_when=asyncio.FIRST_COMPLETED)
            if c2a in done:
                # The client closed (or was refused): the agent's connection is over.
                returncode = await terminate_async(self.proc, self.stdin, grace)
                await _settle(a2c, grace)
            else:
                # The agent closed its stdout: it is ending. Close the WebSocket with why.
                returncode = await wait_exit(self.proc, grace)
                if returncode is None:
                    returncode = await terminate_async(self.proc, self.stdin, grace)
                code, reason = agent_exit_close(returncode)
                if not self.ws.closed:
                    record_close(self.rec, "proxy", code, reason)
                await close_quietly(self.ws, code, reason)
                await _settle(c2a, grace)
            await _settle(err, grace)
        finally:
            for task in (c2a, a2c, err):
                task.cancel()
            if self.proc.poll() is None:
                returncode = await terminate_async(self.proc, self.stdin, 0.1)
            with contextlib.suppress(Exception):
                self.stdin.close()
            self.rec.close(exit_status=returncode if returncode is not None else self.proc.poll())

    async def _client_to_agent(self) -> None:
        ws, rec = self.ws, self.rec
        agent_ok = True
        batcher = _Batcher(self.stdin)
        while True:
            msg = await ws.receive()
            if msg.type == WSMsgType.TEXT or msg.type == WSMsgType.BINARY:
                payload: bytes = msg.data
                binary = msg.type == WSMsgType.BINARY
                decision = message_to_line(payload, binary=binary)
                if isinstance(decision, ToLine):
                    # Recorded before it is written (as on stdio): the agent's answer can
                    # then never be recorded ahead of the request it answers.
                    rec.frame(C2A, payload)
                    if agent_ok:
                        try:
                            await batcher.write(decision.line)
                        except (ConnectionError, OSError, RuntimeError):
                            agent_ok = False
                elif isinstance(decision, Ignore):
                    rec.frame(C2A, payload, binary=True)
                    if not self.warned_binary:
                        self.warned_binary = True
                        rec.event("binary_ignored", {"size": len(payload)})
                        log(f"a client sent a binary message; {decision.why}")
                else:
                    assert isinstance(decision, Refuse)
                    rec.frame(C2A, payload)
                    record_close(rec, "proxy", decision.code, decision.reason)
                    log(f"closing a connection: {decision.reason} (close code {decision.code})")
                    await close_quietly(ws, decision.code, decision.reason)
                    return
                continue
            info = close_info(msg, ws, "client")
            record_close(rec, info.by, info.code, info.reason)
            return

    async def _agent_to_client(self) -> None:
        framer = LineFramer()
        limit = self.settings.max_message
        while True:
            data = await self.stdout.read(CHUNK)
            if not data:
                break
            if self.too_big:
                continue  # the connection is closing: drain the agent, keep nothing
            for line in framer.feed(data):
                if not await self._send(line):
                    break
            if framer.pending > limit and not self.too_big:
                await self._refuse_too_big()
        last = framer.close()
        if last is not None and not self.too_big:
            await self._send(last)

    async def _send(self, line: bytes) -> bool:
        payload, binary = line_to_message(line)
        if len(payload) > self.settings.max_message:
            await self._refuse_too_big()
            return False
        self.rec.frame(A2C, payload, binary=binary)  # before sending: causal order
        if not self.client_gone:
            try:
                await self.ws.send_frame(payload, WSMsgType.BINARY if binary else WSMsgType.TEXT)
            except (ConnectionError, RuntimeError):
                self.client_gone = True
        return True

    async def _refuse_too_big(self) -> None:
        """The agent wrote a line over the limit: close 1009; the agent is then ended."""
        self.too_big = self.client_gone = True
        reason = f"the agent wrote a line over the {self.settings.max_message}-byte limit"
        record_close(self.rec, "proxy", CLOSE_TOO_BIG, reason)
        log(f"closing a connection: {reason}")
        await close_quietly(self.ws, CLOSE_TOO_BIG, reason)

    async def _stderr(self) -> None:
        framer = LineFramer()
        while True:
            data = await self.stderr.read(CHUNK)
            if not data:
                break
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.buffer.write(data)
                sys.stderr.buffer.flush()
            for line in framer.feed(data):
                self.rec.stderr(line)
        last = framer.close()
        if last is not None:
            self.rec.stderr(last)


class _Batcher:
    """Writes the lines of one event-loop turn to a pipe in one system call.

    Messages that arrived together leave the WebSocket reader without yielding; joining their
    lines saves one ``write(2)`` (and one GIL hand-over) per message. Order is kept, and
    back-pressure too: a full pipe is awaited (``drain``) before more is taken.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.parts: list[bytes] = []
        self.size = 0
        self.scheduled = False

    async def write(self, data: bytes) -> None:
        if self.writer.transport.is_closing():
            raise ConnectionResetError("the agent closed its stdin")
        self.parts.append(data)
        self.size += len(data)
        if self.size >= CHUNK:
            self.flush()
            await self.writer.drain()
        elif not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        elif self.writer.transport.get_write_buffer_size() > CHUNK:
            await self.writer.drain()

    def flush(self) -> None:
        self.scheduled = False
        if not self.parts:
            return
        data = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self.parts.clear()
        self.size = 0
        if self.writer.transport.is_closing():
            return  # the agent is gone; write() reports it to the reader loop
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            self.writer.write(data)


async def _settle(task: asyncio.Task[Any], timeout: float) -> None:
    """Give a pump task ``timeout`` seconds to finish on its own, then cancel it."""
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout)
    except TimeoutError:
        task.cancel()
    except Exception:
        pass
    with contextlib.suppress(BaseException):
        await task


async def _pump_ws(
    src: AnyWebSocket, dst: AnyWebSocket, direction: Direction, rec: ConnectionRecorder, by: str
) -> CloseInfo:
    """Forward messages from ``src`` to ``dst`` until ``src`` closes; return how it closed."""
    dst_ok = True
    while True:
        msg = await src.receive()
        if msg.type == WSMsgType.TEXT or msg.type == WSMsgType.BINARY:
            binary = msg.type == WSMsgType.BINARY
            rec.frame(direction, msg.data, binary=binary)  # before sending: causal order
            if dst_ok:
                try:
                    await dst.send_frame(msg.data, msg.type)
                except (ConnectionError, RuntimeError):
                    dst_ok = False
            continue
        return close_info(msg, src, by)


async def relay_websockets(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    rec: ConnectionRecorder,
) -> None:
    """WebSocket <-> WebSocket, message for message; close codes and reasons pass through."""
    c2a = asyncio.create_task(_pump_ws(client, upstream, C2A, rec, "client"))
    a2c = asyncio.create_task(_pump_ws(upstream, client, A2C, rec, "upstream"))
    try:
        done, _ = await asyncio.wait({c2a, a2c}, return_when=asyncio.FIRST_COMPLETED)
        first = c2a if c2a in done else a2c
        info = first.result()
        record_close(rec, info.by, info.code, info.reason)
        other_ws: AnyWebSocket = upstream if first is c2a else client
        code, reason = relay_close(info.code, info.reason, peer=info.by)
        await close_quietly(other_ws, code, reason)
        await _settle(c2a if first is a2c else a2c, 10.0)
    finally:
        c2a.cancel()
        a2c.cancel()
        await close_quietly(client, CLOSE_GOING_AWAY, "")
        await close_quietly(upstream, CLOSE_GOING_AWAY, "")
        rec.close()


# -- running a server -----------------------------------------------------------------------


def format_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"ws://{shown}:{port}{ACP_PATH}"


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
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, shutdown_timeout=30)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = runner.addresses[0]
    url = format_url(host if host not in ("", "0.0.0.0", "::") else str(bound[0]), int(bound[1]))
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


# -- the stdio <-> WebSocket bridge ---------------------------------------------------------


@dataclass
class ConnectSettings:
    """Options of ``acp-proxy connect``."""

    url: str
    recorder: Recorder
    headers: Sequence[tuple[str, str]] = ()
    token: str | None = None
    max_message: int = DEFAULT_MAX_MESSAGE
    heartbeat: float | None = DEFAULT_HEARTBEAT
    label: str | None = None
    grace: float = DEFAULT_GRACE_SECONDS
    stdin_fd: int = 0
    stdout_fd: int = 1


def _stdin_reader(fd: int, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
    """Thread body: blocking reads of ``fd`` into ``queue`` (bounded: back-pressure)."""
    reader = ChunkReader(fd)
    while True:
        try:
            data = reader.read()
        except OSError:
            data = b""
        try:
            asyncio.run_coroutine_threadsafe(queue.put(data), loop).result()
        except (RuntimeError, asyncio.CancelledError):
            return
        if not data:
            return


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_HANDSHAKE_HINTS = {
    401: "wrong or missing token (--token or ACP_PROXY_TOKEN)",
    403: "this origin or client is not allowed",
    404: "no ACP endpoint at this path (usually /acp)",
}


def _connect_failure(exc: BaseException) -> str:
    """Why a connection could not be made, without aiohttp's ``ssl:default`` noise."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if isinstance(os_error, ConnectionRefusedError):
            return "connection refused (is the server running and listening there?)"
        if os_error.strerror:
            return os_error.strerror
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


def _handshake_reason(status: int) -> str:
    """``401 Unauthorized: wrong or missing token ...`` for a refused upgrade."""
    try:
        text = f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        text = str(status)
    hint = _HANDSHAKE_HINTS.get(status)
    return f"{text}: {hint}" if hint else text


async def run_connect(s: ConnectSettings) -> int:
    """Bridge this process's stdin/stdout to the WebSocket at ``s.url``; the exit code.

    0 when stdin ended or the server closed normally (1000/1001); 1 with a one-line reason on
    stderr otherwise (refused handshake, abnormal close, a frame stdio cannot carry);
    128+N after a SIGTERM/SIGHUP N, which closes the WebSocket and flushes the recording.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopped: list[int] = []

    def stop(signum: int) -> None:
        if not stopped:
            stopped.append(signum)
            task.cancel()

    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop, int(sig))
            installed.append(sig)
    try:
        return await _run_connect(s)
    except asyncio.CancelledError:
        if stopped:
            return 128 + stopped[0]
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def _run_connect(s: ConnectSettings) -> int:
    headers = CIMultiDict(s.headers)
    if s.token is not None and "Authorization" not in headers:
        headers["Authorization"] = f"Bearer {s.token}"
    session = aiohttp.ClientSession(
        ws_response_class=_client_ws_class(s.max_message),
        timeout=aiohttp.ClientTimeout(total=None, connect=30),
    )
    try:
        try:
            ws = await session.ws_connect(
                s.url,
                headers=headers,
                heartbeat=s.heartbeat,
                max_msg_size=s.max_message + 1,
                decode_text=False,
            )
        except aiohttp.WSServerHandshakeError as exc:
            log(f"{s.url} refused the WebSocket handshake: {_handshake_reason(exc.status)}")
            return 1
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log(f"cannot connect to {s.url}: {_connect_failure(exc)}")
            return 1
        assert isinstance(ws, _ClientWebSocket)
        kept = headers_worth_keeping(headers.items(), ws.response_headers)
        rec = s.recorder.connection(
            "connect", peer=s.url, headers=kept, label=s.label, agent_command=[s.url]
        )
        try:
            return await _bridge(ws, rec, s)
        finally:
            rec.close()
            await close_quietly(ws, 1000, "")
    finally:
        await session.close()


async def _bridge(ws: _ClientWebSocket, rec: ConnectionRecorder, s: ConnectSettings) -> int:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue(STDIN_QUEUE_CHUNKS)
    pending = PendingRequests()
    answered = asyncio.Event()
    threading.Thread(
        target=_stdin_reader, args=(s.stdin_fd, loop, queue), name="stdin", daemon=True
    ).start()

    async def stdin_to_ws() -> None:
        framer = LineFramer()

        async def send(line: bytes) -> None:
            payload, binary = line_to_message(line)
            rec.frame(C2A, payload, binary=binary)  # before sending: causal order
            await ws.send_frame(payload, WSMsgType.BINARY if binary else WSMsgType.TEXT)
            if not binary:
                pending.sent(payload)

        while True:
            data = await queue.get()
            if not data:
                break
            for line in framer.feed(data):
                await send(line)
            if framer.pending > s.max_message:
                raise _Refused(CLOSE_TOO_BIG, f"stdin line over the {s.max_message}-byte limit")
        last = framer.close()
        if last is not None:
            await send(last)
        rec.event("client_eof")

    async def ws_to_stdout() -> CloseInfo:
        warned = False
        while True:
            msg = await ws.receive()
            if msg.type == WSMsgType.TEXT or msg.type == WSMsgType.BINARY:
                payload: bytes = msg.data
                decision = message_to_line(payload, binary=msg.type == WSMsgType.BINARY)
                if isinstance(decision, ToLine):
                    rec.frame(A2C, payload)  # before writing: causal order
                    await loop.run_in_executor(None, _write_all, s.stdout_fd, decision.line)
                    pending.received(payload)
                    if pending.empty:
                        answered.set()
                elif isinstance(decision, Ignore):
                    rec.frame(A2C, payload, binary=True)
                    if not warned:
                        warned = True
                        rec.event("binary_ignored", {"size": len(payload)})
                        log(f"the server sent a binary message; {decision.why}")
                else:
                    assert isinstance(decision, Refuse)
                    rec.frame(A2C, payload)
                    raise _Refused(decision.code, decision.reason)
                continue
            return close_info(msg, ws, "server")

    up = asyncio.create_task(stdin_to_ws())
    down = asyncio.create_task(ws_to_stdout())
    try:
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if not down.done() and up.exception() is None:
            # stdin ended. A WebSocket cannot half-close: wait until every request we
            # forwarded is answered (at most the grace period), then close normally.
            if not pending.empty:
                answered.clear()
                waiter = asyncio.create_task(answered.wait())
                await asyncio.wait(
                    {waiter, down}, timeout=s.grace, return_when=asyncio.FIRST_COMPLETED
                )
                waiter.cancel()
            if not down.done():
                await close_quietly(ws, 1000, "")
                await _settle(down, 10.0)
                return 0
        return await _outcome(ws, rec, up, down)
    finally:
        for task in (up, down):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _outcome(
    ws: _ClientWebSocket,
    rec: ConnectionRecorder,
    up: asyncio.Task[None],
    down: asyncio.Task[CloseInfo],
) -> int:
    """The bridge's exit code once one side ended abnormally or the server closed."""
    for task in (down, up):
        exc = task.exception() if task.done() else None
        if isinstance(exc, _Refused):
            record_close(rec, "proxy", exc.code, exc.reason)
            await close_quietly(ws, exc.code, exc.reason)
            log(f"closed the connection: {exc.reason} (close code {exc.code})")
            return 1
        if exc is not None:
            log(f"the connection failed: {exc}")
            return 1
    info = down.result()
    record_close(rec, info.by, info.code, info.reason)
    if info.code in (1000, 1001):
        return 0
    detail = f": {info.reason}" if info.reason else ""
    log(f"the server closed the connection with code {info.code}{detail}")
    return 1


class _Refused(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
