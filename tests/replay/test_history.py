"""History re-emission through the real `acp-proxy replay`: v1 session/load, v2 session/resume."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_proxy.testing import AcpError, AcpTestClient
from tests.replay.conftest import Recorded, replay_argv


def recorded_updates(db: Path) -> list[bytes]:
    conn = sqlite3.connect(db)
    try:
        return [
            bytes(r)
            for (r,) in conn.execute(
                "SELECT raw FROM frames WHERE method='session/update' ORDER BY connection_id, seq"
            )
        ]
    finally:
        conn.close()


def window(client: AcpTestClient, method: str) -> tuple[list[Any], int]:
    """Updates received between the load/resume request and its response; response index."""
    log = client.log
    start = next(
        i
        for i, e in enumerate(log)
        if e.direction == "sent"
        and isinstance(e.message, dict)
        and e.message.get("method") == method
    )
    rid = log[start].message["id"]
    end = next(
        i
        for i, e in enumerate(log)
        if i > start
        and e.direction == "received"
        and isinstance(e.message, dict)
        and e.message.get("id") == rid
        and "method" not in e.message
    )
    updates = [e for e in log[start + 1 : end] if e.direction == "received"]
    return updates, end


async def test_v1_load_re_emits_history_before_the_response(v1_recording: Recorded) -> None:
    sid = v1_recording.session_id
    argv = replay_argv(v1_recording.path, "--advertise-load")
    async with AcpTestClient.spawn(argv) as client:
        init = await client.initialize(protocol_version=1)
        assert init["agentCapabilities"]["loadSession"] is True  # spliced in
        assert init["agentInfo"] == {"name": "sdk-test-agent", "version": "1.0"}
        result = await client.load_session(sid, cwd="/somewhere/else")
        assert result == {}
        history, _ = window(client, "session/load")
    variants = [e.message["params"]["update"]["sessionUpdate"] for e in history]
    assert all(e.message["params"]["sessionId"] == sid for e in history)
    # No notices; per turn: the rebuilt user message, two text chunks, tool call, unknown.
    assert "notice" not in variants
    assert (
        variants
        == [
            "user_message_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "_vendor_x",
        ]
        * 3
    )
    users = [
        e.message["params"]["update"]["content"]["text"]
        for e in history
        if e.message["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]
    assert users == ["hello", "hello", "second prompt"]
    # Recorded updates go out byte for byte, unknown ones included.
    recorded = recorded_updates(v1_recording.path)
    vendor = [r for r in recorded if b'"_vendor_x"' in r]
    assert [e.raw for e in history if b'"_vendor_x"' in e.raw] == vendor
    agent_chunks = [r for r in recorded if b'"agent_message_chunk"' in r]
    assert [e.raw for e in history if b'"agent_message_chunk"' in e.raw] == agent_chunks


async def test_v1_initialize_is_byte_exact_without_advertise_load(v1_recording: Recorded) -> None:
    conn = sqlite3.connect(v1_recording.path)
    (recorded,) = conn.execute(
        "SELECT raw FROM frames WHERE method='initialize' AND direction='a2c'"
    ).fetchone()
    conn.close()
    async with AcpTestClient.spawn(replay_argv(v1_recording.path)) as client:
        await client.initialize(protocol_version=1)
    received = client.received()[0].raw
    # The SDK client sent id 0, so does this one: the frame is exactly the recorded one.
    assert received == bytes(recorded)


async def test_v1_load_of_an_unknown_session_is_a_clear_error(v1_recording: Recorded) -> None:
    async with AcpTestClient.spawn(replay_argv(v1_recording.path, "--advertise-load")) as client:
        await client.initialize(protocol_version=1)
        with pytest.raises(AcpError) as err:
            await client.load_session("sess-nope")
    assert err.value.code == -32002
    assert "session sess-nope is not in the recording" in err.value.message
    assert b"unknown session sess-nope" in client.stderr


async def test_v2_resume_replay_from_start(v2_recording: Recorded) -> None:
    sid = v2_recording.session_id
    async with AcpTestClient.spawn(replay_argv(v2_recording.path)) as client:
        await client.initialize(protocol_version=2)
        result = await client.resume_session(sid, replay_from_start=True)
        assert result == {}
        history, _ = window(client, "session/resume")
    updates = [e.message["params"]["update"] for e in history]
    variants = [u["sessionUpdate"] for u in updates]
    assert "notice" not in variants and "state_update" not in variants
    # Every message carries its messageId; chunked messages are reset first.
    for u in updates:
        if u["sessionUpdate"].startswith(("user_message", "agent_message", "agent_thought")):
            assert isinstance(u.get("messageId"), str)
    assert variants[:4] == ["user_message", "agent_thought", "agent_thought_chunk", "agent_message"]
    assert updates[1] == {"sessionUpdate": "agent_thought", "messageId": "t1", "content": []}
    assert updates[3] == {"sessionUpdate": "agent_message", "messageId": "a1", "content": []}
    assert [u["messageId"] for u in updates if u["sessionUpdate"] == "user_message"] == ["u1", "u2"]
    # One terminal snapshot per terminal, output joined; one finished compaction each.
    terminals = [u for u in updates if u["sessionUpdate"].startswith("terminal")]
    assert [t["sessionUpdate"] for t in terminals] == ["terminal_update"] * 2
    assert base64.b64decode(terminals[0]["output"]["data"]) == b"file1\nfile2\n"
    assert terminals[0]["exitStatus"] == {"exitCode": 0} and terminals[0]["command"] == "ls"
    compactions = [u for u in updates if u["sessionUpdate"].startswith("compaction")]
    assert compactions == [
        {
            "sessionUpdate": "compaction_update",
            "compactionId": f"c{n}",
            "status": "completed",
            "summary": [{"type": "text", "text": "summary so far"}],
        }
        for n in (1, 2)
    ]
    # usage: only the latest value; unknown updates: raw, byte-exact.
    assert [u["used"] for u in updates if u["sessionUpdate"] == "usage_update"] == [200]
    vendor = [r for r in recorded_updates(v2_recording.path) if b'"_vendor_x"' in r]
    assert len(vendor) == 2
    assert [e.raw for e in history if b'"_vendor_x"' in e.raw] == vendor


async def test_v2_resume_without_replay_from_re_emits_nothing(v2_recording: Recorded) -> None:
    async with AcpTestClient.spawn(replay_argv(v2_recording.path)) as client:
        await client.initialize(protocol_version=2)
        assert await client.resume_session(v2_recording.session_id) == {}
        history, _ = window(client, "session/resume")
        assert history == []
        # The session is usable afterwards: the recorded prompt replays against it.
        session = client.session(v2_recording.session_id)
        assert await session.prompt("hello") == "u1"
        assert await session.read_text() == "echo: hello"


def test_history_json_is_well_formed(v2_recording: Recorded) -> None:
    for raw in recorded_updates(v2_recording.path):
        assert orjson.loads(raw)["method"] == "session/update"


MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}


def _modes_recording(db: Path) -> str:
    """A v1 session whose ``session/new`` answered modes, five ``session_info_update``
    patches, a mode switch and one turn; no ``session/load`` in it."""
    from tests.acp.conformance.helpers import SID, A, C, ok, rq, up, v1_prelude
    from tests.helpers import insert_frames

    init, init_ok, new, _new_ok = v1_prelude()
    infos = [
        A(up("session_info_update", title="draft")),
        A(up("session_info_update", _meta={"n": 1})),
        A(up("session_info_update", title="Fix the test")),
        A(up("session_info_update", updatedAt="2026-12-02T01:00:00Z")),
        A(up("session_info_update", _meta=None)),
    ]
    frames = [
        init,
        init_ok,
        new,
        A(ok(1, sessionId=SID, modes=MODES)),
        *infos,
        A(up("current_mode_update", currentModeId="code")),
        C(rq(2, "session/prompt", sessionId=SID, prompt=[{"type": "text", "text": "hi"}])),
        A(up("agent_message_chunk", content={"type": "text", "text": "hello"})),
        A(ok(2, stopReason="end_turn")),
    ]
    insert_frames(db, frames, connection={"transport": "stdio", "protocol_version": 1}, index=True)
    return SID


async def test_synthesized_load_answers_the_recorded_modes_and_merges_info(
    tmp_path: Path,
) -> None:
    db = tmp_path / "modes.db"
    sid = _modes_recording(db)
    async with AcpTestClient.spawn(replay_argv(db, "--advertise-load")) as client:
        await client.initialize(protocol_version=1)
        result = await client.load_session(sid)
        history, _ = window(client, "session/load")
    # the modes session/new gave, at the mode the session was last switched to
    assert result == {"modes": {**MODES, "currentModeId": "code"}}
    infos = [
        e.message["params"]["update"]
        for e in history
        if e.message["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]
    # state, not history: one update with the latest value of each field
    assert infos == [
        {
            "sessionUpdate": "session_info_update",
            "title": "Fix the test",
            "_meta": None,
            "updatedAt": "2026-12-02T01:00:00Z",
        }
    ]
