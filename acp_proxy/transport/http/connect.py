"""``acp-proxy connect http://HOST:PORT/acp``: stdin/stdout bridged to a Streamable HTTP agent.

Each stdin line is POSTed (the first must be ``initialize``: its 200 body is the first stdout
line and its ``Acp-Connection-Id`` is sent on every later request, with ``Acp-Session-Id`` on
session-scoped methods). The connection's SSE stream is opened after ``initialize``, a
session's stream as soon as a message names the session (after a successful
``session/load`` / ``session/resume`` for those), as the SDK client does; each SSE event's data
becomes one stdout line. Cookies the server sets are kept and sent back (RFD). When stdin
ends, the bridge waits (at most ``grace``) for answers to the requests it forwarded, then
DELETEs the connection. Recorded as transport ``http-connect``: the POST bodies and the SSE
data as frames, each request's status as an ``http`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from acp_proxy.recorder.handle import ConnectionRecorder, Recorder
from acp_proxy.transport.chunks import CHUNK, write_all
from acp_proxy.transport.http.rules import (
    ATTACH_METHODS,
    CONNECTION_ID_HEADER,
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_SSE,
    SESSION_ID_HEADER,
    SseParser,
    classify_post,
    id_key,
)
from acp_proxy.transport.process.agent import DEFAULT_GRACE_SECONDS
from acp_proxy.transport.stdio.bridge import exit_on_signals, start_stdin_reader
from acp_proxy.transport.ws.connect import connect_failure
from acp_proxy.transport.ws.rules import DEFAULT_MAX_MESSAGE, PendingRequests
from acp_proxy.transport.ws.sockets import log
from acp_proxy.wire.frame import A2C, C2A
from acp_proxy.wire.framing import LineFramer


@dataclass
class HttpConnectSettings:
    """Options of ``acp-proxy connect`` for an ``http://`` / ``https://`` URL."""

    url: str
    recorder: Recorder
    headers: Sequence[tuple[str, str]] = ()
    token: str | None = None
    max_message: int = DEFAULT_MAX_MESSAGE
    label: str | None = None
    grace: float = DEFAULT_GRACE_SECONDS
    stdin_fd: int = 0
    stdout_fd: int = 1
    tls: ssl.SSLContext | None = None  # verifies an https:// peer (None: the system store)


class _Failed(Exception):
    """The bridge cannot go on; the message is its one stderr line."""


@dataclass
class _Bridge:
    s: HttpConnectSettings
    http: aiohttp.ClientSession
    rec: ConnectionRecorder
    connection_id: str | None = None
    streams: dict[str | None, asyncio.Task[None]] = field(default_factory=dict)
    attaching: dict[str, str] = field(default_factory=dict)
    pending: PendingRequests = field(default_factory=PendingRequests)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    out_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closing: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def headers(self, **more: str) -> dict[str, str]:
        headers = dict(self.s.headers)
        if self.s.token is not None and "Authorization" not in headers:
            headers["Authorization"] = f"Bearer {self.s.token}"
        if self.connection_id is not None:
            headers[CONNECTION_ID_HEADER] = self.connection_id
        headers.update(more)
        return headers

    # -- stdin -> POST --------------------------------------------------------------------

    async def post(self, line: bytes) -> None:
        body = line[:-1] if line.endswith(b"\n") else line
        body = body[:-1] if body.endswith(b"\r") else body
        if not body.strip():
            return
        post = classify_post(body)
        if self.connection_id is None and not post.is_initialize:
            raise _Failed("the first message must be initialize (it opens the HTTP connection)")
        extra = {"Content-Type": CONTENT_TYPE_JSON}
        if post.session_scoped and post.session_id is not None:
            extra[SESSION_ID_HEADER] = post.session_id
        if post.method in ATTACH_METHODS and post.id is not None and post.session_id:
            self.attaching[post.id] = post.session_id
        self.rec.frame(C2A, body)  # before sending: causal order
        self.pending.sent(body)
        async with self.http.post(self.s.url, data=body, headers=self.headers(**extra)) as resp:
            answer = await resp.read()
            self.rec.event(
                "http", {"method": "POST", "status": resp.status, "rpc": post.method, "id": post.id}
            )
            if post.is_initialize:
                if resp.status != 200 or CONNECTION_ID_HEADER not in resp.headers:
                    raise _Failed(f"{self.s.url} refused initialize: {_status(resp, answer)}")
                self.connection_id = resp.headers[CONNECTION_ID_HEADER]
                self.rec.update(headers={"response": {CONNECTION_ID_HEADER: self.connection_id}})
                await self.deliver(answer)
                self.open(None)
            elif resp.status not in (200, 202):
                raise _Failed(
                    f"{self.s.url} refused a {post.method or 'response'}: {_status(resp, answer)}"
                )
            elif resp.status == 200 and answer.strip():
                await self.deliver(answer)

    # -- SSE -> stdout --------------------------------------------------------------------

    def open(self, session: str | None) -> None:
        if session in self.streams or self.closing:
            return
        self.streams[session] = asyncio.create_task(self.stream(session))
        self.changed.set()

    async def stream(self, session: str | None) -> None:
        extra = {"Accept": CONTENT_TYPE_SSE}
        if session is not None:
            extra[SESSION_ID_HEADER] = session
        self.rec.event(
            "sse_open", {"stream": "session" if session else "connection", "session": session}
        )
        try:
            async with self.http.get(self.s.url, headers=self.headers(**extra)) as resp:
                if resp.status != 200:
                    raise _Failed(f"{self.s.url} refused the event stream: {resp.status}")
                events = SseParser(join=b" ")  # one message, one stdout line
                async for chunk in resp.content.iter_chunked(CHUNK):
                    for data, _ in events.feed(chunk):
                        await self.deliver(data)
        finally:
            self.rec.event(
                "sse_close", {"stream": "session" if session else "connection", "session": session}
            )

    async def deliver(self, data: bytes) -> None:
        """One agent message: recorded, written to stdout, its sessions' streams opened."""
        self.rec.frame(A2C, data)
        async with self.out_lock:
            await asyncio.get_running_loop().run_in_executor(
                None, write_all, self.s.stdout_fd, data + b"\n"
            )
        self.pending.received(data)
        if self.pending.empty:
            self.answered.set()
        self._follow(data)

    def _follow(self, data: bytes) -> None:
        try:
            message: Any = json.loads(data)
        except (ValueError, RecursionError):  # nested too deep: forwarded, not followed
            return
        if not isinstance(message, dict):
            return
        if "method" not in message and "id" in message:
            loaded = self.attaching.pop(id_key(message["id"]) or "", None)
            if loaded is not None and "result" in message:
                self.open(loaded)
        for part in (message.get("params"), message.get("result")):
            session = part.get("sessionId") if isinstance(part, dict) else None
            if isinstance(session, str) and session not in self.attaching.values():
                self.open(session)

    async def delete(self) -> None:
        self.closing = True
        if self.connection_id is None:
            return
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
            async with self.http.delete(self.s.url, headers=self.headers()) as resp:
                self.rec.event("http", {"method": "DELETE", "status": resp.status})


