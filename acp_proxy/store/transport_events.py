"""The transport's own facts about a connection, placed among its frames, as text.

The transports record what is not a JSON-RPC message as ``events`` rows of the connection
(a kind, a JSON detail, the wall clock): for Streamable HTTP every request (``http``:
method, status, the ``Acp-Connection-Id`` / ``Acp-Session-Id`` headers, the JSON-RPC
method and id of a POST), each SSE stream (``sse_open``; ``sse_close`` with who ended it,
the number of events and their first and last ids) and ``http_delete``; for WebSocket the
close (``websocket_close``); ``client_eof``, ``signal``...

Frames carry their wall clock too, so an event's place is after the last frame recorded at
or before it (:attr:`PlacedEvent.after_seq`; 0: before the first frame). ``acp-proxy show``
and the web inspector read events through :func:`placed_events` and print them with
:func:`describe`, so both say the same thing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from acp_proxy.store.reader import RecordingReader

HTTP_KINDS = frozenset({"http", "sse_open", "sse_close", "http_delete"})
"""Event kinds of the Streamable HTTP transport."""


@dataclass(frozen=True, slots=True)
class PlacedEvent:
    """One recorded event and the sequence number of the frame it follows."""

    after_seq: int
    ts: float
    kind: str
    detail: Any

    @property
    def session(self) -> str | None:
        """The ACP session it concerns (the ``Acp-Session-Id`` header), if any."""
        value = self.detail.get("session") if isinstance(self.detail, dict) else None
        return value if isinstance(value, str) else None

    @property
    def carries_message(self) -> bool:
        """An HTTP request that carried a JSON-RPC message (a POST): it belongs with it."""
        d = self.detail
        return self.kind == "http" and isinstance(d, dict) and ("rpc" in d or "id" in d)

    @property
    def text(self) -> str:
        return describe(self.kind, self.detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ts": self.ts,
            "afterSeq": self.after_seq,
            "detail": self.detail,
            "text": self.text,
        }


def placed_events(reader: RecordingReader, connection_id: int) -> list[PlacedEvent]:
    """The connection's events in recording order, each placed after a frame.

    Places never go backwards (events keep the order they were recorded in, whatever the
    wall clock did). Reads only ``seq, ts`` of the frames, and nothing when there is no event.
    """
    events = list(reader.events(connection_id))
    if not events:
        return []
    times = reader.frame_times(connection_id)
    ahead = next(times, None)
    after = 0
    out: list[PlacedEvent] = []
    for ev in events:
        while ahead is not None and ahead[1] <= ev.ts:
            after = ahead[0]
            ahead = next(times, None)
        out.append(PlacedEvent(after, ev.ts, ev.kind, ev.detail))
    return out


def _id_range(detail: dict[str, Any]) -> str:
    first, last = detail.get("first_id"), detail.get("last_id")
    if first is None:
        return ""
    return f", id {first}" if first == last else f", ids {first}-{last}"


def describe(kind: str, detail: Any) -> str:
    """One line for an event: what a person reading the connection needs of it."""
    d = detail if isinstance(detail, dict) else {}
    headers = "".join(
        f" · {name} {d[key]}"
        for key, name in (("connection", "Acp-Connection-Id"), ("session", "Acp-Session-Id"))
        if d.get(key) is not None
    )
    if kind == "http":
        text = f"HTTP {d.get('method', '?')} {d.get('status', '?')}"
        if d.get("rpc") is not None:
            text += f" {d['rpc']}"
        if d.get("id") is not None:
            text += f" #{d['id']}"
        return text + headers
    if kind in ("sse_open", "sse_close"):
        stream = d.get("stream", "?")
        where = f" {d['session']}" if d.get("session") else ""
        if kind == "sse_open":
            return f"SSE {stream} stream{where} opened"
        text = f"SSE {stream} stream{where} closed"
        if d.get("by") is not None:
            text += f" by {d['by']}"
        if d.get("events") is not None:
            count = d["events"]
            text += f": {count} event{'' if count == 1 else 's'}{_id_range(d)}"
        return text
    if kind == "http_delete":
        return "HTTP DELETE: the connection ends" + headers
    if kind == "websocket_close":
        text = f"WebSocket closed by {d.get('by', '?')}"
        if d.get("code") is not None:
            text += f", code {d['code']}"
        if d.get("reason"):
            text += f" ({d['reason']})"
        return text
    if detail is None:
        return kind
    return f"{kind} {json.dumps(detail, ensure_ascii=False, default=str)}"
