"""Unit tests of the session timeline against the seed text's worked examples and rules."""

from __future__ import annotations

import base64
from typing import Any

from acp_proxy.acp.timeline import Entity, Event, SessionTimeline
from acp_proxy.acp.updates import entity_key, is_live_only


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def fold(*updates: dict[str, Any]) -> SessionTimeline:
    tl = SessionTimeline("s1")
    for seq, update in enumerate(updates, 1):
        tl.apply(update, seq=seq)
    return tl


def only_entity(tl: SessionTimeline, etype: str, eid: str) -> Entity:
    entity = tl.entity(etype, eid)
    assert entity is not None, f"no {etype} {eid}"
    return entity


def test_seed_example_replace_then_chunks_append_to_replacement() -> None:
    # "agent_message [A], chunk B -> [A, B]; agent_message [C] -> [C]; later chunks append to [C]"
    tl = fold(
        {"sessionUpdate": "agent_message", "messageId": "m", "content": [text("A")]},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": text("B")},
    )
    assert only_entity(tl, "agent_message", "m").content == [text("A"), text("B")]
    tl.apply({"sessionUpdate": "agent_message", "messageId": "m", "content": [text("C")]})
    assert only_entity(tl, "agent_message", "m").content == [text("C")]
    tl.apply({"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": text("D")})
    msg = only_entity(tl, "agent_message", "m")
    assert msg.content == [text("C"), text("D")]
    assert msg.text() == "CD"
    assert len(tl.entities()) == 1


def test_omitted_content_leaves_content_unchanged_and_patches_meta() -> None:
    tl = fold(
        {"sessionUpdate": "user_message", "messageId": "u", "content": [text("hi")]},
        {"sessionUpdate": "user_message", "messageId": "u", "_meta": {"k": 1}},
    )
    msg = only_entity(tl, "user_message", "u")
    assert msg.content == [text("hi")]
    assert msg.fields == {"_meta": {"k": 1}}
    tl.apply({"sessionUpdate": "user_message", "messageId": "u", "_meta": None})
    assert msg.fields == {}


def test_clear_with_null_and_with_empty_array() -> None:
    clears: tuple[list[Any] | None, ...] = (None, [])
    for clear in clears:
        tl = fold(
            {"sessionUpdate": "agent_thought_chunk", "messageId": "t", "content": text("x")},
            {"sessionUpdate": "agent_thought", "messageId": "t", "content": clear},
        )
        thought = only_entity(tl, "agent_thought", "t")
        assert not thought.content
        assert thought.text() == ""
        tl.apply({"sessionUpdate": "agent_thought_chunk", "messageId": "t", "content": text("y")})
        assert thought.content == [text("y")]


def test_thought_and_message_with_same_id_stay_distinct() -> None:
    tl = fold(
        {"sessionUpdate": "agent_message", "messageId": "same", "content": [text("answer")]},
        {"sessionUpdate": "agent_thought", "messageId": "same", "content": [text("reason")]},
        {"sessionUpdate": "user_message", "messageId": "same", "content": [text("question")]},
    )
    assert [(e.type, e.id, e.text()) for e in tl.entities()] == [
        ("agent_message", "same", "answer"),
        ("agent_thought", "same", "reason"),
        ("user_message", "same", "question"),
    ]


def test_entities_keep_their_first_position() -> None:
    tl = fold(
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": text("a")},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "pending"},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m2", "content": text("b")},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": text("c")},
    )
    assert [(e.type, e.id) for e in tl.entities()] == [
        ("agent_message", "m1"),
        ("tool_call", "c1"),
        ("agent_message", "m2"),
    ]
    assert only_entity(tl, "agent_message", "m1").text() == "ac"


def test_tool_call_patch_chunks_and_replacement() -> None:
    item = {"type": "content", "content": text("Checked syntax...")}
    final = {"type": "content", "content": text("Analysis complete")}
    tl = fold(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_001",
            "title": "Analyzing Python code",
            "kind": "other",
            "status": "pending",
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": "call_001", "status": "in_progress"},
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "call_001", "content": item},
        {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "call_001", "content": item},
    )
    call = only_entity(tl, "tool_call", "call_001")
    assert call.content == [item, item]
    assert call.fields == {
        "title": "Analyzing Python code",
        "kind": "other",
        "status": "in_progress",
    }
    tl.apply(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_001",
            "status": "completed",
            "content": [final],
            "kind": None,
        }
    )
    assert call.content == [final]
    assert call.fields == {"title": "Analyzing Python code", "status": "completed"}
    assert call.text() == "Analysis complete"


