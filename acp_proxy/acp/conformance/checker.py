"""The conformance engine behind ``acp-proxy check`` (sans-I/O, streaming).

Feed a :class:`ConnectionChecker` one connection's frames in order and call
:meth:`ConnectionChecker.finish` at the end; each call returns the :class:`Finding` objects
it produced. Rules are the table in :mod:`acp_proxy.acp.rules`; the checker keeps only open
state (pending requests, sessions' current work, entity ids, a few recent notifications) so
memory does not grow with the length of a recording, and at most ``max_per_rule`` findings
per rule and connection (the rest are only counted).

Each finding names the side that broke the rule (``client`` or ``agent``), every frame it
is about, and quotes the rule as it applies to that side; close findings of one rule and
side are grouped into one that names all their frames (:data:`GROUP_GAP`).

Requests are paired with responses, and ``initialize`` read, by
:mod:`acp_proxy.acp.exchanges` (per direction, exact id text, a bounded window for
responses recorded before their request), as in every other reader. Version-specific rules
follow the negotiated protocol version (the agent's answer wins; no initialize means v1);
the ``session/update`` variant lists are those of :mod:`acp_proxy.acp.updates`.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_proxy.acp.exchanges import Exchanges, InitializeFacts
from acp_proxy.acp.rules import RULE_BY_ID, TIERS, Side, Tier
from acp_proxy.acp.updates import (
    HISTORY_VARIANTS,
    KNOWN_VARIANTS_V1,
    KNOWN_VARIANTS_V2,
    MESSAGE_VARIANTS,
    V1_TURN_VARIANTS,
    entity_key,
)
from acp_proxy.wire.frame import A2C, C2A, Direction, other_direction
from acp_proxy.wire.jsonrpc import Message, id_json_text, parse_json
from acp_proxy.wire.surrogates import classify_encodable


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


MAX_LINE_BYTES = 64 * 1024 * 1024
"""Lines above this size get a ``framing.size`` info finding (the conformance kit's limit)."""

ANSWERED_MEMORY = 4096
"""How many answered request ids per connection are remembered to spot duplicate responses."""

STOP_REASONS_V1 = _words("end_turn max_tokens max_turn_requests refusal cancelled")
STOP_REASONS_V2 = STOP_REASONS_V1 | {"error"}
STATES = frozenset({"running", "idle", "requires_action"})
SEVERITIES = frozenset({"info", "warning", "error"})
COMPACTION_STATUSES = frozenset({"in_progress", "completed", "failed", "cancelled"})
COMPACTION_DONE = frozenset({"completed", "failed", "cancelled"})
TOOL_STATUSES_V1 = frozenset({"pending", "in_progress", "completed", "failed"})
TOOL_STATUSES_V2 = TOOL_STATUSES_V1 | {"cancelled"}
TOOL_DONE = frozenset({"completed", "failed", "cancelled"})
TOOL_KINDS = _words("read edit delete move search execute think fetch switch_mode other")
NULL_ID_ERROR_CODES = frozenset({-32700, -32600})
"""Error responses that may carry ``"id": null`` (the request could not be read)."""


GROUP_GAP = 8
"""Findings of one rule and side that frames this close together name each other (one
grouped finding: "#16 and #17 answer notifications ..."), up to :data:`GROUP_MAX` frames."""

GROUP_MAX = 10

RUN_MAX = 100
"""At most this many repeats of one finding are one finding (memory stays bounded)."""

RECENT_NOTIFICATIONS = 16
"""How many of a side's latest notifications (of the last :data:`GROUP_GAP` x 2 frames) are
kept to name the one a response with id null answers: the one its error text names, else
the nearest one before it (a run of such answers takes the run's nearest ones in order)."""

_Notification = tuple[int, str, int, int]
"""A recent notification: seq, label, frame count when it came, monotonic ns."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One conformance finding: which rule, how bad, who broke it, where and why.

    ``side`` is the peer that broke the rule (``client`` or ``agent``; ``None`` for notes
    about the recording itself), ``seqs`` every frame the finding names (``#seq`` as in
    ``acp-proxy dump``), and ``reason`` says what happened, starting with the side.
    :attr:`rule_text` quotes the rule as it applies to that side.
    """

    rule: str
    tier: Tier
    connection_id: int
    seqs: tuple[int, ...]
    reason: str
    session_id: str | None = None
    side: Side | None = None

    @property
    def rule_text(self) -> str:
        return RULE_BY_ID[self.rule].text_for(self.side)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "tier": self.tier,
            "side": self.side,
            "connection": self.connection_id,
            "seqs": list(self.seqs),
            "session": self.session_id,
            "reason": self.reason,
            "rule_text": self.rule_text,
        }


@dataclass(slots=True)
class _Group:
    """Findings of one rule and side being gathered into one (see :data:`GROUP_GAP`)."""

    rule: str
    side: Side | None
    session_id: str | None
    frames: list[int]  # the frames that broke the rule
    seqs: set[int]  # every frame named
    subjects: list[str]
    last: int  # frame count when the group last grew


@dataclass(slots=True)
class _Run:
    """A finding repeated frame after frame (one rule, side, session, reason, and the same
    frames but the last): reported once, naming the run's frames (see :data:`GROUP_GAP`)."""

    first: Finding
    lasts: list[int]  # the last frame each repeat names
    at: int  # frame count when the run last grew

    def repeated_by(self, found: Finding, frames: int) -> bool:
        first = self.first
        return (
            frames - self.at <= GROUP_GAP
            and (found.rule, found.side, found.session_id, found.reason)
            == (first.rule, first.side, first.session_id, first.reason)
            and found.seqs[:-1] == first.seqs[:-1]
            and bool(found.seqs)
            and found.seqs[-1] > self.lasts[-1]
            and len(self.lasts) < RUN_MAX
        )

    def finding_for_all(self) -> Finding:
        first = self.first
        if len(self.lasts) == 1:
            return first
        reason = f"{first.reason} ({len(self.lasts)} times: {frames_text(self.lasts, ', ')})"
        seqs = (*first.seqs[:-1], *self.lasts)
        return Finding(
            first.rule, first.tier, first.connection_id, seqs, reason, first.session_id, first.side
        )


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
    turn_ended_seq: int | None = None  # v1: last prompt response with no prompt pending
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
    user_ids_seen: set[str] = field(default_factory=set)
    prompt_message_ids: dict[str, int] = field(default_factory=dict)
    awaiting_user: dict[str, int] = field(default_factory=dict)
    v1_tool_calls: set[str] = field(default_factory=set)
    compactions_open: dict[str, int] = field(default_factory=dict)
    compactions_done: set[str] = field(default_factory=set)


