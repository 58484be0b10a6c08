"""Real ACP peers through the real ``acp-proxy`` executable: the official Python SDK client
talking to an SDK agent and to the bundled demo agent, with every byte checked.

``tee`` on both sides of the proxy captures what the client sent and received and what the
agent received and sent; the four streams must match each other and the recording.
"""

from __future__ import annotations

import asyncio
import shlex
import sqlite3
import sys
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    RequestPermissionResponse,
    TextContentBlock,
)

from tests.conftest import frames_of, proxy_exe
from tests.peers import PEERS

SDK_AGENT = [sys.executable, str(PEERS / "sdk_agent.py")]
DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]


class RecordingClient:
    """A minimal ACP client: collects updates, allows the first permission option."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permissions: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(tool_call)
        allow = next((o for o in options if o.kind.startswith("allow")), options[0])
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=allow.option_id))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def _teed(tmp: Path, agent: list[str], db: Path) -> list[str]:
    """A shell pipeline: client <-> tee <-> acp-proxy <-> tee <-> agent."""
    agent_side = f"tee {tmp / 'agent_in.bin'} | {shlex.join(agent)} | tee {tmp / 'agent_out.bin'}"
    proxy = shlex.join([*proxy_exe(), "--record", str(db), "--", "sh", "-c", agent_side])
    return ["sh", "-c", f"tee {tmp / 'client_out.bin'} | {proxy} | tee {tmp / 'client_in.bin'}"]


async def _session(argv: list[str], prompts: list[str]) -> tuple[RecordingClient, list[str]]:
    client = RecordingClient()
    stops: list[str] = []
    async with spawn_agent_process(client, argv[0], *argv[1:]) as (conn, proc):
        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="proxy-test-client", version="1.2.3"),
            ),
            60,
        )
        assert init.protocol_version == 1
        session = await asyncio.wait_for(conn.new_session(cwd=str(Path.cwd()), mcp_servers=[]), 60)
        for text in prompts:
            result = await asyncio.wait_for(
                conn.prompt(
                    session_id=session.session_id,
                    prompt=[TextContentBlock(type="text", text=text)],
                ),
                60,
            )
            stops.append(result.stop_reason)
    await asyncio.wait_for(proc.wait(), 60)
    return client, stops


def _check_bytes(tmp: Path, db: Path) -> tuple[bytes, bytes]:
    sent = (tmp / "client_out.bin").read_bytes()
    received = (tmp / "client_in.bin").read_bytes()
    assert sent and received
    assert (tmp / "agent_in.bin").read_bytes() == sent
    assert (tmp / "agent_out.bin").read_bytes() == received
    frames = frames_of(db)
    assert b"".join(raw for d, raw in frames if d == "c2a") == sent
    assert b"".join(raw for d, raw in frames if d == "a2c") == received
    assert all(raw.endswith(b"\n") for _, raw in frames)
    return sent, received


async def test_sdk_client_through_proxy_to_sdk_agent(tmp_path: Path) -> None:
    db = tmp_path / "sdk.db"
    client, stops = await _session(_teed(tmp_path, SDK_AGENT, db), ["hello", "big one"])
    assert stops == ["end_turn", "end_turn"]
    texts = [u.content.text for u in client.updates]
    assert texts[:4] == ["you said: hello", "naïve café — ünïcödé ✓", "done", "permission: allow"]
    assert texts[-1] == "permission: allow" and "x" * 3_000_000 in texts
    assert len(client.permissions) == 2
    _, received = _check_bytes(tmp_path, db)
    assert len(received) > 3_000_000
    con = sqlite3.connect(db)
    try:
        row = con.execute(
            "SELECT transport, exit_status, protocol_version, client_info, agent_info, "
            "frames_dropped FROM connections"
        ).fetchone()
        assert row[0] == "stdio" and row[1] == 0 and row[2] == 1 and row[5] == 0
        assert '"proxy-test-client"' in row[3] and '"sdk-test-agent"' in row[4]
        methods = [
            m
            for (m,) in con.execute("SELECT method FROM frames WHERE kind = 'request' ORDER BY seq")
        ]
        assert methods == [
            "initialize",
            "session/new",
            "session/prompt",
            "session/request_permission",
            "session/prompt",
            "session/request_permission",
        ]
        chunks = con.execute(
            "SELECT count(*) FROM frames WHERE update_kind = 'agent_message_chunk' "
            "AND session_id = 'sess_1' AND direction = 'a2c'"
        ).fetchone()[0]
        assert chunks == len(client.updates) == 9
        # responses are paired with their request's method, per direction
        paired = con.execute(
            "SELECT direction, method FROM frames WHERE kind = 'response' ORDER BY seq"
        ).fetchall()
        assert paired == [
            ("a2c", "initialize"),
            ("a2c", "session/new"),
            ("c2a", "session/request_permission"),
            ("a2c", "session/prompt"),
            ("c2a", "session/request_permission"),
            ("a2c", "session/prompt"),
        ]
        stderr = [bytes(r) for (r,) in con.execute("SELECT raw FROM stderr_lines")]
        assert b"sdk agent starting\n" in stderr
    finally:
        con.close()


async def test_sdk_client_through_proxy_to_demo_agent(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    client, stops = await _session(_teed(tmp_path, DEMO_AGENT, db), ["show me everything"])
    assert stops and stops[0] == "end_turn"
    assert client.permissions, "the demo agent asks for permission once per turn"
    assert client.updates
    _check_bytes(tmp_path, db)
    con = sqlite3.connect(db)
    try:
        kinds = {k for (k,) in con.execute("SELECT DISTINCT update_kind FROM frames")}
        # the unknown vendor variant and the notice went through and were indexed as sent
        assert "_vendor_demo" in kinds and "notice" in kinds
        assert con.execute("SELECT frames_dropped, exit_status FROM connections").fetchone() == (
            0,
            0,
        )
    finally:
        con.close()
