"""200 concurrent WebSocket connections, 1,000 frames each way, every frame recorded."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.transport.ws.helpers import ws_server

CONNECTIONS = 200
FRAMES = 1000


def _frame(client: int, n: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"_load/ping","params":{"client":%d,"pad":"%s"}}' % (
        n,
        client,
        b"x" * (n % 97),
    )


async def _client(
    session: aiohttp.ClientSession, url: str, client: int, ready: asyncio.Barrier
) -> int:
    async with session.ws_connect(url, max_msg_size=0, heartbeat=None) as ws:
        await ready.wait()  # every connection is open (and has its agent) before traffic

        async def send() -> None:
            for n in range(FRAMES):
                await ws.send_str(_frame(client, n).decode())

        sender = asyncio.create_task(send())
        for n in range(FRAMES):
            msg = await ws.receive()
            assert msg.type == aiohttp.WSMsgType.TEXT, msg
            assert msg.data.encode() == _frame(client, n)
        await sender
        await ws.close()
    return FRAMES


@pytest.mark.slow
async def test_200_connections_1000_frames_each_all_recorded(tmp_path: Path) -> None:
    db = tmp_path / "load.db"
    # `cat` is the lightest echo agent there is: 200 of them fit on a small machine.
    with ws_server(["--record", str(db), "--heartbeat", "0", "--", "cat"]) as server:
        ready = asyncio.Barrier(CONNECTIONS)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            results = await asyncio.wait_for(  # generous: fail, never hang
                asyncio.gather(
                    *(_client(session, server.url, c, ready) for c in range(CONNECTIONS))
                ),
                600,
            )
        assert sum(results) == CONNECTIONS * FRAMES
        assert server.stop() == 0  # SIGTERM: flushes the recorder
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT count(*), sum(frames_dropped), count(ended_at), "
        "sum(exit_status = 0), count(DISTINCT pid) FROM connections"
    ).fetchone()
    assert rows == (CONNECTIONS, 0, CONNECTIONS, CONNECTIONS, CONNECTIONS)
    # Every frame, both ways, with its content: each connection carried one client's frames
    # 0..999 in order, and the agent's answers are the same bytes.
    seen_clients = set()
    for (connection_id,) in conn.execute("SELECT id FROM connections"):
        c2a: list[bytes] = []
        a2c: list[bytes] = []
        for direction, raw in conn.execute(
            "SELECT direction, raw FROM frames WHERE connection_id = ? ORDER BY seq",
            (connection_id,),
        ):
            (c2a if direction == "c2a" else a2c).append(bytes(raw))
        client = orjson.loads(c2a[0])["params"]["client"]
        seen_clients.add(client)
        expected = [_frame(client, n) for n in range(FRAMES)]
        assert c2a == expected
        assert a2c == expected
    assert seen_clients == set(range(CONNECTIONS))
    kinds = conn.execute("SELECT kind, count(*) FROM frames GROUP BY kind").fetchall()
    assert kinds == [("request", 2 * CONNECTIONS * FRAMES)]
