"""demo.history: which live updates are history, and how they are replayed for v1 and v2."""

from __future__ import annotations

from typing import Any

from acp_proxy.demo.history import is_history, replay_updates

TEXT = {"type": "text", "text": "hi"}
HEL, LO = {"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}
ENTRY = {"content": "a", "priority": "high", "status": "pending"}
HISTORY: list[dict[str, Any]] = [
    {"sessionUpdate": "user_message_chunk", "messageId": "u1", "content": TEXT},
    {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": HEL},
    {"sessionUpdate": "state_update", "state": "idle"},
    {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": LO},
    {"sessionUpdate": "plan", "entries": [ENTRY]},
]


def test_events_are_not_history() -> None:
    assert [is_history(u) for u in HISTORY] == [True, True, False, True, True]


def test_v1_replays_messages_as_chunks_and_the_plan_whole() -> None:
    assert replay_updates(HISTORY, 1) == [
        {"sessionUpdate": "user_message_chunk", "messageId": "u1", "content": TEXT},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": HEL},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": LO},
        {"sessionUpdate": "plan", "entries": [ENTRY]},
    ]


def test_v2_replays_user_messages_whole_and_resets_agent_messages_first() -> None:
    out = replay_updates(HISTORY, 2)
    assert out[:4] == [
        {"sessionUpdate": "user_message", "messageId": "u1", "content": [TEXT]},
        {"sessionUpdate": "agent_message", "messageId": "m1", "content": []},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": HEL},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": LO},
    ]
    assert out[4]["sessionUpdate"] == "plan_update"
    assert out[4]["plan"]["planId"] == "plan" and out[4]["plan"]["entries"] == [ENTRY]
    assert len(out) == 5
