"""Aligning two connections' frames and saying what changed (``acp-proxy diff``; pure).

Each frame is reduced to its *signature*: (direction, JSON-RPC kind, method, update
variant). JSON-RPC ids and the volatile members (ids of every entity, sessionIds,
timestamps, ``_meta`` trace context: :mod:`acp_proxy.acp.volatile`, the one definition
``replay --client`` uses too) are not part of it, so two runs of the same conversation align
even though every id differs. Each direction is aligned on its own, in the order that side
sent its frames (:func:`align_connections`): how client and agent frames interleaved on the
wire is not a difference. Within a direction the two signature sequences are aligned with a
longest common subsequence (:func:`align`); frames of B that are not in it were *added*,
frames of A *removed*, and aligned frames whose JSON differs (after dropping the ignored
members, :func:`normalise`) are *changed*, with each changed member as a path and old → new
values. A response is keyed with the request it answers, so turn 2's ``end_turn`` pairs
with turn 2's.

Memory: the alignment holds only the signatures (small integers) of both connections and,
for the LCS, one bit row per frame of B over the frames of A after the common prefix and
suffix are trimmed: at most :data:`LCS_CELLS` bits (20k x 20k frames, 50 MB). Beyond it
whole turns are aligned first (:func:`turn_pairs`: an LCS over the turns, each turn one
symbol, then the frames of the turns that differ), which on two runs of one conversation
gives the LCS over every frame at the cost of the differing turns only (100k frames a side:
exact). Only when that is still too big does the alignment fall back to a linear greedy walk
(:func:`greedy_pairs`, look-ahead :data:`GREEDY_WINDOW`), and it says so in
:attr:`ConnectionAlignment.note`. The frames' bytes are compared as they are streamed
(:func:`compare_aligned`), never held.

Timing: the latency of every request/response exchange (paired with
:class:`~acp_proxy.acp.exchanges.Exchanges`, the one pairing model) and the duration of every
turn (``session/prompt`` to the ``idle`` state update of its session in v2, to the prompt's
response in v1) are measured on both sides; an aligned exchange or turn that became slower by
more than a threshold is a :class:`TimingRegression`: reported, and a failure only past a
:class:`SlowerLimit` (never for ``initialize``, whose start-up time varies by seconds).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from acp_proxy.acp.exchanges import Exchanges
from acp_proxy.acp.jsonpaths import Difference, diff_values, remove_paths
from acp_proxy.acp.lcs import GREEDY_WINDOW as GREEDY_WINDOW
from acp_proxy.acp.lcs import LCS_CELLS as LCS_CELLS
from acp_proxy.acp.lcs import align_pairs as align_pairs
from acp_proxy.acp.lcs import greedy_pairs as greedy_pairs
from acp_proxy.acp.lcs import lcs_pairs as lcs_pairs
from acp_proxy.acp.lcs import turn_pairs as turn_pairs
from acp_proxy.acp.turns import Turn, TurnTracker
from acp_proxy.acp.volatile import scrub, scrub_parsed
from acp_proxy.wire.frame import A2C, C2A, Direction, Frame
from acp_proxy.wire.jsonrpc import parse_json
from acp_proxy.wire.surrogates import escape_lone_surrogates, json_bytes, may_hold_lone_surrogates

Signature = tuple[Direction, str | None, str | None, str | None]
"""(direction, kind, method, update variant)."""


def describe_signature(sig: Signature) -> str:
    """``c2a request session/prompt`` / ``a2c notification session/update [plan]``."""
    direction, kind, method, update = sig
    text = f"{direction} {kind or '?'}"
    if method:
        text += f" {method}"
    if update:
        text += f" [{update}]"
    return text


@dataclass(slots=True)
class ConnectionSketch:
    """One connection as the alignment sees it: signatures, frame numbers and latencies.

    Feed frames in order with :meth:`add`, then :meth:`finish`. Memory: a few integers per
    frame (signatures are interned in a :class:`Signatures` table shared by both sides; the
    content keys are 8-byte hashes), never the frames themselves.
    """

    table: Signatures
    ignores: Sequence[tuple[str, ...]] = ()
    """Ignore paths for :attr:`content` (as in :func:`normalise`)."""
    sigs: list[int] = field(default_factory=list)
    content: array[int] = field(default_factory=lambda: array("q"))
    """One :func:`content_key` per frame, when :meth:`add` is given the frame's bytes."""
    seqs: list[int] = field(default_factory=list)
    frame_ids: list[int] = field(default_factory=list)
    latency_ns: dict[int, int] = field(default_factory=dict)
    """Frame index of a request -> nanoseconds until its response."""
    turn_ns: dict[int, int] = field(default_factory=dict)
    """Frame index of a ``session/prompt`` -> nanoseconds until its turn ended: the
    ``state_update`` ``idle`` of its session (v2), else the prompt's response (v1)."""
    _exchanges: Exchanges[tuple[int, int], tuple[int, int]] = field(default_factory=Exchanges)
    _turns: TurnTracker = field(default_factory=TurnTracker)
    """The turns (:mod:`acp_proxy.acp.turns`), their prompts named by frame index."""
    _prompt_ns: dict[int, int] = field(default_factory=dict)  # prompt index -> its clock
    _stateful: set[str] = field(default_factory=set)  # sessions that send state_update (v2)

    def add(self, frame: Frame, *, content: bool = True) -> None:
        """The next frame (``content``: key its bytes too, for :attr:`content`)."""
        direction, kind, method = frame.direction, frame.kind, frame.method
        update_kind, mono_ns, session_id = frame.update_kind, frame.mono_ns, frame.session_id
        raw = frame.raw if content else None
        index = len(self.sigs)
        sig = self.table.intern((direction, kind, method, update_kind))
        self.sigs.append(sig)
        self.seqs.append(frame.seq)
        self.frame_ids.append(frame.id)
        if session_id is not None:
            self._turn(index, frame, raw)
        request = self._pair(index, direction, kind, frame.rpc_id, mono_ns)
        if request is not None and request in self._prompt_ns and raw is not None:
            self._ended(self._turns.prompt_result(str(request), parse_json(raw)[0], index, mono_ns))
        if raw is not None:
            # A response is keyed with its request: turn 2's end_turn is not turn 1's.
            context = self.content[request] if request is not None else None
            self.content.append(content_key(sig, raw, self.ignores, context))

    def _pair(
        self, index: int, direction: Direction, kind: str | None, rpc_id: str | None, mono_ns: int
    ) -> int | None:
        """Pair requests and responses; the index of the request a response answers."""
        ex = self._exchanges
        if ex.held:
            ex.tick()
        if rpc_id is None:
            return None
        if kind == "request":
            early = ex.request(direction, rpc_id, (index, mono_ns))
            if early is not None:
                self.latency_ns[index] = max(0, early[1] - mono_ns)
        elif kind == "response":
            req = ex.answer(direction, rpc_id)
            if req is not None:
                self.latency_ns[req[0]] = mono_ns - req[1]
                return req[0]
            ex.hold_early(direction, rpc_id, (index, mono_ns))
        return None

    def _turn(self, index: int, frame: Frame, raw: bytes | None) -> None:
        session_id = frame.session_id
        assert session_id is not None
        if frame.direction == C2A and frame.kind == "request" and frame.method == "session/prompt":
            self._turns.prompt(session_id, str(index), index, frame.mono_ns)
            self._prompt_ns[index] = frame.mono_ns
        elif frame.direction == A2C and frame.update_kind == "state_update":
            self._stateful.add(session_id)
            if raw is not None:
                update = _update_of(raw)
                state = update.get("state")
                self._ended(self._turns.state(session_id, state, update, index, frame.mono_ns))

    def _ended(self, turn: Turn | None) -> None:
        """A turn ended: its prompt's duration (measured from the prompt, as recorded)."""
        if turn is not None and turn.prompt_id is not None and turn.end_ns is not None:
            index = int(turn.prompt_id)
            self.turn_ns[index] = turn.end_ns - self._prompt_ns[index]

    def finish(self) -> None:
        """End of the connection: a prompt whose turn end was not seen (no bytes given, or a
        response that did not say) takes its response's latency, unless its v2 session is
        still running."""
        for index in self._prompt_ns:
            if index not in self.turn_ns and index in self.latency_ns:
                self.turn_ns[index] = self.latency_ns[index]
        for session_id, turn in self._turns.open.items():
            if session_id in self._stateful and turn.prompt_id is not None:
                self.turn_ns.pop(int(turn.prompt_id), None)  # a v2 turn never ended
        self._exchanges.clear()
        self._turns = TurnTracker()
        self._prompt_ns.clear()

    def __len__(self) -> int:
        return len(self.sigs)

    def signature(self, index: int) -> Signature:
        return self.table.sigs[self.sigs[index]]


