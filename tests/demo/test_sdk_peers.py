"""The demo agent against the real SDK client (v1 and v2), directly and through the proxy."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import spawn_agent_process
from acp.experimental.v2 import connect_to_agent
from acp.experimental.v2 import schema as v2
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    RequestPermissionResponse,
    TextContentBlock,
)
from acp.transports import spawn_stdio_transport

from tests.conftest import frames_of, proxy_exe

DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]
TIMEOUT = 60


@pytest.fixture(autouse=True)
def _quiet_sdk_logging(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    # the v1 SDK logs a traceback for update variants it does not know (our _vendor_demo)
    # and drops them; we look at the raw messages instead
    caplog.set_level(logging.CRITICAL)
    yield


def agent_cmd(db: Path | None, *args: str) -> list[str]:
    if db is None:
        return [*DEMO_AGENT, *args]
    return [*proxy_exe(), "--record", str(db), "--", *DEMO_AGENT, *args]


class Raw:
    """Stream observer: every message the SDK sent or received, in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: Any) -> None:
        self.messages.append((event.direction.value, event.message))

    def incoming(self) -> list[dict[str, Any]]:
        return [m for d, m in self.messages if d == "incoming"]

    def updates(self) -> list[dict[str, Any]]:
        return [
            m["params"]["update"] for m in self.incoming() if m.get("method") == "session/update"
        ]


