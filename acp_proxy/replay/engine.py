"""The replay engine: a recording acting as an agent, sans-I/O.

API (what a transport adapter needs)::

    script = select_script(open_replay_frames("session.db"))  # once; lazy
    engine = ReplayEngine(script, ReplayOptions(match="loose", pace="fast"))  # per client
    outputs = engine.start()             # frames to send before the client says anything
    outputs = engine.receive(line)       # one frame from the client (bytes, newline optional)
    outputs = engine.answer_timed_out()  # the adapter gave up waiting for an answer
    outputs = engine.finish()            # the client went away: final notes

Every call returns a list of outputs, to be carried out in order:

- :class:`Send` ``(data, delay)``: write ``data`` (one JSON-RPC message, ending in ``\\n``;
  a WebSocket adapter strips the newline and sends one text frame) after sleeping
  ``delay`` seconds (always ``0.0`` with ``pace="fast"``; the recorded gap with
  ``pace="recorded"``).
- :class:`Note` ``(text)``: a human-readable line for stderr (mismatches, skipped frames).
- :class:`Wait` ``(request_id)``: the script is blocked until the client answers the
  agent→client request with this id (its exact JSON text). Nothing more is sent until that
  answer arrives through :meth:`ReplayEngine.receive`; an adapter may call
  :meth:`ReplayEngine.answer_timed_out` after a timeout of its choosing to move on.

The engine never raises on client input: bad JSON gets a ``-32700`` error response, an
unknown method or params get a ``-32601``/``-32602`` error naming the nearest recorded
candidate and the exact differences (and a :class:`Note` with the same text).

Matching modes (``ReplayOptions.match``): ``loose`` takes the earliest unconsumed recorded
request with the same method and params anywhere in the recording (repeats are served
first-in-first-out); ``sequential`` additionally never goes back before the last matched
step (skipped steps are dropped); ``strict`` requires the very next recorded client message.

Rewriting: an agent response gets the live request's id; an agent request keeps its
recorded id unless that id was already sent in this live connection (a second recorded
connection numbering its requests from 0 again), then it gets the smallest unused integer;
the client's answer is awaited where the recorded client answered; recorded sessionIds are
mapped to live ones. All rewrites are byte splices (:mod:`acp_proxy.replay.splice`); every
other byte goes out as recorded.

``session/load`` and ``session/resume``: when the recording holds the agent's own answer
to a matching request (the frames it sent up to its response), exactly those frames are
sent, like any other step. Only when it does not (a recording of ``session/new`` and
prompts, replayed by a client testing its resume) is the history synthesized from the
recorded session (:mod:`acp_proxy.replay.history`) for ``session/load`` and for
``session/resume`` with ``replayFrom``. Either way one :class:`Note` says which happened.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from acp_proxy.acp.conformance.capabilities import required_capability
from acp_proxy.acp.jsonpaths import Difference, parse_path, short
from acp_proxy.replay.history import history_frames, load_result
from acp_proxy.replay.match import DEFAULT_IGNORES, SessionMap, compare_call, session_of
from acp_proxy.replay.script import AwaitAnswer, Classified, Emit, Item, Script, Step, Trigger
from acp_proxy.replay.splice import Span, find_spans, insert_member, splice
from acp_proxy.wire.jsonrpc import Message, classify
from acp_proxy.wire.surrogates import json_bytes

MatchMode = Literal["loose", "sequential", "strict"]
Pace = Literal["fast", "recorded"]

SESSION_PATHS: list[tuple[str, ...]] = [
    ("params", "sessionId"),
    ("result", "sessionId"),
    ("result", "sessions", "*", "sessionId"),
]


@dataclass(frozen=True, slots=True)
class Send:
    """Write ``data`` to the client after ``delay`` seconds."""

    data: bytes
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Note:
    """A line for the operator (stderr)."""

    text: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Blocked until the client answers the agent request with id ``request_id``."""

    request_id: str


