"""The writer's last stage: where rows are stored. :class:`Sink` is the seam, SQLite the first.

A sink writes one batch of :mod:`~acp_proxy.recorder.writer.rows` operations per transaction,
retrying while another process holds the database lock (until the deadline the caller
gives), and owns the connection rows' life: created with ``host`` and a first
``last_seen_at``, refreshed by :meth:`Sink.heartbeat` while open, closed with ``ended_at``,
``end_reason`` and the loss counts. :class:`SqlSink` is that shared life, written once in
the SQL both engines speak; :class:`SqliteSink` adds SQLite's bulk inserts and lock
retries, :class:`~acp_proxy.recorder.writer.sink_pg.PostgresSink` PostgreSQL's ``COPY`` and
reconnection (:func:`~acp_proxy.recorder.writer.pipeline.sink_for` picks one for a recording
location). What differs between the engines (errors, lock detection, limits, opening) comes
from :mod:`acp_proxy.store.engine`, the columns from :mod:`acp_proxy.store.columns`.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from acp_proxy.recorder.writer.rows import (
    BIG_FRAME_BYTES,
    ControlOp,
    FactsOp,
    Op,
    RowsOp,
    RowState,
)
from acp_proxy.store.columns import (
    FRAME_COLUMNS,
    column_value,
    connection_insert,
    json_text,
    open_row_fields,
)
from acp_proxy.store.engine import SQLITE, SqliteConnection
from acp_proxy.store.schema import RecordingError, connect

_OPEN_ERRORS: tuple[type[BaseException], ...] = (*SQLITE.errors, OSError)
"""What opening the file may raise besides a :class:`RecordingError`."""

ROWS_PER_STATEMENT = 1000
"""Rows one multi-row INSERT carries (fewer if SQLite allows fewer parameters).

``executemany`` releases and retakes the GIL around every row's ``sqlite3_step``; while
the rows thread runs Python, each retake waits up to a switch interval, so per-row
statements crawl. One statement of many rows binds them all, then runs them in one step
without the GIL (measured, and why not 2,000: docs/performance.md, "The recorder's
constants").
"""

BLOB_PIECE_BYTES = 1024 * 1024
"""A big frame's raw bytes are written into its row (incremental blob I/O) this much at a time."""

_FRAME_INSERT = f"INSERT INTO frames ({FRAME_COLUMNS}) VALUES "
_FRAME_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, " + ", ".join(["NULLIF(?, 0)"] * 6) + ")"
_BIG_FRAME_ROW = "(?, ?, ?, ?, ?, zeroblob(?), ?, ?, ?, " + ", ".join(["NULLIF(?, 0)"] * 6) + ")"
_FRAME_NCOLS = 15
_STDERR_INSERT = "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) VALUES "
_STDERR_ROW = "(?, ?, ?, ?, ?)"
_STDERR_NCOLS = 5


class SinkFailed(Exception):
    """A batch could not be stored (nothing of it was).

    ``locked``: another writer held the database; ``unavailable``: the database server
    could not be reached (an outage: the same batch is worth trying again later).
    """

    def __init__(self, reason: str, *, locked: bool = False, unavailable: bool = False) -> None:
        super().__init__(reason)
        self.locked = locked
        self.unavailable = unavailable