@dataclass(slots=True)
class Signatures:
    """Interning table: each distinct signature gets a small integer."""

    ids: dict[Signature, int] = field(default_factory=dict)
    sigs: list[Signature] = field(default_factory=list)

    def intern(self, sig: Signature) -> int:
        number = self.ids.get(sig)
        if number is None:
            number = self.ids[sig] = len(self.sigs)
            self.sigs.append(sig)
        return number


Tag = Literal["equal", "delete", "insert"]
Opcode = tuple[Tag, int, int, int, int]
"""(tag, a_start, a_end, b_start, b_end), like :mod:`difflib`'s opcodes (no ``replace``)."""


@dataclass(frozen=True, slots=True)
class Alignment:
    """The aligned runs of two signature sequences; ``note`` says when LCS was not used."""

    opcodes: list[Opcode]
    exact: bool = True
    note: str | None = None


def align(
    a: Sequence[int],
    b: Sequence[int],
    *,
    a_content: Sequence[int] | None = None,
    b_content: Sequence[int] | None = None,
    max_cells: int = LCS_CELLS,
    a_starts: Sequence[bool] | None = None,
    b_starts: Sequence[bool] | None = None,
) -> Alignment:
    """Align two signature sequences into opcodes.

    With ``a_content``/``b_content`` (one :func:`content_key` per frame), frames that are
    equal (after normalising) are aligned first, and only the frames left between them are
    aligned by signature: so among several frames of one signature (a run of message chunks)
    the equal ones pair up and the one that differs is *changed* or *added*, not whichever
    the signature LCS happened to pick. ``a_starts``/``b_starts`` (whether each frame starts
    a turn) let a big alignment go turn by turn (:func:`turn_pairs`) before greedy.
    """
    if a_content is None or b_content is None:
        by_signature, note = align_pairs(a, b, max_cells, a_starts=a_starts, b_starts=b_starts)
        return Alignment(opcodes_from_pairs(by_signature, len(a), len(b)), note is None, note)
    anchors, note = align_pairs(
        a_content, b_content, max_cells, a_starts=a_starts, b_starts=b_starts
    )
    pairs: list[tuple[int, int]] = []
    i = j = 0
    for pi, pj in [*anchors, (len(a), len(b))]:
        if pi > i and pj > j:  # a gap on both sides: align it by signature
            gap, gap_note = align_pairs(
                a[i:pi],
                b[j:pj],
                max_cells,
                a_starts=None if a_starts is None else a_starts[i:pi],
                b_starts=None if b_starts is None else b_starts[j:pj],
            )
            note = note or gap_note
            pairs += [(i + gi, j + gj) for gi, gj in gap]
        if pi < len(a) and pj < len(b):
            pairs.append((pi, pj))
        i, j = pi + 1, pj + 1
    return Alignment(opcodes_from_pairs(pairs, len(a), len(b)), note is None, note)


