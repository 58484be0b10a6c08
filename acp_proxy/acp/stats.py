"""Traffic statistics from index columns: latency per method, turns per session (sans-I/O).

:class:`StatsAccumulator` is fed one frame at a time (its index columns, plus the parsed
payload only for the few frames that need it: responses, prompts, state updates and
batches) and keeps compact arrays, so a million-frame recording costs a few megabytes.
Requests and responses are paired **per direction**; a response recorded before its
request (both directions are recorded independently) is paired but left out of latency.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.model import Turn, TurnTracker
from acp_proxy.wire.frame import Direction, other_direction

NEEDS_PAYLOAD_SQL = (
    "kind IN ('response', 'batch') OR update_kind = 'state_update' OR method = 'session/prompt'"
)
"""SQL condition for the frames whose raw bytes :meth:`StatsAccumulator.feed` needs."""


def percentile(sorted_values: array[int] | list[int], q: float) -> int | None:
    """Nearest-rank percentile of already sorted values (``None`` when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(slots=True)
class MethodStats:
    """Latencies (ns) and outcomes of one method's requests in one direction."""

    latencies: array[int] = field(default_factory=lambda: array("q"))
    errors: int = 0
    unanswered: int = 0
    reordered: int = 0

    def summary(self) -> dict[str, Any]:
        values = sorted(self.latencies)
        return {
            "answered": len(values) + self.reordered,
            "errors": self.errors,
            "unanswered": self.unanswered,
            "reordered": self.reordered,
            "p50Ms": _ms(percentile(values, 0.50)),
            "p99Ms": _ms(percentile(values, 0.99)),
            "maxMs": _ms(values[-1] if values else None),
        }


@dataclass(slots=True)
class SessionStats:
    """Turns of one session (on one or more connections)."""

    connections: set[int] = field(default_factory=set)
    turns: int = 0
    unfinished: int = 0
    durations: array[int] = field(default_factory=lambda: array("q"))
    stop_reasons: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        values = sorted(self.durations)
        return {
            "connections": sorted(self.connections),
            "turns": self.turns,
            "unfinished": self.unfinished,
            "totalMs": _ms(sum(values)) if values else None,
            "p50Ms": _ms(percentile(values, 0.50)),
            "maxMs": _ms(values[-1] if values else None),
            "stopReasons": dict(self.stop_reasons),
        }


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


class StatsAccumulator:
    """Feed frames in recording order (connection, then seq); read :meth:`to_json`."""

    def __init__(self) -> None:
        self.methods: dict[tuple[str, str], MethodStats] = {}
        self.sessions: dict[str, SessionStats] = {}
        self._conn: int | None = None
        self._pending: dict[tuple[Direction, str], tuple[str, int]] = {}
        self._early: dict[tuple[Direction, str], tuple[Any, int]] = {}
        self._tracker = TurnTracker()

    def _method(self, method: str, direction: str) -> MethodStats:
        key = (method, direction)
        stats = self.methods.get(key)
        if stats is None:
            stats = self.methods[key] = MethodStats()
        return stats

    def _session(self, sid: str) -> SessionStats:
        stats = self.sessions.get(sid)
        if stats is None:
            stats = self.sessions[sid] = SessionStats()
        return stats

    def feed(
        self,
        connection_id: int,
        direction: Direction,
        kind: str | None,
        rpc_id: str | None,
        method: str | None,
        session_id: str | None,
        update_kind: str | None,
        mono_ns: int,
        payload: Any = None,
    ) -> None:
        """One frame's index columns (``payload``: parsed JSON for the frames that need it)."""
        if connection_id != self._conn:
            self._end_connection()
            self._conn = connection_id
        if session_id is not None:
            self._session(session_id).connections.add(connection_id)
        if kind == "batch" and isinstance(payload, list):
            for item in payload:
                self._feed_item(direction, item, mono_ns)
            return
        if kind == "request" and rpc_id is not None and method is not None:
            self._request(direction, rpc_id, method, session_id, mono_ns, payload)
        elif kind == "response" and rpc_id is not None:
            self._response(direction, rpc_id, payload, mono_ns)
        elif update_kind == "state_update" and session_id is not None:
            update = _update_of(payload)
            turn = self._tracker.state(session_id, update.get("state"), update, None, mono_ns)
            if turn is not None:
                self._turn_done(turn)

    def _feed_item(self, direction: Direction, item: Any, mono_ns: int) -> None:
        if not isinstance(item, dict):
            return
        params = item.get("params")
        sid = params.get("sessionId") if isinstance(params, dict) else None
        sid = sid if isinstance(sid, str) else None
        rid = item.get("id")
        rid_text = None if rid is None else _id_text(rid)
        method = item.get("method")
        if isinstance(method, str) and rid_text is not None:
            self._request(direction, rid_text, method, sid, mono_ns, item)
        elif method is None and rid_text is not None:
            self._response(direction, rid_text, item, mono_ns)

    def _request(
        self,
        direction: Direction,
        rpc_id: str,
        method: str,
        session_id: str | None,
        mono_ns: int,
        payload: Any,
    ) -> None:
        key = (direction, rpc_id)
        if key in self._pending:
            self._method(self._pending[key][0], direction).unanswered += 1
        self._pending[key] = (method, mono_ns)
        if method == "session/prompt" and direction == "c2a" and session_id is not None:
            self._tracker.prompt(session_id, rpc_id, None, mono_ns)
        if method == "initialize" and isinstance(payload, dict):
            params = payload.get("params")
            version = params.get("protocolVersion") if isinstance(params, dict) else None
            if isinstance(version, int):
                self._tracker.version = version
        early = self._early.pop(key, None)
        if early is not None:
            self._pending.pop(key)
            stats = self._method(method, direction)
            stats.reordered += 1
            self._outcome(stats, method, rpc_id, early[0], early[1])

    def _response(self, direction: Direction, rpc_id: str, payload: Any, mono_ns: int) -> None:
        key = (other_direction(direction), rpc_id)
        request = self._pending.pop(key, None)
        if request is None:
            self._early[key] = (payload, mono_ns)
            return
        method, start_ns = request
        stats = self._method(method, key[0])
        stats.latencies.append(mono_ns - start_ns)
        self._outcome(stats, method, rpc_id, payload, mono_ns)

    def _outcome(
        self, stats: MethodStats, method: str, rpc_id: str, payload: Any, mono_ns: int
    ) -> None:
        if isinstance(payload, dict) and "error" in payload:
            stats.errors += 1
        if method == "session/prompt":
            result = payload.get("result") if isinstance(payload, dict) else None
            if (
                self._tracker.version is None
                and isinstance(result, dict)
                and "stopReason" in result
            ):
                self._tracker.version = 1
            turn = self._tracker.prompt_result(rpc_id, payload, None, mono_ns)
            if turn is not None:
                self._turn_done(turn)

    def _turn_done(self, turn: Turn) -> None:
        stats = self._session(turn.session_id)
        stats.turns += 1
        if turn.duration_ns is not None:
            stats.durations.append(turn.duration_ns)
        reason = turn.stop_reason
        if turn.error is not None and reason is None:
            reason = "(error response)"
        stats.stop_reasons[str(reason) if reason is not None else "(none)"] += 1

    def _end_connection(self) -> None:
        for (direction, _rid), (method, _ns) in self._pending.items():
            self._method(method, direction).unanswered += 1
        for turn in self._tracker.unfinished():
            stats = self._session(turn.session_id)
            stats.turns += 1
            stats.unfinished += 1
        self._pending.clear()
        self._early.clear()
        self._tracker = TurnTracker()

    def finish(self) -> None:
        self._end_connection()
        self._conn = None

    def to_json(self) -> dict[str, Any]:
        return {
            "latency": [
                {"method": m, "direction": d, **s.summary()}
                for (m, d), s in sorted(self.methods.items())
            ],
            "sessions": [{"sessionId": sid, **s.summary()} for sid, s in self.sessions.items()],
        }


def _update_of(payload: Any) -> dict[str, Any]:
    if isinstance(payload, dict):
        params = payload.get("params")
        if isinstance(params, dict) and isinstance(params.get("update"), dict):
            update: dict[str, Any] = params["update"]
            return update
    return {}


def _id_text(value: Any) -> str:
    import orjson

    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)
