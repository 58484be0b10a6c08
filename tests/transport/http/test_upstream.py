"""``acp-proxy serve --upstream``: in front of the SDK's ASGI server run by uvicorn."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import httpx2

from tests.peers import PEERS
from tests.transport.http.helpers import URL_RE, rows, sdk_client_run, serving

INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'


@contextmanager
def sdk_server() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(PEERS / "asgi_upstream.py")], stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    match = URL_RE.search(proc.stderr.readline())
    assert match, "the SDK server did not start"
    try:
        yield match.group(1).decode()
    finally:
        proc.terminate()
        proc.wait(30)


def test_sdk_client_through_serve_upstream_equals_direct(tmp_path: Path) -> None:
    db = tmp_path / "up.db"
    with sdk_server() as upstream, serving(["--upstream", upstream, "--record", str(db)]) as srv:
        via = sdk_client_run([srv.url])
        direct = sdk_client_run([upstream])
    assert via == direct
    assert any(item[0] == "permission" for item in via["turn"])
    assert rows(db, "select transport, ended_at is not null from connections") == [("http", 1)]
    c2a = rows(db, "select count(*) from frames where direction='c2a'")[0][0]
    a2c = rows(db, "select count(*) from frames where direction='a2c'")[0][0]
    # initialize, session/new, prompt, permission answer / init answer, new answer, 5 updates
    # + permission request + prompt answer
    assert (c2a, a2c) == (4, 8)
    kinds = [k for (k,) in rows(db, "select kind from events")]
    assert kinds.count("sse_open") == 2 and "http_delete" in kinds


def test_status_codes_and_cookies_pass_through(tmp_path: Path) -> None:
    async def run(url: str) -> dict[str, object]:
        got: dict[str, object] = {}
        async with httpx2.AsyncClient(timeout=30) as c:
            json_type = {"Content-Type": "application/json"}
            got["415"] = (
                await c.post(url, content=INIT, headers={"Content-Type": "x/y"})
            ).status_code
            got["404"] = (
                await c.get(url, headers={"Accept": "text/event-stream", "Acp-Connection-Id": "n"})
            ).status_code
            init = await c.post(url, content=INIT, headers=json_type)
            got["init"] = init.status_code
            got["set-cookie"] = init.headers.get("set-cookie")
            cid = init.headers["Acp-Connection-Id"]
            again = await c.post(
                url,
                content=b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}',
                headers={**json_type, "Acp-Connection-Id": cid},
            )
            got["new"] = again.status_code
            got["cookie seen"] = again.headers.get("x-cookie-seen")
            got["delete"] = (await c.delete(url, headers={"Acp-Connection-Id": cid})).status_code
        return got

    with sdk_server() as upstream, serving(["--upstream", upstream]) as srv:
        got = asyncio.run(run(srv.url))
    assert got == {
        "415": 415,
        "404": 404,
        "init": 200,
        "set-cookie": "affinity=node1; Path=/",
        "new": 202,
        "cookie seen": "affinity=node1",
        "delete": 202,
    }


def test_websocket_upgrade_is_relayed_to_the_upstream(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"

    async def run(url: str) -> dict[str, object]:
        async with aiohttp.ClientSession() as s, s.ws_connect(url) as ws:
            await ws.send_str(INIT.decode())
            answer: dict[str, object] = json.loads((await ws.receive()).data)
            await ws.close()
            return answer

    with sdk_server() as upstream, serving(["--upstream", upstream, "--record", str(db)]) as srv:
        answer = asyncio.run(run(srv.ws_url))
    assert answer["id"] == 1 and "result" in answer
    assert rows(db, "select transport from connections") == [("ws-upstream",)]