Row = tuple[int | None, int | None]
"""One row of a connection alignment: (frame of A, frame of B); ``None`` on the side
that does not have it."""


@dataclass(frozen=True, slots=True)
class ConnectionAlignment:
    """Two connections aligned direction by direction, as rows in A's order.

    Each direction's frames are aligned in the order that side sent them (the client's with
    the client's, the agent's with the agent's): how the two directions interleaved on the
    wire (a notification sent while the client's next request was in flight) is not a
    difference. Rows hold every frame of A in order, each with its counterpart in B or
    ``None``; a frame only B has follows the row of the B frame before it.
    """

    rows: list[Row]
    exact: bool = True
    note: str | None = None

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return [(i, j) for i, j in self.rows if i is not None and j is not None]

    @property
    def removed(self) -> list[int]:
        """Frame indexes of A that B does not have."""
        return [i for i, j in self.rows if i is not None and j is None]

    @property
    def added(self) -> list[int]:
        """Frame indexes of B that A does not have."""
        return [j for i, j in self.rows if i is None and j is not None]


def align_connections(
    a: ConnectionSketch, b: ConnectionSketch, *, max_cells: int = LCS_CELLS
) -> ConnectionAlignment:
    """Align each direction's frames separately (:func:`align`), then merge into rows."""
    pairs: list[tuple[int, int]] = []
    note: str | None = None
    keyed = len(a.content) == len(a) and len(b.content) == len(b)
    for direction in (C2A, A2C):
        ia = [i for i in range(len(a)) if a.signature(i)[0] == direction]
        ib = [j for j in range(len(b)) if b.signature(j)[0] == direction]
        sub = align(
            [a.sigs[i] for i in ia],
            [b.sigs[j] for j in ib],
            a_content=[a.content[i] for i in ia] if keyed else None,
            b_content=[b.content[j] for j in ib] if keyed else None,
            max_cells=max_cells,
            a_starts=[_starts_turn(a.signature(i)) for i in ia],
            b_starts=[_starts_turn(b.signature(j)) for j in ib],
        )
        note = note or sub.note
        for tag, i1, i2, j1, _j2 in sub.opcodes:
            if tag == "equal":
                pairs += [(ia[i1 + k], ib[j1 + k]) for k in range(i2 - i1)]
    return ConnectionAlignment(merge_rows(pairs, len(a), len(b)), note is None, note)


