"""Unit tests of the connection model: pairing per direction, sessions, replay, turns."""

from __future__ import annotations

from typing import Any

import orjson

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.acp.model import ConnectionModel
from acp_proxy.acp.timeline import Entity, Event, Exchange
from acp_proxy.wire.frame import Frame


def line(obj: Any) -> bytes:
    return orjson.dumps(obj) + b"\n"


def req(rid: Any, method: str, params: Any = None) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})


def res(rid: Any, result: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "result": result})


def upd(sid: str, update: dict[str, Any]) -> bytes:
    return line(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": sid, "update": update},
        }
    )


def feed(model: ConnectionModel, frames: list[tuple[str, bytes]]) -> None:
    for seq, (direction, raw) in enumerate(frames, 1):
        model.feed(Frame.wire(direction, raw, seq, seq * 1_000_000))  # type: ignore[arg-type]
    model.finish()


def test_pairing_is_per_direction_with_latency() -> None:
    m = ConnectionModel()
    feed(
        m,
        [
            ("c2a", req(1, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "ed"}})),
            ("a2c", req(1, "fs/read_text_file", {"path": "/a"})),  # the agent's own id 1
            ("c2a", res(1, {"content": "x"})),  # answers the agent's request
            ("a2c", res(1, {"protocolVersion": 1, "agentInfo": {"name": "ag"}})),
        ],
    )
    init, read = [i for i in m.connection.items if isinstance(i, Exchange)]
    assert (init.method, init.direction, init.response_seq) == ("initialize", "c2a", 4)
    assert (read.method, read.direction, read.response_seq) == ("fs/read_text_file", "a2c", 3)
    assert init.latency_ns == 3_000_000 and read.latency_ns == 1_000_000
    assert m.protocol_version == 1
    assert m.client_info == {"name": "ed"} and m.agent_info == {"name": "ag"}


def test_ids_keep_their_exact_text() -> None:
    m = ConnectionModel()
    feed(m, [("c2a", req("1", "_x", {})), ("a2c", res(1, {})), ("a2c", res("1", {}))])
    (ex,) = [i for i in m.connection.items if isinstance(i, Exchange)]
    assert ex.id == '"1"' and ex.response_seq == 3
    orphans = [
        i for i in m.connection.items if isinstance(i, Event) and i.kind == "orphan_response"
    ]
    assert len(orphans) == 1 and orphans[0].extra["id"] == "1"


def test_v2_names_sessions_from_results_turns_and_idle() -> None:
    m = ConnectionModel()
    feed(
        m,
        [
            ("c2a", req(0, "initialize", {"protocolVersion": 2, "info": {"name": "ed2"}})),
            ("a2c", res(0, {"protocolVersion": 2, "info": {"name": "ag2"}})),
            ("c2a", req(1, "session/new", {"cwd": "/w"})),
            ("a2c", res(1, {"sessionId": "s1"})),
            ("c2a", req(2, "session/prompt", {"sessionId": "s1", "prompt": []})),
            ("a2c", upd("s1", {"sessionUpdate": "state_update", "state": "running"})),
            ("a2c", res(2, {"messageId": "u1"})),
            ("a2c", upd("s1", {"sessionUpdate": "user_message", "messageId": "u1", "content": []})),
            (
                "a2c",
                upd(
                    "s1",
                    {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"},
                ),
            ),
            # agent-initiated work
            ("a2c", upd("s1", {"sessionUpdate": "state_update", "state": "running"})),
            ("a2c", upd("s1", {"sessionUpdate": "state_update", "state": "idle"})),
            # a prompt with no idle yet
            ("c2a", req(3, "session/prompt", {"sessionId": "s1", "prompt": []})),
        ],
    )
    assert m.protocol_version == 2
    assert m.client_info == {"name": "ed2"} and m.agent_info == {"name": "ag2"}
    assert list(m.sessions) == ["s1"]
    t1, t2 = m.turns
    assert (t1.origin, t1.message_id, t1.stop_reason, t1.duration_ns) == (
        "prompt",
        "u1",
        "end_turn",
        4_000_000,
    )
    assert (t2.origin, t2.stop_reason, t2.start_seq, t2.end_seq) == ("agent", None, 10, 11)
    (open_turn,) = m.tracker.unfinished()
    assert open_turn.prompt_id == "3" and open_turn.end_ns is None
    data = m.to_json()
    assert [t["durationMs"] for t in data["turns"]] == [4.0, 1.0, None]


def test_v1_prompt_result_ends_turn_and_cancel_is_noted() -> None:
    m = ConnectionModel()
    feed(
        m,
        [
            ("c2a", req(0, "initialize", {"protocolVersion": 1})),
            ("a2c", res(0, {"protocolVersion": 1})),
            ("c2a", req(1, "session/prompt", {"sessionId": "s", "prompt": []})),
            (
                "c2a",
                line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}),
            ),
            ("a2c", res(1, {"stopReason": "cancelled"})),
        ],
    )
    (turn,) = m.turns
    assert turn.cancelled and turn.stop_reason == "cancelled" and turn.end_seq == 5


