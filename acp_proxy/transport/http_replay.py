"""The Streamable HTTP adapter of the replay engine, and ``replay --listen`` over both halves.

A :class:`ReplayConnection` is an HTTP connection (its SSE streams and routing are those of
:class:`~acp_proxy.transport.http_agent.HttpConnection`) answered by a fresh
:class:`~acp_proxy.replay.engine.ReplayEngine`: each POST body is one client frame for the
engine, each ``Send`` one agent message (the 200 body of ``initialize``, or an SSE event).
:func:`serve_replay_both` serves ``/acp`` with this for HTTP and the WebSocket replay handler
of :mod:`acp_proxy.transport.replay_ws` for upgrades. With ``--record`` the replayed
conversation is recorded too (transport ``replay-http``; WebSocket: ``replay``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from acp_proxy.record.writer import ConnectionRecorder, Recorder
from acp_proxy.replay.engine import Note, Output, ReplayEngine, Send
from acp_proxy.transport.http_agent import HttpConnection
from acp_proxy.transport.http_endpoint import AcpEndpoint, serve_endpoint
from acp_proxy.transport.replay_ws import replay_handler
from acp_proxy.transport.ws_io import log
from acp_proxy.transport.ws_server import WsSettings


class ReplayConnection(HttpConnection):
    """An HTTP connection answered by a replay engine instead of an agent."""

    def __init__(
        self,
        connection_id: str,
        engine: ReplayEngine,
        rec: ConnectionRecorder,
        initialize_id: str | None,
        answer_timeout: float,
    ) -> None:
        super().__init__(connection_id, rec, initialize_id)
        self.engine = engine
        self.answer_timeout = answer_timeout
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def _write(self, body: bytes) -> None:
        self.inbox.put_nowait(body)

    def stop(self, *, by_client: bool = True) -> None:
        self.deleted = by_client
        self.inbox.put_nowait(None)

    async def _carry_out(self, outputs: list[Output]) -> None:
        for out in outputs:
            if isinstance(out, Send):
                if out.delay > 0:
                    await asyncio.sleep(out.delay)
                self.deliver(out.data)
            elif isinstance(out, Note):
                log(f"connection {self.id[:8]}: {out.text}")

    async def _serve(self) -> None:
        engine = self.engine
        try:
            await self._carry_out(engine.start())
            while True:
                timeout = self.answer_timeout if engine.waiting_for is not None else None
                try:
                    body = await asyncio.wait_for(self.inbox.get(), timeout)
                except TimeoutError:
                    await self._carry_out(engine.answer_timed_out())
                    continue
                if body is None:
                    break
                await self._carry_out(engine.receive(body))
            await self._carry_out(engine.finish())
        finally:
            self.rec.close()


def serve_replay_both(
    new_engine: Callable[[], ReplayEngine],
    host: str,
    port: int,
    *,
    recorder: Recorder,
    token: str | None = None,
    answer_timeout: float = 60.0,
    tls: ssl.SSLContext | None = None,
) -> None:
    """``/acp`` replaying over Streamable HTTP and WebSocket until SIGINT/SIGTERM (blocking)."""
    settings = WsSettings(
        recorder=recorder,
        handler=replay_handler(new_engine, answer_timeout=answer_timeout),
        token=token,
        tls=tls,
    )

    def connection(connection_id: str, rec: ConnectionRecorder, init: str | None) -> HttpConnection:
        return ReplayConnection(connection_id, new_engine(), rec, init, answer_timeout)

    def ready(url: str) -> None:  # the WebSocket URL first, as replay --listen always said
        ws_url = "ws" + url.removeprefix("http")
        log(f"listening on {ws_url} (Streamable HTTP: {url})")

    endpoint = AcpEndpoint(settings, http_backend=connection)
    asyncio.run(serve_endpoint(endpoint, host, port, on_ready=ready))
