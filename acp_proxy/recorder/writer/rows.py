"""The writer's first stage: journal items in, rows out (pure: no I/O, no threads).

:class:`Rows` keeps, per connection, what turning a byte stream into recorded frames needs:
line framing (:class:`~acp_proxy.wire.framing.LineFramer`, and one growing buffer for a line
longer than :data:`LONG_LINE_BYTES`, so a huge frame is held once), frame and stderr
sequence numbers, the :class:`~acp_proxy.acp.index.ConnectionIndexer` that derives the index
columns, and the losses to write on the connection row. :meth:`Rows.build` turns a batch of
:mod:`~acp_proxy.recorder.ipc` items into :data:`Op` s for a :mod:`~acp_proxy.recorder.writer.sink`.

With a :class:`~acp_proxy.formats.redact.RedactRules` (``--redact``), each frame, stderr line
and connection field is redacted here, before it is indexed or stored: the index columns come
from the redacted bytes, and the connection row's ``meta.redaction`` names the rule set.

Text bound to the database must be valid Unicode: JSON text may hold a lone surrogate
(``"\\ud800"``), which SQLite cannot store. :func:`safe_text` is the one place such text is
made storable, and :func:`sanitized` applies it to a batch the sink could not bind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.recorder.ipc import (
    STDERR,
    Chunk,
    Control,
    Drops,
    End,
    Gap,
    Item,
    Losses,
    Whole,
)
from acp_proxy.store.columns import json_text
from acp_proxy.wire.frame import A2C, C2A, Direction
from acp_proxy.wire.framing import LineFramer

LONG_LINE_BYTES = 8 * 1024 * 1024
"""A line longer than this is gathered in its own buffer, then stored from it as is."""

BIG_FRAME_BYTES = 4 * 1024 * 1024
"""Frames bigger than this are not copied for binding: the sink writes them in pieces."""

INDEX_START = 8
"""Position of the first index column in a frame row."""

_UNINDEXED = ("invalid", 0, 0, 0, 0, 0, 0)

if TYPE_CHECKING:
    from acp_proxy.formats.redact import RedactRules


class RowState:
    """What the writer keeps for one connection."""

    __slots__ = (
        "closed",
        "db_id",
        "framers",
        "indexer",
        "long",
        "losses",
        "redact",
        "seq",
        "skip_partial",
        "stderr_seq",
    )

    def __init__(self) -> None:
        self.db_id: int | None = None  # set by the sink once the row exists
        self.seq = 0
        self.stderr_seq = 0
        self.framers: dict[str, LineFramer] = {}
        self.long: dict[str, bytearray] = {}  # streams inside a line of over LONG_LINE_BYTES
        self.skip_partial: set[str] = set()
        self.indexer = ConnectionIndexer()
        self.losses = Losses()  # all losses of this connection: the row's counts
        self.closed = False
        self.redact: RedactRules | None = None  # the stored copy's rule set (--redact)


class RowsOp(NamedTuple):
    """Frame and stderr rows of one connection (first column: its id once known)."""

    conn: RowState
    frames: list[tuple[Any, ...]]
    stderr: list[tuple[Any, ...]]


class ControlOp(NamedTuple):
    """Create, change or close the connection row, or add an event."""

    conn: RowState
    op: str
    fields: dict[str, Any]


class FactsOp(NamedTuple):
    """What the connection's ``initialize`` exchange said."""

    conn: RowState
    protocol_version: Any
    client_info: str | None
    agent_info: str | None


Op: TypeAlias = RowsOp | ControlOp | FactsOp


