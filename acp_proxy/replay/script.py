"""The replay script: a recording cut into client-triggered steps (pure data, no I/O).

A :class:`Script` is built from recorded frames (:func:`build_script`; the loader in
:mod:`acp_proxy.replay.load` reads them from a recording file). Each connection's frames are
cut at every client→agent request or notification (the *trigger*); the agent→client frames
that follow a trigger, up to the next trigger, are that step's items, in recorded order. A
client→agent *response* (the client answering an agent request) does not cut: it becomes an
:class:`AwaitAnswer` item at the position where the answer was recorded, so the replay waits
for the live client's answer exactly where the recorded agent did.

One adjustment keeps replays from deadlocking: when the response to a request was recorded
after a *later request* of the client (the agent answered out of order), it is moved to the
end of its own request's step, because a live client may wait for that response before it
sends the next request. A response recorded after a client *notification* (the typical
``session/cancel`` → ``stopReason: cancelled``) stays where it is.

:attr:`Script.session_frames` keeps, for every sessionId of the recording (all connections,
whatever subset the steps come from), the frames that history re-emission needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.wire.frame import C2A, Direction
from acp_proxy.wire.jsonrpc import Message, classify


@dataclass(slots=True)
class RecFrame:
    """A recorded frame with its classification (``msg``) and index columns."""

    connection_id: int
    seq: int
    mono_ns: int
    direction: Direction
    raw: bytes
    msg: Message
    session_id: str | None = None

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


def rec_frame(
    connection_id: int,
    seq: int,
    mono_ns: int,
    direction: Direction,
    raw: bytes,
    session_id: str | None = None,
) -> RecFrame:
    """Classify ``raw`` and wrap it."""
    return RecFrame(connection_id, seq, mono_ns, direction, raw, classify(raw), session_id)


@dataclass(slots=True)
class Emit:
    """Send this recorded agent→client frame (id and sessionIds rewritten)."""

    frame: RecFrame


@dataclass(slots=True)
class AwaitAnswer:
    """Wait until the live client answered the agent request recorded with ``rpc_id``."""

    connection_id: int
    rpc_id: str


Item = Emit | AwaitAnswer


@dataclass(slots=True)
class Trigger:
    """One client→agent request or notification of the recording (a batch member too)."""

    frame: RecFrame
    msg: Message

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


@dataclass(slots=True)
class Script:
    """Everything the engine replays from: steps in recorded order plus session history."""

    steps: list[Step]
    connections: dict[int, ConnectionInfo]
    session_frames: dict[str, list[RecFrame]]
    source: str = ""
    connection_frames: dict[int, list[RecFrame]] = field(default_factory=dict)

    def protocol_version_of_session(self, session_id: str) -> int | None:
        for frame in self.session_frames.get(session_id, []):
            info = self.connections.get(frame.connection_id)
            if info is not None and info.protocol_version is not None:
                return info.protocol_version
        return None


def build_script(
    frames: Iterable[RecFrame],
    connections: dict[int, ConnectionInfo],
    *,
    step_connections: set[int] | None = None,
    source: str = "",
) -> Script:
    """Cut ``frames`` (ordered by connection, then seq) into a :class:`Script`.

    ``step_connections`` limits the steps to those connections; session history always
    comes from every connection.
    """
    steps: list[Step] = []
    session_frames: dict[str, list[RecFrame]] = {}
    current: dict[int, Step | None] = {}
    prelude: dict[int, list[Item]] = {}
    # (connection, request id) -> step of that client request
    step_of_request: dict[tuple[int, str], Step] = {}
    by_connection: dict[int, list[RecFrame]] = {}
    for frame in frames:
        by_connection.setdefault(frame.connection_id, []).append(frame)
        if frame.session_id is not None:
            session_frames.setdefault(frame.session_id, []).append(frame)
        conn = frame.connection_id
        if step_connections is not None and conn not in step_connections:
            continue
        msg = frame.msg
        if frame.direction == C2A:
            members = msg.items if msg.kind == "batch" else [msg]
            for member in members:
                if member.kind in ("request", "notification"):
                    step = Step(len(steps), Trigger(frame, member))
                    if conn in prelude:
                        step.items.extend(prelude.pop(conn))
                    steps.append(step)
                    current[conn] = step
                    if member.kind == "request" and member.id is not None:
                        step_of_request[(conn, member.id)] = step
                elif member.kind == "response" and member.id is not None:
                    target = current.get(conn)
                    item = AwaitAnswer(conn, member.id)
                    if target is None:
                        prelude.setdefault(conn, []).append(item)
                    else:
                        target.items.append(item)
            continue
        # agent -> client
        target = current.get(conn)
        if msg.kind == "response" and msg.id is not None:
            owner = step_of_request.get((conn, msg.id))
            moved = owner is not None and target is not None and owner is not target
            if moved and target is not None and target.trigger.is_request:
                target = owner
        if target is None:
            prelude.setdefault(conn, []).append(Emit(frame))
        else:
            target.items.append(Emit(frame))
    return Script(steps, connections, session_frames, source, by_connection)
