"""Session history of the demo agent and how it is replayed on ``session/load``/``resume``.

Pure functions over plain JSON values (no I/O; :mod:`acp_proxy.acp.timeline` and
:mod:`acp_proxy.acp.updates` are stdlib-only too). The agent keeps every live
``session/update`` payload that is conversation history; :func:`replay_updates` folds them
with :class:`~acp_proxy.acp.timeline.SessionTimeline` (entities keyed by type and id, in the
order they first appeared) and re-emits each one in finished form for the requested protocol
version:

* v1 ``session/load``: messages as ``*_chunk`` updates (one per content block, with their
  ``messageId``), tool calls as one ``tool_call`` snapshot, the plan as one ``plan``.
* v2 ``session/resume`` with ``replayFrom: {"type": "start"}``: user messages as one whole
  ``user_message``; agent messages and thoughts first reset with ``content: []`` and then
  streamed as chunks; tool calls as one ``tool_call_update`` snapshot; plans as their last
  ``plan_update``.

Events (``notice``, ``state_update``, ``usage_update``, ``session_info_update``...: the
:data:`~acp_proxy.acp.updates.EVENT_VARIANTS`) are never history. Other entities (terminals,
compactions) are replayed as the timeline's finished form; unknown variants, including
``_vendor`` ones, verbatim at their position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from acp_proxy.acp.timeline import Entity, Event, SessionTimeline
from acp_proxy.acp.updates import EVENT_VARIANTS, MESSAGE_TYPES

NOT_HISTORY = EVENT_VARIANTS
"""Update variants that are never part of the replayed conversation."""

V1_PLAN_ID = "plan"
"""The ``planId`` a v1 session's one anonymous plan gets when replayed to a v2 peer."""


def is_history(update: dict[str, Any]) -> bool:
    """Whether a live update belongs to the conversation history that is replayed."""
    return update.get("sessionUpdate") not in NOT_HISTORY


def replay_updates(history: Iterable[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """The ``update`` payloads that replay ``history`` for protocol ``version`` (1 or 2)."""
    timeline = SessionTimeline()
    for update in history:
        timeline.apply(update)
    out: list[dict[str, Any]] = []
    for item in timeline.items:
        if isinstance(item, Event):
            if item.history:
                out.append(item.payload)
            continue
        if not isinstance(item, Entity) or item.removed:
            continue
        if item.type in MESSAGE_TYPES:
            mid, content = item.id, list(item.content or [])
            if version >= 2 and item.type == "user_message":
                out.append({"sessionUpdate": "user_message", "messageId": mid, "content": content})
                continue
            if version >= 2:
                out.append({"sessionUpdate": item.type, "messageId": mid, "content": []})
            for block in content:
                out.append(
                    {"sessionUpdate": f"{item.type}_chunk", "messageId": mid, "content": block}
                )
        elif item.type == "plan":
            plan = dict(item.fields.get("plan") or {})
            if version >= 2:
                out.append(
                    {
                        "sessionUpdate": "plan_update",
                        "plan": {**plan, "planId": item.id or V1_PLAN_ID},
                    }
                )
            else:
                out.append({"sessionUpdate": "plan", "entries": list(plan.get("entries") or [])})
        elif item.type == "tool_call" and version < 2:
            snapshot = {**item.to_update(), "sessionUpdate": "tool_call"}
            snapshot.setdefault("title", item.id)
            out.append(snapshot)
        else:
            out.extend(item.to_updates(version))
    return out