Output = Send | Note | Wait


@dataclass(slots=True)
class ReplayOptions:
    """How to replay: matching mode, pacing, ignore paths, capability tweaks."""

    match: MatchMode = "loose"
    pace: Pace = "fast"
    ignore: list[str] = field(default_factory=lambda: list(DEFAULT_IGNORES))
    advertise_load: bool = False
    max_delay: float | None = None


@dataclass(slots=True)
class _Run:
    """Work queued for sending: items of matched steps, with their live context."""

    item: Item | bytes
    step: Step | None


class ReplayEngine:
    """One live client connection served from a :class:`Script`."""

    def __init__(self, script: Script, options: ReplayOptions | None = None) -> None:
        self.script = script
        # Steps are read lazily, fresh for every engine: one Script may serve many
        # connections (e.g. WebSocket). The window holds the steps read so far that are
        # still candidates; consumed (and, in order modes, skipped) steps leave it.
        self._source = script.steps()
        self._window: list[Step] = []
        self._exhausted = False
        self._read_pos: tuple[int, int, int] | None = None  # trigger of the last step read
        self._skipped: list[Trigger] = []  # requests passed over in order modes (unsent)
        self._consumed_any = False
        self.options = options or ReplayOptions()
        self.ignores = [parse_path(p) for p in self.options.ignore]
        self.sessions = SessionMap()
        self._queue: deque[_Run] = deque()
        self._blocked_on: str | None = None
        self._answered: set[str] = set()
        self._next_fresh = 0
        # (connection, recorded agent request id) -> the id it went out with (the recorded
        # one unless that was already taken in this live connection)
        self._fresh_of: dict[tuple[int, str], str] = {}
        self._recorded_of_fresh: dict[str, tuple[int, str]] = {}
        # (connection, recorded client request id) -> live id text
        self._live_ids: dict[tuple[int, str], str] = {}
        self._initialize_ids: set[tuple[int, str]] = set()
        self._last_matched = -1
        self._current_conn: int | None = None  # connection of the last matched step
        self._init_conn: int | None = None  # connection whose initialize was matched
        self._last_mono: int | None = None
        self.mismatches = 0

    # -- public API ------------------------------------------------------------------------

    def start(self) -> list[Output]:
        """Frames the recording sent before the client's first message (usually none)."""
        return []

    @property
    def waiting_for(self) -> str | None:
        """The id of the agent request whose answer blocks the script, if any."""
        return self._blocked_on

    def receive(self, line: bytes) -> list[Output]:
        """Handle one frame from the client."""
        out: list[Output] = []
        msg = classify(line)
        if msg.kind == "batch":
            for member in msg.items:
                self._receive_message(member, out)
        elif msg.kind == "invalid":
            if msg.reason == "blank line":
                return out
            self._error(
                out,
                msg.id,
                -32700 if msg.payload is None else -32600,
                f"replay: cannot handle this frame: {msg.reason}",
            )
        else:
            self._receive_message(msg, out)
        self._run(out)
        return out

    def answer_timed_out(self) -> list[Output]:
        """Stop waiting for the current answer and carry on with the script."""
        out: list[Output] = []
        if self._blocked_on is not None:
            out.append(Note(f"replay: no answer to request id {self._blocked_on}; moving on"))
            self._answered.add(self._blocked_on)
            self._blocked_on = None
            self._run(out)
        return out

    def finish(self) -> list[Output]:
        """The client is gone; report what was left unplayed."""
        left = [*self._skipped, *(s.trigger for s in self._window if s.trigger.is_request)]
        count, later = (0, None) if self._exhausted else self.script.requests_after(self._read_pos)
        total = len(left) + count
        if not total:
            return []
        first = min(left, key=lambda t: t.position) if left else later
        assert first is not None
        return [
            Note(
                f"replay: {total} recorded client request(s) were never sent, first: "
                f"{first.method} ({first.frame.where})"
            )
        ]

    # -- receiving -------------------------------------------------------------------------

    def _receive_message(self, msg: Message, out: list[Output]) -> None:
        if msg.kind == "response":
            self._receive_answer(msg, out)
            return
        if msg.kind not in ("request", "notification") or msg.method is None:
            self._error(out, msg.id, -32600, f"replay: invalid message: {msg.reason}")
            return
        method = msg.method
        replayable = method in ("session/load", "session/resume")
        if msg.kind == "request" and replayable and self._load(msg, out):
            return
        step, diffs, nearest = self._match(msg)
        if step is None:
            self._no_match(msg, diffs, nearest, out)
            return
        self._accept(step, msg)
        for item in step.items:
            self._queue.append(_Run(item, step))

    def _receive_answer(self, msg: Message, out: list[Output]) -> None:
        if msg.id is None or msg.id not in self._recorded_of_fresh:
            out.append(Note(f"replay: the client answered unknown request id {msg.id}"))
            return
        self._answered.add(msg.id)
        if self._blocked_on == msg.id:
            self._blocked_on = None

    def _accept(self, step: Step, msg: Message) -> None:
        step.consumed = True
        self._consumed_any = True
        self._current_conn = step.connection_id
        self._last_matched = max(self._last_matched, step.index)
        if self.options.match == "loose":
            self._window.remove(step)
        else:  # never back before this step: what it passed over is gone
            for other in self._window:
                if other.index < step.index and other.trigger.is_request:
                    self._skipped.append(other.trigger)
            self._window = [s for s in self._window if s.index > step.index]
        trig = step.trigger
        if msg.id is not None and trig.msg.id is not None:
            key = (step.connection_id, trig.msg.id)
            self._live_ids[key] = msg.id
            if trig.method == "initialize":
                self._initialize_ids.add(key)
                self._init_conn = step.connection_id
        rec_sid, live_sid = session_of(trig.msg.payload), session_of(msg.payload)
        if rec_sid is not None and live_sid is not None:
            self.sessions.bind(rec_sid, live_sid)
        self._last_mono = trig.frame.mono_ns

    # -- matching --------------------------------------------------------------------------

    def _pull(self) -> Step | None:
        """Read the next step of the recording into the window (None: all read)."""
        if self._exhausted:
            return None
        step = next(self._source, None)
        if step is None:
            self._exhausted = True
            return None
        self._window.append(step)
        self._read_pos = step.trigger.position
        return step

    def _pull_until(self, position: tuple[int, int, int]) -> Step | None:
        """Read steps up to the one whose trigger is at ``position``."""
        while (step := self._pull()) is not None:
            if step.trigger.position == position:
                return step
        return None

    def _match(self, msg: Message) -> tuple[Step | None, list[Difference], Step | None]:
        """The recorded step answering ``msg`` (else None, the nearest one's differences,
        the nearest step). Steps not read yet are looked for among the recorded calls of the
        same method (:meth:`Script.future_triggers`) and read only up to the match."""
        mode = self.options.match
        best: tuple[int, Step, list[Difference]] | None = None

        def compare(trig: Trigger, strict: bool) -> list[Difference] | None:
            """Differences (``[]``: a match); None: not a candidate (kind differs)."""
            kinds_differ = trig.msg.kind != msg.kind
            if kinds_differ and not strict:
                return None
            diffs = compare_call(trig.msg.payload, msg.payload, self.ignores, self.sessions)
            if kinds_differ:
                diffs = [Difference("kind", trig.msg.kind, msg.kind), *diffs]
            return diffs

        def score(step: Step, diffs: list[Difference]) -> None:
            nonlocal best
            value = len(diffs) + (100 if step.trigger.method != msg.method else 0)
            if best is None or value < best[0]:
                best = (value, step, diffs)

        def nearest() -> tuple[None, list[Difference], Step | None]:
            return (None, [], None) if best is None else (None, best[2], best[1])

        if mode == "strict":
            if not self._window:
                self._pull()
            for step in self._window[:1]:
                diffs = compare(step.trigger, strict=True)
                if diffs == []:
                    return step, [], step
                score(step, diffs or [])
            return nearest()
        current = self._current_conn
        window = self._window
        if mode == "loose":
            # Prefer the recorded connection being replayed: a multi-connection recording
            # (v1 and v2 runs of one client) must not mix their answers.
            window = sorted(window, key=lambda s: s.connection_id != current)
        elsewhere: Step | None = None  # the earliest match in another connection
        for step in window:
            diffs = compare(step.trigger, strict=False)
            if diffs is None:
                continue
            if not diffs:
                if mode == "sequential" or current is None or step.connection_id == current:
                    return step, [], step
                elsewhere = elsewhere or step
                continue
            score(step, diffs)
        if not self._exhausted and msg.method is not None:
            for trig in self.script.future_triggers(self._read_pos, msg.method):
                if elsewhere is not None and trig.frame.connection_id != current:
                    break  # the earlier match in the window wins
                diffs = compare(trig, strict=False)
                if diffs is None:
                    continue
                if not diffs:
                    found = self._pull_until(trig.position)
                    if found is not None:
                        return found, [], found
                    break
                score(Step(-1, trig), diffs)
        if elsewhere is not None:
            return elsewhere, [], elsewhere
        return nearest()

    def _no_match(
        self, msg: Message, diffs: list[Difference], nearest: Step | None, out: list[Output]
    ) -> None:
        self.mismatches += 1
        asked = f"{msg.method} {short(msg.params, 120)}"
        if nearest is None:
            text = f"replay: no recorded request matches {asked}: " + (
                "nothing left to replay"
                if self.options.match != "loose" or self._consumed_any
                else "the recording has no client requests"
            )
            code = -32601
            data: dict[str, Any] = {"asked": _asked(msg)}
        else:
            same_method = nearest.trigger.method == msg.method
            code = -32602 if same_method else -32601
            shown = "; ".join(d.describe() for d in diffs[:8])
            if len(diffs) > 8:
                shown += f"; and {len(diffs) - 8} more"
            mode = self.options.match
            where = nearest.trigger.frame.where
            text = (
                f"replay: no recorded request matches {asked}; nearest recorded candidate"
                f"{' (next in order, --match ' + mode + ')' if mode != 'loose' else ''}: "
                f"{nearest.trigger.method} ({where}); differences: {shown}"
            )
            data = {
                "asked": _asked(msg),
                "nearest": {
                    "method": nearest.trigger.method,
                    "params": nearest.trigger.params,
                    "where": where,
                },
                "differences": [d.to_json() for d in diffs],
            }
        out.append(Note(text))
        if msg.kind == "request":
            self._error(out, msg.id, code, text, data)

    def _error(
        self,
        out: list[Output],
        id_text: str | None,
        code: int,
        message: str,
        data: Any = None,
    ) -> None:
        body = b'{"jsonrpc":"2.0","id":' + (id_text or "null").encode() + b',"error":'
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        out.append(Send(body + json_bytes(error) + b"}\n"))

    # -- history re-emission ---------------------------------------------------------------

    def _load(self, msg: Message, out: list[Output]) -> bool:
        """Handle session/load and session/resume; False: treat as an ordinary request."""
        params = msg.params if isinstance(msg.params, dict) else {}
        live_sid = params.get("sessionId")
        if not isinstance(live_sid, str):
            return False
        rec_sid = self.sessions.to_recorded(live_sid)
        if not self.script.has_session(rec_sid):
            count, known = self.script.session_ids(20)
            self._error(
                out,
                msg.id,
                -32002,
                f"replay: session {live_sid} is not in the recording ({count} recorded session(s))",
                {"sessionId": live_sid, "known": known},
            )
            out.append(Note(f"replay: {msg.method} for unknown session {live_sid}"))
            return True
        step, diffs, nearest = self._match(msg)
        if step is None and self.options.match == "strict" and not self.options.advertise_load:
            # strict: exactly the next recorded client message, or an error.
            self._no_match(msg, diffs, nearest, out)
            return True
        asked = f"{msg.method} of {live_sid}"
        if step is not None and _response_of(step) is not None:
            # The recording holds the agent's own answer: send exactly that.
            self._accept(step, msg)
            emitted = sum(isinstance(item, Emit) for item in step.items)
            out.append(
                Note(
                    f"replay: {asked}: sending the agent's recorded answer "
                    f"({step.trigger.frame.where}, {emitted} frame(s))"
                )
            )
            for item in step.items:
                self._queue.append(_Run(item, step))
            return True
        frames = self.script.session_frames(rec_sid)
        version = self.script.protocol_version_of(frames)
        live_version = self._live_version()
        if live_version is not None:
            # The same sessionId recorded under another protocol version (agents that
            # number sessions sess_1, sess_2, ... in every process) is another session.
            same = [f for f in frames if self._version_of(f.connection_id) == live_version]
            if same:
                frames, version = same, live_version
        replay = msg.method == "session/load" or (
            (version or 1) >= 2 and params.get("replayFrom") is not None
        )
        if step is not None:
            # A recorded request the agent never answered: history as it stood then.
            cut = (step.trigger.frame.connection_id, step.trigger.frame.seq)
            frames = [f for f in frames if (f.connection_id, f.seq) <= cut]
        self.sessions.bind(rec_sid, live_sid)
        history = history_frames(rec_sid, frames, version) if replay else []
        for raw in history:
            self._queue.append(_Run(raw, None))
        what = (
            f"history synthesized from the recorded session ({len(history)} update(s))"
            if replay
            else "no history asked"
        )
        out.append(Note(f"replay: {asked}: no recorded answer in the recording; {what}"))
        if step is not None:
            self._accept(step, msg)
            for item in step.items:
                f = item.frame if isinstance(item, Emit) else None
                replaced = f is not None and f.method == "session/update"
                if replay and replaced and f is not None and f.session_id == rec_sid:
                    continue  # replaced by the synthesized history above
                self._queue.append(_Run(item, step))
            return True
        result = json_bytes(load_result(frames))  # the session's modes, as the agent would
        answer = b'{"jsonrpc":"2.0","id":' + (msg.id or "null").encode() + b',"result":'
        answer += result + b"}\n"
        self._queue.append(_Run(answer, None))
        return True

    def _version_of(self, connection_id: int) -> int | None:
        info = self.script.connections.get(connection_id)
        return None if info is None else info.protocol_version

    def _live_version(self) -> int | None:
        """The protocol version of the recorded connection whose initialize was matched."""
        return None if self._init_conn is None else self._version_of(self._init_conn)

    # -- sending ---------------------------------------------------------------------------

    def _run(self, out: list[Output]) -> None:
        while self._queue and self._blocked_on is None:
            run = self._queue.popleft()
            item = run.item
            if isinstance(item, bytes):
                out.append(Send(self._map_sessions(item)))
                continue
            if isinstance(item, AwaitAnswer):
                fresh = self._fresh_of.get((item.connection_id, item.rpc_id))
                if fresh is not None and fresh not in self._answered:
                    self._blocked_on = fresh
                    out.append(Wait(fresh))
                continue
            data = self._rewrite(item.frame, out)
            if data is not None:
                out.append(Send(data, self._delay(item.frame)))

    def _delay(self, frame: Classified) -> float:
        if self.options.pace != "recorded":
            return 0.0
        prev = self._last_mono
        self._last_mono = frame.mono_ns
        if prev is None:
            return 0.0
        delay = max(0.0, (frame.mono_ns - prev) / 1e9)
        if self.options.max_delay is not None:
            delay = min(delay, self.options.max_delay)
        return delay

    def _rewrite(self, frame: Classified, out: list[Output]) -> bytes | None:
        raw = frame.raw if frame.raw.endswith(b"\n") else frame.raw + b"\n"
        msg = frame.msg
        conn = frame.connection_id
        if msg.kind == "response" and msg.id is not None:
            live = self._live_ids.get((conn, msg.id))
            if live is None:
                out.append(
                    Note(
                        f"replay: skipping the recorded response to id {msg.id} "
                        f"({frame.where}): the client did not send that request"
                    )
                )
                return None
            raw = self._set_id(raw, live)
            if self.options.advertise_load and (conn, msg.id) in self._initialize_ids:
                raw = _advertise_load(raw)
            result = msg.result
            minted = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(minted, str):  # the client now knows this session by that id
                self.sessions.bind(minted, self.sessions.to_live(minted))
        elif msg.kind == "request" and msg.id is not None:
            fresh = msg.id
            if fresh in self._recorded_of_fresh:  # taken: another recorded request had it
                fresh = self._fresh_id()
            self._fresh_of[(conn, msg.id)] = fresh
            self._recorded_of_fresh[fresh] = (conn, msg.id)
            raw = self._set_id(raw, fresh)
        return self._map_sessions(raw)

    def _fresh_id(self) -> str:
        """The smallest unused integer id (from 0 up) for an agent request."""
        while str(self._next_fresh) in self._recorded_of_fresh:
            self._next_fresh += 1
        return str(self._next_fresh)

    @staticmethod
    def _set_id(raw: bytes, id_text: str) -> bytes:
        spans = find_spans(raw, [("id",)])
        if not spans or spans[0].text(raw) == id_text.encode():
            return raw
        return splice(raw, [(spans[0], id_text.encode())])

    def _map_sessions(self, raw: bytes) -> bytes:
        mapping = self.sessions.rec_to_live
        if not any(k != v for k, v in mapping.items()):
            return raw
        replacements: list[tuple[Span, bytes]] = []
        for span in find_spans(raw, SESSION_PATHS):
            value = span.value(raw)
            if isinstance(value, str) and mapping.get(value, value) != value:
                replacements.append((span, json_bytes(mapping[value])))
        return splice(raw, replacements) if replacements else raw


