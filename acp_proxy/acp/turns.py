"""Turns as one state machine, every transition in one table (sans-I/O).

A turn is one stretch of foreground work in a session: from ``session/prompt`` (or a
``running`` state update the agent sends with no prompt open) to its end: in v1 the prompt's
response (``stopReason``); in v2 the ``idle`` state update (the prompt's response only carries
the inserted ``messageId``; an error response ends a turn the agent never reported running).

:data:`TRANSITIONS` is the whole machine: (the phase of the turn an event is about, the event)
-> (the phase after it, what happens to the turn). A pair that is not in the table changes
nothing: a recording may hold any order of frames, and judging it is the conformance
checker's job, not the tracker's. :class:`TurnTracker` applies the table to the sessions of
one connection; the model, the waterfall, statistics, spans and the checker read turns
through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Phase = Literal["none", "prompted", "running", "agent"]
"""The phase of a turn: ``none`` (no turn open), ``prompted`` (a prompt's turn, no ``running``
seen), ``running`` (a prompt's turn the agent reported running), ``agent`` (a turn the agent
started with ``running`` while no prompt was open)."""

Event = Literal["prompt", "running", "idle", "answered", "rejected"]
"""What happens to a session: a ``session/prompt`` request, a ``running`` or ``idle`` state
update, the prompt's response ending its turn (``answered``: v1) or an error response to a v2
prompt (``rejected``)."""

Action = Literal["start", "adopt", "mark-running", "end", "keep"]
"""What a transition does: ``start`` a new turn (the open one, if any, is left as it is),
``adopt`` the agent's turn as the prompt's (its ``running`` came before the prompt was
inserted), ``mark-running``, ``end`` the turn, or ``keep`` it as it is."""

TRANSITIONS: dict[tuple[Phase, Event], tuple[Phase, Action]] = {
    ("none", "prompt"): ("prompted", "start"),
    ("prompted", "prompt"): ("prompted", "start"),
    ("running", "prompt"): ("prompted", "start"),
    ("agent", "prompt"): ("running", "adopt"),
    ("none", "running"): ("agent", "start"),
    ("prompted", "running"): ("running", "mark-running"),
    ("running", "running"): ("running", "mark-running"),
    ("agent", "running"): ("agent", "mark-running"),
    ("prompted", "idle"): ("none", "end"),
    ("running", "idle"): ("none", "end"),
    ("agent", "idle"): ("none", "end"),
    ("prompted", "answered"): ("none", "end"),
    ("running", "answered"): ("none", "end"),
    ("prompted", "rejected"): ("none", "end"),
    ("running", "rejected"): ("running", "keep"),
}
"""Every transition of a turn: (phase, event) -> (phase after, action)."""


def prompt_ends_turn(version: int | None, result: Any) -> bool:
    """Whether a prompt's response ends its turn: v1 (or, version unknown, a result with a
    ``stopReason``); a v2 result only reports the inserted message."""
    if version == 1:
        return True
    return version is None and isinstance(result, dict) and "stopReason" in result


@dataclass(slots=True)
class Turn:
    """One stretch of foreground work in a session.

    ``origin`` is ``prompt`` (started by ``session/prompt``) or ``agent`` (started by a
    ``running`` state update without a pending prompt). ``end_ns`` stays ``None`` for a turn
    that never ended in the recording.
    """

    session_id: str
    origin: str
    start_seq: int | None
    start_ns: int
    prompt_id: str | None = None
    message_id: str | None = None
    end_seq: int | None = None
    end_ns: int | None = None
    stop_reason: Any = None
    error: Any = None
    cancelled: bool = False
    running: bool = False
    """Whether a ``running`` state update was seen for this turn."""

    @property
    def phase(self) -> Phase:
        """This turn's phase in :data:`TRANSITIONS` (while it is open)."""
        if self.prompt_id is None:
            return "agent"
        return "running" if self.running else "prompted"

    @property
    def duration_ns(self) -> int | None:
        return None if self.end_ns is None else self.end_ns - self.start_ns

    def to_json(self) -> dict[str, Any]:
        duration = self.duration_ns
        return {
            "sessionId": self.session_id,
            "origin": self.origin,
            "startSeq": self.start_seq,
            "endSeq": self.end_seq,
            "promptId": self.prompt_id,
            "messageId": self.message_id,
            "stopReason": self.stop_reason,
            "error": self.error,
            "cancelled": self.cancelled,
            "durationMs": None if duration is None else round(duration / 1e6, 3),
        }


