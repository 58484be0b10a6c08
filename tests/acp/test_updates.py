"""The ``session/update`` vocabulary (acp/updates.py): entity keys and variant sets."""

from __future__ import annotations

import pytest

from acp_proxy.acp.updates import (
    EVENT_VARIANTS,
    HISTORY_VARIANTS,
    KNOWN_VARIANTS_V1,
    KNOWN_VARIANTS_V2,
    entity_key,
    is_live_only,
)


@pytest.mark.parametrize(
    ("update", "key"),
    [
        ({"sessionUpdate": "agent_message_chunk", "messageId": "m1"}, ("agent_message", "m1")),
        ({"sessionUpdate": "tool_call_update", "toolCallId": "t1"}, ("tool_call", "t1")),
        ({"sessionUpdate": "plan_update", "plan": {"planId": "p1"}}, ("plan", "p1")),
        ({"sessionUpdate": "plan_removed", "planId": "p1"}, ("plan", "p1")),
        ({"sessionUpdate": "plan", "entries": []}, ("plan", "")),
        ({"sessionUpdate": "terminal_output_chunk", "terminalId": "x"}, ("terminal", "x")),
    ],
)
def test_entity_key_is_type_and_id(update: dict[str, object], key: tuple[str, str]) -> None:
    assert entity_key(update) == key


@pytest.mark.parametrize(
    "update",
    [
        {"sessionUpdate": "usage_update"},
        {"sessionUpdate": "made_up_update", "messageId": "m"},
        {"sessionUpdate": "agent_message_chunk"},
        {"sessionUpdate": "agent_message_chunk", "messageId": 5},
        "agent_message_chunk",
        None,
    ],
)
def test_events_unknown_variants_and_missing_ids_have_no_entity(update: object) -> None:
    assert entity_key(update) is None


def test_the_same_id_in_two_entity_types_is_two_entities() -> None:
    message = entity_key({"sessionUpdate": "agent_message", "messageId": "same"})
    thought = entity_key({"sessionUpdate": "agent_thought", "messageId": "same"})
    assert message != thought


def test_notice_is_live_only_and_never_history() -> None:
    assert is_live_only({"sessionUpdate": "notice"})
    assert not is_live_only({"sessionUpdate": "agent_message_chunk"})
    assert "notice" not in HISTORY_VARIANTS
    assert "plan_removed" not in HISTORY_VARIANTS
    assert "notice" in EVENT_VARIANTS


def test_each_version_knows_its_own_variants() -> None:
    assert "tool_call" in KNOWN_VARIANTS_V1 and "tool_call" not in KNOWN_VARIANTS_V2
    assert "state_update" in KNOWN_VARIANTS_V2 and "state_update" not in KNOWN_VARIANTS_V1
    assert "tool_call_update" in KNOWN_VARIANTS_V1 & KNOWN_VARIANTS_V2