def _response_of(step: Step) -> Classified | None:
    """The recorded agent response to ``step``'s request, if the step holds it."""
    trig = step.trigger
    for item in step.items:
        if isinstance(item, Emit):
            f = item.frame
            if f.kind == "response" and f.rpc_id == trig.msg.id:
                return f
    return None


def _asked(msg: Message) -> dict[str, Any]:
    return {"method": msg.method, "params": msg.params}


def _load_flag() -> str:
    """The agent capability ``session/load`` needs on v1, from the conformance table."""
    path = required_capability("client", "session/load", 1)
    assert path is not None and len(path) == 1, path
    return path[0]


LOAD_FLAG = _load_flag()
"""``loadSession``: the member ``--advertise-load`` sets in ``agentCapabilities``."""


def _advertise_load(raw: bytes) -> bytes:
    """Set ``result.agentCapabilities.loadSession`` to ``true`` by splicing."""
    caps_path = ("result", "agentCapabilities")
    spans = {s.path: s for s in find_spans(raw, [("result",), caps_path, (*caps_path, LOAD_FLAG)])}
    flag = spans.get((*caps_path, LOAD_FLAG))
    if flag is not None:
        return splice(raw, [(flag, b"true")])
    caps = spans.get(caps_path)
    if caps is not None and caps.text(raw).lstrip().startswith(b"{"):
        return insert_member(raw, caps, LOAD_FLAG, b"true")
    result = spans.get(("result",))
    if result is not None and result.text(raw).lstrip().startswith(b"{"):
        return insert_member(raw, result, "agentCapabilities", json_bytes({LOAD_FLAG: True}))
    return raw