def test_load_replay_window_marks_items() -> None:
    m = ConnectionModel()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "old"}}
    feed(
        m,
        [
            ("c2a", req(0, "initialize", {"protocolVersion": 1})),
            ("a2c", res(0, {"protocolVersion": 1})),
            ("c2a", req(1, "session/load", {"sessionId": "s"})),
            ("a2c", upd("s", chunk)),
            ("a2c", res(1, None)),
            ("a2c", upd("s", {**chunk, "content": {"type": "text", "text": "new"}})),
        ],
    )
    entities = m.sessions["s"].entities()
    assert [(e.text(), e.replayed) for e in entities] == [("old", True), ("new", False)]


def test_v2_resume_replays_only_with_replay_from() -> None:
    for params, replayed in (
        ({"sessionId": "s", "replayFrom": {"type": "start"}}, True),
        ({"sessionId": "s"}, False),
    ):
        m = ConnectionModel()
        feed(
            m,
            [
                ("c2a", req(0, "initialize", {"protocolVersion": 2})),
                ("a2c", res(0, {"protocolVersion": 2})),
                ("c2a", req(1, "session/resume", params)),
                (
                    "a2c",
                    upd("s", {"sessionUpdate": "agent_message", "messageId": "m", "content": []}),
                ),
                ("a2c", res(1, {})),
            ],
        )
        (entity,) = m.sessions["s"].entities()
        assert entity.replayed is replayed


def test_response_recorded_before_its_request_is_paired() -> None:
    m = ConnectionModel()
    feed(
        m,
        [
            ("c2a", res(7, {"outcome": "x"})),
            ("a2c", req(7, "session/request_permission", {"sessionId": "s"})),
        ],
    )
    (ex,) = [i for i in m.sessions["s"].items if isinstance(i, Exchange)]
    assert ex.answered and ex.extra.get("reordered") is True
    assert not [i for i in m.connection.items if getattr(i, "kind", "") == "orphan_response"]


def test_batches_invalid_frames_and_other_notifications() -> None:
    m = ConnectionModel()
    batch = line(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "_a", "params": {}},
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "s",
                    "update": {"sessionUpdate": "notice", "severity": "info", "title": "t"},
                },
            },
        ]
    )
    feed(
        m,
        [
            ("c2a", batch),
            ("a2c", b"not json\n"),
            ("a2c", line([{"jsonrpc": "2.0", "id": 1, "result": {}}])),
        ],
    )
    (ex,) = [i for i in m.connection.items if isinstance(i, Exchange)]
    assert ex.method == "_a" and ex.answered
    kinds = [getattr(i, "kind", None) for i in m.connection.items]
    assert "invalid" in kinds
    (notice,) = m.sessions["s"].items
    assert notice.live_only  # type: ignore[union-attr]


def test_indexer_entity_columns_for_v1_and_v2_plans() -> None:
    ix = ConnectionIndexer()
    cols = ix.index(
        "a2c",
        upd(
            "s",
            {
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": "p9", "entries": []},
            },
        ),
    )
    assert (cols.update_kind, cols.entity_type, cols.entity_id, cols.session_id) == (
        "plan_update",
        "plan",
        "p9",
        "s",
    )
    cols = ix.index("a2c", upd("s", {"sessionUpdate": "plan", "entries": []}))
    assert (cols.entity_type, cols.entity_id) == ("plan", "")
    ix.index("c2a", req(1, "initialize", {"protocolVersion": 2, "info": {"name": "c"}}))
    ix.index("a2c", res(1, {"protocolVersion": 2, "info": {"name": "a"}}))
    assert (ix.facts.client_info, ix.facts.agent_info) == ({"name": "c"}, {"name": "a"})


def test_session_new_result_is_noted_on_the_exchange() -> None:
    m = ConnectionModel()
    feed(m, [("c2a", req(1, "session/new", {})), ("a2c", res(1, {"sessionId": "abc"}))])
    (ex,) = m.connection.items
    assert isinstance(ex, Exchange) and ex.extra["sessionId"] == "abc"
    assert "abc" in m.sessions
    assert not [i for i in m.sessions["abc"].items if isinstance(i, Entity)]
