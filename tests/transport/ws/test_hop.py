"""The WebSocket hop's cheaper paths (issue 27): small reads, bursts written together.

The sockets of both hops are read :data:`~acp_proxy.transport.ws.sockets.READ_SIZE` bytes at
a time (real aiohttp peers on 127.0.0.1); messages many reads long still cross byte for byte
through the real ``acp-proxy`` (agent and upstream modes, recorded); the agent's stdin gets
a line at once unless more messages wait behind it, then all in one write (a real pipe);
a burst of messages leaves a socket in one piece, a lone message at once (real sockets).
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import web

from acp_proxy.transport.ws.sockets import (
    READ_SIZE,
    Cork,
    ServerWebSocket,
    client_ws_class,
    data_queued,
    read_in_small_chunks,
)
from tests.conftest import ECHO_AGENT, frames_of
from tests.transport.ws.helpers import serving, ws_server


def test_read_in_small_chunks_lowers_only_a_bigger_read_size() -> None:
    big, small = SimpleNamespace(max_size=256 * 1024), SimpleNamespace(max_size=100)
    other = object()
    read_in_small_chunks(big)
    read_in_small_chunks(small)
    read_in_small_chunks(other)  # not an asyncio transport: left alone
    read_in_small_chunks(None)
    assert (big.max_size, small.max_size) == (READ_SIZE, 100)
    assert READ_SIZE < 128 * 1024  # under glibc's mmap threshold


async def test_both_hops_read_their_sockets_in_small_chunks() -> None:
    seen: dict[str, int] = {}

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = ServerWebSocket(max_msg_size=1024)
        await ws.prepare(request)
        seen["server"] = request.transport.max_size  # type: ignore[union-attr]
        async for msg in ws:
            await ws.send_str(msg.data)
        return ws

    async with (
        serving(handler) as url,
        aiohttp.ClientSession(ws_response_class=client_ws_class(1024)) as session,
        session.ws_connect(url) as ws,
    ):
        seen["client"] = ws.transport.max_size  # type: ignore[attr-defined]
        await ws.send_str("ping")
        assert (await ws.receive()).data == "ping"
    assert seen == {"server": READ_SIZE, "client": READ_SIZE}


async def test_a_held_burst_leaves_the_socket_in_one_piece_at_release() -> None:
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    peer_sock = socket.create_connection(listener.getsockname())
    ours, _ = listener.accept()
    listener.close()
    peer_sock.setblocking(False)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)

    def arrived() -> bytes:
        try:
            return peer_sock.recv(1 << 16)
        except BlockingIOError:
            return b""

    try:
        cork = Cork(transport)
        transport.write(b"lone")
        assert arrived() == b"lone"  # nothing held: at once
        cork.hold()
        transport.write(b"one,")
        transport.write(b"two")
        assert arrived() == b""  # held...
        cork.release()
        assert arrived() == b"one,two"  # ...and gone at release, together
        transport.write(b"after")
        assert arrived() == b"after"
    finally:
        transport.close()
        peer_sock.close()


async def _until_read(ws: Any, count: int) -> None:
    """Wait until ``ws`` has read ``count`` messages it has not handed out yet."""
    for _ in range(500):
        if len(ws._reader._buffer) >= count:
            return
        await asyncio.sleep(0.01)


async def test_data_queued_says_whether_a_data_message_is_next_without_waiting() -> None:
    got: list[bool] = []

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = ServerWebSocket(max_msg_size=1024)
        await ws.prepare(request)
        await _until_read(ws, 3)  # "a", "b", a ping
        got.append(data_queued(ws))
        assert (await ws.receive()).data == "a"
        got.append(data_queued(ws))
        assert (await ws.receive()).data == "b"
        got.append(data_queued(ws))  # a ping is next: receive() would answer it, then wait
        for text in ("x", "y"):
            await ws.send_str(text)
        while (await ws.receive()).data != "bye":  # open until the client counted
            pass
        return ws

    async with (
        serving(handler) as url,
        aiohttp.ClientSession() as session,
        session.ws_connect(url, autoping=True) as ws,
    ):
        await ws.send_str("a")
        await ws.send_str("b")
        await ws.ping()
        await _until_read(ws, 2)  # the client's side too (aiohttp's other WebSocket class)
        got.append(data_queued(ws))
        assert (await ws.receive()).data == "x"
        assert (await ws.receive()).data == "y"
        got.append(data_queued(ws))  # nothing read is waiting
        await ws.send_str("bye")
    assert got == [True, True, False, True, False]
    assert not data_queued(object())  # not an aiohttp WebSocket: nothing known


async def _exchange(url: str, payloads: list[str]) -> list[str]:
    async with aiohttp.ClientSession() as session, session.ws_connect(url, max_msg_size=0) as ws:
        for p in payloads:  # all at once: the proxy reads them many reads long
            await ws.send_str(p)
        return [(await ws.receive()).data for _ in payloads]


def _payloads() -> list[str]:
    big = '{"jsonrpc":"2.0","method":"big","params":{"pad":"%s"}}'
    sizes = (10, READ_SIZE - 40, READ_SIZE + 1, 5 * READ_SIZE + 7, 20)
    burst = [f'{{"jsonrpc":"2.0","method":"n","params":{{"n":{n}}}}}' for n in range(300)]
    return [big % (chr(ord("a") + n) * size) for n, size in enumerate(sizes)] + burst


def _crossed_and_recorded(got: list[str], payloads: list[str], db: Path) -> None:
    assert got == payloads
    frames = frames_of(db)
    assert [raw for d, raw in frames if d == "c2a"] == [p.encode() for p in payloads]
    assert [raw for d, raw in frames if d == "a2c"] == [p.encode() for p in payloads]


async def test_messages_many_reads_long_cross_byte_exact_to_an_agent(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    payloads = _payloads()
    with ws_server(["--record", str(db), "--", *ECHO_AGENT]) as server:
        got = await _exchange(server.url, payloads)
        server.stop()
    _crossed_and_recorded(got, payloads, db)


async def test_messages_many_reads_long_cross_byte_exact_upstream(tmp_path: Path) -> None:
    db = tmp_path / "up.db"
    payloads = _payloads()
    with (
        ws_server(["--", *ECHO_AGENT]) as agent,
        ws_server(["--record", str(db), "--upstream", agent.url]) as server,
    ):
        got = await _exchange(server.url, payloads)
        server.stop()
    _crossed_and_recorded(got, payloads, db)
