"""Session history of the demo agent and how it is replayed on ``session/load``/``resume``.

Pure functions over plain JSON values (stdlib only, no I/O). The agent keeps every live
``session/update`` payload that is conversation history; :func:`replay_updates` folds them
into entities (messages, thoughts, tool calls, plans; keyed by type and id, in the order they
first appeared) and re-emits each one in finished form for the requested protocol version:

* v1 ``session/load``: messages as ``*_chunk`` updates (one per content block, with their
  ``messageId``), tool calls as one ``tool_call`` snapshot, the plan as one ``plan``.
* v2 ``session/resume`` with ``replayFrom: {"type": "start"}``: user messages as one whole
  ``user_message``; agent messages and thoughts first reset with ``content: []`` and then
  streamed as chunks; tool calls as one ``tool_call_update`` snapshot; plans as their last
  ``plan_update``.

Live-only and state updates (``notice``, ``state_update``, ``usage_update``,
``session_info_update``) are never
history. Any other variant, including unknown ``_vendor`` ones, is kept and replayed
verbatim at its position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NOT_HISTORY = frozenset({"notice", "state_update", "usage_update", "session_info_update"})
"""Update variants that are never part of the replayed conversation."""

_ROLE = {
    "user_message": "user",
    "user_message_chunk": "user",
    "agent_message": "agent",
    "agent_message_chunk": "agent",
    "agent_thought": "thought",
    "agent_thought_chunk": "thought",
}
_WHOLE = {"user": "user_message", "agent": "agent_message", "thought": "agent_thought"}
_CHUNK = {
    "user": "user_message_chunk",
    "agent": "agent_message_chunk",
    "thought": "agent_thought_chunk",
}
V1_PLAN_ID = "plan"


def is_history(update: dict[str, Any]) -> bool:
    """Whether a live update belongs to the conversation history that is replayed."""
    return update.get("sessionUpdate") not in NOT_HISTORY


def _fold(history: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entities in first-appearance order, each in its final state."""
    entities: dict[tuple[str, Any], dict[str, Any]] = {}
    for index, update in enumerate(history):
        kind = update.get("sessionUpdate")
        if not isinstance(kind, str) or kind in NOT_HISTORY:
            continue
        if kind in _ROLE:
            role = _ROLE[kind]
            key: tuple[str, Any] = (role, update.get("messageId"))
            entity = entities.setdefault(
                key, {"type": "message", "role": role, "id": key[1], "content": []}
            )
            if kind.endswith("_chunk"):
                entity["content"].append(update.get("content"))
            elif "content" in update:
                entity["content"] = list(update.get("content") or [])
        elif kind in ("tool_call", "tool_call_update", "tool_call_content_chunk"):
            key = ("tool", update.get("toolCallId"))
            entity = entities.setdefault(
                key, {"type": "tool", "id": key[1], "fields": {}, "content": []}
            )
            if kind == "tool_call_content_chunk":
                entity["content"].append(update.get("content"))
                continue
            for field, value in update.items():
                if field in ("sessionUpdate", "toolCallId"):
                    continue
                if field == "content":
                    entity["content"] = list(value or [])
                elif value is None:
                    entity["fields"].pop(field, None)
                else:
                    entity["fields"][field] = value
        elif kind == "plan":
            key = ("plan", V1_PLAN_ID)
            entity = entities.setdefault(key, {"type": "plan", "id": V1_PLAN_ID})
            entity["plan"] = {
                "type": "items",
                "planId": V1_PLAN_ID,
                "entries": list(update.get("entries") or []),
            }
        elif kind == "plan_update" and isinstance(update.get("plan"), dict):
            plan = update["plan"]
            key = ("plan", plan.get("planId"))
            entity = entities.setdefault(key, {"type": "plan", "id": key[1]})
            entity["plan"] = plan
        else:
            entities[("raw", index)] = {"type": "raw", "update": update}
    return list(entities.values())


def replay_updates(history: Iterable[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """The ``update`` payloads that replay ``history`` for protocol ``version`` (1 or 2)."""
    out: list[dict[str, Any]] = []
    for entity in _fold(history):
        kind = entity["type"]
        if kind == "message":
            role, mid, content = entity["role"], entity["id"], entity["content"]
            if version >= 2 and role == "user":
                out.append({"sessionUpdate": "user_message", "messageId": mid, "content": content})
                continue
            if version >= 2:
                out.append({"sessionUpdate": _WHOLE[role], "messageId": mid, "content": []})
            for block in content:
                out.append({"sessionUpdate": _CHUNK[role], "messageId": mid, "content": block})
        elif kind == "tool":
            fields = dict(entity["fields"])
            if version >= 2:
                out.append(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": entity["id"],
                        **fields,
                        "content": entity["content"],
                    }
                )
            else:
                fields.setdefault("title", str(entity["id"]))
                out.append(
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": entity["id"],
                        **fields,
                        "content": entity["content"],
                    }
                )
        elif kind == "plan":
            plan = entity["plan"]
            if version >= 2:
                out.append({"sessionUpdate": "plan_update", "plan": plan})
            else:
                out.append({"sessionUpdate": "plan", "entries": list(plan.get("entries") or [])})
        else:
            out.append(entity["update"])
    return out
