"""``acp-proxy ws --upstream URL``: WebSocket to WebSocket, headers and close codes through."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiohttp
import websockets

from tests.conftest import frames_of
from tests.peers.sdk_ws import sdk_prompt_over_ws
from tests.peers.ws_upstream_server import Upstream
from tests.transport.ws.helpers import SDK_AGENT, ws_server


async def _until(predicate: object, tries: int = 600) -> None:
    for _ in range(tries):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never became true")


async def test_messages_headers_and_close_codes_pass_through(tmp_path: Path) -> None:
    db = tmp_path / "up.db"
    upstream = await Upstream().start()
    try:
        with ws_server(["--record", str(db), "--upstream", upstream.url]) as server:
            async with websockets.connect(
                server.url,
                additional_headers={
                    "Cookie": "affinity=node-7",
                    "X-Team": "blue",
                    "Acp-Session-Hint": "s1",
                },
                subprotocols=["acp.v1"],  # type: ignore[list-item]
            ) as ws:
                # The upstream's Acp-Connection-Id and cookie come back to the client.
                assert ws.response.headers["Acp-Connection-Id"] == "upstream-1"
                assert ws.response.headers["Set-Cookie"] == "affinity=node-7; Path=/"
                assert ws.subprotocol == "acp.v1"
                await ws.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')
                assert (
                    await ws.recv() == '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
                )
                await ws.send(b"\x00\xffbinary")
                assert await ws.recv() == b"\x00\xffbinary"
                await ws.send('pretty\n{"multi":"line"}')  # no stdio here: passes unchanged
                assert await ws.recv() == 'pretty\n{"multi":"line"}'
                await ws.close(4001, "client bye")
            await _until(lambda: upstream.closes)
            seen = upstream.seen_headers[0]
            assert seen["Cookie"] == "affinity=node-7"
            assert seen["X-Team"] == "blue" and seen["Acp-Session-Hint"] == "s1"
            assert upstream.closes == [(4001, "")]

            # The upstream closes: its code and reason reach the client.
            async with websockets.connect(server.url) as ws:
                await ws.send("close-me 4002 upstream says bye")
                try:
                    await ws.recv()
                    raise AssertionError("expected a close")
                except websockets.ConnectionClosed as closed:
                    assert closed.rcvd is not None
                    assert (closed.rcvd.code, closed.rcvd.reason) == (4002, "upstream says bye")
            server.stop()
    finally:
        await upstream.stop()
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT transport, agent_command, headers FROM connections").fetchall()
    assert [r[0] for r in rows] == ["ws-upstream", "ws-upstream"]
    assert upstream.url in rows[0][1]
    assert '"Acp-Connection-Id":"upstream-1"' in rows[0][2]
    assert "node-7" not in rows[0][2]  # cookie values are secrets: only names are kept
    frames = frames_of(db, 1)
    assert frames == [
        ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'),
        ("a2c", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'),
        ("c2a", b"\x00\xffbinary"),
        ("a2c", b"\x00\xffbinary"),
        ("c2a", b'pretty\n{"multi":"line"}'),
        ("a2c", b'pretty\n{"multi":"line"}'),
    ]
    binary = conn.execute("SELECT binary FROM frames WHERE connection_id=1 ORDER BY seq").fetchall()
    assert binary == [(0,), (0,), (1,), (1,), (0,), (0,)]
    events = [d for (d,) in conn.execute("SELECT detail FROM events ORDER BY id")]
    assert '"code":4001' in events[0] and '"by":"client"' in events[0]
    assert '"code":4002' in events[1] and '"by":"upstream"' in events[1]


async def test_upstream_refusals_and_outages_become_http_errors() -> None:
    upstream = await Upstream(refuse_with=403).start()
    try:
        with ws_server(["--upstream", upstream.url]) as server:
            async with aiohttp.ClientSession() as session:
                try:
                    await session.ws_connect(server.url)
                    raise AssertionError("expected a refusal")
                except aiohttp.WSServerHandshakeError as exc:
                    assert exc.status == 403
                url = upstream.url
                await upstream.stop()
                try:
                    await session.ws_connect(server.url)
                    raise AssertionError("expected a refusal")
                except aiohttp.WSServerHandshakeError as exc:
                    assert exc.status == 502
            assert server.proc.poll() is None
    finally:
        await upstream.stop()
    assert "upstream refused the WebSocket handshake: 403" in server.stderr_text
    assert f"502 cannot reach upstream {url}" in server.stderr_text


async def test_proxy_chain_to_an_sdk_agent(tmp_path: Path) -> None:
    """SDK WebSocket client -> ws --upstream -> ws -- SDK agent: the same bytes at each hop."""
    front_db, back_db = tmp_path / "front.db", tmp_path / "back.db"
    with (
        ws_server(["--record", str(back_db), "--", *SDK_AGENT]) as back,
        ws_server(["--record", str(front_db), "--upstream", back.url]) as front,
    ):
        tapped = await sdk_prompt_over_ws(front.url, "through two proxies")
        front.stop()
        back.stop()
    assert tapped.result["stop"] == "end_turn"
    assert tapped.client.texts == ["echo: ", "through two proxies"]
    assert frames_of(front_db) == frames_of(back_db)
    assert [r for d, r in frames_of(front_db) if d == "c2a"] == tapped.sent
    assert [r for d, r in frames_of(front_db) if d == "a2c"] == tapped.received