class Rows:
    """Turns journal items into sink operations, in order, for any number of connections.

    ``null`` is what a missing index value is in a frame row: 0 for SQLite (cheaper to
    bind than ``None``), ``None`` for PostgreSQL (``COPY`` then takes the row as it is).
    """

    def __init__(self, null: Any = 0, redact: RedactRules | None = None) -> None:
        self.states: dict[Any, RowState] = {}
        self.null = null
        self.redact = redact
        self._unindexed = ("invalid", *(null,) * (len(_UNINDEXED) - 1))

    def state(self, conn: Any) -> RowState:
        """The writer's state of ``conn`` (created at first sight)."""
        st = self.states.get(conn)
        if st is None:
            st = self.states[conn] = RowState()
            st.redact = self.redact
        return st

    def build(self, items: list[Item]) -> list[Op]:
        """Turn queue items into write operations, in order."""
        ops: list[Op] = []
        cur: RowState | None = None
        frame_rows: list[tuple[Any, ...]] = []
        stderr_rows: list[tuple[Any, ...]] = []
        touched: dict[RowState, None] = {}

        def flush() -> None:
            nonlocal frame_rows, stderr_rows
            if cur is not None and (frame_rows or stderr_rows):
                ops.append(RowsOp(cur, frame_rows, stderr_rows))
                frame_rows, stderr_rows = [], []

        states = self.states
        nulls = (self.null, self._unindexed)
        last_conn: Any = None
        for item in items:
            key = item[0]
            if cur is None or key is not last_conn:
                flush()
                cur = states.get(key)
                if cur is None:
                    cur = self.state(key)
                last_conn = key
            st = cur
            if isinstance(item, Chunk):
                stream = item[1]
                lines = _feed(st, stream, item[4])
                if lines and stream in st.skip_partial:
                    # The start of this line was dropped: the rest is lost too.
                    st.skip_partial.discard(stream)
                    lost = lines.pop(0)
                    if stream != STDERR:
                        st.losses.add(1, len(lost))
                if lines:
                    _rows(
                        st, stream, item[2], item[3], lines, frame_rows, stderr_rows, False, nulls
                    )
            elif isinstance(item, Whole):
                _rows(
                    st,
                    item[1],
                    item[2],
                    item[3],
                    [item[4]],
                    frame_rows,
                    stderr_rows,
                    item[5],
                    nulls,
                )
            elif isinstance(item, Gap):
                stream = item[1]
                start = _partial(st, stream)
                if start is not None and stream != STDERR:
                    # this line's end was in the dropped bytes (the frame counted there)
                    st.losses.add(0, len(start))
                if item[2]:  # the next bytes finish a line whose start was dropped
                    st.skip_partial.add(stream)
                else:
                    st.skip_partial.discard(stream)
            elif isinstance(item, End):
                stream = item[1]
                last = _partial(st, stream)
                st.framers.pop(stream, None)
                if last is not None:
                    if stream in st.skip_partial:
                        if stream != STDERR:
                            st.losses.add(1, len(last))
                    else:
                        _rows(
                            st,
                            stream,
                            item[2],
                            item[3],
                            [last],
                            frame_rows,
                            stderr_rows,
                            False,
                            nulls,
                        )
                st.skip_partial.discard(stream)
            elif isinstance(item, Drops):
                st.losses.add(item[1], item[2])
                flush()
                # an empty update: the row gets its counts even if nothing else comes
                ops.append(ControlOp(st, "update", {}))
            elif isinstance(item, Control):
                flush()
                if item[1] == "close":
                    st.closed = True
                fields = item[2] if st.redact is None else st.redact.control(item[1], item[2])
                ops.append(ControlOp(st, item[1], fields))
            if st.indexer.facts.changed:
                touched[st] = None
        flush()
        for st in touched:
            facts = st.indexer.facts
            facts.changed = False
            ops.append(
                FactsOp(
                    st,
                    facts.protocol_version,
                    json_text(facts.client_info),
                    json_text(facts.agent_info),
                )
            )
        return ops

    def open_states(self) -> list[tuple[Any, RowState]]:
        """Connections whose close has not come (yet)."""
        return [(k, s) for k, s in self.states.items() if not s.closed]


