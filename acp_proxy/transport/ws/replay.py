"""The WebSocket adapter of the replay engine: ``acp-proxy replay RECORDING --listen``.

Each WebSocket connection gets its own :class:`~acp_proxy.replay.engine.ReplayEngine` (a
fresh copy of the script): one text frame in is one client frame for the engine; every
``Send`` goes out as one text frame (the engine's trailing newline removed). The rules of
the live transport apply: handshake checks, ``Acp-Connection-Id``, the newline rule (close
1007), binary frames ignored, message size limit. With ``--record`` the replayed
conversation is itself recorded (transport ``replay``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import WSMsgType, web

from acp_proxy.recorder.handle import Recorder
from acp_proxy.replay.engine import Note, Output, ReplayEngine, Send
from acp_proxy.transport.ws.handshake import Handshake, SessionHandler, WsSettings
from acp_proxy.transport.ws.rules import (
    DEFAULT_HEARTBEAT,
    DEFAULT_MAX_MESSAGE,
    Ignore,
    Refuse,
    line_to_message,
    message_to_line,
)
from acp_proxy.transport.ws.server import WsServer, serve
from acp_proxy.transport.ws.sockets import close_info, close_quietly, log, record_close
from acp_proxy.wire.frame import A2C, C2A


def replay_handler(
    new_engine: Callable[[], ReplayEngine], *, answer_timeout: float = 60.0
) -> SessionHandler:
    """A :data:`SessionHandler` that serves one fresh replay engine per connection."""

    async def handle(handshake: Handshake) -> web.StreamResponse:
        connection_id = handshake.connection_id
        ws = await handshake.accept()
        rec = handshake.record_connection("replay", ws)
        engine = new_engine()

        async def carry_out(outputs: list[Output]) -> bool:
            for out in outputs:
                if isinstance(out, Send):
                    if out.delay > 0:
                        await asyncio.sleep(out.delay)
                    payload, binary = line_to_message(out.data)
                    try:
                        await ws.send_frame(payload, WSMsgType.BINARY if binary else WSMsgType.TEXT)
                    except (ConnectionError, RuntimeError):
                        return False
                    rec.frame(A2C, payload, binary=binary)
                elif isinstance(out, Note):
                    log(f"connection {connection_id[:8]}: {out.text}")
            return True

        try:
            ok = await carry_out(engine.start())
            while ok:
                timeout = answer_timeout if engine.waiting_for is not None else None
                try:
                    msg = await ws.receive(timeout=timeout)
                except TimeoutError:
                    ok = await carry_out(engine.answer_timed_out())
                    continue
                if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                    info = close_info(msg, ws, "client")
                    record_close(rec, info.by, info.code, info.reason)
                    break
                payload: bytes = msg.data
                decision = message_to_line(payload, binary=msg.type == WSMsgType.BINARY)
                rec.frame(C2A, payload, binary=isinstance(decision, Ignore))
                if isinstance(decision, Refuse):
                    record_close(rec, "proxy", decision.code, decision.reason)
                    await close_quietly(ws, decision.code, decision.reason)
                    break
                if isinstance(decision, Ignore):
                    continue
                ok = await carry_out(engine.receive(payload))
            await carry_out(engine.finish())
            await close_quietly(ws, 1000, "")
        finally:
            rec.close()
        return ws

    return handle


def serve_replay(
    new_engine: Callable[[], ReplayEngine],
    host: str,
    port: int,
    *,
    recorder: Recorder,
    token: str | None = None,
    allow_origins: tuple[str, ...] = (),
    answer_timeout: float = 60.0,
    max_message: int = DEFAULT_MAX_MESSAGE,
    heartbeat: float | None = DEFAULT_HEARTBEAT,
) -> None:
    """Run the replay WebSocket server until SIGINT/SIGTERM (blocking)."""
    settings = WsSettings(
        recorder=recorder,
        handler=replay_handler(new_engine, answer_timeout=answer_timeout),
        token=token,
        allow_origins=allow_origins,
        max_message=max_message,
        heartbeat=heartbeat,
    )
    asyncio.run(serve(WsServer(settings), host, port))
