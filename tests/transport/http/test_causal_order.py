"""Every mode records each frame before it sends it on: a recording is in causal order.

The property, checked on what each mode recorded: every response comes after the request it
answers (same id, other direction) on its connection. The peer behind the proxy answers
late in the ways that used to reorder the record: an HTTP upstream whose 202 comes after the
answer it put on the SSE stream, an SSE answer after the 202, a WebSocket peer, an agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from acp_proxy.wire.frame import Direction
from tests.conftest import frames_of, proxy_exe
from tests.helpers import listening_process
from tests.peers import PEERS
from tests.peers.jsonrpc_peers import HttpPeer, Message, Peer, StdioPeer
from tests.transport.http.helpers import URL_RE, serving
from tests.transport.ws.helpers import ws_server

LATE = [sys.executable, str(PEERS / "late_peer.py")]
DELAY = "0.3"


def out_of_order(db: Path) -> list[str]:
    """Each response recorded before its request, as ``direction id``."""
    sent: dict[str, set[str]] = {"c2a": set(), "a2c": set()}
    wrong: list[str] = []
    for direction, raw in frames_of(db):
        message = json.loads(raw)
        key = json.dumps(message.get("id"))
        if "method" in message:
            sent[direction].add(key)
        elif "id" in message:
            other = "a2c" if direction == "c2a" else "c2a"
            if key not in sent[other]:
                wrong.append(f"{direction} {key}")
    return wrong


class WsPeer(Peer):
    """The scripted client over one WebSocket."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    async def start(self) -> WsPeer:
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(self.url, protocols=("acp.v1",))
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        async for msg in self.ws:
            self.inbox.put_nowait(json.loads(msg.data))

    async def send(self, message: Message, session: str | None = None) -> None:
        await self.ws.send_str(json.dumps(message))

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()
        await self.session.close()


async def scenario(peer: Peer) -> list[Message]:
    """initialize, session/new, a prompt whose permission request the client allows."""

    async def allow(m: Message) -> None:
        if m["method"] == "session/request_permission":
            outcome = {"outcome": {"outcome": "selected", "optionId": "allow"}}
            await peer.send({"jsonrpc": "2.0", "id": m["id"], "result": outcome}, "s1")

    await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    await peer.on_session("s1")
    prompt = {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}
    end = await peer.call("session/prompt", prompt, "s1", allow)
    await peer.close()
    return [*peer.seen, end]


def late_http(late: str) -> contextlib.AbstractContextManager[str]:
    return listening_process([*LATE, "http", late, DELAY], URL_RE)


def run(make: Callable[[], Awaitable[Peer]]) -> list[Message]:
    async def go() -> list[Message]:
        return await scenario(await make())

    return asyncio.run(go())


def via_stdio(db: Path, _late: str) -> list[Message]:
    argv = [*proxy_exe(), "--record", str(db), "--", *LATE, "stdio", DELAY]
    return run(lambda: StdioPeer(argv).start())


def via_ws(db: Path, _late: str) -> list[Message]:
    with ws_server(["--record", str(db), "--", *LATE, "stdio", DELAY]) as server:
        return run(lambda: WsPeer(server.url).start())


def via_serve_agent(db: Path, _late: str) -> list[Message]:
    with serving(["--record", str(db), "--", *LATE, "stdio", DELAY]) as server:
        return run(lambda: HttpPeer(server.url).start())


def via_serve_upstream(db: Path, late: str) -> list[Message]:
    with late_http(late) as upstream, serving(["--upstream", upstream, "--record", str(db)]) as s:
        return run(lambda: HttpPeer(s.url).start())


def via_serve_upstream_ws(db: Path, late: str) -> list[Message]:
    with late_http(late) as upstream, serving(["--upstream", upstream, "--record", str(db)]) as s:
        return run(lambda: WsPeer(s.ws_url).start())


def via_connect(db: Path, late: str) -> list[Message]:
    with late_http(late) as upstream:
        argv = [*proxy_exe(), "connect", upstream, "--record", str(db)]
        return run(lambda: StdioPeer(argv).start())


def via_connect_ws(db: Path, late: str) -> list[Message]:
    with late_http(late) as upstream:
        url = "ws://" + upstream.removeprefix("http://")
        argv = [*proxy_exe(), "connect", url, "--record", str(db)]
        return run(lambda: StdioPeer(argv).start())


MODES: dict[str, Callable[[Path, str], list[Message]]] = {
    "stdio": via_stdio,
    "ws": via_ws,
    "serve-agent": via_serve_agent,
    "serve-upstream": via_serve_upstream,
    "serve-upstream-ws": via_serve_upstream_ws,
    "connect-http": via_connect,
    "connect-ws": via_connect_ws,
}
CASES = [
    (mode, late)
    for mode in MODES
    for late in (
        ("late-202", "late-sse") if mode in ("serve-upstream", "connect-http") else ("late",)
    )
]


@pytest.mark.parametrize(("mode", "late"), CASES, ids=[f"{m}-{lt}" for m, lt in CASES])
def test_every_mode_records_responses_after_their_requests(
    tmp_path: Path, mode: str, late: str
) -> None:
    db = tmp_path / "order.db"
    seen: Any = MODES[mode](db, late)
    assert seen[-1]["result"] == {"stopReason": "end_turn"}
    frames = frames_of(db)
    # initialize, session/new, prompt, permission answer; their 3 answers, 2 updates, 1 ask
    assert sorted(d for d, _ in frames) == ["a2c"] * 6 + ["c2a"] * 4, frames
    assert out_of_order(db) == []


# The frames of one prompt as ``serve --upstream`` used to record them when the upstream's
# 202 came late: each answer (and the prompt's update and permission request) before the
# POST it answers.
OLD_UPSTREAM_ORDER: list[tuple[Direction, bytes]] = [
    ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}'),
    ("a2c", b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}'),
    (
        "c2a",
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}',
    ),
    (
        "c2a",
        b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1",'
        b'"prompt":[{"type":"text","text":"hi"}]}}',
    ),
    (
        "a2c",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}}}',
    ),
    ("a2c", b'{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}'),
]


def test_a_response_recorded_before_its_request_is_a_warning_and_still_replays(
    tmp_path: Path,
) -> None:
    from tests.conftest import run_proxy
    from tests.helpers import insert_frames

    db = tmp_path / "old.db"
    insert_frames(db, OLD_UPSTREAM_ORDER, connection={"transport": "http"}, index=True)
    done = run_proxy(["check", str(db), "--json"])
    (conn,) = json.loads(done.stdout)["connections"]
    findings = [f for f in conn["findings"] if f["rule"] == "recording.order"]
    assert [(f["tier"], f["seqs"]) for f in findings] == [("warning", [3, 4])], findings
    text = run_proxy(["check", str(db)]).stdout.decode()
    assert "response #3 was recorded before its request #4 (session/new)" in text

    argv = [*proxy_exe(), "replay", str(db)]

    async def client() -> list[Message]:
        peer = await StdioPeer(argv).start()
        await peer.call("initialize", {"protocolVersion": 1})
        new = await peer.call("session/new", {"cwd": "/", "mcpServers": []})
        prompt = {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}
        end = await peer.call("session/prompt", prompt)
        await peer.close()
        return [new, end]

    new, end = asyncio.run(asyncio.wait_for(client(), 60))
    assert new["result"] == {"sessionId": "s1"}
    assert end["result"] == {"stopReason": "end_turn"}
