"""One Streamable HTTP ACP connection in front of one agent process over stdio.

An :class:`HttpConnection` is born from an ``initialize`` POST: it starts the agent
(:func:`acp_proxy.transport.process.agent.spawn_agent`), writes each accepted POST body to the
agent's stdin as one line, and puts each line of the agent's stdout on an SSE stream chosen by
:class:`~acp_proxy.transport.http.rules.StreamRouter` (the ``initialize`` response goes back
in the POST's 200 body instead). Streams buffer until their GET arrives; a new GET on the same
stream takes it over. The connection ends when the agent ends or on DELETE (the agent gets
the close sequence of :class:`~acp_proxy.transport.process.agent.Agent`); its SSE streams then end.

Recorded: every POST body (``c2a``) and every agent line as sent on HTTP (``a2c``, the SSE
event's data or the 200 body) as frames; the HTTP facts as ``http`` events (method, status,
ACP headers, JSON-RPC method), ``sse_open`` / ``sse_close`` (stream, the event ids sent) and
``http_delete``. SSE event ids are the agent message's ordinal on the connection (1, 2, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from acp_proxy.recorder.handle import ConnectionRecorder
from acp_proxy.transport.chunks import CHUNK
from acp_proxy.transport.http.rules import (
    KEEPALIVE,
    KEEPALIVE_SECONDS,
    Post,
    StreamRouter,
    is_response_to,
    parse,
    post_line,
    sse_data,
    sse_events,
)
from acp_proxy.transport.process.agent import Agent, wait_exit
from acp_proxy.transport.process.pipes import StdinBatcher, copy_agent_stderr
from acp_proxy.transport.ws.sockets import settle_all
from acp_proxy.wire.frame import A2C, C2A
from acp_proxy.wire.framing import LineFramer


class AgentEnded(Exception):
    """The agent ended before answering ``initialize``."""


@dataclass
class SseStream:
    """One SSE stream of a connection: the events not yet sent, and the GET that sends them."""

    name: str
    session_id: str | None = None
    items: list[tuple[int, bytes]] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    owner: object | None = None
    closed: bool = False
    closed_by: str = "proxy"

    def push(self, event_id: int, data: bytes) -> None:
        self.items.append((event_id, data))
        self.wake.set()

    def close(self, by: str = "proxy") -> None:
        self.closed = True
        self.closed_by = by
        self.wake.set()

    async def send(self, resp: web.StreamResponse, rec: ConnectionRecorder) -> None:
        """Send this stream's events on ``resp`` until it ends, is taken over or the client
        goes away; record the ids sent."""
        me = object()
        self.owner = me
        self.wake.set()  # a GET this one replaces wakes up and leaves
        first: int | None = None
        last: int | None = None
        count = 0
        ended_by = "proxy"
        rec.event("sse_open", {"stream": self.name, "session": self.session_id})
        try:
            while True:
                if self.owner is not me:
                    ended_by = "replaced"
                    break
                if self.items:
                    items, self.items = self.items, []
                    try:
                        await resp.write(sse_events(items))
                    except (ConnectionError, RuntimeError):
                        self.items[:0] = items  # kept for the client's next GET
                        ended_by = "client"
                        break
                    first = items[0][0] if first is None else first
                    last = items[-1][0]
                    count += len(items)
                    continue
                if self.closed:
                    ended_by = self.closed_by
                    break
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    try:
                        await resp.write(KEEPALIVE)
                    except (ConnectionError, RuntimeError):
                        ended_by = "client"
                        break
        finally:
            if self.owner is me:
                self.owner = None
            rec.event(
                "sse_close",
                {
                    "stream": self.name,
                    "session": self.session_id,
                    "by": ended_by,
                    "events": count,
                    "first_id": first,
                    "last_id": last,
                },
            )


class HttpConnection:
    """One ACP connection over Streamable HTTP: its streams, its routing, its record.

    What answers is up to a subclass: :class:`AgentConnection` (an agent process over stdio)
    or :class:`ReplayConnection` (a replay engine). Either hands each message it produces
    to :meth:`deliver`.
    """

    def __init__(
        self, connection_id: str, rec: ConnectionRecorder, initialize_id: str | None
    ) -> None:
        self.id = connection_id
        self.rec = rec
        self.router = StreamRouter()
        self.connection_stream = SseStream("connection")
        self.session_streams: dict[str, SseStream] = {}
        self.initialize_id = initialize_id
        self.initialized: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.sent = 0  # agent messages so far: the next SSE event id is sent + 1
        self.ended = asyncio.Event()
        self.deleted = False
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._serve()
        finally:
            if not self.initialized.done():
                self.initialized.set_exception(AgentEnded())
                self.initialized.exception()  # retrieved: no "never retrieved" warning
            self.ended.set()
            self.connection_stream.close()
            for stream in self.session_streams.values():
                stream.close()

    async def _serve(self) -> None:
        """Run until the connection ends; close :attr:`rec` with what is known."""
        raise NotImplementedError

    async def _write(self, body: bytes) -> None:
        """Hand one client message (a POST body) to what answers."""
        raise NotImplementedError

    def stop(self, *, by_client: bool = True) -> None:
        """End the connection (DELETE, or the server is stopping)."""
        raise NotImplementedError

    async def wait(self) -> None:
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self.task)

    # -- client -> agent ------------------------------------------------------------------

    async def forward(self, post: Post, body: bytes) -> None:
        """An accepted POST body: remember its route, record it, hand it on."""
        self.router.client_sent(post)
        self.rec.frame(C2A, body)  # before it is written: the answer never precedes it
        await self._write(body)

    def stream_for(self, session_id: str | None, *, hold: bool = False) -> SseStream | None:
        """The stream a GET asks for; ``None`` if that session is unknown here, unless
        ``hold``: then a stream held for a ``session/load`` / ``session/resume`` to come
        (the TypeScript SDK opens it first); it ends if the agent refuses that load."""
        if session_id is None:
            return self.connection_stream
        if session_id not in self.router.sessions and not (
            hold or session_id in self.session_streams
        ):
            return None
        stream = self.session_streams.get(session_id)
        if stream is None:
            stream = self.session_streams[session_id] = SseStream("session", session_id)
            if self.ended.is_set():
                stream.close()
        return stream

    def knows_session(self, session_id: str) -> bool:
        return session_id in self.router.sessions

    # -- agent -> client ------------------------------------------------------------------

    def deliver(self, line: bytes) -> None:
        """One message from the agent side (a stdout line): recorded, then routed."""
        data = sse_data(line)
        self.rec.frame(A2C, data)  # before it is sent: causal order
        self._route(data)

    def deliver_all(self, lines: list[bytes]) -> None:
        """The messages of one read from the agent: recorded in one call, then routed."""
        datas = [sse_data(line) for line in lines]
        self.rec.frames(A2C, datas)  # before they are sent: causal order
        for data in datas:
            self._route(data)

    def _route(self, data: bytes) -> None:
        self.sent += 1
        message = parse(data)
        if not self.initialized.done() and is_response_to(message, self.initialize_id):
            self.initialized.set_result(data)
            return
        refused = self.router.refused_attach(message)
        session = self.router.route(message)
        if session is None:
            self.connection_stream.push(self.sent, data)
        else:
            stream = self.stream_for(session)
            (stream or self.connection_stream).push(self.sent, data)
        if refused is not None:
            held = self.session_streams.pop(refused, None)
            if held is not None:
                held.close("refused")  # after the refusal went on the connection stream


class AgentConnection(HttpConnection):
    """An HTTP connection answered by an agent process over stdio (one line per message)."""

    def __init__(
        self,
        connection_id: str,
        agent: Agent,
        pipes: tuple[asyncio.StreamWriter, asyncio.StreamReader, asyncio.StreamReader],
        rec: ConnectionRecorder,
        initialize_id: str | None,
    ) -> None:
        super().__init__(connection_id, rec, initialize_id)
        self.agent = agent
        self.stdin, self.stdout, self.stderr = pipes
        self._batcher = StdinBatcher(self.stdin)
        self._agent_ok = True
        self._stopping: asyncio.Task[Any] | None = None

    async def _write(self, body: bytes) -> None:
        if not self._agent_ok:
            return
        try:
            await self._batcher.write(post_line(body))
        except (ConnectionError, OSError, RuntimeError):
            self._agent_ok = False

    async def _agent_to_client(self) -> None:
        framer = LineFramer()
        while True:
            data = await self.stdout.read(CHUNK)
            if not data:
                break
            lines = framer.feed(data)
            if lines:
                self.deliver_all(lines)
        last = framer.close()
        if last is not None:
            self.deliver(last)

    async def _stderr(self) -> None:
        await copy_agent_stderr(self.stderr, self.rec)

    async def _serve(self) -> None:
        agent = self.agent
        out = asyncio.create_task(self._agent_to_client())
        err = asyncio.create_task(self._stderr())
        returncode: int | None = None
        try:
            with contextlib.suppress(Exception):
                await out
            if self._stopping is not None:
                returncode = await self._stopping
            else:
                returncode = await wait_exit(agent.popen, agent.grace)
                if returncode is None:
                    returncode = await agent.terminate_async(self.stdin)
            await settle_all([err], agent.grace)
            await agent.end_tree_async()
        finally:
            for task in (out, err):
                task.cancel()
            if agent.popen.poll() is None or agent.tree.running():
                await agent.end_tree_async(kill_now=True)
                returncode = await wait_exit(agent.popen, None)
            with contextlib.suppress(Exception):
                self.stdin.close()
            self.rec.close(exit_status=returncode if returncode is not None else agent.popen.poll())

    def stop(self, *, by_client: bool = True) -> None:
        """The agent's close sequence: stdin closed, SIGTERM then SIGKILL after its grace."""
        if self._stopping is not None or self.ended.is_set():
            return
        self.deleted = by_client
        self._stopping = asyncio.create_task(self.agent.terminate_async(self.stdin))