def _feed(st: RowState, stream: str, data: bytes | bytearray) -> list[Any]:
    """The lines ``data`` completes on ``stream`` (a long line: its own, uncopied buffer)."""
    long = st.long.get(stream)
    if long is not None:
        pos = data.find(b"\n")
        if pos < 0:
            long += data
            return []
        del st.long[stream]
        if pos + 1 == len(data):
            long += data
            return [long]
        view = memoryview(data)
        long += view[: pos + 1]
        lines: list[Any] = [long]
        lines.extend(_feed(st, stream, data[pos + 1 :]))
        return lines
    framer = st.framers.get(stream)
    if framer is None:
        framer = st.framers[stream] = LineFramer()
    # A bytearray's lines are bytearrays: bound as they are, no copy per frame (_blob)
    buf: Any = data if type(data) is bytearray else bytearray(data)
    out: list[Any] = framer.feed(buf)
    if framer.pending > LONG_LINE_BYTES:
        start = framer.close()
        assert start is not None
        st.long[stream] = bytearray(start)
    return out


def _partial(st: RowState, stream: str) -> Any:
    """The bytes of ``stream``'s unfinished line (taken: the stream starts afresh)."""
    long = st.long.pop(stream, None)
    if long is not None:
        return long
    framer = st.framers.get(stream)
    return framer.close() if framer is not None else None


def _rows(
    st: RowState,
    stream: str,
    ts: float,
    mono: int,
    lines: list[Any],
    frame_rows: list[tuple[Any, ...]],
    stderr_rows: list[tuple[Any, ...]],
    binary: bool,
    nulls: tuple[Any, tuple[Any, ...]],
) -> None:
    # Rows are bound the cheap way: Python's sqlite3 binds int, float, str and bytearray
    # directly but sends bytes and None through its adaptation machinery (about 1 us
    # each, measured). So raw bytes travel as bytearray (stored as the same BLOB) and a
    # missing index value as 0, which the sink turns back into NULL. ``nulls``: the missing
    # value and the columns of an unindexed frame (PostgreSQL's rows take None).
    redact = st.redact
    if redact is not None:  # the stored copy only: forwarding has sent the original bytes
        if stream == STDERR:
            lines = [redact.line(raw) for raw in lines]
        else:
            lines = [redact.frame(raw, binary=binary) for raw in lines]
    if stream == STDERR:
        for raw in lines:
            st.stderr_seq += 1
            stderr_rows.append((st.db_id, st.stderr_seq, ts, mono, _blob(raw)))
        return
    values = st.indexer.values
    direction: Direction = C2A if stream == C2A else A2C
    append = frame_rows.append
    seq = st.seq
    bin_flag = int(binary)
    cid = st.db_id  # None until the row exists; the sink fills it in then
    missing, unindexed = nulls
    for raw in lines:
        seq += 1
        try:
            columns = values(direction, raw, missing)
        except Exception:  # the indexer failed on this frame: stored raw, unindexed
            columns = unindexed
        append((cid, seq, ts, mono, direction, _blob(raw), len(raw), bin_flag, *columns))
    st.seq = seq


def _blob(raw: Any) -> Any:
    """``raw`` as cheaply bound (bytearray), without copying a buffer or a big frame."""
    if type(raw) is bytearray or len(raw) > BIG_FRAME_BYTES:
        return raw
    return bytearray(raw)


def safe_text(text: str) -> str:
    """``text`` as valid Unicode: lone surrogates become their ``\\udXXX`` escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def safe_value(value: Any) -> Any:
    """A column value storable as is (text made safe; anything else unchanged)."""
    return safe_text(value) if isinstance(value, str) else value


def _deep_safe(value: Any) -> Any:
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(str(k)): _deep_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_deep_safe(v) for v in value]
    return value


def sanitized(ops: list[Op]) -> list[Op]:
    """``ops`` with every text value made storable (a batch the sink could not bind)."""
    out: list[Op] = []
    fix: Callable[[Any], Any] = safe_value
    for op in ops:
        if isinstance(op, RowsOp):
            frames = [(*r[:INDEX_START], *(fix(v) for v in r[INDEX_START:])) for r in op.frames]
            out.append(RowsOp(op.conn, frames, op.stderr))
        elif isinstance(op, ControlOp):
            fields = {k: _deep_safe(v) for k, v in op.fields.items()}
            out.append(ControlOp(op.conn, op.op, fields))
        elif isinstance(op, FactsOp):
            out.append(
                FactsOp(op.conn, fix(op.protocol_version), fix(op.client_info), fix(op.agent_info))
            )
    return out
