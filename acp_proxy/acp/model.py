"""The ACP model of one connection: frames in, sessions, exchanges and turns out (sans-I/O).

:class:`ConnectionModel` is fed a connection's frames in order (direction, raw bytes,
sequence number, monotonic nanoseconds) and maintains:

- ``protocol_version`` and client/agent info from ``initialize``
  (:class:`~acp_proxy.acp.exchanges.InitializeFacts`: the agent's answer wins);
- requests paired with their responses **per direction** (the client's id 1 and the
  agent's id 1 are different requests) by :class:`~acp_proxy.acp.exchanges.Exchanges`, as
  :class:`~acp_proxy.acp.timeline.Exchange` items with latency; a response that answers no
  request within the early window becomes an ``orphan_response`` event;
- one :class:`~acp_proxy.acp.timeline.SessionTimeline` per sessionId (learnt from params and
  from ``session/new`` / ``session/fork`` results; ``session/load`` and ``session/resume``
  carry it in their params), plus :attr:`ConnectionModel.connection` for what belongs to no
  session (``initialize``, invalid frames, orphan responses outside a turn);
- frames that break JSON-RPC (invalid frames, responses that answer no request, such as a
  peer's ``"id": null`` error answers) arriving while a session's turn or replay is open go
  into *that* session's timeline, in place, so every conversation view shows them; a
  response with an unusable id (``null``) answers nothing at once (each one is kept);
- replay windows: updates between a ``session/load`` (or a v2 ``session/resume`` with
  ``replayFrom``) request and its response are marked ``replayed``;
- turns (:class:`~acp_proxy.acp.turns.Turn`, by the table of :mod:`acp_proxy.acp.turns`): from
  ``session/prompt`` (or an agent-initiated ``running``) to the v1 prompt result or the v2
  ``idle`` state update, with stop reason and duration.

:meth:`ConnectionModel.feed` returns the sessions that just reached a boundary (a turn
ended, a replay window closed) so renderers can print and :meth:`drain` them as they go.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from acp_proxy.acp.exchanges import Exchanges, InitializeFacts, session_id_of
from acp_proxy.acp.timeline import Event, Exchange, SessionTimeline
from acp_proxy.acp.turns import Turn, TurnTracker
from acp_proxy.wire.frame import Direction, Frame, other_direction
from acp_proxy.wire.jsonrpc import Message
from acp_proxy.wire.surrogates import classify_encodable

SESSION_RESULT_METHODS = frozenset({"session/new", "session/fork", "session/create"})
"""Methods whose result carries a new ``sessionId``."""


def replays_history(method: str, params: Any, version: int | None) -> bool:
    """Whether the agent replays history before answering this request."""
    if method == "session/load":
        return True
    if method == "session/resume" and version != 1 and isinstance(params, dict):
        return params.get("replayFrom") is not None
    return False


@dataclass(slots=True)
class _Pending:
    exchange: Exchange
    timeline: SessionTimeline


_Early = tuple[Any, int | None, int, SessionTimeline]
"""A held early response: payload, seq, mono_ns and the conversation it arrived in."""

UNUSABLE_IDS = frozenset({"null", "true", "false"})
"""Response id texts no request can be waiting for: such a response answers nothing."""


class ConnectionModel:
    """Feed one connection's frames in order; read sessions, exchanges and turns."""

    def __init__(self, connection_id: int | None = None) -> None:
        self.connection_id = connection_id
        self.facts = InitializeFacts()
        self.connection = SessionTimeline(None)
        self.sessions: dict[str, SessionTimeline] = {}
        self.turns: list[Turn] = []
        """Turns that ended, in the order they ended."""
        self.tracker = TurnTracker()
        self.frames = 0
        self._last_timeline = self.connection
        self._last_session: SessionTimeline | None = None
        # early responses are held as (payload, seq, mono_ns, the conversation they arrived in)
        self._exchanges: Exchanges[_Pending, _Early] = Exchanges()

    @property
    def protocol_version(self) -> int | None:
        """The agent's answered ``initialize`` version, else the client's requested one."""
        return self.facts.protocol_version

    @property
    def client_info(self) -> Any:
        return self.facts.client_info

    @property
    def agent_info(self) -> Any:
        return self.facts.agent_info

    # -- feeding -------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionTimeline:
        tl = self.sessions.get(session_id)
        if tl is None:
            tl = SessionTimeline(session_id)
            self.sessions[session_id] = tl
        return tl

    def feed(self, frame: Frame) -> list[str | None]:
        """Fold one frame; return the sessions (``None``: the connection) at a boundary."""
        direction, raw, seq, mono_ns = frame.direction, frame.raw, frame.seq, frame.mono_ns
        self.frames += 1
        msg = classify_encodable(raw)
        if msg.kind == "batch":
            out: list[str | None] = []
            for item in msg.items:
                out.extend(self._message(direction, item, seq, mono_ns, raw))
        else:
            out = self._message(direction, msg, seq, mono_ns, raw)
        for key, early in self._exchanges.tick():
            out.extend(self._orphan(key, early))
        return out

    def _message(
        self, direction: Direction, msg: Message, seq: int | None, ns: int, raw: bytes
    ) -> list[str | None]:
        if msg.kind == "invalid":
            text = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
            target = self._conversation()
            target.interject(
                Event("invalid", text, seq, extra={"reason": msg.reason, "direction": direction})
            )
            return [None] if target is self.connection else []
        if msg.kind == "request":
            return self._request(direction, msg, seq, ns)
        if msg.kind == "response":
            return self._response(direction, msg, seq, ns)
        return self._notification(direction, msg, seq, ns)

    def _request(
        self, direction: Direction, msg: Message, seq: int | None, ns: int
    ) -> list[str | None]:
        assert msg.id is not None and msg.method is not None
        method, params = msg.method, msg.params
        sid = session_id_of(params)
        tl = self.session(sid) if sid is not None else self.connection
        self._last_timeline = tl
        if sid is not None:
            self._last_session = tl
        if method == "initialize":
            self.facts.observe_request(params)
            self.tracker.version = self.facts.protocol_version
        ex = Exchange(direction, msg.id, method, params, seq, ns)
        tl.add_event(ex)
        if (direction, msg.id) in self._exchanges.pending:
            ex.extra["problem"] = "request id reused while an earlier request is pending"
        if sid is not None and method == "session/prompt" and direction == "c2a":
            self.tracker.prompt(sid, msg.id, seq, ns)
        if sid is not None and replays_history(method, params, self.protocol_version):
            tl.replaying = True
        pending = _Pending(ex, tl)
        early = self._exchanges.request(direction, msg.id, pending)
        if early is not None:
            ex.extra["reordered"] = True  # the response was recorded first
            return self._answer(pending, *early[:3])
        return []

    def _response(
        self, direction: Direction, msg: Message, seq: int | None, ns: int
    ) -> list[str | None]:
        assert msg.id is not None
        pending = self._exchanges.answer(direction, msg.id)
        if pending is not None:
            return self._answer(pending, msg.payload, seq, ns)
        early: _Early = (msg.payload, seq, ns, self._conversation())
        key = (other_direction(direction), msg.id)
        if msg.id in UNUSABLE_IDS:  # no request can come for it: it answers nothing now
            return self._orphan(key, early)
        displaced = self._exchanges.held.get(key)
        out: list[str | None] = []
        if displaced is not None:  # a second early response with the same id: keep both
            del self._exchanges.held[key]
            out = self._orphan(key, displaced[1])
        self._exchanges.hold_early(direction, msg.id, early)
        return out

    def _answer(
        self, pending: _Pending, payload: Any, seq: int | None, ns: int
    ) -> list[str | None]:
        ex, tl = pending.exchange, pending.timeline
        self._last_timeline = tl
        ex.response = payload
        ex.response_seq = seq
        ex.response_mono_ns = ns
        ex.answered = True
        result = payload.get("result") if isinstance(payload, dict) else None
        boundaries: list[str | None] = []
        tl.end_group()
        if tl is self.connection:
            boundaries.append(None)
        if ex.drained:  # printed while pending: show it again, now with its answer
            ex.drained = False
            ex.extra["late"] = True
            tl.add_event(ex)
        if ex.method == "initialize" and not (isinstance(payload, dict) and "error" in payload):
            self.facts.observe_result(result)
            self.tracker.version = self.facts.protocol_version
        if ex.method in SESSION_RESULT_METHODS or (
            tl is self.connection and isinstance(result, dict)
        ):
            sid = session_id_of(result)
            if sid is not None:
                ex.extra["sessionId"] = sid
                self.session(sid)
        if tl.replaying and replays_history(ex.method, ex.params, self.protocol_version):
            tl.replaying = False
            boundaries.append(tl.session_id)
        if ex.method == "session/prompt" and ex.direction == "c2a":
            turn = self.tracker.prompt_result(ex.id, payload, seq, ns)
            if turn is not None:
                self.turns.append(turn)
                boundaries.append(tl.session_id)
        return boundaries

    def finish(self) -> None:
        """End of the recording: responses that never met their request become events."""
        for key, early in self._exchanges.expire_all():
            self._orphan(key, early)

    def _conversation(self) -> SessionTimeline:
        """Where a frame that belongs to no session goes: the last session fed while its
        turn or replay is open (a peer's stray answer breaks into that conversation), else
        the connection."""
        tl = self._last_session
        if tl is not None and (tl.replaying or tl.session_id in self.tracker.open):
            return tl
        return self.connection

    def _orphan(self, key: tuple[Direction, str], early: _Early) -> list[str | None]:
        """A response that answered no request (within the early window) as an event in
        the conversation it arrived in; the boundary to report."""
        req_direction, rid = key
        payload, seq, _ns, target = early
        target.interject(
            Event(
                "orphan_response",
                payload,
                seq,
                extra={"direction": other_direction(req_direction), "id": rid},
            )
        )
        return [None] if target is self.connection else []

    def _notification(
        self, direction: Direction, msg: Message, seq: int | None, ns: int
    ) -> list[str | None]:
        params = msg.params
        sid = session_id_of(params)
        tl = self.session(sid) if sid is not None else self.connection
        self._last_timeline = tl
        if sid is not None:
            self._last_session = tl
        if msg.method == "session/update" and isinstance(params, dict) and "update" in params:
            update = params["update"]
            item = tl.apply(update, seq=seq)
            if tl.replaying:
                item.replayed = True
            if isinstance(update, dict) and update.get("sessionUpdate") == "state_update":
                if sid is None:
                    return []
                turn = self.tracker.state(sid, update.get("state"), update, seq, ns)
                if turn is not None:
                    self.turns.append(turn)
                    return [sid]
            return []
        event = Event(
            "notification",
            params,
            seq,
            extra={"method": msg.method, "direction": direction},
        )
        tl.add_event(event)
        if msg.method == "session/cancel" and sid is not None:
            self.tracker.cancel(sid)
        return [tl.session_id] if tl is self.connection else []

    def transport_event(
        self,
        kind: str,
        detail: Any,
        *,
        session_id: str | None,
        with_last_frame: bool = False,
        **extra: Any,
    ) -> list[str | None]:
        """A fact the transport recorded (an HTTP request, an SSE stream, a WebSocket
        close...) as a ``transport`` event (``variant``: its kind) at this point of the
        timeline of ``session_id`` when that session is known, else (``with_last_frame``:
        the timeline of the last frame fed, e.g. the POST that carried it) of the
        connection. ``extra`` (its place, its text) goes into the event's JSON."""
        tl = self.sessions.get(session_id) if session_id is not None else None
        if tl is None:
            tl = self._last_timeline if with_last_frame else self.connection
        target = tl
        target.add_event(Event("transport", detail, None, variant=kind, extra=dict(extra)))
        return [None] if target is self.connection else []

    # -- reading -------------------------------------------------------------------------

    def timelines(self) -> Iterator[SessionTimeline]:
        """The connection-level timeline, then each session in order of first appearance."""
        yield self.connection
        yield from self.sessions.values()

    def pending_exchanges(self) -> list[Exchange]:
        return [p.exchange for p in self._exchanges.pending.values()]

    def to_json(self, session_ids: set[str] | None = None) -> dict[str, Any]:
        """Plain data for ``show --json`` and the web inspector."""
        sessions = [
            tl.to_json()
            for sid, tl in self.sessions.items()
            if session_ids is None or sid in session_ids
        ]
        turns = [*self.turns, *self.tracker.unfinished()]
        return {
            "connectionId": self.connection_id,
            "protocolVersion": self.protocol_version,
            "clientInfo": self.client_info,
            "agentInfo": self.agent_info,
            "frames": self.frames,
            "items": [item.to_json() for item in self.connection.items],
            "sessions": sessions,
            "turns": [
                t.to_json() for t in turns if session_ids is None or t.session_id in session_ids
            ],
        }