class Sink(ABC):
    """Stores the recorder's operations (one implementation per database engine)."""

    where: str = "the recording"
    """The store as named in messages (a URL without its password)."""

    engine: str = "SQLite"
    """The database engine, as named in messages."""

    null: Any = 0
    """A missing index value in the frame rows :meth:`write` takes (see :class:`~.rows.Rows`)."""

    @abstractmethod
    def open(self, give_up_at: Callable[[], float]) -> None:
        """Connect (create, migrate); raises :class:`SinkFailed` (``locked`` if it was)."""

    @property
    @abstractmethod
    def is_open(self) -> bool: ...

    @abstractmethod
    def write(self, ops: list[Op], give_up_at: Callable[[], float]) -> int:
        """Store ``ops`` in one transaction; returns the frames stored.

        Retries while the database is locked until ``give_up_at()`` (monotonic) has passed;
        then, or on any other storage error, raises :class:`SinkFailed` with nothing
        stored. Other exceptions (a value that cannot be bound) also leave nothing stored.
        """

    @abstractmethod
    def heartbeat(self, now: float) -> None:
        """Refresh ``last_seen_at`` of every open connection row (failures are ignored)."""

    def interrupt(self) -> None:  # noqa: B027 - only a server's sink has anything to cut
        """From another thread: make a call stuck on an unanswering server fail now."""

    def doubtful(self, ops: list[Op]) -> int:
        """Frames of ``ops`` whose ``COMMIT`` got no answer: they may be stored (0: none)."""
        return 0

    def settle_later(  # noqa: B027 - only a server's sink can settle later
        self,
        rows: list[RowState],
        doubt: dict[RowState, tuple[int, int]],
        ends: dict[RowState, dict[str, Any]],
    ) -> None:
        """The server never answered at exit: have ``rows`` get their true losses (``doubt``:
        frames and bytes of the unanswered COMMIT) and ``ends`` once it does. A hook."""

    @abstractmethod
    def close(self) -> None:
        """Disconnect."""


class SqlSink(Sink):
    """What both engines share: a batch's operations applied in one transaction.

    Subclasses provide the engine's primitives (transaction control, the frame and stderr
    bulk inserts, statements in the shared SQL with ``?`` placeholders); this class owns
    the connection rows' life (created, updated, closed with the loss counts, heartbeats).
    A batch's frame rows, of all its connections, go to one bulk insert (one ``COPY`` on
    PostgreSQL), as do its stderr rows.
    """

    def __init__(self) -> None:
        self._open_ids: dict[int, RowState] = {}

    # -- the engine's primitives -----------------------------------------------------------

    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any]) -> Any:
        """Run one statement of the shared SQL; returns its cursor."""

    @abstractmethod
    def _insert_connection(self, sql: str, params: list[Any]) -> int:
        """Run a connection row's INSERT (:func:`connection_insert`); returns the row's id."""

    @abstractmethod
    def _begin(self) -> None: ...

    @abstractmethod
    def _commit(self) -> None: ...

    @abstractmethod
    def _rollback(self) -> None:
        """Undo the open transaction (errors ignored: the connection may be gone)."""

    @abstractmethod
    def _insert_frames(self, rows: list[tuple[Any, ...]]) -> None:
        """Store frame rows (:data:`~acp_proxy.recorder.writer.rows.FRAME_COLUMNS`), in order."""

    @abstractmethod
    def _insert_stderr(self, rows: list[tuple[Any, ...]]) -> None:
        """Store stderr rows ``(connection_id, seq, ts, mono_ns, raw)``."""

    def _aborted(self, ops: list[Op], opened: list[RowState], closed: list[int]) -> None:
        """The batch ``ops`` failed (before its rows' ids are forgotten): a hook."""

    # -- shared ------------------------------------------------------------------------------

    def heartbeat(self, now: float) -> None:
        if not self.is_open or not self._open_ids:
            return
        ids = list(self._open_ids)
        marks = ", ".join("?" * len(ids))
        with contextlib.suppress(Exception):
            self._execute(
                f"UPDATE connections SET last_seen_at = ? WHERE id IN ({marks})", [now, *ids]
            )

    def _apply(self, ops: list[Op]) -> int:
        opened: list[RowState] = []
        closed: list[int] = []
        self._begin()
        try:
            written = self._apply_ops(ops, opened, closed)
            self._commit()
        except BaseException:
            self._rollback()
            self._aborted(ops, opened, closed)
            for st in opened:
                st.db_id = None
            raise
        self._settle(opened, closed)
        return written

    def _settle(self, opened: list[RowState], closed: list[int]) -> None:
        """A batch committed: follow which connection rows are open now."""
        for st in opened:
            if not st.closed and st.db_id is not None:
                self._open_ids[st.db_id] = st
        for cid in closed:
            self._open_ids.pop(cid, None)

    def _apply_ops(self, ops: list[Op], opened: list[RowState], closed: list[int]) -> int:
        seen: dict[RowState, None] = {}
        written = 0
        now = time.time()
        frames: list[list[tuple[Any, ...]]] = []
        stderr: list[list[tuple[Any, ...]]] = []
        for op in ops:
            st = op[0]
            seen[st] = None
            if type(op) is RowsOp:
                cid = st.db_id
                if cid is None:  # its row could not be written: counted, not stored
                    st.losses.add(len(op.frames), sum(r[6] for r in op.frames))
                    continue
                if op.frames:
                    frames.append(_with_id(op.frames, cid))
                    written += len(op.frames)
                if op.stderr:
                    stderr.append(_with_id(op.stderr, cid))
            elif type(op) is ControlOp:
                self._control(op, now, opened, closed)
            elif st.db_id is not None:  # facts
                assert type(op) is FactsOp
                self._execute(
                    "UPDATE connections SET protocol_version = ?, client_info = ?, "
                    "agent_info = ? WHERE id = ?",
                    (op.protocol_version, op.client_info, op.agent_info, st.db_id),
                )
        # Every connection's rows in one bulk insert (a fleet's batch holds hundreds)
        if frames:
            self._insert_frames(_joined(frames))
        if stderr:
            self._insert_stderr(_joined(stderr))
        for st in seen:
            if (st.losses.frames or st.losses.nbytes) and st.db_id is not None:
                self._execute(
                    "UPDATE connections SET frames_dropped = ?, bytes_dropped = ? WHERE id = ?",
                    (st.losses.frames, st.losses.nbytes, st.db_id),
                )
        return written

    def _control(
        self, op: ControlOp, now: float, opened: list[RowState], closed: list[int]
    ) -> None:
        st = op.conn
        if op.op == "open":
            if st.db_id is not None:
                return
            sql, params = connection_insert(open_row_fields(op.fields, now))
            st.db_id = self._insert_connection(sql, params)
            opened.append(st)
        elif st.db_id is None:
            return
        elif op.op == "event":
            raw = op.fields
            self._execute(
                "INSERT INTO events (connection_id, ts, kind, detail) VALUES (?, ?, ?, ?)",
                (st.db_id, raw["ts"], raw["kind"], json_text(raw["detail"])),
            )
        else:  # update | close
            fields = {k: column_value(v) for k, v in op.fields.items()}
            if op.op == "close":
                fields["frames_dropped"] = st.losses.frames
                fields["bytes_dropped"] = st.losses.nbytes
                fields["last_seen_at"] = now
                closed.append(st.db_id)
            if fields:
                sets = ", ".join(f"{k} = ?" for k in fields)
                self._execute(
                    f"UPDATE connections SET {sets} WHERE id = ?", [*fields.values(), st.db_id]
                )


