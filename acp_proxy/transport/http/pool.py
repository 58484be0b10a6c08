"""Keep-alive HTTP/1.1 requests to a plain ``http://`` upstream, on asyncio protocols.

``serve --upstream http://...`` sends every POST here rather than through aiohttp's client,
whose per-request machinery was the largest single cost of a relayed round trip. One
request per connection at a time (no pipelining); a connection goes back to the pool when
its response is whole and both sides keep it alive, and is dropped as soon as the upstream
closes it. A request is never sent twice: if the upstream closes the connection before the
response is whole, the caller gets :class:`UpstreamBroke` (the proxy answers 502).
"""

from __future__ import annotations

import asyncio

from acp_proxy.transport.http.h1 import H1Error, Response, ResponseReader, request_head

CONNECT_TIMEOUT_SECONDS = 30.0
MAX_IDLE = 100
"""Idle connections kept for reuse at most (aiohttp's connector limit)."""


class UpstreamBroke(Exception):
    """The upstream ended or garbled a response (the message says which)."""


class _Connection(asyncio.Protocol):
    """One TCP connection to the upstream, carrying one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._reader: ResponseReader | None = None
        self._answer: asyncio.Future[Response] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self, data: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None
        self._reader = ResponseReader()
        self._answer = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self._answer

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        if reader is None:  # bytes no request asked for: this connection is done
            self.shut()
            return
        try:
            response = reader.feed(data)
        except H1Error as exc:
            self._fail(UpstreamBroke(f"its response breaks HTTP/1.1: {exc}"))
            return
        if response is not None:
            self._reader = None
            if reader.extra or not response.keep_alive:
                self.shut()
            self._settle(response)

    def eof_received(self) -> bool:
        reader, self._reader = self._reader, None
        self.closed = True
        if reader is not None:
            try:
                self._settle(reader.eof())
            except H1Error as exc:
                self._fail(UpstreamBroke(str(exc)))
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._reader is not None:
            self._reader = None
            why = f"the connection was lost in the middle of a response: {exc or 'closed'}"
            self._fail(UpstreamBroke(why))

    def _settle(self, response: Response) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(response)

    def _fail(self, exc: Exception) -> None:
        self._reader = None
        self.shut()
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(exc)

    def shut(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Http1Pool:
    """Keep-alive connections to one ``http://host:port``; :meth:`request` sends on one."""

    def __init__(self, host: str, port: int, host_header: str) -> None:
        self.host, self.port, self.host_header = host, port, host_header
        self._idle: list[_Connection] = []
        self._closed = False

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            _, conn = await loop.create_connection(_Connection, self.host, self.port)
        return conn

    async def request(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> Response:
        """Send one request with ``body`` (``Content-Length``); its whole response.

        Raises OSError/TimeoutError when the upstream cannot be reached, and
        :class:`UpstreamBroke` when it closes or garbles the response."""
        idle = self._idle
        conn = None
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.transport and not conn.transport.is_closing():
                break
            conn = None
        if conn is None:
            conn = await self._open()
        head = request_head(method, target, self.host_header, headers, len(body))
        answer = conn.send(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            assert conn.transport is not None
            conn.transport.write(body)
        try:
            response = await answer
        except BaseException:
            conn.shut()  # cancelled or broken: the connection's state is unknown
            raise
        if self._closed or len(idle) >= MAX_IDLE:
            conn.shut()  # shutting down, or enough kept
        elif not conn.closed:
            idle.append(conn)
        return response

    def close(self) -> None:
        """Close the idle connections (one in use closes when its request ends)."""
        self._closed = True
        for conn in self._idle:
            conn.shut()
        self._idle.clear()
