"""What the checker remembers of a connection: open requests and each session's open work.

:class:`CheckerState` declares that state (set up by
:class:`~acp_proxy.acp.conformance.checker.ConnectionChecker`) for the areas built on it, and
reads the peers' capabilities from ``initialize``; the small JSON readers the areas share are
here too.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_proxy.acp.conformance.findings import Reporter
from acp_proxy.acp.exchanges import Exchanges
from acp_proxy.acp.turns import TurnTracker
from acp_proxy.wire.frame import Direction
from acp_proxy.wire.jsonrpc import Message

_Notification = tuple[int, str, int]
"""A recent notification: seq, label, frame count when it came."""

FrameTimes = Callable[[list[int]], Mapping[int, int]]
"""The monotonic ns of the frames of the given sequence numbers (those it knows): the few
times a finding names (an answer paired by time), asked for when it is made."""


@dataclass(slots=True)
class _Pending:
    method: str
    seq: int
    session_id: str | None
    cancel_seq: int | None = None  # $/cancel_request
    must_cancel_seq: int | None = None  # session/cancel while a permission request was open
    replay: str | None = None  # load | replay | plain (session/load, session/resume)


@dataclass(slots=True)
class _Session:
    sid: str
    # replay windows
    window: str | None = None  # load | replay | plain, between request and response
    window_seq: int = 0
    after: str | None = None  # the same, after a successful response until the next prompt
    after_seq: int = 0
    # prompts
    prompts_pending: int = 0
    turn_ended_seq: int | None = None  # v1: the prompt response that ended the last turn
    v1_cancel_seq: int | None = None
    # v2 foreground work
    state: str | None = None
    activity_seq: int | None = None  # evidence of foreground work since the last idle
    activity_prompt: bool = False  # ... and that evidence is a session/prompt
    cancel_seq: int | None = None
    work_entities: set[tuple[str, str]] = field(default_factory=set)
    tool_status: dict[str, tuple[str | None, int]] = field(default_factory=dict)
    cancelled_entities: set[tuple[str, str]] = field(default_factory=set)
    cancelled_idle_seq: int = 0
    # entities
    # user messages not (yet) returned by a session/prompt: retired when one returns them
    user_ids_seen: set[str] = field(default_factory=set)
    # every messageId a session/prompt returned (kept for entity.id-reuse: what grows)
    prompt_message_ids: dict[str, int] = field(default_factory=dict)
    awaiting_user: dict[str, int] = field(default_factory=dict)
    v1_tool_calls: set[str] = field(default_factory=set)
    compactions_open: dict[str, int] = field(default_factory=dict)
    compactions_done: set[str] = field(default_factory=set)


class CheckerState(Reporter):
    """The open state of one connection, shared by every area of the checker."""

    transport: str | None
    _first_seen: bool
    _exchanges: Exchanges[_Pending, tuple[int, Message]]  # early responses: (seq, message)
    _pending: dict[tuple[Direction, str], _Pending]
    _answered: OrderedDict[tuple[Direction, str], int]
    _sessions: dict[str, _Session]
    # answers with id null paired by time: (frame count, seq, the notification)
    _null_runs: dict[Direction, list[tuple[int, int, _Notification]]]
    _notifications: dict[Direction, deque[_Notification]]
    _turns: TurnTracker  # v1 turns: a prompt's response ends its turn (acp.turns)

    frame_times: FrameTimes | None  # where the times a finding names come from
    _fed_ns: dict[int, int]  # the times of the last frames fed with feed(), by seq

    def _times(self, seqs: list[int]) -> Mapping[int, int]:
        """The monotonic ns of the frames ``seqs`` that are known: from :attr:`frame_times`,
        else those :meth:`feed` was given (a frame of unknown time is named without it)."""
        if self.frame_times is not None:
            return self.frame_times(seqs)
        return self._fed_ns

    @property
    def _client_caps(self) -> dict[str, Any] | None:
        """The client's capabilities (``{}`` if not an object); ``None`` before initialize."""
        if not self.facts.request_seen:
            return None
        caps = self.facts.client_capabilities
        return caps if isinstance(caps, dict) else {}

    @property
    def _agent_caps(self) -> dict[str, Any] | None:
        """The agent's capabilities (``{}`` if not an object); ``None`` until it answered."""
        if not self.facts.result_seen:
            return None
        caps = self.facts.agent_capabilities
        return caps if isinstance(caps, dict) else {}

    def _session(self, sid: str) -> _Session:
        s = self._sessions.get(sid)
        if s is None:
            s = self._sessions[sid] = _Session(sid)
        return s


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _str(obj: Any, key: str) -> str | None:
    value = _get(obj, key)
    return value if isinstance(value, str) else None


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _short(value: Any) -> str:
    if value is None:
        return "missing or null"
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