def _status(resp: aiohttp.ClientResponse, body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip().splitlines()
    return f"{resp.status} {resp.reason or ''}".strip() + (f": {text[0][:200]}" if text else "")


async def run_http_connect(s: HttpConnectSettings) -> int:
    """Bridge stdin/stdout to the Streamable HTTP endpoint ``s.url``; the exit code.

    0 when stdin ended (after DELETE); 1 with one line on stderr when the server refused a
    request or ended the connection stream; 128+N after SIGTERM/SIGHUP N.
    """

    async def run() -> int:
        http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, connect=30),
            cookie_jar=aiohttp.CookieJar(unsafe=True),  # keep cookies, also for IP addresses
            connector=aiohttp.TCPConnector(ssl=s.tls or True),
        )
        rec = s.recorder.connection(
            "http-connect", peer=s.url, label=s.label, agent_command=[s.url]
        )
        bridge = _Bridge(s, http, rec)
        try:
            return await _run(bridge)
        finally:
            with contextlib.suppress(BaseException):
                await asyncio.shield(bridge.delete())
            for stream in bridge.streams.values():
                stream.cancel()
            rec.close()
            await http.close()

    return await exit_on_signals(run)


async def _run(bridge: _Bridge) -> int:
    s = bridge.s
    queue = start_stdin_reader(s.stdin_fd)

    async def stdin_to_http() -> None:
        framer = LineFramer()
        while True:
            data = await queue.get()
            if not data:
                break
            for line in framer.feed(data):
                await bridge.post(line)
        last = framer.close()
        if last is not None:
            await bridge.post(last)
        bridge.rec.event("client_eof")

    up = asyncio.create_task(stdin_to_http())
    try:
        while True:
            bridge.changed.clear()
            changed = asyncio.create_task(bridge.changed.wait())
            watched: set[asyncio.Task[Any]] = {up, changed, *bridge.streams.values()}
            done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            done.discard(changed)
            for finished in done:
                exc = finished.exception()
                if isinstance(exc, _Failed):
                    log(str(exc))
                    return 1
                if isinstance(exc, (aiohttp.ClientError, OSError, TimeoutError)):
                    log(f"cannot reach {s.url}: {connect_failure(exc)}")
                    return 1
                if exc is not None:
                    raise exc
            if up in done:
                break
            if bridge.streams.get(None) in done:
                log(f"{s.url} ended the connection's event stream")
                return 1
            for key, stream in list(bridge.streams.items()):
                if stream in done:  # a session stream may end; the connection goes on
                    del bridge.streams[key]
        if not bridge.pending.empty:
            bridge.answered.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(bridge.answered.wait(), s.grace)
        return 0
    finally:
        up.cancel()
        with contextlib.suppress(BaseException):
            await up