class ConnectionChecker:
    """Checks one connection's frames against the rule table, streaming.

    ``transport`` (``stdio``, ``websocket``...) enables the line-ending rules for stdio;
    ``frames_dropped`` (from the connection row) adds a ``recording.incomplete`` note.
    """

    def __init__(
        self,
        connection_id: int,
        *,
        transport: str | None = None,
        frames_dropped: int = 0,
        max_per_rule: int = 100,
    ) -> None:
        self.connection_id = connection_id
        self.transport = transport
        self.max_per_rule = max_per_rule
        self.frames = 0
        self.counts: dict[str, int] = dict.fromkeys(TIERS, 0)
        self.per_rule: dict[str, int] = {}
        self.suppressed: dict[str, int] = {}
        self.facts = InitializeFacts()
        self._first_seen = False
        # early responses are held as (seq, message)
        self._exchanges: Exchanges[_Pending, tuple[int, Message]] = Exchanges()
        self._pending = self._exchanges.pending  # the same dict, read here often
        self._answered: OrderedDict[tuple[Direction, str], int] = OrderedDict()
        self._sessions: dict[str, _Session] = {}
        self._out: list[Finding] = []
        self._sender: Side | None = None  # the side that sent the frame being checked
        self._group: _Group | None = None
        self._run: _Run | None = None
        self._now_ns = 0  # the monotonic time of the frame being checked
        # each side's answers with id null paired by time since the other side's last
        # notification: (frame count, ns, the notification it is paired with)
        self._null_runs: dict[Direction, list[tuple[int, int, _Notification]]] = {
            C2A: [],
            A2C: [],
        }
        # each side's latest notifications not yet answered
        self._notifications: dict[Direction, deque[_Notification]] = {
            C2A: deque(maxlen=RECENT_NOTIFICATIONS),
            A2C: deque(maxlen=RECENT_NOTIFICATIONS),
        }
        self._finished = False
        if frames_dropped:
            self._report(
                "recording.incomplete",
                (),
                f"{frames_dropped} frame(s) of this connection were not recorded",
            )

    # -- public API ------------------------------------------------------------------------

    @property
    def negotiated_version(self) -> int | None:
        """The protocol version from ``initialize`` (result, else request); None if unseen."""
        return self.facts.protocol_version

    @property
    def effective_version(self) -> int:
        """The version the rules follow: the negotiated one, v1 when there was none."""
        return self.facts.protocol_version or 1

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

    def feed(
        self, seq: int, direction: Direction, raw: bytes, mono_ns: int = 0, *, binary: bool = False
    ) -> list[Finding]:
        """Check one frame; return the findings it produced (possibly none)."""
        self.frames += 1
        self._now_ns = mono_ns
        self._sender = _side(direction)
        if binary:
            self._report("framing.binary", (seq,), f"binary WebSocket frame of {len(raw)} bytes")
            return self._take()
        if len(raw) > MAX_LINE_BYTES:
            self._report("framing.size", (seq,), f"frame of {len(raw)} bytes (over 64 MiB)")
        if self.transport == "stdio":
            if raw.endswith(b"\r\n"):
                self._report("framing.crlf", (seq,), "line ends with \\r\\n")
            elif not raw.endswith(b"\n"):
                self._report("framing.unterminated", (seq,), "last line has no newline")
        msg = classify_encodable(raw)
        if msg.kind == "invalid":
            self._invalid(seq, msg)
        elif msg.kind == "batch":
            if self.effective_version < 2:
                self._report(
                    "jsonrpc.batch", (seq,), f"a batch of {len(msg.items)} on a v1 connection"
                )
            for item in msg.items:
                if item.kind == "invalid":
                    self._invalid(seq, item)
                else:
                    self._message(seq, direction, item)
        else:
            self._message(seq, direction, msg)
        self._orphans(self._exchanges.tick())
        if self._group is not None and self.frames - self._group.last > GROUP_GAP:
            self._flush_group()
        if self._run is not None and self.frames - self._run.at > GROUP_GAP:
            self._flush_run()
        return self._take()

    def finish(self) -> list[Finding]:
        """End of the connection: report what never completed."""
        if self._finished:
            return []
        self._finished = True
        self._sender = None
        self._orphans(self._exchanges.expire_all())
        self._flush_group()
        for (direction, rid), req in self._pending.items():
            who = _side(other_direction(direction))
            if req.method.startswith("_"):
                self._report(
                    "jsonrpc.extension-answered",
                    (req.seq,),
                    f"extension request {req.method} id {rid} was never answered by the {who}",
                    req.session_id,
                    who,
                )
                continue
            extra = ""
            if req.cancel_seq is not None:
                extra = (
                    f" (cancelled by $/cancel_request #{req.cancel_seq}: still needs a response)"
                )
            self._report(
                "jsonrpc.request-answered",
                (req.seq,) if req.cancel_seq is None else (req.seq, req.cancel_seq),
                f"{req.method} id {rid} got no response from the {who} before the recording "
                f"ended{extra}",
                req.session_id,
                who,
            )
        for s in self._sessions.values():
            for mid, seq in s.awaiting_user.items():
                self._report(
                    "v2.prompt-user-message",
                    (seq,),
                    f"no user_message/user_message_chunk with messageId {mid!r} (returned by "
                    "session/prompt)",
                    s.sid,
                )
            if s.cancel_seq is not None:
                self._report(
                    "v2.cancel-idle",
                    (s.cancel_seq,),
                    "session/cancel was never followed by an idle state_update",
                    s.sid,
                )
            elif s.state in ("running", "requires_action"):
                self._report(
                    "v2.work-left-running",
                    (s.activity_seq,) if s.activity_seq else (),
                    f"session still {s.state} when the recording ended",
                    s.sid,
                )
            for cid, seq in s.compactions_open.items():
                self._report(
                    "compaction.terminal-status",
                    (seq,),
                    f"compaction {cid!r} never reached completed/failed/cancelled",
                    s.sid,
                )
        self._flush_run()
        return self._take()

    # -- reporting -------------------------------------------------------------------------

    def _report(
        self,
        rule_id: str,
        seqs: tuple[int, ...],
        reason: str,
        session_id: str | None = None,
        side: Side | None = None,
    ) -> None:
        """Report a finding; ``side`` defaults to who can break the rule, else the sender."""
        rule = RULE_BY_ID[rule_id]
        if not rule.applies_to(self.effective_version):
            return
        if rule.breaker == "recorder":
            side = None
        elif rule.breaker != "peer":
            side = rule.breaker
        elif side is None:
            side = self._sender
        if side is not None:
            reason = f"{side}: {reason}"
        found = Finding(rule_id, rule.tier, self.connection_id, seqs, reason, session_id, side)
        run = self._run
        if run is not None and run.repeated_by(found, self.frames):
            run.lasts.append(seqs[-1])
            run.at = self.frames
            return
        self._flush_run()
        if seqs:
            self._run = _Run(found, [seqs[-1]], self.frames)
        else:
            self._emit(found)

    def _flush_run(self) -> None:
        """Emit the finding being repeated: one for the whole run, naming each frame."""
        run, self._run = self._run, None
        if run is not None:
            self._emit(run.finding_for_all())

    def _emit(self, found: Finding) -> None:
        self.counts[found.tier] += 1
        n = self.per_rule.get(found.rule, 0) + 1
        self.per_rule[found.rule] = n
        if n > self.max_per_rule:
            self.suppressed[found.rule] = self.suppressed.get(found.rule, 0) + 1
            return
        self._out.append(found)

    def _grouped(
        self,
        rule_id: str,
        seq: int,
        named: tuple[int, ...],
        subject: str,
        side: Side | None,
        session_id: str | None = None,
    ) -> None:
        """A finding that joins the open group of its rule and side when frames are close."""
        g = self._group
        if (
            g is None
            or (g.rule, g.side, g.session_id) != (rule_id, side, session_id)
            or self.frames - g.last > GROUP_GAP
            or len(g.frames) >= GROUP_MAX
        ):
            self._flush_group()
            g = self._group = _Group(rule_id, side, session_id, [], set(), [], self.frames)
        g.frames.append(seq)
        g.seqs.update((seq, *named))
        g.subjects.append(subject)
        g.last = self.frames

    def _flush_group(self) -> None:
        g, self._group = self._group, None
        if g is None:
            return
        reason = _GROUP_TEXT[g.rule](g.frames, g.subjects, g.side)
        self._report(g.rule, tuple(sorted(g.seqs)), reason, g.session_id, g.side)

    def drain(self) -> list[Finding]:
        """Findings reported but not yet returned (e.g. ``recording.incomplete``)."""
        self._flush_run()
        return self._take()

    def _take(self) -> list[Finding]:
        out, self._out = self._out, []
        return out

    def _session(self, sid: str) -> _Session:
        s = self._sessions.get(sid)
        if s is None:
            s = self._sessions[sid] = _Session(sid)
        return s

    # -- JSON-RPC layer --------------------------------------------------------------------

    def _invalid(self, seq: int, msg: Message) -> None:
        reason = msg.reason or "invalid"
        if not self._first_seen:
            self._first_seen = True
            self._report(
                "lifecycle.initialize-first",
                (seq,),
                f"the first frame is not initialize ({reason})",
            )
        if reason == "blank line":
            self._report("framing.blank-line", (seq,), "blank line")
        elif reason == "not valid UTF-8":
            self._report("framing.utf8", (seq,), "frame is not valid UTF-8")
        elif reason.startswith("not JSON"):
            self._report("framing.json", (seq,), reason)
        elif reason == "empty batch":
            self._report("jsonrpc.batch", (seq,), "empty batch []")
        elif (
            reason == "neither a call nor a response"
            and isinstance(msg.payload, dict)
            and "id" in msg.payload
        ):
            self._report(
                "jsonrpc.result-xor-error", (seq,), "response has neither result nor error"
            )
        else:
            self._report("jsonrpc.envelope", (seq,), reason)

    def _message(self, seq: int, direction: Direction, msg: Message) -> None:
        for problem in msg.problems:
            rule = (
                "jsonrpc.result-xor-error"
                if problem == "response has both result and error"
                else "jsonrpc.envelope"
            )
            self._report(rule, (seq,), problem)
        if msg.id is not None and msg.id[:1] in ("{", "[", "t", "f"):
            self._report("jsonrpc.envelope", (seq,), f"id {msg.id} is not a string or number")
        if not self._first_seen:
            self._first_seen = True
            if not (direction == C2A and msg.kind == "request" and msg.method == "initialize"):
                what = msg.method or f"a response id {msg.id}"
                who = "client" if direction == C2A else "agent"
                self._report(
                    "lifecycle.initialize-first",
                    (seq,),
                    f"the first message is {what} from the {who}, not the client's initialize",
                )
        if msg.kind == "request":
            assert msg.id is not None and msg.method is not None
            params = msg.params
            sid = _str(params, "sessionId")
            req = _Pending(msg.method, seq, sid)
            early = self._exchanges.request(direction, msg.id, req)
            if direction == C2A:
                self._client_request(seq, msg.method, params, req)
            else:
                self._agent_request(seq, msg.method, params)
            if early is not None:
                self._early_response(seq, (direction, msg.id), req, early)
        elif msg.kind == "notification":
            assert msg.method is not None
            self._notification(seq, direction, msg.method, msg.params)
        elif msg.kind == "response":
            assert msg.id is not None
            self._response(seq, direction, msg)

    def _orphans(
        self, expired: Sequence[tuple[tuple[Direction, str], tuple[int, Message]]]
    ) -> None:
        """Responses that found no request within the early window answer nothing."""
        for key, (seq, msg) in expired:
            self._grouped(
                "jsonrpc.response-id-echo", seq, (), f"id {msg.id}", _side(other_direction(key[0]))
            )

    def _same_value(self, direction: Direction, id_text: str) -> tuple[Direction, str] | None:
        value = _id_value(id_text)
        if value is None:
            return None
        for key in self._pending:
            if key[0] == direction and _id_value(key[1]) == value:
                return key
        return None

    def _early_response(
        self, seq: int, key: tuple[Direction, str], req: _Pending, early: tuple[int, Message]
    ) -> None:
        """A request whose response was recorded before it: pair them, note the order."""
        rseq, msg = early
        self._report(
            "recording.order",
            (rseq, seq),
            f"response #{rseq} was recorded before its request #{seq} ({req.method})",
            req.session_id,
        )
        self._answered_now(rseq, key, req, msg)

    def _response(self, seq: int, direction: Direction, msg: Message) -> None:
        assert msg.id is not None
        key = (other_direction(direction), msg.id)
        req = self._exchanges.answer(direction, msg.id)
        if req is None:
            if msg.id == "null":
                err = msg.error
                code = err.get("code") if isinstance(err, dict) else None
                if code not in NULL_ID_ERROR_CODES:
                    self._notification_answer(seq, direction, err)
                return
            first = self._answered.get(key)
            if first is not None:
                self._report(
                    "jsonrpc.one-response",
                    (first, seq),
                    f"second response to request id {msg.id} (first answered at #{first})",
                )
                return
            same = self._same_value(key[0], msg.id)
            if same is not None:  # the same id value spelled differently ("a\u0062", "ab")
                key = same
                req = self._pending.pop(key)
                self._answered_now(seq, key, req, msg)
                return
            loose = _loose_id(msg.id)
            near = next(
                (
                    (k, p)
                    for k, p in self._pending.items()
                    if k[0] == key[0] and _loose_id(k[1]) == loose
                ),
                None,
            )
            if near is not None:
                self._report(
                    "jsonrpc.response-id-echo",
                    (near[1].seq, seq),
                    f"response id {msg.id} does not echo the request id {near[0][1]} exactly",
                    near[1].session_id,
                )
                del self._pending[near[0]]
                key, req = near
            else:
                # Perhaps recorded just before its request (a recorder race): wait a little.
                self._exchanges.hold_early(direction, msg.id, (seq, msg))
                return
        self._answered_now(seq, key, req, msg)

    def _answered_now(
        self, seq: int, key: tuple[Direction, str], req: _Pending, msg: Message
    ) -> None:
        self._answered[key] = seq
        if len(self._answered) > ANSWERED_MEMORY:
            self._answered.popitem(last=False)
        if key[0] == C2A:
            self._client_request_answered(seq, req, msg)
        else:
            self._agent_request_answered(seq, req, msg)

    # -- capabilities ----------------------------------------------------------------------

    def _needs(self, seq: int, ok: bool | None, what: str, sid: str | None = None) -> None:
        if ok is False:
            self._report("lifecycle.capabilities", (seq,), what, sid)

    def _agent_cap(self, *path: str) -> Any:
        return _dig(self._agent_caps, *path) if self._agent_caps is not None else _UNKNOWN

    def _client_cap(self, *path: str) -> Any:
        return _dig(self._client_caps, *path) if self._client_caps is not None else _UNKNOWN

    def _client_request(self, seq: int, method: str, params: Any, req: _Pending) -> None:
        v2 = self.effective_version >= 2
        sid = req.session_id
        if method == "initialize":
            self.facts.observe_request(params)
            return
        if method in (
            "session/new",
            "session/load",
            "session/resume",
            "session/list",
            "session/fork",
        ):
            self._paths(seq, sid, ("cwd", _get(params, "cwd")))
            dirs = _get(params, "additionalDirectories")
            if isinstance(dirs, list):
                self._paths(seq, sid, *(("additionalDirectories[]", d) for d in dirs))
        if v2 and method.startswith("session/") and method != "session/cancel":
            cap = self._agent_cap("session")
            if cap is not _UNKNOWN and cap is None:
                self._needs(
                    seq, False, f"{method}: the agent did not advertise capabilities.session", sid
                )
        if method == "session/load":
            if v2:
                self._needs(seq, False, "session/load is not a v2 method (use session/resume)", sid)
            else:
                cap = self._agent_cap("loadSession")
                self._needs(
                    seq, _flag(cap), "session/load without agentCapabilities.loadSession", sid
                )
            if sid is not None:
                req.replay = "load"
                self._open_window(sid, "load", seq)
        elif method == "session/resume":
            if not v2:
                cap = self._agent_cap("sessionCapabilities", "resume")
                self._needs(
                    seq,
                    _present(cap),
                    "session/resume without agentCapabilities.sessionCapabilities.resume",
                    sid,
                )
            replay_from = _get(params, "replayFrom")
            kind = "replay" if v2 and replay_from is not None else "plain"
            if sid is not None:
                req.replay = kind
                self._open_window(sid, kind, seq)
        elif method in ("session/list", "session/close", "session/delete") and not v2:
            name = method.split("/")[1]
            cap = self._agent_cap("sessionCapabilities", name)
            self._needs(
                seq,
                _present(cap),
                f"{method} without agentCapabilities.sessionCapabilities.{name}",
                sid,
            )
        elif method == "session/delete":
            cap = self._agent_cap("session", "delete")
            self._needs(
                seq, _present(cap), "session/delete without capabilities.session.delete", sid
            )
        elif method == "session/prompt" and sid is not None:
            self._prompt_content(seq, sid, _get(params, "prompt"))
            s = self._session(sid)
            s.prompts_pending += 1
            s.after = None
            s.turn_ended_seq = None
            if s.activity_seq is None:
                s.activity_seq = seq
                s.activity_prompt = True
        elif method in ("auth/login", "auth/logout") and v2 and self._agent_caps is not None:
            methods = self.facts.auth_methods
            self._needs(
                seq,
                isinstance(methods, list) and len(methods) > 0,
                f"{method} but the agent advertised no authMethods",
                sid,
            )

    def _prompt_content(self, seq: int, sid: str, prompt: Any) -> None:
        if not isinstance(prompt, list) or self._agent_caps is None:
            return
        v2 = self.effective_version >= 2
        need = {"image": "image", "audio": "audio", "resource": "embeddedContext"}
        for block in prompt:
            btype = _str(block, "type")
            if btype not in need:
                continue
            name = need[btype]
            if v2:
                ok = _present(self._agent_cap("session", "prompt", name))
                where = f"capabilities.session.prompt.{name}"
            else:
                ok = _flag(self._agent_cap("promptCapabilities", name))
                where = f"agentCapabilities.promptCapabilities.{name}"
            if ok is False:
                self._report(
                    "lifecycle.capabilities",
                    (seq,),
                    f"session/prompt sends {btype} content without {where}",
                    sid,
                )

    def _agent_request(self, seq: int, method: str, params: Any) -> None:
        v2 = self.effective_version >= 2
        sid = _str(params, "sessionId")
        if method.startswith("fs/") or method.startswith("terminal/"):
            if v2:
                self._needs(
                    seq,
                    False,
                    f"{method} is not a v2 method (v2 has no client fs or terminal capabilities)",
                    sid,
                )
            elif method == "fs/read_text_file":
                self._needs(
                    seq,
                    _flag(self._client_cap("fs", "readTextFile")),
                    "fs/read_text_file without clientCapabilities.fs.readTextFile",
                    sid,
                )
            elif method == "fs/write_text_file":
                self._needs(
                    seq,
                    _flag(self._client_cap("fs", "writeTextFile")),
                    "fs/write_text_file without clientCapabilities.fs.writeTextFile",
                    sid,
                )
            elif method.startswith("terminal/"):
                self._needs(
                    seq,
                    _flag(self._client_cap("terminal")),
                    f"{method} without clientCapabilities.terminal",
                    sid,
                )
            if method.startswith("fs/"):
                self._paths(seq, sid, ("path", _get(params, "path")))
            elif method == "terminal/create":
                self._paths(seq, sid, ("cwd", _get(params, "cwd")))
        elif method == "elicitation/create":
            cap = self._client_cap("elicitation")
            self._needs(
                seq, _present(cap), "elicitation/create without client elicitation capability", sid
            )

    def _paths(self, seq: int, sid: str | None, *named: tuple[str, Any]) -> None:
        for name, value in named:
            if isinstance(value, str) and not _is_absolute(value):
                self._report(
                    "lifecycle.absolute-path", (seq,), f"{name} {value!r} is not absolute", sid
                )

    # -- responses -------------------------------------------------------------------------

    def _client_request_answered(self, seq: int, req: _Pending, msg: Message) -> None:
        result = msg.result
        ok = not msg.is_error_response
        sid = req.session_id
        if req.method == "initialize":
            if ok:
                self.facts.observe_result(result)
            return
        if req.method in ("session/new", "session/fork") and ok:
            new_sid = _str(result, "sessionId")
            if new_sid is not None:
                fresh = self._session(new_sid)
                if fresh.state is None:
                    fresh.state = "idle"  # a new session has no foreground work yet
            return
        if req.replay is not None and sid is not None:
            s = self._session(sid)
            s.window = None
            if ok:
                s.after = req.replay
                s.after_seq = seq
            return
        if req.method == "session/prompt" and sid is not None:
            self._prompt_answered(seq, req.seq, sid, ok, result)

    def _prompt_answered(self, seq: int, req_seq: int, sid: str, ok: bool, result: Any) -> None:
        s = self._session(sid)
        s.prompts_pending = max(0, s.prompts_pending - 1)
        if self.effective_version < 2:
            stop = _get(result, "stopReason") if ok else None
            if ok:
                self._enum(seq, sid, "stopReason", stop, STOP_REASONS_V1)
            if s.v1_cancel_seq is not None and stop != "cancelled":
                got = f"stopReason {stop!r}" if ok else "an error response"
                self._report(
                    "v1.cancel-stop-reason",
                    (s.v1_cancel_seq, seq),
                    f"prompt answered with {got} after session/cancel #{s.v1_cancel_seq}",
                    sid,
                )
            if s.prompts_pending == 0:
                s.turn_ended_seq = seq
                s.v1_cancel_seq = None
            return
        if not ok:
            if s.activity_seq == req_seq and s.state not in ("running", "requires_action"):
                s.activity_seq = None  # rejected before insertion: no work started
                s.activity_prompt = False
            return
        mid = _get(result, "messageId")
        if not isinstance(mid, str) or not mid:
            self._report(
                "v2.prompt-message-id",
                (seq,),
                f"session/prompt result has no messageId string (got {_short(result)})",
                sid,
            )
            return
        first = s.prompt_message_ids.get(mid)
        if first is not None:
            self._report(
                "entity.id-reuse",
                (first, seq),
                f"two session/prompt responses returned the same messageId {mid!r}",
                sid,
            )
            return
        s.prompt_message_ids[mid] = seq
        if mid not in s.user_ids_seen:
            s.awaiting_user[mid] = seq

    def _agent_request_answered(self, seq: int, req: _Pending, msg: Message) -> None:
        if req.method == "session/request_permission" and req.must_cancel_seq is not None:
            outcome = _dig(msg.result, "outcome", "outcome")
            if outcome != "cancelled":
                got = f"outcome {outcome!r}" if not msg.is_error_response else "an error"
                self._report(
                    "turn.permission-cancelled",
                    (req.must_cancel_seq, seq),
                    f"permission request answered with {got} after session/cancel "
                    f"#{req.must_cancel_seq}",
                    req.session_id,
                )

    # -- notifications ---------------------------------------------------------------------

    def _notification_answer(self, seq: int, direction: Direction, error: Any) -> None:
        """A response with id null that is no parse/invalid-request error: it answers a
        notification of the other side. Name the one its error text names, else the nearest
        unanswered one before it (by time), else none ("cannot be paired")."""
        side = _side(direction)
        recent = self._notifications[other_direction(direction)]
        while recent and self.frames - recent[0][2] > 2 * GROUP_GAP:
            recent.popleft()
        message = _get(error, "message")
        text = message if isinstance(message, str) else orjson.dumps(error).decode()
        run = self._null_runs[direction]
        named = next((n for n in reversed(recent) if n[1] in text), None)
        if named is not None:
            recent.remove(named)
            run.clear()
            subject = f"`{named[1]}` #{named[0]} (named in its error)"
            self._grouped("jsonrpc.notification-answered", seq, (named[0],), subject, side)
            return
        if not recent:
            run.clear()
            self._grouped("jsonrpc.notification-answered", seq, (), "", side)
            return
        nearest = recent.pop()
        self._grouped("jsonrpc.notification-answered", seq, (nearest[0],), "", side)
        g = self._group
        assert g is not None
        if len(g.subjects) < len(run) + 1 or any(f < self.frames - GROUP_GAP for f, _, _ in run):
            run.clear()
        run.append((self.frames, self._now_ns, nearest))
        # answers in a row take the nearest notifications before them first in, first
        # answered: the run's first answer the oldest of them
        taken = sorted(n for _f, _ns, n in run)
        run[:] = [(f, ns, n) for (f, ns, _old), n in zip(run, taken, strict=True)]
        g.subjects[len(g.subjects) - len(run) :] = [_by_time_subject(n, ns) for _f, ns, n in run]

    def _notification(self, seq: int, direction: Direction, method: str, params: Any) -> None:
        label = method
        if method == "session/update":
            variant = _get(_get(params, "update"), "sessionUpdate")
            if isinstance(variant, str):
                label = variant
        self._notifications[direction].append((seq, label, self.frames, self._now_ns))
        self._null_runs[other_direction(direction)].clear()
        if method == "$/cancel_request":
            rid = _get(params, "requestId")
            if rid is not None:
                req = self._pending.get((direction, id_json_text(rid, None)))
                if req is not None:
                    req.cancel_seq = seq
            return
        if direction == C2A and method == "session/cancel":
            sid = _str(params, "sessionId")
            if sid is None:
                return
            s = self._session(sid)
            if self.effective_version < 2:
                if s.prompts_pending:
                    s.v1_cancel_seq = seq
            elif s.state in ("running", "requires_action"):
                s.cancel_seq = seq
            for (d, _rid), req in self._pending.items():
                if (
                    d == A2C
                    and req.method == "session/request_permission"
                    and (req.session_id == sid)
                ):
                    req.must_cancel_seq = seq
            return
        if direction == A2C and method == "session/update":
            sid = _str(params, "sessionId")
            update = _get(params, "update")
            if sid is not None and isinstance(update, dict):
                self._update(seq, self._session(sid), update)

    # -- session/update --------------------------------------------------------------------

    def _update(self, seq: int, s: _Session, update: dict[str, Any]) -> None:
        variant = update.get("sessionUpdate")
        if not isinstance(variant, str):
            return
        v2 = self.effective_version >= 2
        sid = s.sid
        self._enum(
            seq, sid, "sessionUpdate", variant, KNOWN_VARIANTS_V2 if v2 else KNOWN_VARIANTS_V1
        )
        entity = self._entity_key(variant, update)
        if v2 and variant in MESSAGE_VARIANTS:
            mid = update.get("messageId")
            if not isinstance(mid, str) or not mid:
                self._report("v2.message-id", (seq,), f"{variant} without a messageId", sid)
        if variant in ("user_message", "user_message_chunk"):
            mid = update.get("messageId")
            if isinstance(mid, str):
                s.user_ids_seen.add(mid)
                s.awaiting_user.pop(mid, None)
        self._fields(seq, s, variant, update)
        # replay windows
        replaying = False
        if s.window is not None:
            replaying = s.window != "plain"
            if variant == "notice" and replaying:
                self._report(
                    "replay.no-notice",
                    (s.window_seq, seq),
                    f"notice inside the replay window of request #{s.window_seq}",
                    sid,
                )
            elif s.window == "plain" and variant in HISTORY_VARIANTS:
                self._report(
                    "replay.plain-resume",
                    (s.window_seq, seq),
                    f"{variant} replayed during a session/resume without replayFrom",
                    sid,
                )
            if replaying:
                return
        elif s.after is not None and self._late_history(variant, s):
            if s.after == "plain":
                self._report(
                    "replay.plain-resume",
                    (s.after_seq, seq),
                    f"{variant} after the session/resume response #{s.after_seq} and before any "
                    "new work: resume without replayFrom must not replay",
                    sid,
                )
            else:
                self._report(
                    "replay.before-response",
                    (s.after_seq, seq),
                    f"{variant} arrives after the replay response #{s.after_seq}, before any new "
                    "prompt",
                    sid,
                )
            return
        if not v2:
            if (
                variant in V1_TURN_VARIANTS
                and s.prompts_pending == 0
                and (s.turn_ended_seq is not None)
            ):
                self._report(
                    "v1.updates-after-turn",
                    (s.turn_ended_seq, seq),
                    f"{variant} after the prompt response #{s.turn_ended_seq} ended the turn",
                    sid,
                )
            return
        self._v2_work(seq, s, variant, update, entity)

    def _late_history(self, variant: str, s: _Session) -> bool:
        if self.effective_version >= 2:
            # v2 work may go on across a resume (live agent output after the response) and
            # background tool activity may run while idle; a user message with no prompt
            # pending can only be history.
            return variant in ("user_message", "user_message_chunk") and s.prompts_pending == 0
        return variant in V1_TURN_VARIANTS or variant in MESSAGE_VARIANTS

    def _entity_key(self, variant: str, update: dict[str, Any]) -> tuple[str, str] | None:
        if variant in ("plan", "plan_removed"):
            return None  # a v1 plan is one per session; a removal creates nothing
        return entity_key(update)

    def _fields(self, seq: int, s: _Session, variant: str, update: dict[str, Any]) -> None:
        sid = s.sid
        v2 = self.effective_version >= 2
        if variant == "notice":
            title = update.get("title")
            severity = update.get("severity")
            if not isinstance(title, str) or not title.strip():
                self._report("notice.fields", (seq,), f"notice title is {_short(title)}", sid)
            if not isinstance(severity, str):
                self._report("notice.fields", (seq,), f"notice severity is {_short(severity)}", sid)
            else:
                self._enum(seq, sid, "severity", severity, SEVERITIES)
        elif variant == "compaction_update":
            cid = update.get("compactionId")
            status = update.get("status")
            if not isinstance(cid, str) or not cid or not isinstance(status, str):
                self._report(
                    "compaction.fields",
                    (seq,),
                    f"compaction_update with compactionId {_short(cid)}, status {_short(status)}",
                    sid,
                )
                return
            self._enum(seq, sid, "compaction status", status, COMPACTION_STATUSES)
            if status == "in_progress":
                if cid in s.compactions_done:
                    self._report(
                        "entity.id-reuse",
                        (seq,),
                        f"compactionId {cid!r} restarts after it ended: IDs MUST NOT be reused "
                        "for another compaction",
                        sid,
                    )
                    s.compactions_done.discard(cid)
                s.compactions_open.setdefault(cid, seq)
            elif status in COMPACTION_DONE:
                s.compactions_open.pop(cid, None)
                s.compactions_done.add(cid)
            elif cid not in s.compactions_done:
                s.compactions_open.setdefault(cid, seq)
        elif variant == "compaction_summary_chunk":
            cid = update.get("compactionId")
            if not isinstance(cid, str) or not cid or update.get("content") is None:
                self._report(
                    "compaction.fields",
                    (seq,),
                    f"compaction_summary_chunk with compactionId {_short(cid)} and content "
                    f"{_short(update.get('content'))}",
                    sid,
                )
            elif cid not in s.compactions_done:
                s.compactions_open.setdefault(cid, seq)
        elif variant in ("tool_call", "tool_call_update"):
            tid = update.get("toolCallId")
            status = update.get("status")
            if status is not None:
                self._enum(
                    seq,
                    sid,
                    "tool call status",
                    status,
                    TOOL_STATUSES_V2 if v2 else TOOL_STATUSES_V1,
                )
            kind = update.get("kind")
            if kind is not None:
                self._enum(seq, sid, "tool kind", kind, TOOL_KINDS)
            locations = update.get("locations")
            if isinstance(locations, list):
                self._paths(
                    seq, sid, *(("locations[].path", _get(loc, "path")) for loc in locations)
                )
            if variant == "tool_call" and isinstance(tid, str):
                if tid in s.v1_tool_calls:
                    self._report(
                        "entity.id-reuse",
                        (seq,),
                        f"a second tool_call creates toolCallId {tid!r} again (updates use "
                        "tool_call_update)",
                        sid,
                    )
                s.v1_tool_calls.add(tid)
        elif variant == "terminal_update":
            self._paths(seq, sid, ("cwd", update.get("cwd")))

    def _v2_work(
        self,
        seq: int,
        s: _Session,
        variant: str,
        update: dict[str, Any],
        entity: tuple[str, str] | None,
    ) -> None:
        sid = s.sid
        if variant == "state_update":
            state = update.get("state")
            if not isinstance(state, str):
                return
            self._enum(seq, sid, "state", state, STATES)
            if state == "running":
                s.state = "running"
                s.after = None
                s.cancelled_entities = set()
                if s.activity_seq is None:
                    s.activity_seq = seq
            elif state == "requires_action":
                s.state = state
            elif state == "idle":
                self._idle(seq, s, update)
            return
        if entity is not None and entity in s.cancelled_entities:
            self._report(
                "v2.nothing-after-cancel",
                (s.cancelled_idle_seq, seq),
                f"{variant} for {entity[0]} {entity[1]!r} of the cancelled work arrives after "
                f"the idle #{s.cancelled_idle_seq} that reported cancellation",
                sid,
            )
        if entity is not None:
            if s.activity_seq is None and entity[0] in ("agent_message", "agent_thought"):
                s.activity_seq = seq
            if s.state in ("running", "requires_action") and entity is not None:
                s.work_entities.add(entity)
                if variant == "tool_call_update":
                    status = update.get("status")
                    previous = s.tool_status.get(entity[1])
                    if isinstance(status, str) or previous is None:
                        s.tool_status[entity[1]] = (
                            status if isinstance(status, str) else None,
                            seq,
                        )

    def _idle(self, seq: int, s: _Session, update: dict[str, Any]) -> None:
        sid = s.sid
        stop = update.get("stopReason")
        was_working = s.state in ("running", "requires_action")
        # Work on a session taken over from another connection (state unknown) may have
        # started before this recording; only a prompt sent here proves it started here.
        if (
            not was_working
            and s.activity_seq is not None
            and (s.state == "idle" or s.activity_prompt)
        ):
            self._report(
                "v2.running-before-idle",
                (s.activity_seq, seq),
                f"idle ends work (from #{s.activity_seq}) that never reported running",
                sid,
            )
        if was_working or s.activity_seq is not None:
            if stop is None:
                self._report("v2.stop-reason", (seq,), "idle without a stopReason", sid)
            elif not isinstance(stop, str):
                self._report("v2.stop-reason", (seq,), f"stopReason is {_short(stop)}", sid)
            else:
                self._enum(seq, sid, "stopReason", stop, STOP_REASONS_V2)
        if s.cancel_seq is not None:
            if stop != "cancelled":
                self._report(
                    "v2.cancel-idle",
                    (s.cancel_seq, seq),
                    f"idle after session/cancel #{s.cancel_seq} has stopReason {_short(stop)}",
                    sid,
                )
            s.cancelled_entities = set(s.work_entities)
            s.cancelled_idle_seq = seq
            s.cancel_seq = None
        elif stop == "cancelled":
            s.cancelled_entities = set(s.work_entities)
            s.cancelled_idle_seq = seq
        if stop == "error":
            unfinished = [
                (tid, st, tseq) for tid, (st, tseq) in s.tool_status.items() if st not in TOOL_DONE
            ]
            if unfinished:
                names = ", ".join(f"{tid!r} ({st or 'no status'})" for tid, st, _ in unfinished)
                self._report(
                    "v2.error-idle-tools",
                    (*(t for _, _, t in unfinished), seq),
                    f"error idle leaves tool call(s) unfinished: {names}",
                    sid,
                )
        s.state = "idle"
        s.activity_seq = None
        s.activity_prompt = False
        s.work_entities = set()
        s.tool_status = {}

    def _enum(
        self, seq: int, sid: str | None, name: str, value: Any, known: frozenset[str]
    ) -> None:
        if isinstance(value, str) and value not in known and not value.startswith("_"):
            self._report(
                "enum.reserved",
                (seq,),
                f"{name} {value!r} is neither a known value nor a _-prefixed extension "
                "(reserved for future ACP versions)",
                sid,
            )

    def _open_window(self, sid: str, kind: str, seq: int) -> None:
        s = self._session(sid)
        s.window = kind
        s.window_seq = seq
        s.after = None
        s.turn_ended_seq = None