def test_terminal_snapshot_and_chunks() -> None:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    tl = fold(
        {"sessionUpdate": "terminal_update", "terminalId": "t1", "command": "ls", "cwd": "/w"},
        {"sessionUpdate": "terminal_output_chunk", "terminalId": "t1", "data": b64(b"a\n")},
        {"sessionUpdate": "terminal_output_chunk", "terminalId": "t1", "data": b64(b"\xffb")},
    )
    term = only_entity(tl, "terminal", "t1")
    assert bytes(term.output or b"") == b"a\n\xffb"
    tl.apply(
        {"sessionUpdate": "terminal_update", "terminalId": "t1", "output": {"data": b64(b"S")}}
    )
    assert bytes(term.output or b"") == b"S"
    tl.apply({"sessionUpdate": "terminal_output_chunk", "terminalId": "t1", "data": b64(b"T")})
    tl.apply(
        {"sessionUpdate": "terminal_update", "terminalId": "t1", "exitStatus": {"exitCode": 0}}
    )
    assert bytes(term.output or b"") == b"ST"
    assert term.fields == {"command": "ls", "cwd": "/w", "exitStatus": {"exitCode": 0}}
    update = term.to_update()
    assert update["output"] == {"data": b64(b"ST")}
    tl.apply({"sessionUpdate": "terminal_update", "terminalId": "t1", "output": None})
    assert term.output is None
    tl.apply({"sessionUpdate": "terminal_output_chunk", "terminalId": "t1", "data": "!!notb64"})
    assert term.problems == ["invalid base64 terminal data"]


def test_plan_by_plan_id_and_v1_plan() -> None:
    entries1 = [{"content": "a", "priority": "high", "status": "pending"}]
    entries2 = [{"content": "a", "priority": "high", "status": "completed"}]
    tl = fold(
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "p1", "entries": entries1},
        },
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p2", "entries": []}},
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "p1", "entries": entries2},
        },
        {"sessionUpdate": "plan_removed", "planId": "p2"},
    )
    assert [e.id for e in tl.entities()] == ["p1", "p2"]
    assert only_entity(tl, "plan", "p1").fields["plan"] == {"type": "items", "entries": entries2}
    assert only_entity(tl, "plan", "p2").removed
    assert entity_key({"sessionUpdate": "plan_update", "plan": {"planId": "p1"}}) == ("plan", "p1")
    v1 = fold(
        {"sessionUpdate": "plan", "entries": entries1},
        {"sessionUpdate": "plan", "entries": entries2},
    )
    (plan,) = v1.entities()
    assert plan.fields["plan"]["entries"] == entries2


def test_compaction_patch_fields_and_summary_chunks() -> None:
    tl = fold(
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c", "content": text("x")},
    )
    comp = only_entity(tl, "compaction", "c")
    assert comp.fields == {"status": "in_progress"}  # a first-seen id starts in_progress
    tl.apply({"sessionUpdate": "compaction_update", "compactionId": "c", "status": "in_progress"})
    assert comp.content == [text("x")]  # summary omitted: the streamed content stays
    tl.apply(
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c", "content": text("y")}
    )
    assert comp.content == [text("x"), text("y")]
    tl.apply(
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "c",
            "status": "failed",
            "summary": [],
        }
    )
    assert comp.content == [] and comp.fields["status"] == "failed"
    tl.apply(
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "c",
            "status": "completed",
            "summary": [text("S")],
            "error": "boom",
        }
    )
    tl.apply(
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c", "content": text("+")}
    )
    tl.apply(
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "c",
            "status": "completed",
            "error": None,
        }
    )
    assert comp.content == [text("S"), text("+")]
    assert comp.fields == {"status": "completed"}
    assert comp.to_update() == {
        "sessionUpdate": "compaction_update",
        "compactionId": "c",
        "status": "completed",
        "summary": [text("S"), text("+")],
    }


