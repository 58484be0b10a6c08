"""The messages the WebSocket relay reads in one turn are recorded in one call (issue 27).

Through the real ``acp-proxy ws --upstream --record`` (real sockets, an aiohttp upstream in the
test, a real SQLite file): bursts each way, text and binary mixed, written in one piece
(:class:`~acp_proxy.transport.ws.sockets.Cork`) so the proxy reads many at once. Every message
arrives and is recorded once, in order, numbered, with its direction and binary flag; the
messages of one turn share one clock reading (one journal call). A message over the limit in
the middle of a burst ends it: what came before it is relayed and recorded, nothing after
(through the executable, refused by aiohttp's reader; and, with stand-ins for the sockets,
refused by our exact check as the run of already-read messages is taken).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import WebSocketError, WSMsgType, web

from acp_proxy.transport.ws.sockets import Cork, client_ws_class, take_queued
from acp_proxy.transport.ws.upstream import _pump_ws
from tests.transport.ws.helpers import serving, ws_server

Message = tuple[bytes, bool]  # payload, binary


def _burst(tag: str, n: int) -> list[Message]:
    return [
        (f'{{"jsonrpc":"2.0","method":"{tag}","params":{{"n":{i}}}}}'.encode(), i % 7 == 3)
        for i in range(n)
    ]


async def _send_in_one_piece(ws: Any, transport: Any, messages: list[Message]) -> None:
    cork = Cork(transport)
    cork.hold()
    for payload, binary in messages:
        await (ws.send_bytes(payload) if binary else ws.send_str(payload.decode()))
    cork.release()


def _as_message(msg: aiohttp.WSMessage) -> Message:
    binary = msg.type == WSMsgType.BINARY
    return (msg.data if binary else msg.data.encode(), binary)


def _upstream(
    handler: Callable[[web.WebSocketResponse, web.Request], Awaitable[None]],
) -> AbstractAsyncContextManager[str]:
    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        await handler(ws, request)
        return ws

    return serving(handle)


def _recorded(db: Path) -> list[tuple[int, str, bytes, bool, int]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT seq, direction, raw, binary, mono_ns FROM frames ORDER BY seq")
        return [(s, d, bytes(r), bool(b), m) for s, d, r, b, m in rows]
    finally:
        conn.close()


async def test_bursts_are_recorded_whole_in_order_a_turn_in_one_call(tmp_path: Path) -> None:
    n = 200
    down, up = _burst("c", n), _burst("a", n)
    upstream_got: list[Message] = []

    async def handler(ws: web.WebSocketResponse, request: web.Request) -> None:
        while len(upstream_got) < n:
            upstream_got.append(_as_message(await ws.receive()))
        await _send_in_one_piece(ws, request.transport, up)
        await ws.receive()  # until the client closes

    db = tmp_path / "turns.db"
    async with _upstream(handler) as url:
        with ws_server(["--record", str(db), "--upstream", url]) as server:
            async with (
                aiohttp.ClientSession(ws_response_class=client_ws_class(1 << 20)) as session,
                session.ws_connect(server.url) as ws,
            ):
                await _send_in_one_piece(ws, ws.transport, down)  # type: ignore[attr-defined]
                got = [_as_message(await ws.receive()) for _ in range(n)]
            server.stop()
    assert upstream_got == down
    assert got == up
    rows = _recorded(db)
    assert [seq for seq, *_ in rows] == list(range(1, 2 * n + 1))
    assert [(raw, binary) for _, d, raw, binary, _ in rows if d == "c2a"] == down
    assert [(raw, binary) for _, d, raw, binary, _ in rows if d == "a2c"] == up
    assert [d for _, d, *_ in rows] == ["c2a"] * n + ["a2c"] * n
    for direction in ("c2a", "a2c"):
        clocks = [mono for _, d, _, _, mono in rows if d == direction]
        assert clocks == sorted(clocks)
        assert len(set(clocks)) < n  # turns of several messages, each one clock reading


async def test_a_message_over_the_limit_ends_a_burst_after_what_came_before(
    tmp_path: Path,
) -> None:
    before = _burst("a", 5)
    big = (b'{"jsonrpc":"2.0","method":"big","params":{"pad":"' + b"x" * 2000 + b'"}}', False)
    after = _burst("z", 3)

    async def handler(ws: web.WebSocketResponse, request: web.Request) -> None:
        await ws.receive()  # "go"
        await _send_in_one_piece(ws, request.transport, [*before, big, *after])
        await ws.receive()

    db = tmp_path / "big.db"
    async with _upstream(handler) as url:
        with ws_server(
            ["--record", str(db), "--max-message-size", "1K", "--upstream", url]
        ) as server:
            async with aiohttp.ClientSession() as session, session.ws_connect(server.url) as ws:
                await ws.send_str("go")
                got: list[Message] = []
                while (msg := await asyncio.wait_for(ws.receive(), 10)).type in (
                    WSMsgType.TEXT,
                    WSMsgType.BINARY,
                ):
                    got.append(_as_message(msg))
                closed = (msg.type, msg.data)
            server.stop()
    assert closed == (WSMsgType.CLOSE, 1009)
    assert got == before
    rows = _recorded(db)
    assert [(raw, binary) for _, d, raw, binary, _ in rows if d == "a2c"] == before
    assert [raw for _, d, raw, _, _ in rows if d == "c2a"] == [b"go"]


class _Queued:
    """A stand-in WebSocket whose reader has already read ``messages`` (aiohttp's queue);
    ``receive`` turns one over the limit into the error our check returns."""

    def __init__(self, messages: list[aiohttp.WSMessage], too_big: bytes) -> None:
        self._reader = type("Reader", (), {"_buffer": deque((m, 0) for m in messages)})()
        self.too_big = too_big
        self.sent: list[bytes] = []

    async def receive(self) -> aiohttp.WSMessage:
        msg: aiohttp.WSMessage = self._reader._buffer.popleft()[0]
        if msg.data == self.too_big:
            return aiohttp.WSMessage(WSMsgType.ERROR, WebSocketError(1009, "too big"), None)
        return msg

    async def send_frame(self, data: bytes, kind: WSMsgType) -> None:
        self.sent.append(data)


class _Recorder:
    """A stand-in connection recorder: the frames it was given, and in how many calls."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.calls = 0

    def frame(self, direction: str, raw: bytes, *, binary: bool = False) -> None:
        self.got.append(raw)
        self.calls += 1

    def frames(self, direction: str, raws: list[bytes], binary: list[bool]) -> None:
        self.got.extend(raws)
        self.calls += 1


def _text(data: bytes) -> aiohttp.WSMessage:
    return aiohttp.WSMessage(WSMsgType.TEXT, data, None)


async def test_a_run_taken_stops_at_a_message_our_check_refuses() -> None:
    ws = _Queued([_text(b"b"), _text(b"BIG"), _text(b"c")], too_big=b"BIG")
    turn, last = await take_queued(ws, _text(b"a"))
    assert [m.data for m in turn] == [b"a", b"b"]
    assert last is not None and last.type == WSMsgType.ERROR
    assert [m.data for m, _ in ws._reader._buffer] == [b"c"]  # not taken


async def test_the_pump_records_and_sends_a_turn_then_closes_at_the_refusal() -> None:
    src = _Queued([_text(b"a"), _text(b"b"), _text(b"BIG"), _text(b"c")], too_big=b"BIG")
    dst = _Queued([], too_big=b"")
    rec = _Recorder()
    stand_ins: Any = (src, dst, rec)
    info = await _pump_ws(stand_ins[0], stand_ins[1], None, "a2c", stand_ins[2], "upstream")
    assert (info.by, info.code) == ("upstream", 1009)
    assert dst.sent == [b"a", b"b"]
    assert (rec.got, rec.calls) == ([b"a", b"b"], 1)  # one call for the turn