class V1Client:
    """An SDK v1 client that allows, or cancels the turn, when asked for permission."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.cancel_next = False
        self.conn: Any = None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        if self.cancel_next:
            await self.conn.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        allow = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)


async def v1_session(cmd: list[str], raw: Raw, client: V1Client) -> tuple[str, list[str]]:
    async with spawn_agent_process(client, cmd[0], *cmd[1:], observers=[raw]) as (conn, proc):
        client.conn = conn
        init = await asyncio.wait_for(conn.initialize(protocol_version=1), TIMEOUT)
        assert init.protocol_version == 1 and init.agent_capabilities.load_session
        session = await conn.new_session(cwd="/tmp/demo-project", mcp_servers=[])
        reasons = []
        for cancel in (False, True):
            client.cancel_next = cancel
            done = await asyncio.wait_for(
                conn.prompt(
                    session_id=session.session_id,
                    prompt=[TextContentBlock(type="text", text="What is this?")],
                ),
                TIMEOUT,
            )
            reasons.append(done.stop_reason)
    assert proc.returncode == 0
    return session.session_id, reasons


@pytest.mark.parametrize("via_proxy", [False, True], ids=["direct", "proxy"])
async def test_v1_sdk_client_plays_a_turn_and_a_cancelled_turn(
    tmp_path: Path, via_proxy: bool
) -> None:
    db = tmp_path / "v1.db" if via_proxy else None
    raw, client = Raw(), V1Client()
    _, reasons = await v1_session(agent_cmd(db), raw, client)
    assert reasons == ["end_turn", "cancelled"]
    kinds = [u["sessionUpdate"] for u in raw.updates()]
    for expected in (
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "plan",
        "tool_call",
        "tool_call_update",
        "notice",
        "_vendor_demo",
        "usage_update",
    ):
        assert expected in kinds, expected
    # the SDK parsed every standard variant into a model (it drops only _vendor_demo)
    parsed = [u.session_update for u in client.updates]
    assert parsed == [k for k in kinds if k != "_vendor_demo"]
    if db is not None:
        frames = frames_of(db)
        a2c = [json.loads(r) for d, r in frames if d == "a2c"]
        assert a2c == raw.incoming()  # what the SDK got is exactly what was recorded
        c2a = [json.loads(r) for d, r in frames if d == "c2a"]
        assert c2a == [m for d, m in raw.messages if d == "outgoing"]


async def test_v1_session_load_in_a_new_process_replays_history_first(tmp_path: Path) -> None:
    db, state = tmp_path / "load.db", tmp_path / "state.json"
    cmd = agent_cmd(db, "--state", str(state))
    sid, _ = await v1_session(cmd, Raw(), V1Client())
    raw, client = Raw(), V1Client()
    async with spawn_agent_process(client, cmd[0], *cmd[1:], observers=[raw]) as (conn, _proc):
        await asyncio.wait_for(conn.initialize(protocol_version=1), TIMEOUT)
        await asyncio.wait_for(
            conn.load_session(session_id=sid, cwd="/tmp/demo-project", mcp_servers=[]), TIMEOUT
        )
    incoming = raw.incoming()
    assert incoming[0]["id"] == 0  # the initialize response
    load_response = next(i for i, m in enumerate(incoming) if m.get("id") == 1 and "result" in m)
    window = incoming[1:load_response]
    assert window and all(m.get("method") == "session/update" for m in window)
    replayed = [m["params"]["update"] for m in window]
    assert not incoming[load_response + 1 :]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds[0] == "user_message_chunk"
    assert "notice" not in kinds and "_vendor_demo" in kinds
    assert [u.session_update for u in client.updates] == [k for k in kinds if k != "_vendor_demo"]
    # the recording shows the same order: connection 2, updates between request and response
    db_rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT seq, direction, kind, method, update_kind FROM frames WHERE connection_id = 2 "
            "ORDER BY seq"
        )
        .fetchall()
    )
    request = next(r[0] for r in db_rows if r[2] == "request" and r[3] == "session/load")
    response = next(r[0] for r in db_rows if r[2] == "response" and r[3] == "session/load")
    # notifications only: across directions the recorder's seq order is not causal (the
    # initialize response may be stored after the load request that followed it)
    between = [r for r in db_rows if request < r[0] < response and r[2] == "notification"]
    assert [r[4] for r in between] == kinds
    assert not [r for r in db_rows if r[0] > response]


class V2Client:
    """An SDK v2 client: allows permissions and signals idle per session."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.idle: asyncio.Queue[Any] = asyncio.Queue()

    async def request_permission(
        self, session_id: str, title: str, options: list[Any], **kwargs: Any
    ) -> v2.RequestPermissionResponse:
        return v2.RequestPermissionResponse(
            outcome=v2.SelectedPermissionOutcomeVariant(outcome="selected", option_id="allow")
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if getattr(update, "session_update", None) == "state_update" and update.state == "idle":
            self.idle.put_nowait(update.stop_reason)


async def test_v2_sdk_client_prompt_and_resume_with_replay(tmp_path: Path) -> None:
    db, state = tmp_path / "v2.db", tmp_path / "state.json"
    cmd = agent_cmd(db, "--state", str(state))
    info = v2.Implementation(name="sdk-test", version="1")
    client, raw = V2Client(), Raw()
    async with spawn_stdio_transport(*cmd) as (reader, writer, proc):
        conn = connect_to_agent(client, writer, reader, observers=[raw])
        init = await asyncio.wait_for(conn.initialize(protocol_version=2, info=info), TIMEOUT)
        assert init.protocol_version == 2
        session = await conn.new_session(cwd="/tmp/demo-project", mcp_servers=[])
        accepted = await asyncio.wait_for(
            conn.prompt(
                session_id=session.session_id,
                prompt=[v2.TextContentBlock(type="text", text="What is this?")],
            ),
            TIMEOUT,
        )
        assert await asyncio.wait_for(client.idle.get(), TIMEOUT) == "end_turn"
    assert proc.returncode == 0
    users = [u for u in client.updates if u.session_update == "user_message"]
    assert [u.message_id for u in users] == [accepted.message_id]
    live_kinds = [u["sessionUpdate"] for u in raw.updates()]
    assert {"notice", "_vendor_demo", "tool_call_content_chunk", "plan_update"} <= set(live_kinds)
    assert [type(u).__name__ for u in client.updates if u.session_update == "_vendor_demo"] == [
        "OtherSessionUpdate"
    ]

    client2, raw2 = V2Client(), Raw()
    async with spawn_stdio_transport(*cmd) as (reader, writer, proc):
        conn = connect_to_agent(client2, writer, reader, observers=[raw2])
        await asyncio.wait_for(conn.initialize(protocol_version=2, info=info), TIMEOUT)
        sid = session.session_id
        await asyncio.wait_for(
            conn.resume_session(session_id=sid, cwd="/tmp/demo-project"), TIMEOUT
        )
        plain = len(raw2.incoming())
        await asyncio.wait_for(
            conn.resume_session(
                session_id=sid,
                cwd="/tmp/demo-project",
                replay_from=v2.ReplayFromStartVariant(type="start"),
            ),
            TIMEOUT,
        )
    incoming = raw2.incoming()
    assert [m.get("id") for m in incoming[:plain]] == [0, 1]  # plain resume: nothing before it
    replay_window = incoming[plain:-1]
    assert incoming[-1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert replay_window and all(m.get("method") == "session/update" for m in replay_window)
    replayed = [m["params"]["update"] for m in replay_window]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert "notice" not in kinds and "state_update" not in kinds
    assert "_vendor_demo" in kinds
    assert replayed[0] == {
        "sessionUpdate": "user_message",
        "messageId": accepted.message_id,
        "content": [{"type": "text", "text": "What is this?"}],
    }
    assert ("agent_message", []) in [(u["sessionUpdate"], u.get("content")) for u in replayed]
    # the SDK accepts every replayed update as a model
    assert len(client2.updates) == len(replayed)
    rows = (
        sqlite3.connect(db)
        .execute("SELECT connection_id, count(*) FROM frames GROUP BY connection_id")
        .fetchall()
    )
    assert [c for c, _ in rows] == [1, 2]
