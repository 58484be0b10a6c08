"""The replay script: a recording cut into client-triggered steps, read lazily (no I/O here).

A :class:`Script` reads frames through a :class:`FrameStore` (the SQLite one is
:class:`acp_proxy.store.replay_frames.ReplayFrames`; :class:`MemoryFrames` holds a list, for tests
and :func:`build_script`) and cuts them into steps **as the engine asks for them**
(:meth:`Script.steps`), so serving a recording costs memory for the steps in play, not for
the recording. Each connection's frames are cut at every client→agent request or
notification (the *trigger*); the agent→client frames that follow a trigger, up to the next
trigger, are that step's items, in recorded order. A client→agent *response* (the client
answering an agent request) does not cut: it becomes an :class:`AwaitAnswer` item at the
position where the answer was recorded, so the replay waits for the live client's answer
exactly where the recorded agent did.

One adjustment keeps replays from deadlocking: when the response to a request was recorded
after a *later request* of the client (the agent answered out of order), it is moved to the
end of its own request's step, because a live client may wait for that response before it
sends the next request. A response recorded after a client *notification* (the typical
``session/cancel`` → ``stopReason: cancelled``) stays where it is. A response recorded
*before* its request (a recorder that wrote the request late; ``check`` warns
``recording.order``) is held until that request, at most
:data:`~acp_proxy.acp.exchanges.EARLY_WINDOW` frames, and answers it there. A step is handed
out once it is complete: the next trigger of its connection was read and, for a request the agent
answered (the store's index says where), its response too.

:meth:`Script.session_frames` reads, for one sessionId (all connections, whatever subset the
steps come from), the frames that history re-emission needs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from acp_proxy.acp.exchanges import EARLY_WINDOW
from acp_proxy.wire.frame import A2C, C2A, Direction, Frame
from acp_proxy.wire.jsonrpc import Message, classify


@dataclass(frozen=True, slots=True)
class Classified:
    """A recorded :class:`~acp_proxy.wire.frame.Frame` and what :func:`classify` made of it.

    Not a frame shape of its own: ``frame`` is the package's one frame value as the store
    yields it, and ``msg`` its JSON-RPC classification, computed once (:func:`classified`)
    since the script and the engine ask for it at every step.
    """

    frame: Frame
    msg: Message

    @property
    def connection_id(self) -> int:
        return self.frame.connection_id

    @property
    def seq(self) -> int:
        return self.frame.seq

    @property
    def mono_ns(self) -> int:
        return self.frame.mono_ns

    @property
    def direction(self) -> Direction:
        return self.frame.direction

    @property
    def raw(self) -> bytes:
        return self.frame.raw

    @property
    def session_id(self) -> str | None:
        return self.frame.session_id

    @property
    def kind(self) -> str:
        return self.msg.kind

    @property
    def rpc_id(self) -> str | None:
        return self.msg.id

    @property
    def method(self) -> str | None:
        return self.msg.method

    @property
    def where(self) -> str:
        return f"connection {self.connection_id} frame #{self.seq}"


def classified(frame: Frame | Classified) -> Classified:
    """``frame`` with its classification: the one place a recorded frame is classified."""
    if isinstance(frame, Classified):
        return frame
    return Classified(frame, classify(frame.raw))


def classified_bytes(
    connection_id: int,
    seq: int,
    mono_ns: int,
    direction: Direction,
    raw: bytes,
    session_id: str | None = None,
) -> Classified:
    """A :class:`Classified` frame of bytes known only by where they were (tests, live)."""
    frame = Frame(0, connection_id, seq, 0.0, mono_ns, direction, raw, len(raw), False)
    return classified(frame._replace(session_id=session_id))


@dataclass(slots=True)
class Emit:
    """Send this recorded agent→client frame (id and sessionIds rewritten)."""

    frame: Classified


@dataclass(slots=True)
class AwaitAnswer:
    """Wait until the live client answered the agent request recorded with ``rpc_id``."""

    connection_id: int
    rpc_id: str


Item = Emit | AwaitAnswer


@dataclass(slots=True)
class Trigger:
    """One client→agent request or notification of the recording (a batch member too)."""

    frame: Classified
    msg: Message
    member: int = 0  # its place in a batch frame

    @property
    def position(self) -> tuple[int, int, int]:
        """(connection, seq, batch member): where it is in the recording."""
        return self.frame.connection_id, self.frame.seq, self.member

    @property
    def method(self) -> str:
        return self.msg.method or ""

    @property
    def params(self) -> Any:
        return self.msg.params

    @property
    def is_request(self) -> bool:
        return self.msg.kind == "request"


@dataclass(slots=True)
class Step:
    """A trigger and the agent's recorded reaction to it."""

    index: int
    trigger: Trigger
    items: list[Item] = field(default_factory=list)
    consumed: bool = False

    @property
    def connection_id(self) -> int:
        return self.trigger.frame.connection_id


@dataclass(slots=True)
class ConnectionInfo:
    """What the script needs to know about a recorded connection."""

    id: int
    protocol_version: int | None = None


