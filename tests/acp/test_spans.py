"""The pure span mapping (acp/spans.py): turns, tools, requests, events, trace context, ids."""

from __future__ import annotations

import json
from typing import Any

from acp_proxy.acp.span_records import SpanRecord, parse_traceparent
from acp_proxy.acp.spans import SpanMapper
from acp_proxy.wire.frame import Frame

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def frame(direction: str, obj: Any) -> tuple[str, bytes]:
    return direction, json.dumps(obj).encode()


def req(direction: str, rid: int, method: str, params: Any) -> tuple[str, bytes]:
    return frame(direction, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def res(direction: str, rid: int, result: Any = None, error: Any = None) -> tuple[str, bytes]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    body.update({"error": error} if error is not None else {"result": result})
    return frame(direction, body)


def upd(sid: str, **update: Any) -> tuple[str, bytes]:
    params = {"sessionId": sid, "update": update}
    return frame("a2c", {"jsonrpc": "2.0", "method": "session/update", "params": params})


def run(frames: list[tuple[str, bytes]], **kw: Any) -> list[SpanRecord]:
    mapper = SpanMapper("1700000000.5", **kw)
    out: list[SpanRecord] = []
    for seq, (direction, raw) in enumerate(frames, 1):
        out += mapper.feed(Frame(0, 1, seq, 1700000000.5, 1_000_000 * seq, direction, raw))  # type: ignore[arg-type]
    return out + mapper.finish()


def v1_session(prompt_meta: Any = None) -> list[tuple[str, bytes]]:
    prompt: dict[str, Any] = {
        "sessionId": "s1",
        "prompt": [{"type": "text", "text": "secret plan"}],
    }
    if prompt_meta is not None:
        prompt["_meta"] = prompt_meta
    call = {"toolCallId": "c1", "title": "Read /etc/x", "kind": "read", "status": "pending"}
    return [
        req("c2a", 0, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "ed"}}),
        res("a2c", 0, {"protocolVersion": 1, "agentInfo": {"name": "bot", "version": "2.0"}}),
        req("c2a", 1, "session/new", {"cwd": "/", "mcpServers": []}),
        res("a2c", 1, {"sessionId": "s1"}),
        req("c2a", 2, "session/prompt", prompt),
        upd("s1", sessionUpdate="agent_message_chunk", messageId="m1",
            content={"type": "text", "text": "hel"}),
        upd("s1", sessionUpdate="agent_message_chunk", messageId="m1",
            content={"type": "text", "text": "lo"}),
        upd("s1", sessionUpdate="tool_call", **call),
        req("a2c", 0, "session/request_permission",
            {"sessionId": "s1", "toolCall": call, "options": []}),
        res("c2a", 0, {"outcome": {"outcome": "selected", "optionId": "allow"}}),
        upd("s1", sessionUpdate="tool_call_update", toolCallId="c1", status="completed",
            content=[{"type": "content", "content": {"type": "text", "text": "file body"}}]),
        req("a2c", 1, "fs/read_text_file", {"sessionId": "s1", "path": "/x"}),
        res("c2a", 1, error={"code": -32002, "message": "not found"}),
        upd("s1", sessionUpdate="usage_update", used=10, size=100),
        res("a2c", 2, {"stopReason": "end_turn", "usage": {"inputTokens": 7, "outputTokens": 3}}),
    ]  # fmt: skip


def by_name(spans: list[SpanRecord]) -> dict[str, SpanRecord]:
    return {s.name: s for s in spans}