@dataclass(slots=True)
class TurnTracker:
    """The turns of one connection's sessions, by :data:`TRANSITIONS`.

    ``version`` is the negotiated protocol version (``None`` while unknown): it decides
    whether a prompt's response ends its turn (:func:`prompt_ends_turn`).
    """

    version: int | None = None
    open: dict[str, Turn] = field(default_factory=dict)
    _by_prompt: dict[str, Turn] = field(default_factory=dict)

    def _step(
        self, turn: Turn | None, event: Event, session_id: str, seq: int | None, ns: int
    ) -> tuple[Turn | None, Action | None]:
        """Apply the table to ``turn`` (``None``: no turn open); return the turn acted on."""
        step = TRANSITIONS.get(("none" if turn is None else turn.phase, event))
        if step is None:
            return turn, None
        action = step[1]
        if action == "start":
            turn = Turn(session_id, "prompt" if event == "prompt" else "agent", seq, ns)
            turn.running = event == "running"
            self.open[session_id] = turn
        elif turn is None:
            return None, None
        elif action == "adopt":
            turn.origin = "prompt"
        elif action == "mark-running":
            turn.running = True
        elif action == "end":
            turn.end_seq = seq
            turn.end_ns = ns
            if self.open.get(turn.session_id) is turn:
                del self.open[turn.session_id]
            if turn.prompt_id is not None:
                self._by_prompt.pop(turn.prompt_id, None)
        return turn, action

    def prompt(self, session_id: str, prompt_id: str, seq: int | None, ns: int) -> None:
        """A ``session/prompt`` request (``prompt_id``: its id text)."""
        turn, _action = self._step(self.open.get(session_id), "prompt", session_id, seq, ns)
        if turn is not None:
            turn.prompt_id = prompt_id
            self._by_prompt[prompt_id] = turn

    def prompt_result(self, prompt_id: str, response: Any, seq: int | None, ns: int) -> Turn | None:
        """Handle the prompt's response; return the turn if it ended there (v1 or error)."""
        turn = self._by_prompt.pop(prompt_id, None)
        if turn is None:
            return None
        result = response.get("result") if isinstance(response, dict) else None
        error = response.get("error") if isinstance(response, dict) else None
        if isinstance(result, dict) and isinstance(result.get("messageId"), str):
            turn.message_id = result["messageId"]
        if prompt_ends_turn(self.version, result):
            turn.stop_reason = result.get("stopReason") if isinstance(result, dict) else None
            turn.error = error
            event: Event = "answered"
        elif error is not None:
            turn.error = error
            turn.stop_reason = None
            event = "rejected"
        else:
            return None
        ended, action = self._step(turn, event, turn.session_id, seq, ns)
        return ended if action == "end" else None

    def state(
        self, session_id: str, state: Any, update: dict[str, Any], seq: int | None, ns: int
    ) -> Turn | None:
        """Handle a state update; return the turn it ended, if any."""
        if state not in ("running", "idle"):
            return None
        turn, action = self._step(self.open.get(session_id), state, session_id, seq, ns)
        if action != "end" or turn is None:
            return None
        turn.stop_reason = update.get("stopReason")
        turn.error = update.get("error")
        return turn

    def cancel(self, session_id: str) -> None:
        """A ``session/cancel``: the open turn is marked cancelled (its end says how)."""
        turn = self.open.get(session_id)
        if turn is not None:
            turn.cancelled = True

    def unfinished(self) -> list[Turn]:
        return list(self.open.values())
