"""The pure half of ``replay --client``: the recorded client of one connection, replayed.

:class:`ClientPlayer` decides what to send to a live agent next and when it may be sent,
and compares what the agent sent with the recording: before each recorded client frame the
agent must have produced what it had produced at that point of the recording (the responses
recorded before it, the agent request it answers, and as many frames overall). Answers to
agent requests are the recorded ones with the live request's id; recorded sessionIds in
sent frames are mapped to the ones the live agent minted. The comparison ignores JSON-RPC
ids, maps live sessionIds back to recorded ones, drops the ignore paths and masks the
volatile members (entity ids such as ``toolCallId``, timestamps such as ``updatedAt``,
``_meta`` trace context: :mod:`acp_proxy.acp.volatile`, the definition ``acp-proxy diff``
uses), then diffs the normalized agent→client message sequences line by line. No I/O: the
process and the bytes are :mod:`acp_proxy.transport.stdio.agent_check`'s job.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.diff import SlowerLimit
from acp_proxy.acp.jsonpaths import parse_path, remove_paths
from acp_proxy.acp.volatile import scrub
from acp_proxy.replay.match import DEFAULT_IGNORES, SessionMap, session_of
from acp_proxy.replay.script import Classified, classified_bytes
from acp_proxy.replay.splice import Span, find_spans, splice
from acp_proxy.wire.frame import A2C, C2A
from acp_proxy.wire.surrogates import json_bytes


@dataclass(slots=True)
class CheckResult:
    """The outcome: normalized sequences, the unified diff (empty: no differences)."""

    recorded: list[str]
    live: list[str]
    diff: list[str]
    notes: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    """Why the differences are expected, where it is known (a session from an earlier
    connection the fresh agent does not have)."""
    slower: list[SlowerExchange] = field(default_factory=list)
    """Exchanges the live agent answered more slowly than recorded (reported; a failure
    only where ``fails``)."""

    @property
    def ok(self) -> bool:
        return not self.diff and not any(t.fails for t in self.slower)


@dataclass(frozen=True, slots=True)
class SlowerExchange:
    """A client request the live agent answered more slowly than the recorded agent."""

    request: Classified
    recorded_ns: int
    live_ns: int
    fails: bool


@dataclass
class ClientPlayer:
    """The recorded client of one connection, replayed against a live agent (sans-I/O)."""

    frames: list[Classified]
    ignores: list[tuple[str, ...]] = field(
        default_factory=lambda: [parse_path(p) for p in DEFAULT_IGNORES]
    )
    sessions: SessionMap = field(default_factory=SessionMap)
    live: list[Classified] = field(default_factory=list)
    _pos: int = 0
    _live_requests: list[Classified] = field(default_factory=list)
    _live_responses: dict[str, Classified] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    earlier_sessions: dict[str, int] = field(default_factory=dict)
    """Recorded sessionIds of the connections replayed before -> the last that named it."""
    lost_session: bool = False
    sent_ns: dict[str, int] = field(default_factory=dict)
    """JSON-RPC id of each client request sent -> when (for the live latency)."""
    threshold_ns: int = 1_000_000_000
    """Report an exchange slower than recorded by more than this."""
    fail_slower: SlowerLimit | None = None
    """The live agent refused to load or resume a session of an earlier connection: the
    rest of this connection cannot replay (the caller stops sending)."""

    def __post_init__(self) -> None:
        self._recorded_a2c = [f for f in self.frames if f.direction == A2C]
        self._recorded_requests = [
            f.rpc_id for f in self._recorded_a2c if f.kind == "request" and f.rpc_id
        ]
        self._c2a_methods = {
            f.rpc_id: f.method
            for f in self.frames
            if f.direction == C2A and f.kind == "request" and f.rpc_id is not None
        }
        self._recorded_responses = {
            f.rpc_id: f for f in self._recorded_a2c if f.kind == "response" and f.rpc_id
        }
        # For each position: (agent frames before it, agent responses before it).
        self._before: list[tuple[int, int]] = []
        self._response_order: list[str] = []
        count = 0
        for f in self.frames:
            self._before.append((count, len(self._response_order)))
            if f.direction == A2C:
                count += 1
                if f.kind == "response" and f.rpc_id is not None:
                    self._response_order.append(f.rpc_id)
        self._responses_seen = 0

    @property
    def _continuations(self) -> set[str]:
        """JSON-RPC ids of the recorded loads/resumes of a session of an earlier connection."""
        return {f.rpc_id for f in self._continuation_requests() if f.rpc_id is not None}

    def _continuation_requests(self) -> list[Classified]:
        out = []
        for f in self.frames:
            if f.direction != C2A or f.kind != "request" or f.rpc_id is None:
                continue
            if f.method in ("session/load", "session/resume"):
                session = session_of(f.msg.payload)
                if session is not None and session in self.earlier_sessions:
                    out.append(f)
        return out

    @property
    def done(self) -> bool:
        return self._pos >= len(self.frames)

    def feed(self, raw: bytes, mono_ns: int = 0) -> None:
        """One frame from the live agent (``mono_ns``: when it arrived)."""
        frame = classified_bytes(0, len(self.live) + 1, mono_ns, A2C, raw)
        self.live.append(frame)
        if frame.kind == "request":
            self._live_requests.append(frame)
        elif frame.kind == "response" and frame.rpc_id is not None:
            self._live_responses[frame.rpc_id] = frame
            if frame.rpc_id in self._continuations and isinstance(frame.msg.payload, dict):
                self.lost_session = self.lost_session or "error" in frame.msg.payload
            recorded = self._recorded_responses.get(frame.rpc_id)
            if recorded is not None:
                self._learn_sessions(recorded.msg.result, frame.msg.result)

    def _learn_sessions(self, recorded: Any, live: Any) -> None:
        if isinstance(recorded, dict) and isinstance(live, dict):
            r, lv = recorded.get("sessionId"), live.get("sessionId")
            if isinstance(r, str) and isinstance(lv, str):
                self.sessions.bind(r, lv)

    def next_send(self) -> tuple[bytes | None, bool]:
        """``(frame, ready)``: the next client frame to send and whether the agent caught up.

        Advances past recorded agent frames. ``(None, True)`` when everything was sent.
        """
        while self._pos < len(self.frames) and self.frames[self._pos].direction == A2C:
            self._pos += 1
        if self._pos >= len(self.frames):
            return None, True
        frame = self.frames[self._pos]
        return frame.raw, self._ready(self._pos)

    def _ready(self, pos: int) -> bool:
        frames_before, responses_before = self._before[pos]
        if len(self.live) < frames_before:
            return False
        while self._responses_seen < responses_before:
            if self._response_order[self._responses_seen] not in self._live_responses:
                return False
            self._responses_seen += 1
        frame = self.frames[pos]
        if frame.kind == "response" and frame.rpc_id in self._recorded_requests:
            index = self._recorded_requests.index(frame.rpc_id)
            if index >= len(self._live_requests):
                return False
        return True

    def take(self, now_ns: int = 0) -> bytes:
        """The next frame to send, rewritten for the live agent; advances. ``now_ns``: when
        it is sent (a request's live latency is measured from it)."""
        frame = self.frames[self._pos]
        self._pos += 1
        if frame.kind == "request" and frame.rpc_id is not None:
            self.sent_ns[frame.rpc_id] = now_ns
        raw = frame.raw if frame.raw.endswith(b"\n") else frame.raw + b"\n"
        replacements: list[tuple[Span, bytes]] = []
        if frame.kind == "response" and frame.rpc_id in self._recorded_requests:
            index = self._recorded_requests.index(frame.rpc_id)
            if index < len(self._live_requests):
                live_id = self._live_requests[index].rpc_id or "null"
                for span in find_spans(raw, [("id",)]):
                    replacements.append((span, live_id.encode()))
            else:
                self.notes.append(f"the agent never sent the request answered at {frame.where}")
        for span in find_spans(raw, [("params", "sessionId")]):
            value = span.value(raw)
            if isinstance(value, str) and self.sessions.to_live(value) != value:
                replacements.append((span, json_bytes(self.sessions.to_live(value))))
        return splice(raw, replacements) if replacements else raw

    def settled(self) -> bool:
        """The agent produced at least as much as recorded, and answered every request."""
        if len(self.live) < len(self._recorded_a2c):
            return False
        return all(rid in self._live_responses for rid in self._recorded_responses)

    # -- comparison ----------------------------------------------------------------------

    def normalize(self, frame: Classified, *, live: bool) -> str:
        msg = frame.msg
        payload = msg.payload
        if msg.kind == "invalid" or not isinstance(payload, dict):
            text = frame.raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
            return f"{msg.kind}: {text}"
        if live:
            payload = _map_strings(payload, self.sessions.live_to_rec)
        payload = scrub(remove_paths(payload, self.ignores))
        if msg.kind == "response":
            method = self._c2a_methods.get(msg.id or "", "?")
            body = {k: v for k, v in payload.items() if k in ("result", "error")}
            if "error" in body and isinstance(body["error"], dict):
                body["error"] = {k: v for k, v in body["error"].items() if k != "message"} | {
                    "message": body["error"].get("message")
                }
            return f"response to {method}: " + _canon(body)
        label = "request" if msg.kind == "request" else "notification"
        return f"{label} {msg.method}: " + _canon(payload.get("params"))

    def result(self) -> CheckResult:
        recorded = [self.normalize(f, live=False) for f in self._recorded_a2c]
        live = [self.normalize(f, live=True) for f in self.live]
        diff = list(
            difflib.unified_diff(recorded, live, "recorded agent", "live agent", lineterm="", n=2)
        )
        causes = self.continuation_failures() if diff else []
        return CheckResult(recorded, live, diff, list(self.notes), causes, self.slower_exchanges())

    def slower_exchanges(self) -> list[SlowerExchange]:
        """Client requests answered more slowly than recorded: past ``threshold_ns``, or
        past ``fail_slower`` (those fail; ``initialize`` never does)."""
        out = []
        for f in self.frames:
            if f.direction != C2A or f.kind != "request" or f.rpc_id is None:
                continue
            recorded = self._recorded_responses.get(f.rpc_id)
            live = self._live_responses.get(f.rpc_id)
            sent = self.sent_ns.get(f.rpc_id)
            if recorded is None or live is None or sent is None:
                continue
            rec_ns, live_ns = recorded.mono_ns - f.mono_ns, live.mono_ns - sent
            limit = self.fail_slower
            fails = limit is not None and limit.fails(f.method, rec_ns, live_ns)
            if fails or live_ns - rec_ns > self.threshold_ns:
                out.append(SlowerExchange(f, rec_ns, live_ns, fails))
        return out

    def continuation_failures(self) -> list[str]:
        """A ``session/load`` or ``session/resume`` of a session an earlier connection made
        that the live agent refused or left unanswered: the fresh agent process does not
        have it, and everything after it differs for that reason."""
        out = []
        for f in self._continuation_requests():
            session = session_of(f.msg.payload)
            assert f.rpc_id is not None and session is not None
            answer = self._live_responses.get(f.rpc_id)
            if answer is None:
                got = "no answer"
            elif isinstance(answer.msg.payload, dict) and "error" in answer.msg.payload:
                error = answer.msg.payload["error"]
                message = error.get("message") if isinstance(error, dict) else error
                got = f"the error {message!r}"
            else:
                continue
            made_in = self.earlier_sessions[session]
            out.append(
                f"{f.method} at {f.where} asks for session {session} of connection "
                f"{made_in}, and this fresh agent process gave {got}: "
                "it does not keep sessions across processes, so the rest of this connection "
                f"was not replayed. Check connection {made_in} alone (-c {made_in}), or give "
                "the agent saved state (the demo agent: --state FILE)."
            )
        return out

    def sessions_seen(self) -> set[str]:
        """The recorded sessionIds this connection named (for the connections after it)."""
        seen = set()
        for f in self.frames:
            payload = f.msg.payload
            sid = session_of(payload)
            if sid is None and isinstance(payload, dict):
                result = payload.get("result")
                sid = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(sid, str):
                seen.add(sid)
        return seen


def _canon(value: Any) -> str:
    return json_bytes(value, sort_keys=True).decode()


def _map_strings(value: Any, mapping: dict[str, str]) -> Any:
    if not mapping:
        return value
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, dict):
        return {k: _map_strings(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, mapping) for v in value]
    return value