def test_v1_turn_tool_permission_and_fs_tree() -> None:
    spans = by_name(run(v1_session()))
    conn, session = spans["acp.connection"], spans["acp.session"]
    turn, tool = spans["invoke_agent bot"], spans["execute_tool read"]
    perm, fs = spans["session/request_permission"], spans["fs/read_text_file"]
    assert session.parent_span_id is None and session.trace_id != conn.trace_id
    assert spans["initialize"].parent_span_id == conn.span_id
    assert spans["session/new"].parent_span_id == session.span_id
    assert spans["session/new"].trace_id == session.trace_id
    assert turn.parent_span_id == session.span_id and turn.kind == "client"
    assert tool.parent_span_id == turn.span_id and perm.parent_span_id == tool.span_id
    assert fs.parent_span_id == turn.span_id and fs.status == "error"
    assert fs.attributes["rpc.jsonrpc.error_code"] == -32002
    assert {s.trace_id for s in (turn, tool, perm, fs)} == {session.trace_id}
    a = turn.attributes
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.conversation.id"] == "s1"
    assert a["gen_ai.agent.name"] == "bot" and a["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert a["gen_ai.usage.input_tokens"] == 7 and a["gen_ai.usage.output_tokens"] == 3
    assert a["acp.usage.context_used"] == 10 and a["rpc.method"] == "session/prompt"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.attributes["acp.tool.status"] == "completed"
    assert perm.attributes["acp.permission.option_id"] == "allow"
    # the two chunks of one message are one event; times follow the monotonic clock
    chunks = [e for e in turn.events if e.name == "agent_message_chunk"]
    assert len(chunks) == 1 and chunks[0].attributes["acp.chunks"] == 2
    assert turn.end_ns - turn.start_ns == 10_000_000  # frame 5 to frame 15, 1 ms apart


def test_content_only_when_asked() -> None:
    plain = run(v1_session())
    texts = json.dumps([[s.attributes, [e.attributes for e in s.events]] for s in plain])
    assert "secret plan" not in texts and "file body" not in texts and "/etc/x" not in texts
    rich = by_name(run(v1_session(), include_content=True))
    assert rich["invoke_agent bot"].attributes["acp.prompt.text"] == "secret plan"
    events = rich["execute_tool read"].events
    assert any(e.attributes.get("acp.content.text") == "file body" for e in events)
    chunk = next(e for e in rich["invoke_agent bot"].events if e.name == "agent_message_chunk")
    assert chunk.attributes["acp.content.text"] == "hello"


def test_ids_are_deterministic_and_depend_on_the_connection() -> None:
    def key(spans: list[SpanRecord]) -> list[tuple[int, int, int | None, str]]:
        return sorted((s.trace_id, s.span_id, s.parent_span_id, s.name) for s in spans)

    assert key(run(v1_session())) == key(run(v1_session()))
    other = SpanMapper("1700000001.0")
    for seq, (d, raw) in enumerate(v1_session(), 1):
        other.feed(Frame(0, 1, seq, 1.0, seq, d, raw))  # type: ignore[arg-type]
    assert {s.span_id for s in other.finish()}.isdisjoint({s.span_id for s in run(v1_session())})


def test_traceparent_joins_the_peers_trace() -> None:
    meta = {"traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "vendor=1"}
    spans = by_name(run(v1_session(meta)))
    turn, session = spans["invoke_agent bot"], spans["acp.session"]
    assert turn.trace_id == int(TRACE, 16) and turn.parent_span_id == int(PARENT, 16)
    assert turn.remote_parent and turn.trace_state == "vendor=1"
    assert turn.links == [(session.trace_id, session.span_id)]
    assert spans["execute_tool read"].trace_id == int(TRACE, 16)  # children follow the turn
    assert parse_traceparent({"traceparent": f"00-{'0' * 32}-{PARENT}-01"}) is None
    assert parse_traceparent({"traceparent": "garbage"}) is None


def test_v2_turn_ends_at_idle_and_prompt_is_a_child_span() -> None:
    frames = [
        req("c2a", 0, "initialize", {"protocolVersion": 2, "info": {"name": "ed"}}),
        res("a2c", 0, {"protocolVersion": 2, "info": {"name": "bot2"}}),
        req("c2a", 1, "session/new", {"cwd": "/"}),
        res("a2c", 1, {"sessionId": "s2"}),
        upd("s2", sessionUpdate="state_update", state="running"),
        req("c2a", 2, "session/prompt", {"sessionId": "s2", "prompt": []}),
        res("a2c", 2, {"messageId": "u1"}),
        upd("s2", sessionUpdate="tool_call_update", toolCallId="t1", kind="execute",
            status="in_progress"),
        frame("c2a", {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s2"}}),
        upd("s2", sessionUpdate="tool_call_update", toolCallId="t1", status="cancelled"),
        upd("s2", sessionUpdate="state_update", state="idle", stopReason="cancelled"),
        upd("s2", sessionUpdate="notice", severity="info", title="after"),
    ]  # fmt: skip
    spans = by_name(run(frames))
    turn, rpc, tool = (
        spans["invoke_agent bot2"],
        spans["session/prompt"],
        spans["execute_tool execute"],
    )
    assert rpc.parent_span_id == turn.span_id and tool.parent_span_id == turn.span_id
    assert turn.attributes["acp.stop_reason"] == "cancelled"
    assert turn.attributes["acp.turn.cancelled"] is True
    assert turn.end_ns == 1_700_000_000_500_000_000 + 10_000_000  # the idle, frame 11
    assert "session/cancel" in [e.name for e in turn.events]
    assert tool.attributes["acp.tool.status"] == "cancelled"
    # after the turn: events go on the session root
    assert "notice" in [e.name for e in spans["acp.session"].events]


def test_unanswered_and_unfinished_spans_end_at_the_last_frame() -> None:
    frames = v1_session()[:8]  # the prompt and the tool call never finish
    spans = by_name(run(frames))
    assert spans["invoke_agent bot"].attributes["acp.unfinished"] is True
    assert spans["execute_tool read"].attributes["acp.unfinished"] is True
    assert spans["invoke_agent bot"].end_ns == 1_700_000_000_500_000_000 + 7_000_000