def _starts_turn(sig: Signature) -> bool:
    """Whether a frame opens a turn for :func:`turn_pairs`: the prompt request (the client's
    side), the prompt's response (the agent's)."""
    return sig[2] == "session/prompt" and sig[1] in ("request", "response")


def merge_rows(pairs: Iterable[tuple[int, int]], n: int, m: int) -> list[Row]:
    """Rows for ``n`` frames of A and ``m`` of B given the matched ``pairs`` (any order)."""
    a_to_b = dict(pairs)
    b_to_a = {j: i for i, j in a_to_b.items()}
    after: dict[int, list[int]] = {}  # row of A -> frames only B has, shown after it
    anchor = -1
    for j in range(m):
        if j in b_to_a:
            anchor = b_to_a[j]
        else:
            after.setdefault(anchor, []).append(j)
    rows: list[Row] = [(None, j) for j in after.get(-1, [])]
    for i in range(n):
        rows.append((i, a_to_b.get(i)))
        rows += [(None, j) for j in after.get(i, [])]
    return rows


def content_key(
    signature: int,
    raw: bytes,
    ignores: Sequence[tuple[str, ...]] = (),
    context: int | None = None,
) -> int:
    """A hash of a frame's signature and normalised JSON (:func:`normalise`): equal frames of
    two runs (ids, sessionIds and timestamps aside) get equal keys. ``context``: the content
    key of the request a response answers."""
    value, problem = parse_frame(raw)
    if problem is not None:
        return hash((signature, context, raw))
    try:
        text = json_bytes(_normalise_parsed(value, ignores), sort_keys=True)
    except RecursionError:  # nested too deep to normalise: the bytes are the content
        return hash((signature, context, raw))
    return hash((signature, context, text))


def parse_frame(raw: bytes) -> tuple[Any, str | None]:
    """:func:`parse_json`, each lone surrogate (valid JSON UTF-8 cannot hold) first made its
    ``\\uXXXX`` escape text, so values print, dump and compare like any other text."""
    if may_hold_lone_surrogates(raw):
        raw = escape_lone_surrogates(raw)
    return parse_json(raw)


def opcodes_from_pairs(pairs: Iterable[tuple[int, int]], n: int, m: int) -> list[Opcode]:
    """Runs of equal / deleted (in A only) / inserted (in B only) frames."""
    out: list[Opcode] = []
    i = j = 0

    def push(tag: Tag, i1: int, i2: int, j1: int, j2: int) -> None:
        if out and out[-1][0] == tag and out[-1][2] == i1 and out[-1][4] == j1:
            prev = out[-1]
            out[-1] = (tag, prev[1], i2, prev[3], j2)
        else:
            out.append((tag, i1, i2, j1, j2))

    for pi, pj in [*pairs, (n, m)]:
        if pi > i:
            push("delete", i, pi, j, j)
        if pj > j:
            push("insert", pi, pi, j, pj)
        if pi < n and pj < m:
            push("equal", pi, pi + 1, pj, pj + 1)
        i, j = pi + 1, pj + 1
    return out


def normalise(message: Any, ignores: Sequence[tuple[str, ...]] = ()) -> Any:
    """A message without its JSON-RPC id and ``ignores``, its volatile members (ids,
    timestamps, trace context: :mod:`acp_proxy.acp.volatile`) masked."""
    if isinstance(message, dict):
        message = {k: v for k, v in message.items() if k != "id"}
    return scrub(remove_paths(message, list(ignores)))


def _normalise_parsed(message: Any, ignores: Sequence[tuple[str, ...]] = ()) -> Any:
    """:func:`normalise` of a message just parsed that nothing else holds, done in place
    (:func:`~acp_proxy.acp.volatile.scrub_parsed`): the same value, without copying it."""
    if isinstance(message, dict):
        message.pop("id", None)
    if ignores:
        message = remove_paths(message, list(ignores))
    return scrub_parsed(message)


def changed_members(
    raw_a: bytes, raw_b: bytes, ignores: Sequence[tuple[str, ...]] = ()
) -> list[Difference]:
    """How two aligned frames differ (``recorded`` = A, ``live`` = B); ``[]`` when equal."""
    if raw_a == raw_b:
        return []
    a, problem_a = parse_frame(raw_a)
    b, problem_b = parse_frame(raw_b)
    if problem_a is None and problem_b is None:
        try:
            return diff_values(_normalise_parsed(a, ignores), _normalise_parsed(b, ignores))
        except RecursionError:  # nested too deep to walk: compare the text
            pass
    text_a = raw_a.decode("utf-8", "replace")
    text_b = raw_b.decode("utf-8", "replace")
    return [] if text_a == text_b else [Difference("(bytes)", text_a, text_b)]