class SqliteSink(SqlSink):
    """The recording's SQLite file (WAL), written through one connection."""

    def __init__(self, path: Path, *, attempt_seconds: float = 0.2) -> None:
        super().__init__()
        self.path = path
        self.where = str(path)
        self.attempt_seconds = attempt_seconds
        self._db: SqliteConnection | None = None
        self._per: dict[int, int] = {}

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def open(self, give_up_at: Callable[[], float]) -> None:
        while True:
            wait = max(0.0, min(self.attempt_seconds, give_up_at() - time.monotonic()))
            try:
                db = connect(self.path, create=True, timeout=wait)
            except RecordingError as exc:
                locked = exc.__cause__ is not None and SQLITE.is_locked(exc.__cause__)
                if locked and time.monotonic() < give_up_at():
                    continue
                raise SinkFailed(str(exc), locked=locked) from exc
            except _OPEN_ERRORS as exc:
                raise SinkFailed(f"cannot open {self.path}: {exc}") from exc
            # Our own retry loop decides how long to wait for another writer.
            db.execute("PRAGMA busy_timeout = 50")
            self._db = db
            return

    def write(self, ops: list[Op], give_up_at: Callable[[], float]) -> int:
        delay = 0.01
        while True:
            try:
                return self._apply(ops)
            except SQLITE.errors as exc:
                locked = SQLITE.is_locked(exc)
                if locked and time.monotonic() < give_up_at():
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)
                    continue
                raise SinkFailed(str(exc), locked=locked) from exc

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(*SQLITE.errors):
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self._db.close()
            self._db = None

    def _execute(self, sql: str, params: Sequence[Any]) -> Any:
        assert self._db is not None
        return self._db.execute(sql, params)

    def _insert_connection(self, sql: str, params: list[Any]) -> int:
        assert self._db is not None
        return int(self._db.execute(sql, params).lastrowid or 0)

    def _begin(self) -> None:
        assert self._db is not None
        self._db.execute("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        assert self._db is not None
        self._db.execute("COMMIT")

    def _rollback(self) -> None:
        if self._db is not None:
            with contextlib.suppress(*SQLITE.errors):
                self._db.execute("ROLLBACK")

    def _insert_stderr(self, rows: list[tuple[Any, ...]]) -> None:
        assert self._db is not None
        self._insert(self._db, _STDERR_INSERT, _STDERR_ROW, _STDERR_NCOLS, rows)

    def _insert_frames(self, rows: list[tuple[Any, ...]]) -> None:
        """INSERT frame rows in order; a big frame's bytes go in pieces, never bound whole."""
        db = self._db
        assert db is not None
        start = 0
        for i, row in enumerate(rows):
            if row[6] > BIG_FRAME_BYTES:
                if i > start:
                    self._insert(db, _FRAME_INSERT, _FRAME_ROW, _FRAME_NCOLS, rows[start:i])
                self._insert_big(db, row)
                start = i + 1
        if start == 0:
            self._insert(db, _FRAME_INSERT, _FRAME_ROW, _FRAME_NCOLS, rows)
        elif start < len(rows):
            self._insert(db, _FRAME_INSERT, _FRAME_ROW, _FRAME_NCOLS, rows[start:])

    @staticmethod
    def _insert_big(db: SqliteConnection, row: tuple[Any, ...]) -> None:
        raw = row[5]
        cur = db.execute(_FRAME_INSERT + _BIG_FRAME_ROW, (*row[:5], len(raw), *row[6:]))
        rowid = int(cur.lastrowid or 0)
        view = memoryview(raw)
        with db.blobopen("frames", "raw", rowid) as blob:
            for at in range(0, len(view), BLOB_PIECE_BYTES):
                blob.write(view[at : at + BLOB_PIECE_BYTES])
        view.release()

    def _insert(
        self,
        db: SqliteConnection,
        insert: str,
        one: str,
        ncols: int,
        rows: list[tuple[Any, ...]],
    ) -> None:
        """INSERT ``rows`` (``one``: a row's VALUES) in a few multi-row statements.

        Full statements carry :data:`ROWS_PER_STATEMENT` rows (fewer if SQLite allows fewer
        parameters); the rest goes in statements of 1024, 512, ... rows, so every row is in
        a multi-row statement (per-row steps each wait for the GIL) and a dozen statement
        texts at most are ever prepared.
        """
        per = self._per.get(ncols)
        if per is None:
            limit = SQLITE.variable_limit(db) // ncols
            per = self._per[ncols] = max(1, min(ROWS_PER_STATEMENT, limit))
        done = 0
        total = len(rows)
        while done < total:
            left = total - done
            count = per if left >= per else 1 << (left.bit_length() - 1)
            db.execute(
                _statement(insert, one, count),
                list(chain.from_iterable(rows[done : done + count])),
            )
            done += count


_STATEMENTS: dict[tuple[str, str, int], str] = {}


def _statement(insert: str, one: str, count: int) -> str:
    """The text of an INSERT of ``count`` rows (built once: it can be 200 KB)."""
    key = (insert, one, count)
    sql = _STATEMENTS.get(key)
    if sql is None:
        sql = _STATEMENTS[key] = insert + ", ".join([one] * count)
    return sql


def _with_id(rows: list[tuple[Any, ...]], cid: int) -> list[tuple[Any, ...]]:
    """``rows`` with their first column set to the connection id (usually already is)."""
    if rows[0][0] == cid and rows[-1][0] == cid:
        return rows
    return [(cid, *r[1:]) for r in rows]


def _joined(parts: list[list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    return parts[0] if len(parts) == 1 else [row for rows in parts for row in rows]