class FrameStore(Protocol):
    """The queries a :class:`Script` reads a recording with (each answered lazily)."""

    def protocol_versions(self) -> dict[int, int | None]:
        """Connection id -> negotiated protocol version, for every recorded connection."""
        ...

    def connection_frames(
        self,
        connection_id: int,
        *,
        after_seq: int = 0,
        client_method: str | None = None,
        client_only: bool = False,
    ) -> Iterator[Frame | Classified]:
        """The connection's frames after ``after_seq``, in order. ``client_only``: only
        client→agent frames; ``client_method``: only client→agent frames that may hold a
        call of that method (batches and frames without an indexed method included)."""
        ...

    def response_seq(self, connection_id: int, rpc_id: str, after_seq: int) -> int | None:
        """The seq of the first agent→client response with id ``rpc_id`` after ``after_seq``."""
        ...

    def session_frames(self, session_id: str) -> Iterator[Frame | Classified]:
        """Every frame indexed with ``session_id``, by connection then seq."""
        ...

    def session_connections(self, session_id: str) -> list[int]:
        """The connections in which ``session_id`` appears."""
        ...

    def session_ids(self, limit: int) -> tuple[int, list[str]]:
        """(how many sessionIds the recording has, the first ``limit`` of them sorted)."""
        ...


def _triggers(frame: Classified) -> list[tuple[int, Message]]:
    """(batch member, message) of every client request/notification in a client frame."""
    members = frame.msg.items if frame.msg.kind == "batch" else [frame.msg]
    return [(i, m) for i, m in enumerate(members) if m.kind in ("request", "notification")]


class Script:
    """A recording to replay: steps of the chosen connections in recorded order, read lazily,
    plus the session queries of history re-emission. One script may serve many engines."""

    def __init__(
        self,
        store: FrameStore,
        *,
        step_connections: Iterable[int] | None = None,
        source: str = "",
    ) -> None:
        self.store = store
        self.source = source
        self.connections = {
            cid: ConnectionInfo(cid, version) for cid, version in store.protocol_versions().items()
        }
        chosen = self.connections if step_connections is None else set(step_connections)
        self.step_connections = sorted(c for c in chosen if c in self.connections)

    # -- steps -----------------------------------------------------------------------------

    def steps(self) -> Iterator[Step]:
        """Fresh steps (``index`` 0, 1, ...) in recorded order, built as they are asked for."""
        counter = iter(range(1 << 62))
        for conn in self.step_connections:
            yield from _connection_steps(self.store, conn, counter)

    def future_triggers(self, after: tuple[int, int, int] | None, method: str) -> Iterator[Trigger]:
        """Client calls of ``method`` recorded after position ``after`` (None: from the
        start), in order, read without building their steps."""
        for conn in self.step_connections:
            if after is not None and conn < after[0]:
                continue
            after_seq = after[1] - 1 if after is not None and conn == after[0] else 0
            for row in self.store.connection_frames(
                conn, after_seq=after_seq, client_method=method
            ):
                frame = classified(row)
                for member, msg in _triggers(frame):
                    trig = Trigger(frame, msg, member)
                    if msg.method == method and (after is None or trig.position > after):
                        yield trig

    def requests_after(self, after: tuple[int, int, int] | None) -> tuple[int, Trigger | None]:
        """(how many client requests were recorded after ``after``, the first of them)."""
        count, first = 0, None
        for conn in self.step_connections:
            if after is not None and conn < after[0]:
                continue
            after_seq = after[1] - 1 if after is not None and conn == after[0] else 0
            for row in self.store.connection_frames(conn, after_seq=after_seq, client_only=True):
                frame = classified(row)
                for member, msg in _triggers(frame):
                    trig = Trigger(frame, msg, member)
                    if msg.kind == "request" and (after is None or trig.position > after):
                        count += 1
                        first = first or trig
        return count, first

    def has_client_requests(self) -> bool:
        """Whether the chosen connections hold any client request (read up to the first)."""
        for conn in self.step_connections:
            for row in self.store.connection_frames(conn, client_only=True):
                if any(m.kind == "request" for _, m in _triggers(classified(row))):
                    return True
        return False

    def connection_frames(self, connection_id: int) -> list[Classified]:
        """Every frame of one connection (``replay --client`` plays one at a time)."""
        return [classified(r) for r in self.store.connection_frames(connection_id)]

    # -- sessions --------------------------------------------------------------------------

    def session_frames(self, session_id: str) -> list[Classified]:
        return [classified(r) for r in self.store.session_frames(session_id)]

    def has_session(self, session_id: str) -> bool:
        return bool(self.store.session_connections(session_id))

    def session_ids(self, limit: int = 20) -> tuple[int, list[str]]:
        return self.store.session_ids(limit)

    def protocol_version_of(self, frames: list[Classified]) -> int | None:
        """The protocol version of the first of ``frames`` whose connection has one."""
        for frame in frames:
            info = self.connections.get(frame.connection_id)
            if info is not None and info.protocol_version is not None:
                return info.protocol_version
        return None