@dataclass(frozen=True, slots=True)
class Change:
    """An aligned pair of frames whose JSON differs (indexes into both sketches)."""

    a: int
    b: int
    members: list[Difference]


def compare_aligned(
    alignment: ConnectionAlignment,
    frames_a: Iterator[bytes],
    frames_b: Iterator[bytes],
    ignores: Sequence[tuple[str, ...]] = (),
) -> Iterator[Change]:
    """Stream both connections' raw frames (in order) and yield the aligned pairs that differ.

    Pairs are met in A's order; B's frames read ahead of their pair (where the directions
    interleaved differently) are held until it comes, and only those.
    """
    wanted = {j for _, j in alignment.pairs}
    held: dict[int, bytes] = {}
    next_a = next_b = 0
    for i, j in alignment.pairs:
        while next_a < i:
            next(frames_a)
            next_a += 1
        raw_a = next(frames_a)
        next_a += 1
        while next_b <= j:
            raw = next(frames_b)
            if next_b in wanted:
                held[next_b] = raw
            next_b += 1
        members = changed_members(raw_a, held.pop(j), ignores)
        if members:
            yield Change(i, j, members)


def _update_of(raw: bytes) -> dict[str, Any]:
    """The ``params.update`` object of a ``session/update`` (``{}`` if there is none)."""
    value, problem = parse_json(raw)
    params = value.get("params") if problem is None and isinstance(value, dict) else None
    update = params.get("update") if isinstance(params, dict) else None
    return update if isinstance(update, dict) else {}


@dataclass(frozen=True, slots=True)
class SlowerLimit:
    """When getting slower fails a diff (``--fail-slower``): by more than ``percent`` of the
    recorded (A) time, or by more than ``ms`` milliseconds. ``initialize`` never fails."""

    percent: float | None = None
    ms: float | None = None

    @classmethod
    def parse(cls, text: str) -> SlowerLimit:
        """``50%`` or ``500`` / ``500ms`` (ValueError with a message otherwise)."""
        value = text.strip().lower()
        try:
            if value.endswith("%"):
                limit = cls(percent=float(value[:-1]))
            else:
                limit = cls(ms=float(value.removesuffix("ms")))
        except ValueError:
            raise ValueError(f"{text!r} is not PCT% or MS (e.g. 50% or 500)") from None
        if (limit.percent or 0) < 0 or (limit.ms or 0) < 0:
            raise ValueError(f"{text!r}: the limit cannot be negative")
        return limit

    def fails(self, method: str | None, a_ns: int, b_ns: int) -> bool:
        if method == "initialize":
            return False
        if self.percent is not None:
            return b_ns - a_ns > a_ns * self.percent / 100
        return self.ms is not None and b_ns - a_ns > self.ms * 1e6


@dataclass(frozen=True, slots=True)
class TimingRegression:
    """An aligned exchange (``what`` = exchange) or turn (``turn``) that got slower;
    ``fails``: past the :class:`SlowerLimit` the caller gave."""

    a: int
    b: int
    method: str | None
    a_ns: int
    b_ns: int
    what: Literal["exchange", "turn"] = "exchange"
    fails: bool = False


def timing_regressions(
    alignment: ConnectionAlignment,
    a: ConnectionSketch,
    b: ConnectionSketch,
    threshold_ns: int,
    limit: SlowerLimit | None = None,
) -> list[TimingRegression]:
    """Aligned requests whose response (prompts: whose turn's end) came more than
    ``threshold_ns`` later in B than in A, or past ``limit`` (then they fail).

    A ``session/prompt`` is judged by its turn when both sides have a turn duration; a v2
    prompt's own response (it only acknowledges the prompt) is not judged then.
    """
    out: list[TimingRegression] = []
    for i, j in alignment.pairs:
        method = a.signature(i)[2]
        ta, tb = a.turn_ns.get(i), b.turn_ns.get(j)
        what: Literal["exchange", "turn"] = "turn"
        if ta is None or tb is None:
            ta, tb, what = a.latency_ns.get(i), b.latency_ns.get(j), "exchange"
        if ta is None or tb is None:
            continue
        fails = limit is not None and limit.fails(method, ta, tb)
        if fails or tb - ta > threshold_ns:
            out.append(TimingRegression(i, j, method, ta, tb, what, fails))
    return out
