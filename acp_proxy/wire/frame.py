"""A recorded frame (:class:`Frame`) and frame directions (``c2a`` client to agent, ``a2c``).

:class:`Frame` is the one frame value of the package: the readers of a recording yield it and
every analysis (the model, the checker, statistics, the waterfall, spans) takes it. It is a
:class:`~typing.NamedTuple` in the column order of the ``frames`` table, so a reader builds it
from a SQL row in one step.

Three records near it are not frames, and say why: :class:`acp_proxy.recorder.ipc.Whole`
(a transport's message before the writer gives it a connection id and a sequence number),
:class:`acp_proxy.store.edit.Capture` (what ``insert_frames`` numbers into frames) and
:class:`acp_proxy.replay.script.Classified` (a :class:`Frame` with its JSON-RPC
classification). ``tests/test_architecture.py`` fails on a fourth.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Direction = Literal["c2a", "a2c"]
"""``c2a``: client to agent; ``a2c``: agent to client."""

C2A: Direction = "c2a"
A2C: Direction = "a2c"


KEY_C2A = 1
"""In a :func:`wire_key`: the frame went from client to agent (no flag: ``a2c``)."""
KEY_BINARY = 2
"""In a :func:`wire_key`: a WebSocket binary message."""
KEY_OTHER = 4
"""In a :func:`wire_key`: a direction neither ``c2a`` nor ``a2c`` (no recording of ours)."""
KEY_SHIFT = 3
"""A :func:`wire_key` shifted right by this much is the frame's sequence number."""


def wire_key(seq: int, direction: str, binary: object) -> int:
    """A frame's sequence number, direction and binary flag as one integer (what the rows of
    :meth:`RecordingReader.wire_rows <acp_proxy.store.reader.RecordingReader.wire_rows>` carry:
    one column read instead of three). The agent's text frames, most of a recording: ``seq``
    itself (sequence numbers are never negative); any other frame: ``-((seq << KEY_SHIFT) +
    flags)``, the ``KEY_*`` flags (at least one set: the key is negative). :data:`WIRE_KEY_SQL`
    is the same in SQL."""
    if direction == A2C and not binary:
        return seq
    flags = KEY_C2A if direction == C2A else 0 if direction == A2C else KEY_OTHER
    return -((seq << KEY_SHIFT) + flags + (KEY_BINARY if binary else 0))


WIRE_KEY_SQL = (
    "CASE WHEN direction = 'a2c' AND \"binary\" = 0 THEN seq"
    " ELSE -(seq * 8 + CASE direction WHEN 'a2c' THEN 0 WHEN 'c2a' THEN 1 ELSE 4 END"
    ' + CASE WHEN "binary" <> 0 THEN 2 ELSE 0 END) END'
)
""":func:`wire_key` as a column of the ``frames`` table, in the SQL both stores speak
(``tests/store/test_reader.py`` compares the two); the agent's text frames, most of a
recording, take the first branch (the column itself: no arithmetic per row)."""


def other_direction(direction: Direction) -> Direction:
    """The direction a response travels for a request sent in ``direction``."""
    return A2C if direction == C2A else C2A


class Frame(NamedTuple):
    """One recorded frame: which connection, where in it, when, which way, its bytes, and the
    index columns the recorder derived from them.

    ``raw`` is the frame as it crossed the wire. A reader that leaves columns out says so: a
    list of frames may carry only their first bytes (``len(raw) < size``), statistics only the
    bytes they parse (``b""`` for the others); ``id`` and ``ts`` are 0 where not read.
    """

    id: int
    connection_id: int
    seq: int
    ts: float
    mono_ns: int
    direction: Direction
    raw: bytes
    size: int = 0
    binary: bool = False
    kind: str | None = None
    rpc_id: str | None = None
    method: str | None = None
    session_id: str | None = None
    update_kind: str | None = None
    entity_type: str | None = None
    entity_id: str | None = None

    @classmethod
    def wire(
        cls,
        direction: Direction,
        raw: bytes,
        seq: int = 0,
        mono_ns: int = 0,
        *,
        binary: bool = False,
        connection_id: int = 0,
    ) -> Frame:
        """A frame known only by what crossed the wire (tests, live feeds)."""
        return cls(0, connection_id, seq, 0.0, mono_ns, direction, raw, len(raw), binary)
