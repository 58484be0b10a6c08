"""``acp-proxy serve``: the RFD's refusals, security, the WebSocket half, many connections."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import httpx2

from tests.peers.jsonrpc_peers import HttpPeer
from tests.transport.http.helpers import DEMO, SDK_AGENT, rows, serving

INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
JSON = {"Content-Type": "application/json"}


async def _still_serves(url: str, headers: dict[str, str] | None = None) -> None:
    async with httpx2.AsyncClient(timeout=30) as client:
        resp = await client.post(url, content=INIT, headers={**JSON, **(headers or {})})
        assert resp.status_code == 200, resp.text
        cid = resp.headers["Acp-Connection-Id"]
        gone = await client.delete(url, headers={"Acp-Connection-Id": cid, **(headers or {})})
        assert gone.status_code == 202


def test_refusals_have_the_rfd_status_and_leave_the_server_serving(tmp_path: Path) -> None:
    async def run(url: str) -> dict[str, int]:
        got: dict[str, int] = {}
        async with httpx2.AsyncClient(timeout=30) as c:
            got["text/plain"] = (
                await c.post(url, content=INIT, headers={"Content-Type": "text/plain"})
            ).status_code
            got["no type"] = (await c.post(url, content=INIT)).status_code
            got["batch"] = (await c.post(url, content=b"[" + INIT + b"]", headers=JSON)).status_code
            got["not json"] = (await c.post(url, content=b"{nope", headers=JSON)).status_code
            msg = b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}'
            got["no id"] = (await c.post(url, content=msg, headers=JSON)).status_code
            unknown = {**JSON, "Acp-Connection-Id": "nope"}
            got["unknown id"] = (await c.post(url, content=msg, headers=unknown)).status_code
            sse = {"Accept": "text/event-stream"}
            got["get no id"] = (await c.get(url, headers=sse)).status_code
            got["get unknown"] = (
                await c.get(url, headers={**sse, "Acp-Connection-Id": "x"})
            ).status_code
            got["get no accept"] = (
                await c.get(url, headers={"Accept": "application/json", "Acp-Connection-Id": "x"})
            ).status_code
            got["delete no id"] = (await c.delete(url)).status_code
            got["delete unknown"] = (
                await c.delete(url, headers={"Acp-Connection-Id": "x"})
            ).status_code
            big = (
                b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"'
                + b"x" * 5000
                + b'"}}'
            )
            got["big"] = (await c.post(url, content=big, headers=JSON)).status_code

            async def chunked() -> Any:
                yield big

            got["big chunked"] = (await c.post(url, content=chunked(), headers=JSON)).status_code
            got["origin"] = (
                await c.post(url, content=INIT, headers={**JSON, "Origin": "https://evil.example"})
            ).status_code
            # a known connection: missing / unknown session header on a session-scoped POST
            init = await c.post(url, content=INIT, headers=JSON)
            cid = init.headers["Acp-Connection-Id"]
            prompt = (
                b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s"}}'
            )
            conn = {**JSON, "Acp-Connection-Id": cid}
            got["no session"] = (await c.post(url, content=prompt, headers=conn)).status_code
            got["unknown session"] = (
                await c.post(url, content=prompt, headers={**conn, "Acp-Session-Id": "s"})
            ).status_code
            # held for a session/load of it (the TypeScript SDK opens it first): 200
            held = {**sse, "Acp-Connection-Id": cid, "Acp-Session-Id": "s"}
            async with c.stream("GET", url, headers=held) as stream:
                got["get unknown session"] = stream.status_code
            got["delete"] = (await c.delete(url, headers={"Acp-Connection-Id": cid})).status_code
            got["after delete"] = (await c.post(url, content=prompt, headers=conn)).status_code
        await _still_serves(url)
        return got

    with serving(["--max-message-size", "4K", "--", *DEMO]) as server:
        got = asyncio.run(run(server.url))
        assert server.proc.poll() is None
    assert got == {
        "text/plain": 415,
        "no type": 415,
        "batch": 501,
        "not json": 400,
        "no id": 400,
        "unknown id": 404,
        "get no id": 400,
        "get unknown": 404,
        "get no accept": 406,
        "delete no id": 400,
        "delete unknown": 404,
        "big": 413,
        "big chunked": 413,
        "origin": 403,
        "no session": 400,
        "unknown session": 404,
        "get unknown session": 200,
        "delete": 202,
        "after delete": 404,
    }
    assert "Traceback" not in server.stderr_text


def test_token_is_checked_on_every_request(tmp_path: Path) -> None:
    async def run(url: str) -> list[int]:
        got = []
        async with httpx2.AsyncClient(timeout=30) as c:
            got.append((await c.post(url, content=INIT, headers=JSON)).status_code)
            wrong = {**JSON, "Authorization": "Bearer nope"}
            got.append((await c.post(url, content=INIT, headers=wrong)).status_code)
            good = {"Authorization": "Bearer s3cret"}
            init = await c.post(url, content=INIT, headers={**JSON, **good})
            got.append(init.status_code)
            cid = init.headers["Acp-Connection-Id"]
            # the connection id alone is not enough: every request needs the token
            sse = {"Accept": "text/event-stream", "Acp-Connection-Id": cid}
            async with c.stream("GET", url, headers=sse) as stream:  # never hangs on a 200
                got.append(stream.status_code)
            got.append((await c.delete(url, headers={"Acp-Connection-Id": cid})).status_code)
            got.append(
                (await c.delete(url, headers={"Acp-Connection-Id": cid, **good})).status_code
            )
        await _still_serves(url, {"Authorization": "Bearer s3cret"})
        return got

    with serving(["--token", "s3cret", "--", *DEMO]) as server:
        assert asyncio.run(run(server.url)) == [401, 401, 200, 401, 401, 202]


def test_websocket_half_of_the_same_endpoint(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"

    async def run(url: str) -> dict[str, Any]:
        async with aiohttp.ClientSession() as s, s.ws_connect(url) as ws:
            assert ws._response.headers.get("Acp-Connection-Id")
            await ws.send_str(INIT.decode())
            answer = json.loads((await ws.receive()).data)
            await ws.close()
            return answer  # type: ignore[no-any-return]

    with serving(["--record", str(db), "--", *SDK_AGENT]) as server:
        answer = asyncio.run(run(server.ws_url))
    assert answer["id"] == 1 and "result" in answer
    assert rows(db, "select transport from connections") == [("websocket",)]


def test_a_hundred_concurrent_http_connections_every_frame_recorded_exactly(
    tmp_path: Path,
) -> None:
    """100 HTTP clients at once (initialize, session/new, a prompt with its permission
    request, DELETE) through ``serve --record`` to the demo agent (one agent process each;
    the demo agent starts in a tenth of the SDK agent's CPU time): each connection's frames
    are exactly the bytes its client sent, in order, and every message it received."""
    db = tmp_path / "many.db"
    n = 100

    async def one(url: str, i: int) -> HttpPeer:
        peer = HttpPeer(url)
        await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = new["result"]["sessionId"]
        await peer.on_session(sid)

        async def allow(m: dict[str, Any]) -> None:
            if m["method"] == "session/request_permission":
                option = m["params"]["options"][0]["optionId"]
                result = {"outcome": {"outcome": "selected", "optionId": option}}
                await peer.send({"jsonrpc": "2.0", "id": m["id"], "result": result}, sid)

        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"hello {i}"}]}
        answer = await peer.call("session/prompt", prompt, sid, allow)
        assert answer["result"]["stopReason"] == "end_turn"
        await peer.close()
        return peer

    async def run(url: str) -> list[HttpPeer]:
        return list(await asyncio.gather(*(one(url, i) for i in range(n))))

    agent = [*DEMO, "--state", str(tmp_path / "demo-state")]
    with serving(["--record", str(db), "--", *agent]) as server:
        peers = asyncio.run(run(server.url))
    assert rows(db, "select count(*) from connections where transport='http'") == [(n,)]
    assert rows(db, "select count(*) from connections where ended_at is null") == [(0,)]
    assert rows(db, "select coalesce(sum(frames_dropped), 0) from connections") == [(0,)]
    by_cid = {
        json.loads(headers)["response"]["Acp-Connection-Id"]: cid
        for cid, headers in rows(db, "select id, headers from connections")
    }
    assert len(by_cid) == n
    for peer in peers:
        assert peer.connection_id is not None
        cid = by_cid[peer.connection_id]
        c2a = [r for (r,) in rows(db, _FRAMES, cid, "c2a")]
        a2c = [r for (r,) in rows(db, _FRAMES, cid, "a2c")]
        assert len(c2a) == len(peer.sent_raw) == len(peer.statuses) >= 4
        assert c2a == peer.sent_raw  # byte-exact, in the order sent
        assert len(a2c) == peer.received >= 5
        assert sorted(a2c) == sorted(peer.received_raw)  # two SSE streams: any interleaving
        assert any(b"session/request_permission" in r for r in a2c)


_FRAMES = "select raw from frames where connection_id = ? and direction = ? order by seq"


def test_bad_command_lines_are_one_line_errors() -> None:
    import subprocess

    from tests.conftest import proxy_exe

    cases = {
        ("serve",): "no agent",
        ("serve", "--listen", "0.0.0.0:0", "--", "cat"): "--token",
        ("serve", "--upstream", "ftp://x/acp"): "not an http:// URL",
        ("serve", "--upstream", "http://x/acp", "--", "cat"): "either --upstream",
    }
    for args, expected in cases.items():
        done = subprocess.run([*proxy_exe(), *args], capture_output=True, timeout=60)
        err = done.stderr.decode()
        assert done.returncode != 0 and expected in err and "Traceback" not in err, (args, err)
    done = subprocess.run(
        [*proxy_exe(), "serve", "--", "no-such-agent-xyz"], capture_output=True, timeout=60
    )
    assert done.returncode == 127 and b"agent command not found" in done.stderr
