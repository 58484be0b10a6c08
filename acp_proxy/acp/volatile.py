"""What legitimately differs between two runs of one conversation (pure; one definition).

``acp-proxy diff``, ``replay --client`` and the inspector's diff view compare two runs of
the same script; these members differ on every run of an unchanged agent and are never a
difference:

- the ids an agent or client mints for an entity (:data:`ENTITY_ID_KEYS`): sessions, tool
  calls, messages, terminals, plans, compactions, permission and elicitation requests,
  MCP connections, suggestions;
- timestamps (:data:`TIMESTAMP_KEYS`), such as a session's ``updatedAt``;
- the trace context reserved in ``_meta`` (:data:`TRACE_META_KEYS`).

:func:`scrub` replaces each such value by :data:`VOLATILE` (so a member that appears or
disappears is still a difference) at any depth, without recursion (a frame may nest
thousands deep); :func:`scrub_parsed` does the same in place, for a value just parsed that
nothing else holds (``acp-proxy diff`` scrubs every frame of both connections). The JSON-RPC
``id`` of the message itself is the caller's to drop.
"""

from __future__ import annotations

from typing import Any

ENTITY_ID_KEYS = frozenset(
    {
        "sessionId",
        "messageId",
        "userMessageId",
        "toolCallId",
        "terminalId",
        "planId",
        "compactionId",
        "requestId",
        "elicitationId",
        "connectionId",
        "suggestionId",
    }
)
"""Members holding a minted id, ignored at any depth."""

TIMESTAMP_KEYS = frozenset(
    {"timestamp", "createdAt", "updatedAt", "startedAt", "endedAt", "completedAt"}
)
"""Timestamp members, ignored at any depth (frame times are never compared either)."""

TRACE_META_KEYS = frozenset({"traceparent", "tracestate", "baggage"})
"""W3C trace context members of a ``_meta`` object (reserved by ACP), ignored."""

VOLATILE_KEYS = ENTITY_ID_KEYS | TIMESTAMP_KEYS
"""Every member ignored at any depth (``_meta`` trace fields aside)."""

VOLATILE = "(varies)"
"""What a volatile value is replaced by."""

_META_VOLATILE_KEYS = VOLATILE_KEYS | TRACE_META_KEYS
"""Every member volatile in a ``_meta`` object."""


def is_volatile(key: str, parent_key: str | None) -> bool:
    """Whether member ``key`` of an object that is member ``parent_key`` is volatile."""
    return key in VOLATILE_KEYS or (parent_key == "_meta" and key in TRACE_META_KEYS)


def scrub(value: Any) -> Any:
    """A copy of a JSON value with every volatile member's value replaced by :data:`VOLATILE`.

    Iterative: any nesting depth the parser accepted is scrubbed without a RecursionError.
    """
    if not isinstance(value, dict | list):
        return value
    root: list[Any] = [None]
    # (source container, its key in its parent, target container, slot in target)
    stack: list[tuple[Any, str | None, Any, Any]] = [(value, None, root, 0)]
    while stack:
        source, key, target, slot = stack.pop()
        if isinstance(source, dict):
            copy: dict[str, Any] = {}
            target[slot] = copy
            for k, v in source.items():
                if is_volatile(k, key):
                    copy[k] = VOLATILE
                elif isinstance(v, dict | list):
                    copy[k] = None
                    stack.append((v, k, copy, k))
                else:
                    copy[k] = v
        else:
            items: list[Any] = list(source)
            target[slot] = items
            for n, v in enumerate(items):
                if isinstance(v, dict | list):
                    stack.append((v, key, items, n))
    return root[0]


def scrub_parsed(value: Any) -> Any:
    """:func:`scrub` in place: ``value`` itself, every volatile member's value replaced by
    :data:`VOLATILE`. Only for a value just parsed that nothing else holds (no copy is made,
    so it is several times faster); iterative like :func:`scrub`."""
    if not isinstance(value, (dict, list)):
        return value
    stack: list[tuple[Any, str | None]] = [(value, None)]
    pop, push = stack.pop, stack.append
    while stack:
        source, key = pop()
        if isinstance(source, dict):
            volatile = _META_VOLATILE_KEYS if key == "_meta" else VOLATILE_KEYS
            for k, v in source.items():
                if k in volatile:
                    source[k] = VOLATILE  # an existing key: the dict does not change size
                elif isinstance(v, (dict, list)):
                    push((v, k))
        else:
            for v in source:
                if isinstance(v, (dict, list)):
                    push((v, key))
    return value
