"""Traffic statistics from index columns: latency per method, turns per session (sans-I/O).

:class:`StatsAccumulator` is fed one frame at a time (its index columns, plus the parsed
payload only for the few frames that need it: responses, prompts, state updates and
batches) and keeps compact arrays, so a million-frame recording costs a few megabytes.
Requests and responses are paired by :class:`~acp_proxy.acp.exchanges.Exchanges` and the
protocol version comes from :class:`~acp_proxy.acp.exchanges.InitializeFacts`, as in every
other reader; a response recorded before its request (both directions are recorded
independently) is paired but left out of latency.

A session is identified by its **lineage**, not its id alone: a session created on a
connection (``session/new``, ``session/fork``) starts a new lineage, and a later connection
that continues it (``session/load``, ``session/resume``, or just uses the id) joins the
latest lineage of that id. So the same id created by two unrelated agent processes is two
sessions, while a session taken back by a new agent process is one.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.exchanges import Exchanges, InitializeFacts
from acp_proxy.acp.model import SESSION_RESULT_METHODS
from acp_proxy.acp.turns import Turn, TurnTracker
from acp_proxy.wire.frame import Direction, Frame, other_direction
from acp_proxy.wire.jsonrpc import id_json_text
from acp_proxy.wire.surrogates import encodable


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

    session_id: str
    connections: list[int] = field(default_factory=list)
    frames: int = 0
    bytes: int = 0
    turns: int = 0
    unfinished: int = 0
    durations: array[int] = field(default_factory=lambda: array("q"))
    stop_reasons: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        values = sorted(self.durations)
        return {
            "sessionId": self.session_id,
            "connections": list(self.connections),
            "frames": self.frames,
            "bytes": self.bytes,
            "turns": self.turns,
            "unfinished": self.unfinished,
            "totalMs": _ms(sum(values)) if values else None,
            "p50Ms": _ms(percentile(values, 0.50)),
            "maxMs": _ms(values[-1] if values else None),
            "stopReasons": dict(self.stop_reasons),
        }


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


LineageKey = tuple[int, str]
"""(connection the session lineage starts on, sessionId)."""


@dataclass(slots=True)
class ConnectionPart:
    """What one connection adds to the statistics, on its own: its methods' outcomes and its
    sessions in the order they first appear, each with whether the connection created it.

    :meth:`StatsAccumulator.add` merges parts in connection order into exactly what feeding
    every frame would give, so a connection's part can be derived once and stored
    (:mod:`acp_proxy.analysis.aggregates`); :meth:`to_json` and :meth:`from_json` round-trip.
    """

    connection_id: int
    methods: dict[tuple[str, str], MethodStats] = field(default_factory=dict)
    sessions: dict[str, tuple[bool, SessionStats]] = field(default_factory=dict)
    protocol_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "v": self.protocol_version,
            "m": [
                [m, d, s.latencies.tolist(), s.errors, s.unanswered, s.reordered]
                for (m, d), s in self.methods.items()
            ],
            "s": [
                [
                    sid,
                    creates,
                    s.frames,
                    s.bytes,
                    s.turns,
                    s.unfinished,
                    s.durations.tolist(),
                    list(s.stop_reasons.items()),
                ]
                for sid, (creates, s) in self.sessions.items()
            ],
        }

    @classmethod
    def from_json(cls, connection_id: int, data: dict[str, Any]) -> ConnectionPart:
        part = cls(connection_id, protocol_version=data["v"])
        for m, d, latencies, errors, unanswered, reordered in data["m"]:
            part.methods[(m, d)] = MethodStats(array("q", latencies), errors, unanswered, reordered)
        for sid, creates, frames, size, turns, unfinished, durations, reasons in data["s"]:
            stats = SessionStats(sid, [], frames, size, turns, unfinished, array("q", durations))
            stats.stop_reasons.update(dict(reasons))
            part.sessions[sid] = (creates, stats)
        return part


class StatsAccumulator:
    """Feed frames in recording order (connection, then seq), or :meth:`add` connections'
    parts in that order; read :meth:`to_json`."""

    def __init__(self) -> None:
        self.methods: dict[tuple[str, str], MethodStats] = {}
        self.sessions: dict[LineageKey, SessionStats] = {}
        self.protocol_versions: dict[int, int | None] = {}
        """Each connection's protocol version (see :class:`InitializeFacts`)."""
        self.last_part: ConnectionPart | None = None
        """The part of the connection fed last, once it is done (see :meth:`finish`)."""
        self._latest: dict[str, LineageKey] = {}  # sessionId -> its latest lineage
        self._part: ConnectionPart | None = None  # the connection being fed
        # request: (method, sent at); an early response: (payload, received at)
        self._exchanges: Exchanges[tuple[str, int], tuple[Any, int]] = Exchanges()
        self._facts = InitializeFacts()
        self._tracker = TurnTracker()

    def _method(self, method: str, direction: str) -> MethodStats:
        assert self._part is not None
        key = (method, direction)
        stats = self._part.methods.get(key)
        if stats is None:
            stats = self._part.methods[key] = MethodStats()
        return stats

    def _session(self, sid: str, creates: bool = False) -> SessionStats:
        """The session ``sid`` means on the current connection (see the module docstring)."""
        assert self._part is not None
        entry = self._part.sessions.get(sid)
        if entry is not None:
            return entry[1]
        stats = SessionStats(sid)
        self._part.sessions[sid] = (creates, stats)
        return stats

    def feed(self, frame: Frame, payload: Any = None) -> None:
        """One frame's index columns (``payload``: parsed JSON for the frames that need it)."""
        connection_id, direction, kind = frame.connection_id, frame.direction, frame.kind
        rpc_id, method, session_id = frame.rpc_id, frame.method, frame.session_id
        update_kind, mono_ns, size = frame.update_kind, frame.mono_ns, frame.size
        if self._part is None or connection_id != self._part.connection_id:
            self._end_connection()
            self._part = ConnectionPart(connection_id)
        self._exchanges.tick()  # responses that answered nothing: no latency, no outcome
        if session_id is not None:
            creates = kind == "response" and method in SESSION_RESULT_METHODS
            stats = self._session(session_id, creates)
            stats.frames += 1
            stats.bytes += size
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

    def add(self, part: ConnectionPart) -> None:
        """Merge one connection's part (after every earlier connection's)."""
        self._end_connection()
        cid = part.connection_id
        self.protocol_versions[cid] = part.protocol_version
        for key, m in part.methods.items():
            total = self.methods.get(key)
            if total is None:
                total = self.methods[key] = MethodStats()
            total.latencies.extend(m.latencies)
            total.errors += m.errors
            total.unanswered += m.unanswered
            total.reordered += m.reordered
        for sid, (creates, s) in part.sessions.items():
            lineage = self._latest.get(sid)
            if creates or lineage is None:
                lineage = (cid, sid)
                self._latest[sid] = lineage
            total_s = self.sessions.get(lineage)
            if total_s is None:
                total_s = self.sessions[lineage] = SessionStats(sid)
            total_s.connections.append(cid)
            total_s.frames += s.frames
            total_s.bytes += s.bytes
            total_s.turns += s.turns
            total_s.unfinished += s.unfinished
            total_s.durations.extend(s.durations)
            total_s.stop_reasons.update(s.stop_reasons)

    def _feed_item(self, direction: Direction, item: Any, mono_ns: int) -> None:
        if not isinstance(item, dict):
            return
        params = item.get("params")
        sid = params.get("sessionId") if isinstance(params, dict) else None
        sid = encodable(sid) if isinstance(sid, str) else None
        rid_text = id_json_text(item["id"], None) if "id" in item else None
        method = item.get("method")
        if isinstance(method, str) and rid_text is not None:
            self._request(direction, rid_text, encodable(method), sid, mono_ns, item)
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
        previous = self._exchanges.pending.get((direction, rpc_id))
        if previous is not None:
            self._method(previous[0], direction).unanswered += 1
        if method == "session/prompt" and direction == "c2a" and session_id is not None:
            self._tracker.prompt(session_id, rpc_id, None, mono_ns)
        if method == "initialize":
            params = payload.get("params") if isinstance(payload, dict) else None
            self._facts.observe_request(params)
            self._tracker.version = self._facts.protocol_version
        early = self._exchanges.request(direction, rpc_id, (method, mono_ns))
        if early is not None:
            stats = self._method(method, direction)
            stats.reordered += 1
            self._outcome(stats, method, rpc_id, early[0], early[1])

    def _response(self, direction: Direction, rpc_id: str, payload: Any, mono_ns: int) -> None:
        request = self._exchanges.answer(direction, rpc_id)
        if request is None:
            self._exchanges.hold_early(direction, rpc_id, (payload, mono_ns))
            return
        method, start_ns = request
        stats = self._method(method, other_direction(direction))
        stats.latencies.append(mono_ns - start_ns)
        self._outcome(stats, method, rpc_id, payload, mono_ns)

    def _outcome(
        self, stats: MethodStats, method: str, rpc_id: str, payload: Any, mono_ns: int
    ) -> None:
        error = isinstance(payload, dict) and "error" in payload
        if error:
            stats.errors += 1
        if method == "initialize" and not error and isinstance(payload, dict):
            self._facts.observe_result(payload.get("result"))
            self._tracker.version = self._facts.protocol_version
        if method == "session/prompt":
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
        stats.stop_reasons[encodable(str(reason)) if reason is not None else "(none)"] += 1

    def _end_connection(self) -> None:
        part = self._part
        if part is None:
            return
        part.protocol_version = self._facts.protocol_version
        for (direction, _rid), (method, _ns) in self._exchanges.pending.items():
            self._method(method, direction).unanswered += 1
        for turn in self._tracker.unfinished():
            stats = self._session(turn.session_id)
            stats.turns += 1
            stats.unfinished += 1
        self._exchanges.clear()
        self._facts = InitializeFacts()
        self._tracker = TurnTracker()
        self._part = None
        self.last_part = part
        self.add(part)

    def finish(self) -> None:
        self._end_connection()

    def to_json(self) -> dict[str, Any]:
        return {
            "latency": [
                {"method": m, "direction": d, **s.summary()}
                for (m, d), s in sorted(self.methods.items())
            ],
            "sessions": [s.summary() for s in self.sessions.values()],
        }


def _update_of(payload: Any) -> dict[str, Any]:
    if isinstance(payload, dict):
        params = payload.get("params")
        if isinstance(params, dict) and isinstance(params.get("update"), dict):
            update: dict[str, Any] = params["update"]
            return update
    return {}
