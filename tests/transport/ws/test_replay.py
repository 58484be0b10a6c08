"""``acp-proxy replay RECORDING --listen``: a recording served over WebSocket."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import aiohttp

from tests.peers.sdk_ws import sdk_prompt_over_ws
from tests.transport.ws.helpers import listening, ws_server

DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]


async def test_record_over_ws_then_replay_over_ws(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    with ws_server(["--record", str(db), "--", *DEMO_AGENT]) as live_server:
        live = await sdk_prompt_over_ws(live_server.url, "hello replay")
        live_server.stop()
    with listening(["replay", str(db), "--listen", "127.0.0.1:0"]) as server:
        # Two clients, one after the other: each gets its own fresh replay.
        first = await sdk_prompt_over_ws(server.url, "hello replay")
        second = await sdk_prompt_over_ws(server.url, "hello replay")
        # A request the recording never saw gets a JSON-RPC error naming the difference.
        async with aiohttp.ClientSession() as session, session.ws_connect(server.url) as ws:
            assert ws._response.headers.get("Acp-Connection-Id")
            await ws.send_str('{"jsonrpc":"2.0","id":1,"method":"_never/recorded"}')
            answer = await ws.receive_json()
            assert answer["id"] == 1 and answer["error"]["code"] == -32601
            await ws.send_str('{"jsonrpc":"2.0",\n"id":2,"method":"initialize"}')
            closed = await ws.receive()
            assert (closed.type, closed.data) == (aiohttp.WSMsgType.CLOSE, 1007)
        server.stop()
    assert server.returncode == 0
    for replayed in (first, second):
        assert replayed.result == live.result
        assert replayed.client.texts == live.client.texts
        # Same requests sent (the SDK is deterministic) -> byte-identical frames back.
        assert replayed.sent == live.sent
        assert replayed.received == live.received
    assert "_never/recorded" in server.stderr_text
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM connections").fetchone() == (1,)
