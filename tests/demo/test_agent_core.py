"""The demo agent's sans-I/O core and its history replay, driven in-process."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

import pytest

from acp_proxy.demo.agent import DemoAgent, serve
from acp_proxy.demo.history import replay_updates
from acp_proxy.demo.sessions import SessionStore, StateError


class Harness:
    """A DemoAgent with its output captured; runs turns until they wait for the client."""

    def __init__(self, state: Path | None = None) -> None:
        self.out: list[dict[str, Any]] = []
        self.agent = DemoAgent(SessionStore(str(state) if state else None), self.out.append)
        self.next_id = 100

    def feed(self, message: Any) -> list[dict[str, Any]]:
        start = len(self.out)
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.agent.receive_line(raw + b"\n")
        while self.agent.runnable():
            self.agent.step()
        self.agent.store.save()
        return self.out[start:]

    def request(self, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        self.next_id += 1
        return self.feed({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})

    def result(self, messages: list[dict[str, Any]]) -> Any:
        (response,) = [m for m in messages if m.get("id") == self.next_id and "method" not in m]
        assert "error" not in response, response
        return response["result"]

    def start(self, version: int) -> str:
        init = self.request("initialize", {"protocolVersion": version})
        assert self.result(init)["protocolVersion"] == version
        return str(
            self.result(self.request("session/new", {"cwd": "/w", "mcpServers": []}))["sessionId"]
        )


def updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] for u in updates(messages)]


def permission(messages: list[dict[str, Any]]) -> dict[str, Any]:
    (ask,) = [m for m in messages if m.get("method") == "session/request_permission"]
    return ask


def answer(h: Harness, ask: dict[str, Any], outcome: dict[str, Any]) -> list[dict[str, Any]]:
    return h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": outcome}})


ALLOW = {"outcome": "selected", "optionId": "allow"}


@pytest.mark.parametrize(("asked", "got"), [(1, 1), (2, 2), (3, 2), (7, 2), (0, 1)])
def test_initialize_negotiates_min_of_requested_and_2(asked: int, got: int) -> None:
    h = Harness()
    result = h.result(h.request("initialize", {"protocolVersion": asked}))
    assert result["protocolVersion"] == got
    if got == 1:
        assert result["agentCapabilities"]["loadSession"] is True
        assert result["agentInfo"]["name"] == "acp-proxy-demo"
    else:
        assert result["info"]["name"] == "acp-proxy-demo"


def test_v2_turn_shapes_and_order() -> None:
    h = Harness()
    sid = h.start(2)
    prompt = [{"type": "text", "text": "hello"}]
    first = h.request("session/prompt", {"sessionId": sid, "prompt": prompt})
    # insertion: running, then the user message, then the prompt result with its messageId
    assert kinds(first)[:2] == ["state_update", "user_message"]
    user = updates(first)[1]
    assert user["content"] == prompt
    assert h.result(first) == {"messageId": user["messageId"]}
    assert first.index(next(m for m in first if m.get("id") == h.next_id)) == 2
    ask = permission(first)
    assert ask["params"]["subject"]["type"] == "tool_call"
    assert [o["kind"] for o in ask["params"]["options"]] == ["allow_once", "reject_once"]
    assert kinds(first)[-1] == "state_update" and updates(first)[-1]["state"] == "requires_action"
    rest = answer(h, ask, ALLOW)
    assert updates(rest)[0] == {"sessionUpdate": "state_update", "state": "running"}
    assert updates(rest)[-1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }
    everything = first + rest
    seen = set(kinds(everything))
    assert {
        "agent_thought_chunk",
        "agent_message_chunk",
        "plan_update",
        "tool_call_update",
        "tool_call_content_chunk",
        "notice",
        "_vendor_demo",
        "usage_update",
    } <= seen
    for u in updates(everything):
        if "message" in u["sessionUpdate"] or "thought" in u["sessionUpdate"]:
            assert u["messageId"].startswith("msg_")
        if u["sessionUpdate"] == "notice":
            assert u["title"] and u["severity"] == "info"
        if u["sessionUpdate"] == "plan_update":
            assert u["plan"]["planId"] == "plan_1" and u["plan"]["type"] == "items"
    tool = [u for u in updates(everything) if u["sessionUpdate"] == "tool_call_update"]
    assert [t.get("status") for t in tool] == ["pending", "in_progress", "completed"]


def test_v1_turn_ends_with_prompt_result() -> None:
    h = Harness()
    sid = h.start(1)
    first = h.request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    assert not [m for m in first if m.get("id") == h.next_id]  # v1: no result before the end
    assert "state_update" not in kinds(first)
    assert kinds(first)[0] == "user_message_chunk" and updates(first)[0]["messageId"]
    assert "tool_call" in kinds(first) and "plan" in kinds(first)
    ask = permission(first)
    assert ask["params"]["toolCall"]["toolCallId"] == "call_1"
    rest = answer(h, ask, ALLOW)
    assert rest[-1] == {"jsonrpc": "2.0", "id": h.next_id, "result": {"stopReason": "end_turn"}}
    assert "_vendor_demo" in kinds(rest) and "usage_update" in kinds(rest)


@pytest.mark.parametrize("version", [1, 2])
def test_cancel_while_permission_pending_ends_turn_cancelled(version: int) -> None:
    h = Harness()
    sid = h.start(version)
    first = h.request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )
    prompt_id = h.next_id
    ask = permission(first)
    assert (
        h.feed({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}) == []
    )
    rest = answer(h, ask, {"outcome": "cancelled"})
    tool = updates(rest)[0]
    assert tool["sessionUpdate"] == "tool_call_update"
    assert tool["status"] == ("cancelled" if version == 2 else "failed")
    if version == 2:
        assert updates(rest)[-1] == {
            "sessionUpdate": "state_update",
            "state": "idle",
            "stopReason": "cancelled",
        }
    else:
        assert rest[-1] == {
            "jsonrpc": "2.0",
            "id": prompt_id,
            "result": {"stopReason": "cancelled"},
        }
    # the session is usable again
    again = h.request("session/prompt", {"sessionId": sid, "prompt": []})
    assert permission(again)


def test_rejected_permission_fails_the_tool_and_finishes() -> None:
    h = Harness()
    sid = h.start(2)
    ask = permission(h.request("session/prompt", {"sessionId": sid, "prompt": []}))
    rest = answer(h, ask, {"outcome": "selected", "optionId": "reject"})
    assert updates(rest)[1]["status"] == "failed"
    assert updates(rest)[-1]["stopReason"] == "end_turn"


def test_session_close_ends_a_pending_turn_before_answering() -> None:
    h = Harness()
    sid = h.start(2)
    permission(h.request("session/prompt", {"sessionId": sid, "prompt": []}))
    out = h.request("session/close", {"sessionId": sid})
    assert updates(out)[-1]["stopReason"] == "cancelled"
    assert out[-1] == {"jsonrpc": "2.0", "id": h.next_id, "result": {}}
    err = h.request("session/prompt", {"sessionId": sid, "prompt": []})
    assert err[0]["error"]["code"] == -32602  # closed: not open on this connection


def play_turn(h: Harness, sid: str) -> None:
    ask = permission(
        h.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "q"}]})
    )
    answer(h, ask, ALLOW)


def test_v2_resume_replays_history_before_response_and_without_notice(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = Harness(state)
    sid = first.start(2)
    play_turn(first, sid)
    live = updates(first.out)
    second = Harness(state)  # a new process: only the file is shared
    second.request("initialize", {"protocolVersion": 2})
    plain = second.request("session/resume", {"sessionId": sid, "cwd": "/w"})
    assert plain == [{"jsonrpc": "2.0", "id": second.next_id, "result": {}}]
    out = second.request(
        "session/resume", {"sessionId": sid, "cwd": "/w", "replayFrom": {"type": "start"}}
    )
    assert out[-1] == {"jsonrpc": "2.0", "id": second.next_id, "result": {}}
    replay = updates(out[:-1])
    assert len(replay) == len(out) - 1
    replayed = [u["sessionUpdate"] for u in replay]
    assert not {"notice", "state_update", "usage_update"} & set(replayed)
    assert replay[0]["sessionUpdate"] == "user_message"
    user_id = next(u["messageId"] for u in live if u["sessionUpdate"] == "user_message")
    assert replay[0]["messageId"] == user_id
    # chunked messages are reset with an empty whole message first
    for i, u in enumerate(replay):
        if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk"):
            whole = u["sessionUpdate"].removesuffix("_chunk")
            resets = [r for r in replay[:i] if r["sessionUpdate"] == whole]
            assert any(r["messageId"] == u["messageId"] and r["content"] == [] for r in resets)
    vendor = [u for u in replay if u["sessionUpdate"] == "_vendor_demo"]
    assert vendor == [u for u in live if u["sessionUpdate"] == "_vendor_demo"]
    tool = [u for u in replay if u["sessionUpdate"] == "tool_call_update"]
    assert len(tool) == 1 and tool[0]["status"] == "completed" and len(tool[0]["content"]) == 2

    # the chunks' text is the same as live
    def text(us: list[dict[str, Any]]) -> list[str]:
        return [u["content"]["text"] for u in us if u["sessionUpdate"] == "agent_message_chunk"]

    assert text(replay) == text(live)
    # counters continue: a new turn on the second connection does not reuse ids
    play_turn(second, sid)
    new_ids = {u.get("messageId") for u in updates(second.out[len(out) + 1 :])} - {None}
    assert not new_ids & {u.get("messageId") for u in live}


def test_v1_load_replays_as_chunks_before_response(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = Harness(state)
    sid = first.start(1)
    play_turn(first, sid)
    second = Harness(state)
    second.request("initialize", {"protocolVersion": 1})
    out = second.request("session/load", {"sessionId": sid, "cwd": "/w", "mcpServers": []})
    assert out[-1] == {"jsonrpc": "2.0", "id": second.next_id, "result": {}}
    replayed = kinds(out)
    assert len(replayed) == len(out) - 1
    assert replayed[0] == "user_message_chunk"
    assert "notice" not in replayed and "usage_update" not in replayed
    assert replayed.count("tool_call") == 1 and "tool_call_update" not in replayed
    assert replayed.count("plan") == 1 and "_vendor_demo" in replayed
    assert all(u.get("messageId") for u in updates(out) if u["sessionUpdate"].endswith("_chunk"))


def test_load_is_v1_only_and_unknown_session_is_not_found(tmp_path: Path) -> None:
    h = Harness()
    h.request("initialize", {"protocolVersion": 2})
    assert h.request("session/load", {"sessionId": "x", "cwd": "/"})[0]["error"]["code"] == -32601
    assert (
        h.request("session/resume", {"sessionId": "nope", "cwd": "/"})[0]["error"]["code"] == -32002
    )


def test_malformed_input_gets_errors_never_exceptions() -> None:
    h = Harness()
    cases: list[tuple[bytes, Any, int | None]] = [
        (b"not json", None, -32700),
        (b"\xff\xfe", None, -32700),
        (b"[]", None, -32600),
        (b"42", None, -32600),
        (b'{"jsonrpc":"1.0","id":3,"method":"x"}', 3, -32600),
        (b'{"jsonrpc":"2.0","id":4}', 4, -32600),
        (b'{"jsonrpc":"2.0","id":5,"method":7}', 5, -32600),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"x"}', None, -32600),
        (b'{"jsonrpc":"2.0","id":"s","method":"_vendor/thing"}', "s", -32601),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":[1]}', 1.5, -32602),
        (
            b'{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2"}}',
            6,
            -32602,
        ),
        (b'{"jsonrpc":"2.0","id":7,"method":"session/new","params":{}}', 7, -32602),
        (
            b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"z"}}',
            8,
            -32002,
        ),
        (b'{"jsonrpc":"2.0","method":"_vendor/notify","params":{}}', None, None),
        (b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"z"}}', None, None),
        (b'{"jsonrpc":"2.0","id":99,"result":{}}', None, None),
        (b"   \r", None, None),
        (b'{"jsonrpc":"2.0","id":NaN,"method":"x"}', None, -32700),
        (b'{"jsonrpc":"2.0","id":1e999,"method":"x"}', None, -32700),
        (b"[" * 100000, None, -32700),
    ]
    for line, rpc_id, code in cases:
        out = h.feed(line)
        if code is None:
            assert out == [], line
        else:
            assert out == [
                {
                    "jsonrpc": "2.0",
                    "id": rpc_id,
                    "error": {"code": code, "message": out[0]["error"]["message"]},
                }
            ], line
    batch = h.feed(
        b'[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}, 5]'
    )
    assert batch[0]["result"]["protocolVersion"] == 2 and batch[1]["error"]["code"] == -32600


def test_two_runs_give_identical_output() -> None:
    def run() -> str:
        h = Harness()
        sid = h.start(2)
        play_turn(h, sid)
        return json.dumps(h.out)

    assert run() == run()


def test_state_file_errors_are_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(StateError, match="cannot read state file"):
        SessionStore(str(bad))
    other = tmp_path / "other.json"
    other.write_text('{"format": "something else"}')
    with pytest.raises(StateError, match="not a demo agent state file"):
        SessionStore(str(other))


def test_serve_paces_steps_and_cancel_lands_between_them() -> None:
    out: list[dict[str, Any]] = []
    agent = DemoAgent(SessionStore(None), out.append)
    inbox: queue.Queue[bytes | None] = queue.Queue()
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/w"}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": "sess_1", "prompt": []},
        },
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess_1"}},
    ):
        inbox.put(json.dumps(message).encode())
    inbox.put(None)
    # with a delay the cancel (already queued) is read right after the first step, before
    # the user message is inserted: the prompt fails with -32800 and the work goes idle
    serve(agent, inbox, delay=0.01)
    assert kinds(out) == ["state_update", "state_update"]
    assert updates(out)[-1] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "cancelled",
    }
    (error,) = [m for m in out if m.get("id") == 3]
    assert error["error"]["code"] == -32800
    assert not [m for m in out if m.get("method") == "session/request_permission"]


def test_serve_plays_out_turns_at_end_of_input() -> None:
    out: list[dict[str, Any]] = []
    agent = DemoAgent(SessionStore(None), out.append)
    inbox: queue.Queue[bytes | None] = queue.Queue()
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/w"}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": "sess_1", "prompt": []},
        },
    ):
        inbox.put(json.dumps(message).encode())
    inbox.put(None)
    serve(agent, inbox, delay=30)  # returns at once: no pauses after end of input
    assert out[-1]["method"] == "session/request_permission"


def test_replay_of_foreign_shapes() -> None:
    history = [
        {
            "sessionUpdate": "agent_message",
            "messageId": "m",
            "content": [{"type": "text", "text": "a"}],
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "b"},
        },
        {"sessionUpdate": "notice", "severity": "info", "title": "t"},
        {"sessionUpdate": "_x", "v": 1},
        {
            "sessionUpdate": "agent_message",
            "messageId": "m",
            "content": [{"type": "text", "text": "c"}],
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "title": "T",
            "status": "pending",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "title": None,
            "status": "completed",
        },
    ]
    v2 = replay_updates(history, 2)
    assert v2 == [
        {"sessionUpdate": "agent_message", "messageId": "m", "content": []},
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": "c"},
        },
        {"sessionUpdate": "_x", "v": 1},
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "content": [],
        },
    ]
    v1 = replay_updates(history, 1)
    assert v1[-1] == {
        "sessionUpdate": "tool_call",
        "toolCallId": "t1",
        "status": "completed",
        "title": "t1",
        "content": [],
    }


@pytest.mark.parametrize("version", [1, 2])
def test_a_new_prompt_is_accepted_as_soon_as_the_turn_ends(version: int) -> None:
    h = Harness()
    sid = h.start(version)
    prompt_id = h.next_id + 1
    ask = permission(h.request("session/prompt", {"sessionId": sid, "prompt": []}))
    h.agent.receive_line(json.dumps({"jsonrpc": "2.0", "id": ask["id"], "result": {}}).encode())

    def ended() -> bool:
        last = h.out[-1]
        if version == 1:
            return last.get("id") == prompt_id
        return last.get("params", {}).get("update", {}).get("state") == "idle"

    while not ended():  # step by step, as the paced driver does: no extra step after the end
        h.agent.step()
    again = h.request("session/prompt", {"sessionId": sid, "prompt": []})
    assert "error" not in again[0], again[0]
