"""``acp-proxy connect``: this process's stdin/stdout bridged to an ACP WebSocket server.

stdin lines become text frames (a line that is not UTF-8 a binary frame, same bytes), text
frames become stdout lines, by the rules of :mod:`acp_proxy.transport.ws_bridge`. stdin is
read by a thread (blocking reads, bounded queue: back-pressure); the rest runs on the loop.
A WebSocket has no half-close, so after stdin ends the bridge waits (at most ``grace``) for
answers to the requests it forwarded before it closes with 1000.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
from aiohttp import WSMsgType
from multidict import CIMultiDict

from acp_proxy.record.writer import ConnectionRecorder, Recorder
from acp_proxy.transport.chunks import write_all
from acp_proxy.transport.process import DEFAULT_GRACE_SECONDS
from acp_proxy.transport.stdio_bridge import exit_on_signals, start_stdin_reader
from acp_proxy.transport.tls import tls_failure
from acp_proxy.transport.ws_bridge import (
    CLOSE_TOO_BIG,
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_MESSAGE,
    Ignore,
    PendingRequests,
    Refuse,
    ToLine,
    headers_worth_keeping,
    line_to_message,
    message_to_line,
)
from acp_proxy.transport.ws_io import (
    ClientWebSocket,
    CloseInfo,
    client_ws_class,
    close_info,
    close_quietly,
    log,
    record_close,
    settle,
)
from acp_proxy.wire.frame import A2C, C2A
from acp_proxy.wire.framing import LineFramer


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
    tls: ssl.SSLContext | None = None  # verifies a wss:// peer (None: the system store)


_HANDSHAKE_HINTS = {
    401: "wrong or missing token (--token or ACP_PROXY_TOKEN)",
    403: "this origin or client is not allowed",
    404: "no ACP endpoint at this path (usually /acp)",
}


def _connect_failure(exc: BaseException) -> str:
    """Why a connection could not be made, without aiohttp's ``ssl:default`` noise."""
    tls = tls_failure(exc)
    if tls is not None:
        return tls
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
    return await exit_on_signals(lambda: _run_connect(s))


async def _run_connect(s: ConnectSettings) -> int:
    headers = CIMultiDict(s.headers)
    if s.token is not None and "Authorization" not in headers:
        headers["Authorization"] = f"Bearer {s.token}"
    session = aiohttp.ClientSession(
        ws_response_class=client_ws_class(s.max_message),
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
                ssl=s.tls or True,
            )
        except aiohttp.WSServerHandshakeError as exc:
            log(f"{s.url} refused the WebSocket handshake: {_handshake_reason(exc.status)}")
            return 1
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            log(f"cannot connect to {s.url}: {_connect_failure(exc)}")
            return 1
        assert isinstance(ws, ClientWebSocket)
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


async def _bridge(ws: ClientWebSocket, rec: ConnectionRecorder, s: ConnectSettings) -> int:
    loop = asyncio.get_running_loop()
    pending = PendingRequests()
    answered = asyncio.Event()
    queue = start_stdin_reader(s.stdin_fd)

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
                    await loop.run_in_executor(None, write_all, s.stdout_fd, decision.line)
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
                await settle(down, 10.0)
                return 0
        return await _outcome(ws, rec, up, down)
    finally:
        for task in (up, down):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _outcome(
    ws: ClientWebSocket,
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
