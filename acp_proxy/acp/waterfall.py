"""One connection's exchanges and turns on a clock, and their latency figures (sans-I/O).

:class:`WaterfallBuilder` is fed a connection's frames in order (sequence number, direction,
index columns, monotonic clock and, for the few frames that need it, the parsed payload) and
gives what the inspector's timeline draws: every request with its response (a bar from one
to the other), turns from ``session/prompt`` to their end (v1: the prompt's response; v2:
the ``idle`` state update, as :class:`~acp_proxy.acp.turns.TurnTracker` decides) with the
time to the first chunk, agent requests (permission prompts, file reads...) nested in the
turn they happened in, each turn's prompt text and ``session/cancel``, and a performance
summary: per method count and p50/p95/p99/max,
turn durations and the slowest exchanges.

Pairing goes through :class:`~acp_proxy.acp.exchanges.Exchanges` (per direction, early
responses included) and the protocol version through
:class:`~acp_proxy.acp.exchanges.InitializeFacts`, as in every other reader.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.exchanges import Exchanges, InitializeFacts, session_id_of
from acp_proxy.acp.stats import percentile
from acp_proxy.acp.turns import Turn, TurnTracker
from acp_proxy.wire.frame import Direction, Frame

__all__ = ["Bar", "WaterfallBuilder", "needs_payload"]

MAX_BARS = 3000
"""Exchanges drawn at most (the figures cover them all)."""
SLOWEST = 10
PROMPT_TEXT_MAX = 200
"""Characters of a turn's prompt text sent to the timeline (it labels the turn's row)."""


def needs_payload(kind: str | None, method: str | None, update_kind: str | None) -> bool:
    """Whether :meth:`WaterfallBuilder.feed` needs the frame's parsed payload."""
    return (
        kind == "response"
        or method in ("initialize", "session/prompt")
        or update_kind == "state_update"
    )


@dataclass(slots=True)
class Bar:
    """One request and (when it came) its response."""

    method: str
    direction: Direction
    rpc_id: str
    session_id: str | None
    start_seq: int
    start_ns: int
    end_seq: int | None = None
    end_ns: int | None = None
    error: bool = False

    def to_json(self, origin_ns: int) -> dict[str, Any]:
        return {
            "method": self.method,
            "direction": self.direction,
            "id": self.rpc_id,
            "sessionId": self.session_id,
            "startSeq": self.start_seq,
            "endSeq": self.end_seq,
            "startMs": round((self.start_ns - origin_ns) / 1e6, 3),
            "endMs": None if self.end_ns is None else round((self.end_ns - origin_ns) / 1e6, 3),
            "latencyMs": None
            if self.end_ns is None
            else round((self.end_ns - self.start_ns) / 1e6, 3),
            "error": self.error,
        }


@dataclass(slots=True)
class _TurnMarks:
    turn: Turn
    first_chunk_ns: int | None = None
    first_chunk_seq: int | None = None
    prompt_text: str | None = None
    cancel_ns: int | None = None
    cancel_seq: int | None = None