# -- small helpers -----------------------------------------------------------------------


def frames_text(seqs: Sequence[int], sep: str = ",") -> str:
    """Frame numbers as ``#5,#6-#15``: three or more consecutive ones as a range."""
    parts: list[str] = []
    n = 0
    while n < len(seqs):
        end = n
        while end + 1 < len(seqs) and seqs[end + 1] == seqs[end] + 1:
            end += 1
        if end - n >= 2:
            parts.append(f"#{seqs[n]}\u2013#{seqs[end]}")
        else:
            parts.extend(f"#{x}" for x in seqs[n : end + 1])
        n = end + 1
    return sep.join(parts)


def _side(direction: Direction) -> Side:
    """The side that sends frames in ``direction``."""
    return "client" if direction == C2A else "agent"


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _notifications_answered(frames: list[int], subjects: list[str], side: Side | None) -> str:
    paired = [(f, s) for f, s in zip(frames, subjects, strict=True) if s]
    unpaired = [f"#{f}" for f, s in zip(frames, subjects, strict=True) if not s]
    if paired:
        verb = "answers" if len(paired) == 1 else "answer"
        text = _and([f"#{f}" for f, _s in paired]) + f" {verb} "
        text += ("notification " if len(paired) == 1 else "notifications ") + _and(
            [s for _f, s in paired]
        )
        if unpaired:
            text += f"; {_and(unpaired)} cannot be paired with a notification (none recent"
            text += " left unanswered)"
        return text
    verb = "answers" if len(frames) == 1 else "answer"
    text = _and(unpaired) + f" {verb} "
    return text + (
        "a notification: a response with id null that is not a parse/invalid-request error"
        if len(frames) == 1
        else "notifications: responses with id null that are not parse/invalid-request errors"
    )


