"""Trace spans as plain data: what :class:`~acp_proxy.acp.spans.SpanMapper` returns.

:class:`SpanRecord` (ids as integers, times as Unix nanoseconds) with its
:class:`SpanEvent` items, the deterministic ids spans are given (:func:`derive_id`), the
W3C ``traceparent`` a request may carry in ``_meta`` (:func:`parse_traceparent`) and the
text of ACP content, capped at :data:`CONTENT_LIMIT`. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

AttrValue = str | bool | int | float | list[str]

CONTENT_LIMIT = 8192
"""Most characters of content kept in one attribute (with ``include_content``)."""

MAX_EVENTS = 128
"""Most events kept on one span (OpenTelemetry's default span limit); the rest are counted
in ``acp.events.dropped``."""

TOOL_END_STATUSES = frozenset({"completed", "failed", "cancelled"})

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(slots=True)
class SpanEvent:
    """A timestamped event on a span."""

    name: str
    time_ns: int
    attributes: dict[str, AttrValue] = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """One span as plain data (ids as integers, times as Unix nanoseconds).

    ``kind`` is ``internal`` or ``client``; ``status`` is ``unset``, ``ok`` or ``error``;
    ``remote_parent`` says the parent came from a peer's ``traceparent``; ``links`` are
    (trace id, span id) pairs.
    """

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    kind: str
    start_ns: int
    end_ns: int = 0
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    status: str = "unset"
    status_message: str | None = None
    trace_state: str | None = None
    remote_parent: bool = False
    links: list[tuple[int, int]] = field(default_factory=list)
    events_dropped: int = 0
    _last_chunk: tuple[str, str] | None = None

    def fold_chunk(self, chunk_key: tuple[str, str] | None, text: str | None = None) -> bool:
        """Fold a chunk into the last event if it continues that message; False if not."""
        if chunk_key is None or chunk_key != self._last_chunk or not self.events:
            return False
        last = self.events[-1]
        count = last.attributes.get("acp.chunks", 1)
        last.attributes["acp.chunks"] = (count if isinstance(count, int) else 1) + 1
        if text is not None:
            before = last.attributes.get("acp.content.text", "")
            last.attributes["acp.content.text"] = cap(f"{before}{text}")
        return True

    def add_event(self, event: SpanEvent, chunk_key: tuple[str, str] | None = None) -> None:
        """Add ``event``; a chunk continuing the previous event's message is folded into it."""
        text = event.attributes.get("acp.content.text")
        if self.fold_chunk(chunk_key, text if isinstance(text, str) else None):
            return
        self._last_chunk = chunk_key
        if len(self.events) >= MAX_EVENTS:
            self.events_dropped += 1
            self.attributes["acp.events.dropped"] = self.events_dropped
            return
        self.events.append(event)


def derive_id(bits: int, *parts: str) -> int:
    """A deterministic non-zero id of ``bits`` bits from ``parts`` (SHA-256)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "backslashreplace")).digest()
    value = int.from_bytes(digest[: bits // 8], "big")
    return value or 1


def parse_traceparent(meta: Any) -> tuple[int, int, str | None] | None:
    """(trace id, parent span id, tracestate) from a ``_meta`` object, if it is valid W3C."""
    if not isinstance(meta, dict):
        return None
    header = meta.get("traceparent")
    if not isinstance(header, str):
        return None
    match = _TRACEPARENT.match(header.strip().lower())
    if match is None or match.group(1) == "ff":
        return None
    trace_id, span_id = int(match.group(2), 16), int(match.group(3), 16)
    if not trace_id or not span_id:
        return None
    state = meta.get("tracestate")
    return trace_id, span_id, state if isinstance(state, str) and state else None


def cap(text: str) -> str:
    return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT]


def content_text(value: Any) -> str:
    """The text of ACP content: a text block, a tool-call content item, or a list of them."""
    if isinstance(value, list):
        return "".join(content_text(v) for v in value)
    if not isinstance(value, dict):
        return ""
    if value.get("type") == "text" and isinstance(value.get("text"), str):
        return str(value["text"])
    inner = value.get("content")
    return content_text(inner) if isinstance(inner, (dict, list)) else ""


def json_text(value: Any) -> str:
    return cap(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
