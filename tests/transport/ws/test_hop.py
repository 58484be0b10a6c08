"""The WebSocket hop's cheaper paths (issue 27): small socket reads, the first stdin line at once.

The sockets of both hops are read :data:`~acp_proxy.transport.ws.sockets.READ_SIZE` bytes at
a time (real aiohttp peers on 127.0.0.1); messages many reads long still cross byte for byte
through the real ``acp-proxy`` (agent and upstream modes, recorded); the agent's stdin gets
the first line of a loop turn at once and the lines that follow it in one write (a real pipe).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from types import SimpleNamespace

import aiohttp
from aiohttp import web

from acp_proxy.transport.ws.agent import EagerStdinBatcher
from acp_proxy.transport.ws.sockets import (
    READ_SIZE,
    ServerWebSocket,
    client_ws_class,
    read_in_small_chunks,
)
from tests.conftest import ECHO_AGENT, frames_of
from tests.transport.ws.helpers import ws_server


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

    app = web.Application()
    app.router.add_get("/acp", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with (
            aiohttp.ClientSession(ws_response_class=client_ws_class(1024)) as session,
            session.ws_connect(f"ws://127.0.0.1:{port}/acp") as ws,
        ):
            seen["client"] = ws._conn.transport.max_size  # type: ignore[attr-defined]
            await ws.send_str("ping")
            assert (await ws.receive()).data == "ping"
    finally:
        await runner.cleanup()
    assert seen == {"server": READ_SIZE, "client": READ_SIZE}


async def _exchange(url: str, payloads: list[str]) -> list[str]:
    async with aiohttp.ClientSession() as session, session.ws_connect(url, max_msg_size=0) as ws:
        for p in payloads:  # all at once: the proxy reads them many reads long
            await ws.send_str(p)
        return [(await ws.receive()).data for _ in payloads]


def _payloads() -> list[str]:
    big = '{"jsonrpc":"2.0","method":"big","params":{"pad":"%s"}}'
    sizes = (10, READ_SIZE - 40, READ_SIZE + 1, 5 * READ_SIZE + 7, 20)
    return [big % (chr(ord("a") + n) * size) for n, size in enumerate(sizes)]


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


async def test_the_first_line_of_a_turn_is_written_at_once_the_rest_together() -> None:
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(write_fd, "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    def pending() -> bytes:
        try:
            return os.read(read_fd, 1 << 16)
        except BlockingIOError:
            return b""

    try:
        batcher = EagerStdinBatcher(writer)
        await batcher.write(b"first\n")
        assert pending() == b"first\n"  # before the loop turned
        await batcher.write(b"second\n")
        await batcher.write(b"third\n")
        assert pending() == b""  # they wait for the end of the turn...
        await asyncio.sleep(0)
        assert pending() == b"second\nthird\n"  # ...and leave in one write
        await asyncio.sleep(0)
        await batcher.write(b"next turn\n")
        assert pending() == b"next turn\n"
    finally:
        transport.close()
        os.close(read_fd)