def test_state_usage_facts_and_live_only_notice() -> None:
    notice = {"sessionUpdate": "notice", "severity": "warning", "title": "MCP server unavailable"}
    tl = fold(
        {"sessionUpdate": "state_update", "state": "running"},
        notice,
        {"sessionUpdate": "usage_update", "used": 53000, "size": 200000},
        {
            "sessionUpdate": "state_update",
            "state": "idle",
            "stopReason": "error",
            "error": {"code": -32000, "message": "Authentication required"},
        },
        {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
    )
    assert tl.facts.state == "idle"
    assert tl.facts.stop_reason == "error"
    assert tl.facts.error == {"code": -32000, "message": "Authentication required"}
    assert tl.facts.usage == {"used": 53000, "size": 200000}
    assert tl.facts.mode == "code"
    kinds = [(i.kind, i.live_only) for i in tl.items if isinstance(i, Event)]
    assert kinds == [
        ("state_update", False),
        ("notice", True),
        ("usage_update", False),
        ("state_update", False),
        ("current_mode_update", False),
    ]
    assert is_live_only(notice)
    assert tl.history_updates() == []  # none of these is history


def test_unknown_variants_kept_in_place_with_raw_payload() -> None:
    vendor = {"sessionUpdate": "_vendor_x", "payload": {"deep": [1, 2.5, None]}}
    future = {"sessionUpdate": "hologram_update", "id": "h"}
    tl = fold(
        {"sessionUpdate": "agent_message", "messageId": "m", "content": [text("a")]},
        vendor,
        {"sessionUpdate": "notice", "severity": "info", "title": "t"},
        future,
        {"sessionUpdate": "agent_message", "messageId": "m2", "content": [text("b")]},
    )
    kinds = [i.kind if isinstance(i, Event) else getattr(i, "type", None) for i in tl.items]
    assert kinds == ["agent_message", "unknown", "notice", "unknown", "agent_message"]
    unknown = [i for i in tl.items if isinstance(i, Event) and i.kind == "unknown"]
    assert [u.payload for u in unknown] == [vendor, future]
    assert [u.variant for u in unknown] == ["_vendor_x", "hologram_update"]
    # history keeps unknown updates in place and leaves the live notice out
    assert [u["sessionUpdate"] for u in tl.history_updates()] == [
        "agent_message",
        "_vendor_x",
        "hologram_update",
        "agent_message",
    ]


def test_v1_chunks_without_message_id_group_consecutively() -> None:
    tl = fold(
        {"sessionUpdate": "user_message_chunk", "content": text("hello")},
        {"sessionUpdate": "agent_message_chunk", "content": text("Hi")},
        {"sessionUpdate": "agent_message_chunk", "content": text(" there")},
        {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "Read", "status": "pending"},
        {"sessionUpdate": "agent_message_chunk", "content": text("Done")},
        {"sessionUpdate": "agent_thought_chunk", "content": text("hmm")},
        {"sessionUpdate": "agent_message_chunk", "content": text("!")},
    )
    got = [(e.type, e.text(), e.synthetic_id) for e in tl.entities()]
    assert got == [
        ("user_message", "hello", True),
        ("agent_message", "Hi there", True),
        ("tool_call", "", False),
        ("agent_message", "Done", True),
        ("agent_thought", "hmm", True),
        ("agent_message", "!", True),
    ]
    assert len({e.id for e in tl.entities() if e.type == "agent_message"}) == 3


def test_history_updates_finished_form_and_to_json_is_plain() -> None:
    import orjson

    tl = fold(
        {"sessionUpdate": "user_message_chunk", "messageId": "u", "content": text("q")},
        {"sessionUpdate": "agent_message_chunk", "messageId": "a", "content": text("x")},
        {"sessionUpdate": "agent_message_chunk", "messageId": "a", "content": text("y")},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"},
    )
    assert tl.history_updates() == [
        {"sessionUpdate": "user_message", "messageId": "u", "content": [text("q")]},
        {"sessionUpdate": "agent_message", "messageId": "a", "content": [text("x"), text("y")]},
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "status": "completed",
            "content": [],
        },
    ]
    data = tl.to_json()
    assert orjson.loads(orjson.dumps(data)) == data
    assert [i["text"] for i in data["items"] if i.get("type") == "agent_message"] == ["xy"]


def test_drain_forgets_items_and_marks_continuations() -> None:
    tl = fold({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "pending"})
    drained = tl.drain()
    assert len(drained) == 1 and tl.items == []
    tl.apply({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"})
    (again,) = tl.entities()
    assert again.continued and again.fields == {"status": "completed"}


def test_malformed_updates_never_raise() -> None:
    tl = SessionTimeline("s")
    bads: tuple[Any, ...] = (
        None,
        5,
        "x",
        [],
        {},
        {"sessionUpdate": 7},
        {"sessionUpdate": "tool_call_update"},
        {"sessionUpdate": "agent_message", "messageId": "m", "content": "notalist"},
        {"sessionUpdate": "terminal_output_chunk", "terminalId": "t"},
        {"sessionUpdate": "plan_update", "plan": "x"},
    )
    for bad in bads:
        tl.apply(bad)
    assert tl.update_count == 10
    assert only_entity(tl, "agent_message", "m").problems


def test_history_updates_in_v1_form() -> None:
    tl = fold(
        {"sessionUpdate": "user_message_chunk", "content": text("q")},
        {"sessionUpdate": "agent_message_chunk", "content": text("a")},
        {"sessionUpdate": "agent_message_chunk", "content": text("b")},
        {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "T", "status": "pending"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"},
        {"sessionUpdate": "plan", "entries": [{"content": "x", "status": "pending"}]},
        {"sessionUpdate": "notice", "severity": "info", "title": "live"},
    )
    assert tl.history_updates(version=1) == [
        {"sessionUpdate": "user_message_chunk", "content": text("q")},
        {"sessionUpdate": "agent_message_chunk", "content": text("a")},
        {"sessionUpdate": "agent_message_chunk", "content": text("b")},
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "T",
            "status": "completed",
            "content": [],
        },
        {"sessionUpdate": "plan", "entries": [{"content": "x", "status": "pending"}]},
    ]