def _by_time_subject(n: _Notification, answer_ns: int) -> str:
    """How an answer paired by time with the notification ``n`` names it."""
    gap = (answer_ns - n[3]) / 1e6
    when = ""
    if answer_ns and n[3] and gap >= 0:
        when = f": {gap:.1f} ms before" if gap >= 0.1 else ": under 0.1 ms before"
    return f"`{n[1]}` #{n[0]} (by time{when})"


def _orphan_responses(frames: list[int], subjects: list[str], side: Side | None) -> str:
    other = "agent" if side == "client" else "client"
    if len(frames) == 1:
        return f"response #{frames[0]} ({subjects[0]}) answers no request of the {other}"
    numbers = _and([f"#{f}" for f in frames])
    return f"responses {numbers} ({_and(subjects)}) answer no request of the {other}"


_GROUP_TEXT = {
    "jsonrpc.notification-answered": _notifications_answered,
    "jsonrpc.response-id-echo": _orphan_responses,
}
"""How a group of findings of a rule reads (frames that broke it, subjects, side)."""

_UNKNOWN: Any = object()


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


def _flag(value: Any) -> bool | None:
    """A boolean capability: ``None`` when unknown (no initialize seen)."""
    if value is _UNKNOWN:
        return None
    return value is True


def _present(value: Any) -> bool | None:
    """An object capability (``{}`` advertises it; omitted or null does not)."""
    if value is _UNKNOWN:
        return None
    return value is not None and value is not False


def _is_absolute(path: str) -> bool:
    if path.startswith("/") or path.startswith("\\\\"):
        return True
    return len(path) >= 3 and path[0].isalpha() and path[1] == ":" and path[2] in "\\/"


def _id_value(text: str) -> tuple[str, Any] | None:
    """An id's JSON value with its type, so that 1 and 1.0 and "1" stay different."""
    value, reason = parse_json(text.encode())
    if reason is not None:
        return None
    return (type(value).__name__, value)


def _loose_id(text: str) -> str:
    """Ids that a sloppy peer might confuse (1, 1.0, "1") map to the same key."""
    value, reason = parse_json(text.encode())
    if reason is not None:
        return text
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return text
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return text


def _short(value: Any) -> str:
    if value is None:
        return "missing or null"
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
