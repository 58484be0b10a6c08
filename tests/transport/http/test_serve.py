"""``acp-proxy serve``: real SDK peers over Streamable HTTP, transcripts equal to stdio."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.peers.jsonrpc_peers import HttpPeer, Peer, StdioPeer, v2_scenario
from tests.transport.http.helpers import DEMO, SDK_AGENT, rows, sdk_client_run, serving


@pytest.mark.parametrize("agent", ["sdk", "demo"])
def test_sdk_http_client_through_serve_sees_what_stdio_sees(tmp_path: Path, agent: str) -> None:
    db = tmp_path / "http.db"
    argv = SDK_AGENT if agent == "sdk" else [*DEMO, "--state", str(tmp_path / "http-state")]
    with serving(["--record", str(db), "--", *argv]) as server:
        over_http = sdk_client_run([f"{server.url}"])
    direct_argv = SDK_AGENT if agent == "sdk" else [*DEMO, "--state", str(tmp_path / "st")]
    direct = sdk_client_run(["--", *direct_argv])
    assert over_http == direct
    assert any(item[0] == "permission" for item in over_http["turn"])
    if agent == "demo":
        assert over_http["load"], "session/load replayed the conversation"
    # every JSON-RPC message of every connection is a frame; HTTP facts are events
    connections = rows(db, "select id, transport, exit_status from connections")
    assert len(connections) == (2 if agent == "demo" else 1)
    assert {c[1] for c in connections} == {"http"}
    kinds = {k for (k,) in rows(db, "select kind from events")}
    assert {"http", "sse_open", "sse_close", "http_delete"} <= kinds
    statuses = [
        json.loads(d)["status"] for (d,) in rows(db, "select detail from events where kind='http'")
    ]
    assert 200 in statuses and 202 in statuses


def test_recorded_frames_are_the_bytes_on_the_wire(tmp_path: Path) -> None:
    """The POST bodies and SSE data exactly; SSE event ids are the agent message ordinals."""
    db = tmp_path / "raw.db"

    async def run(url: str) -> tuple[list[bytes], list[bytes]]:
        import httpx2

        sent = [
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',
            b'{ "jsonrpc": "2.0",\n "id": "two", "method": "session/new",'
            b' "params": {"cwd": "/tmp", "mcpServers": []} }',
        ]
        got: list[bytes] = []
        async with httpx2.AsyncClient(timeout=None) as client:
            resp = await client.post(
                url, content=sent[0], headers={"Content-Type": "application/json"}
            )
            assert resp.status_code == 200
            got.append(resp.content)
            cid = resp.headers["Acp-Connection-Id"]
            hdrs = {"Acp-Connection-Id": cid}
            async with client.stream(
                "GET", url, headers={**hdrs, "Accept": "text/event-stream"}
            ) as s:
                post = await client.post(
                    url, content=sent[1], headers={**hdrs, "Content-Type": "application/json"}
                )
                assert post.status_code == 202
                lines = s.aiter_lines()
                async for line in lines:
                    if line.startswith("id: "):
                        assert line == "id: 2"
                    if line.startswith("data: "):
                        got.append(line[6:].encode())
                        break
            assert (await client.delete(url, headers=hdrs)).status_code == 202
        return sent, got

    with serving(["--record", str(db), "--", *DEMO]) as server:
        sent, got = asyncio.run(run(server.url))
    frames = rows(db, "select direction, raw from frames order by seq")
    assert [bytes(r) for d, r in frames if d == "c2a"] == sent
    assert [bytes(r) for d, r in frames if d == "a2c"] == got
    assert json.loads(got[1])["id"] == "two"


def test_v2_prompt_permission_cancel_and_resume_replay_match_stdio(tmp_path: Path) -> None:
    peers: list[HttpPeer] = []

    async def over_http(url: str) -> list[list[dict[str, Any]]]:
        async def new() -> Peer:
            peers.append(HttpPeer(url))
            return await peers[-1].start()

        return await v2_scenario(new)

    async def direct() -> list[list[dict[str, Any]]]:
        async def new() -> Peer:
            return await StdioPeer([*DEMO, "--state", str(tmp_path / "direct")]).start()

        return await v2_scenario(new)

    db = tmp_path / "v2.db"
    with serving(["--record", str(db), "--", *DEMO, "--state", str(tmp_path / "http")]) as server:
        got = asyncio.run(over_http(server.url))
    want = asyncio.run(direct())
    for got_part, want_part in zip(got, want, strict=True):
        # the same messages; the session's stream keeps its order, streams interleave
        key = lambda m: json.dumps(m, sort_keys=True)  # noqa: E731
        assert sorted(map(key, got_part)) == sorted(map(key, want_part))
        updates = [m for m in got_part if m.get("method") == "session/update"]
        assert updates == [m for m in want_part if m.get("method") == "session/update"]
    first, resumed = got
    stops = [
        m["params"]["update"].get("stopReason")
        for m in first
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "state_update"
        and m["params"]["update"]["state"] == "idle"
    ]
    assert stops[-1] == "cancelled"
    replayed = [m for m in resumed if m.get("method") == "session/update"]
    assert replayed, "replayFrom start replayed the history before the response"
    assert resumed[-1].get("result") is not None
    # every POST and every message the agent sent is one frame
    posted = sum(len(p.statuses) for p in peers)
    received = sum(p.received for p in peers)
    assert rows(db, "select count(*) from frames where direction='c2a'")[0][0] == posted
    assert rows(db, "select count(*) from frames where direction='a2c'")[0][0] == received


def test_serve_exports_spans_live_like_every_recording_command(tmp_path: Path) -> None:
    from tests.peers.otlp_collector import otlp_collector

    db = tmp_path / "otlp.db"
    with otlp_collector() as (url, got):
        with serving(["--record", str(db), "--otlp-endpoint", url, "--", *SDK_AGENT]) as server:
            sdk_client_run([f"{server.url}"])
        names = {s.name for s in got.wait_spans(3)}
    assert "acp.session" in names and any(n.startswith("invoke_agent") for n in names)