def _connection_steps(store: FrameStore, conn: int, counter: Iterator[int]) -> Iterator[Step]:
    """The steps of one connection, each handed out once complete (see the module doc)."""
    pending: deque[Step] = deque()  # built, not handed out yet, in order
    # id(step) -> seq of its request's response (absent: the agent never answered it).
    awaiting: dict[int, int] = {}
    current: Step | None = None
    prelude: list[Item] = []
    step_of_request: dict[str, Step] = {}  # request id -> the step still waiting for it
    # response id -> (seq, item) of a response recorded before its request (still to come)
    early: dict[str, tuple[int, Emit]] = {}
    requested: set[str] = set()  # ids of the client requests read so far
    read_seq = 0

    def place(item: Item) -> None:
        if current is None:
            prelude.append(item)
        else:
            current.items.append(item)

    def expire_early() -> None:
        for rpc_id, (seq, item) in list(early.items()):
            if read_seq - seq >= EARLY_WINDOW:  # no request came: it answers nothing
                del early[rpc_id]
                place(item)

    def ready() -> Iterator[Step]:
        while pending:
            head = pending[0]
            if head is current:
                return  # its items are not complete until the next trigger
            due = awaiting.get(id(head))
            if due is not None and due > read_seq:
                return
            awaiting.pop(id(head), None)
            yield pending.popleft()

    for row in store.connection_frames(conn):
        frame = classified(row)
        read_seq = frame.seq
        msg = frame.msg
        if frame.direction == C2A:
            members = msg.items if msg.kind == "batch" else [msg]
            for member, m in enumerate(members):
                if m.kind in ("request", "notification"):
                    step = Step(next(counter), Trigger(frame, m, member))
                    if prelude:
                        step.items.extend(prelude)
                        prelude = []
                    pending.append(step)
                    current = step
                    if m.kind == "request" and m.id is not None:
                        requested.add(m.id)
                        held = early.pop(m.id, None)
                        if held is not None:  # its response was recorded first
                            step.items.append(held[1])
                            continue
                        step_of_request[m.id] = step
                        due = store.response_seq(conn, m.id, frame.seq)
                        if due is not None:
                            awaiting[id(step)] = due
                elif m.kind == "response" and m.id is not None:
                    place(AwaitAnswer(conn, m.id))
            expire_early()
            yield from ready()
            continue
        # agent -> client
        target = current
        expire_early()
        if msg.kind == "response" and msg.id is not None:
            if msg.id not in requested and msg.id not in early and msg.id != "null":
                early[msg.id] = (frame.seq, Emit(frame))  # before its request: held
                yield from ready()
                continue
            owner = step_of_request.pop(msg.id, None)
            moved = owner is not None and target is not None and owner is not target
            if moved and target is not None and target.trigger.is_request:
                target = owner  # answered out of order: keep it with its request
        if target is None:
            prelude.append(Emit(frame))
        else:
            target.items.append(Emit(frame))
        yield from ready()
    for _, item in early.values():  # never requested: kept where they were (skipped)
        place(item)
    current = None
    awaiting.clear()
    yield from ready()


@dataclass(slots=True)
class MemoryFrames:
    """A :class:`FrameStore` over frames held in memory (ordered by connection, then seq)."""

    frames: list[Classified]
    versions: dict[int, int | None]

    def protocol_versions(self) -> dict[int, int | None]:
        return dict(self.versions)

    def connection_frames(
        self,
        connection_id: int,
        *,
        after_seq: int = 0,
        client_method: str | None = None,
        client_only: bool = False,
    ) -> Iterator[Classified]:
        for f in self.frames:
            if f.connection_id != connection_id or f.seq <= after_seq:
                continue
            if (client_only or client_method is not None) and f.direction != C2A:
                continue
            yield f

    def response_seq(self, connection_id: int, rpc_id: str, after_seq: int) -> int | None:
        for f in self.frames:
            here = f.connection_id == connection_id and f.seq > after_seq
            if here and f.direction == A2C and f.kind == "response" and f.rpc_id == rpc_id:
                return f.seq
        return None

    def session_frames(self, session_id: str) -> Iterator[Classified]:
        return (f for f in self.frames if f.session_id == session_id)

    def session_connections(self, session_id: str) -> list[int]:
        return sorted({f.connection_id for f in self.frames if f.session_id == session_id})

    def session_ids(self, limit: int) -> tuple[int, list[str]]:
        ids = sorted({f.session_id for f in self.frames if f.session_id is not None})
        return len(ids), ids[:limit]


def build_script(
    frames: Iterable[Classified],
    connections: dict[int, ConnectionInfo],
    *,
    step_connections: set[int] | None = None,
    source: str = "",
) -> Script:
    """A :class:`Script` over ``frames`` held in memory (ordered by connection, then seq).

    ``step_connections`` limits the steps to those connections; session history always
    comes from every connection.
    """
    versions = {cid: info.protocol_version for cid, info in connections.items()}
    for f in frames if isinstance(frames, list) else (frames := list(frames)):
        versions.setdefault(f.connection_id, None)
    store = MemoryFrames(list(frames), versions)
    return Script(store, step_connections=step_connections, source=source)