@dataclass
class WaterfallBuilder:
    """Feed frames in sequence order, then read :meth:`to_json`."""

    origin_ns: int | None = None
    bars: list[Bar] = field(default_factory=list)
    finished: list[_TurnMarks] = field(default_factory=list)
    _exchanges: Exchanges[Bar, tuple[int, int, bool]] = field(default_factory=Exchanges)
    _facts: InitializeFacts = field(default_factory=InitializeFacts)
    _tracker: TurnTracker = field(default_factory=TurnTracker)
    _marks: dict[int, _TurnMarks] = field(default_factory=dict)  # id(turn) -> marks
    _last_ns: int = 0

    def feed(self, frame: Frame, payload: Any = None) -> None:
        """One frame (``payload``: the parsed message when :func:`needs_payload` says so)."""
        seq, direction, kind, rpc_id = frame.seq, frame.direction, frame.kind, frame.rpc_id
        method, session_id, update_kind = frame.method, frame.session_id, frame.update_kind
        mono_ns = frame.mono_ns
        if self.origin_ns is None:
            self.origin_ns = mono_ns
        self._last_ns = max(self._last_ns, mono_ns)
        self._exchanges.tick()
        message = payload if isinstance(payload, dict) else {}
        if kind == "request" and rpc_id is not None:
            params = message.get("params") if message else None
            if method == "initialize" and params is not None:
                self._facts.observe_request(params)
            bar = Bar(method or "?", direction, rpc_id, session_id, seq, mono_ns)
            early = self._exchanges.request(direction, rpc_id, bar)
            self.bars.append(bar)
            if method == "session/prompt" and session_id is not None:
                self._tracker.version = self._facts.protocol_version
                self._tracker.prompt(session_id, f"{direction}:{rpc_id}", seq, mono_ns)
                self._mark_open(session_id)
                marks = self._open_marks(session_id)
                if marks is not None:
                    marks.prompt_text = prompt_text(params)
            if early is not None:
                bar.end_seq, _, bar.error = early
                bar.end_ns = bar.start_ns  # recorded before its request: no latency known
        elif kind == "response" and rpc_id is not None:
            bar_or_none = self._exchanges.answer(direction, rpc_id)
            error = "error" in message
            if bar_or_none is None:
                self._exchanges.hold_early(direction, rpc_id, (seq, mono_ns, error))
                return
            bar = bar_or_none
            bar.end_seq, bar.end_ns, bar.error = seq, mono_ns, error
            if bar.method == "initialize" and isinstance(message.get("result"), dict):
                self._facts.observe_result(message["result"])
            if bar.method == "session/prompt":
                self._tracker.version = self._facts.protocol_version
                ended = self._tracker.prompt_result(
                    f"{bar.direction}:{bar.rpc_id}", message, seq, mono_ns
                )
                self._ended(ended)
        elif kind == "notification" and session_id is not None:
            if update_kind == "state_update":
                params = message.get("params")
                update = params.get("update") if isinstance(params, dict) else None
                if isinstance(update, dict):
                    sid = session_id_of(params) or session_id
                    self._tracker.version = self._facts.protocol_version
                    ended = self._tracker.state(sid, update.get("state"), update, seq, mono_ns)
                    self._mark_open(sid)
                    self._ended(ended)
            elif update_kind is not None and update_kind.endswith("_chunk"):
                turn = self._tracker.open.get(session_id)
                if turn is not None and update_kind != "user_message_chunk":
                    marks = self._marks.get(id(turn))
                    if marks is not None and marks.first_chunk_ns is None:
                        marks.first_chunk_ns, marks.first_chunk_seq = mono_ns, seq
            elif method == "session/cancel":
                self._tracker.cancel(session_id)
                marks = self._open_marks(session_id)
                if marks is not None and marks.cancel_ns is None:
                    marks.cancel_ns, marks.cancel_seq = mono_ns, seq

    def _mark_open(self, session_id: str) -> None:
        turn = self._tracker.open.get(session_id)
        if turn is not None and id(turn) not in self._marks:
            self._marks[id(turn)] = _TurnMarks(turn)

    def _open_marks(self, session_id: str) -> _TurnMarks | None:
        turn = self._tracker.open.get(session_id)
        return None if turn is None else self._marks.get(id(turn))

    def _ended(self, turn: Turn | None) -> None:
        if turn is None:
            return
        marks = self._marks.pop(id(turn), None) or _TurnMarks(turn)
        self.finished.append(marks)

    def to_json(self) -> dict[str, Any]:
        """Bars, turns (with their nested agent requests) and the performance summary."""
        origin = self.origin_ns or 0
        open_turns = [self._marks.get(id(t)) or _TurnMarks(t) for t in self._tracker.unfinished()]
        turns = sorted([*self.finished, *open_turns], key=lambda m: m.turn.start_ns)
        shown = self.bars[:MAX_BARS]
        bars = [b.to_json(origin) for b in shown]
        for i, bar in enumerate(bars):
            bar["index"] = i
        starts = [b.start_ns for b in shown]  # fed in order: sorted
        turn_json: list[dict[str, Any]] = []
        nested: set[int] = set()
        for n, marks in enumerate(turns[:MAX_BARS]):
            t = marks.turn
            end = t.end_ns if t.end_ns is not None else self._last_ns
            lo, hi = bisect_left(starts, t.start_ns), bisect_right(starts, end)
            inside = [i for i in range(lo, hi) if shown[i].session_id == t.session_id]
            nested.update(i for i in inside if shown[i].method != "session/prompt")
            turn_json.append(
                {
                    "index": n,
                    **t.to_json(),
                    "startMs": round((t.start_ns - origin) / 1e6, 3),
                    "endMs": None if t.end_ns is None else round((t.end_ns - origin) / 1e6, 3),
                    "firstChunkMs": None
                    if marks.first_chunk_ns is None
                    else round((marks.first_chunk_ns - t.start_ns) / 1e6, 3),
                    "firstChunkSeq": marks.first_chunk_seq,
                    "promptText": marks.prompt_text,
                    "cancelMs": None
                    if marks.cancel_ns is None
                    else round((marks.cancel_ns - origin) / 1e6, 3),
                    "cancelSeq": marks.cancel_seq,
                    "bars": inside,
                }
            )
        for i, bar in enumerate(bars):
            bar["nested"] = i in nested
        return {
            "spanMs": round((self._last_ns - origin) / 1e6, 3),
            "bars": bars,
            "barsTotal": len(self.bars),
            "turns": turn_json,
            "turnsTotal": len(turns),
            "performance": self._performance(turns),
        }

    def _performance(self, turns: list[_TurnMarks]) -> dict[str, Any]:
        by_method: dict[tuple[str, str], list[int]] = {}
        counts: dict[tuple[str, str], list[int]] = {}  # [requests, errors, unanswered]
        for b in self.bars:
            key = (b.method, b.direction)
            c = counts.setdefault(key, [0, 0, 0])
            c[0] += 1
            c[1] += b.error
            if b.end_ns is None:
                c[2] += 1
            else:
                by_method.setdefault(key, []).append(b.end_ns - b.start_ns)
        methods = []
        for (method, direction), (n, errors, unanswered) in sorted(counts.items()):
            values = sorted(by_method.get((method, direction), []))
            methods.append(
                {
                    "method": method,
                    "direction": direction,
                    "count": n,
                    "errors": errors,
                    "unanswered": unanswered,
                    **{f"p{q}Ms": _ms(percentile(values, q / 100)) for q in (50, 95, 99)},
                    "maxMs": _ms(values[-1] if values else None),
                }
            )
        durations = sorted(m.turn.duration_ns for m in turns if m.turn.duration_ns is not None)
        first_chunks = sorted(
            m.first_chunk_ns - m.turn.start_ns for m in turns if m.first_chunk_ns is not None
        )
        answered = [b for b in self.bars if b.end_ns is not None and b.end_seq is not None]
        slowest = sorted(answered, key=lambda b: b.end_ns - b.start_ns, reverse=True)  # type: ignore[operator]
        return {
            "methods": methods,
            "turns": {
                "count": len(turns),
                "finished": len(durations),
                **{f"p{q}Ms": _ms(percentile(durations, q / 100)) for q in (50, 95, 99)},
                "maxMs": _ms(durations[-1] if durations else None),
                "firstChunkP50Ms": _ms(percentile(first_chunks, 0.5)),
            },
            "slowest": [b.to_json(self.origin_ns or 0) for b in slowest[:SLOWEST]],
        }


def prompt_text(params: Any) -> str | None:
    """The text blocks of a ``session/prompt``'s ``prompt``, on one line and cut at
    :data:`PROMPT_TEXT_MAX` characters (``None`` without any text)."""
    blocks = params.get("prompt") if isinstance(params, dict) else None
    if not isinstance(blocks, list):
        return None
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    text = " ".join(" ".join(texts).split())
    if not text:
        return None
    return text if len(text) <= PROMPT_TEXT_MAX else text[: PROMPT_TEXT_MAX - 1] + "\u2026"


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)
