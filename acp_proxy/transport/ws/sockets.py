"""aiohttp WebSocket objects with acp-proxy's limits, and the close helpers every mode shares.

:class:`ServerWebSocket` / :class:`ClientWebSocket` enforce the exact per-message size limit
and close with 1009 and a readable reason, and read their sockets :data:`READ_SIZE` bytes at a
time (:func:`read_in_small_chunks`); :func:`close_info`, :func:`record_close` and
:func:`close_quietly` say, record and send how a connection ended; :func:`settle` gives a
pump task a bounded time to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import WebSocketError, WSMsgType, web

from acp_proxy.console import warn
from acp_proxy.recorder.handle import ConnectionRecorder
from acp_proxy.transport.ws.rules import (
    CLOSE_TOO_BIG,
    DEFAULT_MAX_MESSAGE,
    clip_reason,
    too_big_reason,
)

log = warn
"""One line on the proxy's stderr."""

READ_SIZE = 64 * 1024
"""The most a WebSocket's socket is asked for per ``recv`` (asyncio's default: 256 KiB).

asyncio receives into a new bytes object of the size it asks for. glibc serves one of
256 KiB with ``mmap`` (over its 128 KiB threshold), so every small read of a round trip also
cost an ``mmap``, an ``mremap`` (shrunk to what came) and a ``munmap``, and page faults
(``strace -c``: 3 of the 5 system calls per message relayed). 64 KiB comes from the heap.
"""


def read_in_small_chunks(transport: Any) -> None:
    """Ask ``transport`` (an asyncio socket transport) for :data:`READ_SIZE` bytes per read."""
    if transport is not None and isinstance(getattr(transport, "max_size", None), int):
        transport.max_size = min(transport.max_size, READ_SIZE)


class Cork:
    """Holds a TCP socket's output while a burst of messages is written, then lets it go.

    aiohttp writes each WebSocket message with a ``send`` of its own; on loopback each one
    also runs the receiver's side of TCP and wakes it. While :meth:`hold` is in force
    (``TCP_CORK``, Linux) the messages of a burst (held while :func:`data_queued`) gather in
    the socket and leave together at :meth:`release`. A lone message (a round trip) is never
    held. Not a TCP socket, or no ``TCP_CORK``: nothing is held, every message leaves at once.
    """

    def __init__(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket") if transport is not None else None
        tcp = sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6)
        self.sock: socket.socket | None = sock if tcp and _CORK is not None else None
        self.held = False

    def hold(self) -> None:
        if self.sock is not None and not self.held:
            self.held = self._set(1)

    def release(self) -> None:
        if self.held:
            self.held = False
            self._set(0)

    def _set(self, on: int) -> bool:
        assert self.sock is not None and _CORK is not None
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, _CORK, on)
        except OSError:  # closed meanwhile: nothing is held
            return False
        return True


def data_queued(ws: Any) -> bool:
    """Whether the next message ``ws`` will hand out is already read, and text or binary.

    Then the next ``receive`` returns it without waiting, so what is sent now may be held
    (:class:`Cork`) until it is sent too; a control frame (ping, close) or nothing: ``False``.
    aiohttp's reader queue, read without a public accessor; if it moves in a later aiohttp
    this says ``False`` and every message is written on its own, as before.
    """
    try:
        queue = ws._reader._buffer
        return bool(queue) and queue[0][0].type in _DATA
    except (AttributeError, TypeError, IndexError):
        return False


async def take_queued(
    ws: Any, first: aiohttp.WSMessage
) -> tuple[list[aiohttp.WSMessage], aiohttp.WSMessage | None]:
    """``first`` and the text or binary messages ``ws`` has already read behind it (each
    ``receive`` returns at once: :func:`data_queued`); and the message that ended the run
    if it was not one (a message over the limit: the error :func:`too_big` returns), else
    ``None``."""
    turn = [first]
    while data_queued(ws):
        msg = await ws.receive()
        if msg.type != WSMsgType.TEXT and msg.type != WSMsgType.BINARY:
            return turn, msg
        turn.append(msg)
    return turn, None


_DATA = (WSMsgType.TEXT, WSMsgType.BINARY)
_CORK: int | None = getattr(socket, "TCP_CORK", None)


# -- aiohttp WebSocket objects that say why a message was too big ---------------------------


class ServerWebSocket(web.WebSocketResponse):
    """aiohttp's server WebSocket, whose automatic 1009 close carries a readable reason."""

    def __init__(self, *, max_msg_size: int, **kwargs: Any) -> None:
        # aiohttp refuses a frame whose length is >= its limit: allow exactly ``limit`` bytes.
        super().__init__(max_msg_size=max_msg_size + 1, **kwargs)
        self.limit = max_msg_size

    async def prepare(self, request: web.BaseRequest) -> Any:
        writer = await super().prepare(request)
        read_in_small_chunks(request.transport)
        return writer

    async def receive(self, timeout: float | None = None) -> Any:
        msg = await super().receive(timeout)
        return await too_big(self) if over_limit(self, msg) else msg

    async def close(self, *, code: int = 1000, message: bytes = b"", drain: bool = True) -> bool:
        if code == CLOSE_TOO_BIG and not message:
            message = too_big_reason(self.limit).encode()
        return await super().close(code=code, message=message, drain=drain)


class ClientWebSocket(aiohttp.ClientWebSocketResponse):
    """aiohttp's client WebSocket with a reasoned 1009 and the upgrade response's headers."""

    limit = DEFAULT_MAX_MESSAGE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        read_in_small_chunks(self.transport)

    @property
    def transport(self) -> Any:
        """The connection's asyncio transport (``None`` once it is released)."""
        return self._conn.transport if self._conn is not None else None

    @property
    def response_headers(self) -> list[tuple[str, str]]:
        return list(self._response.headers.items())

    async def close(self, *, code: int = 1000, message: bytes = b"") -> bool:
        if code == CLOSE_TOO_BIG and not message:
            message = too_big_reason(self.limit).encode()
        return await super().close(code=code, message=message)

    async def receive(self, timeout: float | None = None) -> Any:
        msg = await super().receive(timeout)
        return await too_big(self) if over_limit(self, msg) else msg


def client_ws_class(limit: int) -> type[ClientWebSocket]:
    return type("ClientWebSocket", (ClientWebSocket,), {"limit": limit})


def over_limit(ws: ServerWebSocket | ClientWebSocket, msg: Any) -> bool:
    """The exact limit, also for compressed messages (aiohttp's check is off by one there).

    A plain function: the per-message check costs no coroutine; only a refusal awaits.
    """
    return msg.type in (WSMsgType.TEXT, WSMsgType.BINARY) and len(msg.data) > ws.limit


async def too_big(ws: ServerWebSocket | ClientWebSocket) -> Any:
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


async def settle(task: asyncio.Task[Any], timeout: float) -> None:
    """Give a pump task ``timeout`` seconds to finish on its own, then cancel it."""
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout)
    except TimeoutError:
        task.cancel()
    except Exception:
        pass
    with contextlib.suppress(BaseException):
        await task


async def settle_all(tasks: list[asyncio.Task[Any]], timeout: float) -> None:
    """:func:`settle` for several tasks within one shared deadline of ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for task in tasks:
        await settle(task, max(0.0, deadline - loop.time()))
