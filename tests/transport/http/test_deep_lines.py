"""A line nested thousands deep is forwarded by every transport; a deep POST body gets 400."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp
import httpx2

from tests.conftest import proxy_exe
from tests.peers import PEERS
from tests.peers.deep_agent import DEEP
from tests.transport.http.helpers import rows, serving
from tests.transport.ws.helpers import ws_server

AGENT = [sys.executable, str(PEERS / "deep_agent.py")]
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
CALL = b'{"jsonrpc":"2.0","id":2,"method":"_x","params":{}}'
JSON = {"Content-Type": "application/json"}
BOUND = 60.0
"""A bound on each wait, so a lost message fails the test instead of hanging it."""


def _answer(rid: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"result":{"ok":true}}' % rid


def test_stdio_forwards_a_deep_line(tmp_path: Path) -> None:
    db = tmp_path / "stdio.db"
    done = subprocess.run(
        [*proxy_exe(), "--record", str(db), "--", *AGENT],
        input=CALL + b"\n",
        capture_output=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == DEEP + _answer(2) + b"\n"
    recorded = [bytes(r).rstrip(b"\n") for (r,) in rows(db, "SELECT raw FROM frames")]
    assert recorded == [CALL, DEEP.rstrip(b"\n"), _answer(2)]


async def _over_websocket(url: str) -> list[str]:
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(url, max_msg_size=0)
        await ws.send_str(CALL.decode())
        got = [(await asyncio.wait_for(ws.receive(), BOUND)).data for _ in range(2)]
        await ws.close()
    return got


async def test_ws_forwards_a_deep_line() -> None:
    with ws_server(["--", *AGENT]) as server:
        got = await _over_websocket(server.url)
    assert got == [DEEP.rstrip(b"\n").decode(), _answer(2).decode()]
    assert "Traceback" not in server.stderr_text


async def test_ws_upstream_forwards_a_deep_line() -> None:
    with (
        ws_server(["--", *AGENT]) as agent_side,
        ws_server(["--upstream", agent_side.url]) as relay,
    ):
        got = await _over_websocket(relay.url)
    assert got == [DEEP.rstrip(b"\n").decode(), _answer(2).decode()]


async def _sse_messages(client: httpx2.AsyncClient, url: str, cid: str, want: int) -> list[bytes]:
    headers = {"Accept": "text/event-stream", "Acp-Connection-Id": cid}
    got: list[bytes] = []
    async with client.stream("GET", url, headers=headers) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                got.append(line.removeprefix("data: ").encode())
                if len(got) == want:
                    break
    return got


def test_serve_forwards_a_deep_line_over_http_and_websocket(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"

    async def run(url: str, ws_url: str) -> None:
        async with httpx2.AsyncClient(timeout=BOUND) as client:
            init = await client.post(url, content=INIT, headers=JSON)
            assert init.status_code == 200, init.text
            assert init.content.rstrip(b"\n") == _answer(1)
            cid = init.headers["Acp-Connection-Id"]
            stream = asyncio.create_task(_sse_messages(client, url, cid, 3))
            posted = await client.post(
                url, content=CALL, headers={**JSON, "Acp-Connection-Id": cid}
            )
            assert posted.status_code == 202, posted.text
            got = await asyncio.wait_for(stream, BOUND)
            # the deep line before initialize's answer, then the deep line and the answer
            assert got == [DEEP.rstrip(b"\n"), DEEP.rstrip(b"\n"), _answer(2)]
            again = await client.post(url, content=CALL, headers={**JSON, "Acp-Connection-Id": cid})
            assert again.status_code == 202, again.text
            deep_body = b'{"jsonrpc":"2.0","id":3,"method":"_x","params":' + b"[" * 5000
            deep_body += b"]" * 5000 + b"}"
            refused = await client.post(url, content=deep_body, headers=JSON)
            assert refused.status_code == 400, refused.text
        assert await _over_websocket(ws_url) == [DEEP.rstrip(b"\n").decode(), _answer(2).decode()]

    with serving(["--record", str(db), "--", *AGENT]) as server:
        asyncio.run(run(server.url, server.ws_url))
    assert "Traceback" not in server.stderr_text
    assert "internal error" not in server.stderr_text


def test_connect_over_http_forwards_a_deep_line() -> None:
    with serving(["--", *AGENT]) as server:
        done = subprocess.run(
            [*proxy_exe(), "connect", server.url],
            input=INIT + b"\n" + CALL + b"\n",
            capture_output=True,
            timeout=BOUND,
        )
    lines = done.stdout.splitlines()
    assert lines.count(DEEP.rstrip(b"\n")) == 2, done.stderr.decode()[-2000:]
    assert _answer(1) in lines and _answer(2) in lines
    assert "Traceback" not in done.stderr.decode()


def test_connect_over_websocket_forwards_a_deep_line() -> None:
    with ws_server(["--", *AGENT]) as server:
        done = subprocess.run(
            [*proxy_exe(), "connect", server.url],
            input=CALL + b"\n",
            capture_output=True,
            timeout=BOUND,
        )
    assert done.stdout.splitlines() == [DEEP.rstrip(b"\n"), _answer(2)], done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()


def test_serve_upstream_forwards_a_deep_line() -> None:
    async def run(url: str) -> None:
        async with httpx2.AsyncClient(timeout=BOUND) as client:
            init = await client.post(url, content=INIT, headers=JSON)
            assert init.status_code == 200, init.text
            cid = init.headers["Acp-Connection-Id"]
            stream = asyncio.create_task(_sse_messages(client, url, cid, 3))
            headers = {**JSON, "Acp-Connection-Id": cid}
            posted = await client.post(url, content=CALL, headers=headers)
            assert posted.status_code == 202, posted.text
            got = await asyncio.wait_for(stream, BOUND)
            assert got == [DEEP.rstrip(b"\n"), DEEP.rstrip(b"\n"), _answer(2)]

    with serving(["--", *AGENT]) as agent_side, serving(["--upstream", agent_side.url]) as relay:
        asyncio.run(run(relay.url))
    assert "Traceback" not in relay.stderr_text
