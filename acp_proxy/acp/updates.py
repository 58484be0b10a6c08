"""The ``session/update`` vocabulary: which variants touch which entity, and which are events.

The one home of every variant list: the recorder's index columns, the timeline, replay's
history and the conformance checker all read them here. Entities are identified by
(entity type, id) — the seed text's rule — never by id alone.
"""

from __future__ import annotations

from typing import Any

MESSAGE_TYPES = ("user_message", "agent_message", "agent_thought")

ENTITY_UPDATES: dict[str, tuple[str, str, str]] = {
    # variant: (entity type, id field, operation)
    "user_message": ("user_message", "messageId", "upsert"),
    "user_message_chunk": ("user_message", "messageId", "chunk"),
    "agent_message": ("agent_message", "messageId", "upsert"),
    "agent_message_chunk": ("agent_message", "messageId", "chunk"),
    "agent_thought": ("agent_thought", "messageId", "upsert"),
    "agent_thought_chunk": ("agent_thought", "messageId", "chunk"),
    "tool_call": ("tool_call", "toolCallId", "upsert"),  # v1
    "tool_call_update": ("tool_call", "toolCallId", "upsert"),
    "tool_call_content_chunk": ("tool_call", "toolCallId", "chunk"),
    "terminal_update": ("terminal", "terminalId", "upsert"),
    "terminal_output_chunk": ("terminal", "terminalId", "chunk"),
    "plan_update": ("plan", "planId", "upsert"),  # the id lives in plan.planId
    "plan_removed": ("plan", "planId", "remove"),
    "plan": ("plan", "", "v1plan"),  # v1: the whole list each time, one plan per session
    "compaction_update": ("compaction", "compactionId", "upsert"),
    "compaction_summary_chunk": ("compaction", "compactionId", "chunk"),
}
"""Variants that create, update or append to an entity."""

ENTITY_OF_UPDATE: dict[str, tuple[str, str]] = {
    variant: (etype, id_field) for variant, (etype, id_field, _op) in ENTITY_UPDATES.items()
}
"""variant -> (entity type, id field)."""

EVENT_VARIANTS = frozenset(
    {
        "state_update",
        "usage_update",
        "available_commands_update",
        "config_option_update",
        "session_info_update",
        "current_mode_update",
        "notice",
    }
)
"""Known variants that are events rather than entities."""

KNOWN_VARIANTS = frozenset(ENTITY_UPDATES) | EVENT_VARIANTS

V1_ONLY_VARIANTS = frozenset({"tool_call", "plan", "current_mode_update"})
"""Variants of protocol v1 that v2 replaced (``tool_call_update``, ``plan_update``, config)."""

V2_ONLY_VARIANTS = frozenset(
    {
        "user_message",
        "agent_message",
        "agent_thought",
        "state_update",
        "tool_call_content_chunk",
        "terminal_update",
        "terminal_output_chunk",
    }
)
"""Variants that v1 does not have (v1's unstable additions, such as ``notice``, it has)."""

KNOWN_VARIANTS_V1 = KNOWN_VARIANTS - V2_ONLY_VARIANTS
KNOWN_VARIANTS_V2 = KNOWN_VARIANTS - V1_ONLY_VARIANTS

MESSAGE_VARIANTS = frozenset(v for v, spec in ENTITY_UPDATES.items() if spec[0] in MESSAGE_TYPES)
"""Message upserts and chunks (user, agent, thought)."""

HISTORY_VARIANTS = frozenset(v for v, spec in ENTITY_UPDATES.items() if spec[2] != "remove")
"""Variants that are conversation history (what a replay sends)."""

V1_TURN_VARIANTS = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
    }
)
"""v1 variants that belong to a prompt turn (the others are session state, sent any time)."""

LIVE_ONLY_VARIANTS = frozenset({"notice"})
"""Variants that are live events, never history (SHOULD NOT be replayed)."""


def entity_key(update: Any) -> tuple[str, str] | None:
    """(entity type, id) that ``update`` addresses, or ``None`` (events, unknown, no id)."""
    if not isinstance(update, dict):
        return None
    variant = update.get("sessionUpdate")
    return entity_of(variant, update) if isinstance(variant, str) else None


def entity_of(variant: str, update: dict[str, Any]) -> tuple[str, str] | None:
    """:func:`entity_key` of ``update``, whose ``sessionUpdate`` is ``variant`` (read
    already)."""
    spec = ENTITY_UPDATES.get(variant)
    if spec is None:
        return None
    etype, id_field, op = spec
    if op == "v1plan":
        return (etype, "")
    if variant == "plan_update":
        plan = update.get("plan")
        eid = plan.get("planId") if isinstance(plan, dict) else update.get("planId")
    else:
        eid = update.get(id_field)
    return (etype, eid) if isinstance(eid, str) else None


def is_live_only(update: Any) -> bool:
    """True for updates that are live events and not conversation history (``notice``)."""
    return isinstance(update, dict) and update.get("sessionUpdate") in LIVE_ONLY_VARIANTS
