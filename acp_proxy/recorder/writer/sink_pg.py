"""The recorder's PostgreSQL sink: batches through ``COPY``, and an outage survived.

:class:`PostgresSink` is the :class:`~acp_proxy.recorder.writer.sink.SqlSink` of a PostgreSQL
database: the connection rows' life is the shared one (``INSERT ... RETURNING id``, the
same updates, heartbeats and closes as SQLite's), and a batch's frames and stderr lines go
in with PostgreSQL's bulk path, ``COPY ... FROM STDIN (FORMAT BINARY)``, in the batch's one
transaction: binary ``COPY`` was the fastest way measured (docs/performance.md, "The
recorder's constants").

Outages: a server that cannot be reached, or goes away (restarted, network cut), makes
:meth:`PostgresSink.write` raise :class:`~acp_proxy.recorder.writer.sink.SinkFailed` with
``unavailable`` set and nothing stored; the pipeline keeps the batch (the backlog waits in
the journal's spool) and calls again, which reconnects. A batch whose ``COMMIT`` got no
answer is not sent twice: every transaction notes its id (``pg_current_xact_id()``) and,
after reconnecting, ``pg_xact_status`` says whether it committed; if it did, the retried
batch is taken as written (its connection rows keep the ids they got), else it is sent
again. Connection ids and sequence numbers therefore stay those of the first attempt, and
nothing is stored twice.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from acp_proxy.recorder.writer.rows import (
    BIG_FRAME_BYTES,
    INDEX_START,
    ControlOp,
    Op,
    RowsOp,
    RowState,
)
from acp_proxy.recorder.writer.sink import SinkFailed, SqlSink
from acp_proxy.store.columns import FRAME_COLUMNS, column_value
from acp_proxy.store.engine import POSTGRES
from acp_proxy.store.pg import (
    NO_PSYCOPG,
    TAKE_WRITER_LOCK,
    PgDatabase,
    PgUnavailable,
    binary_bytes_dumper,
    connect_pg,
    describe_error,
    is_unavailable,
    safe_url,
)
from acp_proxy.store.pg_partitions import WRITER_MOVE_LIMIT, ensure_partitions_pg
from acp_proxy.store.schema import RecordingError

CONNECT_SECONDS = 5.0
"""How long one connection attempt may take (libpq ``connect_timeout``)."""

PARTITIONS_RETRY_SECONDS = 600.0
"""How soon a writer tries again to create the coming days' partitions after it failed."""

_FRAME_COPY = f"COPY frames ({FRAME_COLUMNS}) FROM STDIN (FORMAT BINARY)"
_FRAME_TYPES = ["int8", "int8", "float8", "int8", "text", "bytea", "int8", "int8"] + ["text"] * 7
_STDERR_COPY = "COPY stderr_lines (connection_id, seq, ts, mono_ns, raw) FROM STDIN (FORMAT BINARY)"
_STDERR_TYPES = ["int8", "int8", "float8", "int8", "bytea"]
_NUL_ESCAPE = b"\\u0000"
"""How JSON spells NUL: a frame without it has no NUL in its index values."""


@dataclass
class _Doubt:
    """A batch whose ``COMMIT`` had no answer: what it did, should it have committed."""

    xid: str
    pid: int  # the server process of the connection that sent the COMMIT
    key: list[tuple[int, Any]]
    ids: list[tuple[RowState, int | None]]
    closed: list[int]
    written: int


class PostgresSink(SqlSink):
    """A PostgreSQL database (``postgresql://`` URL), written through one connection."""

    engine = "PostgreSQL"
    null = None  # frame rows go to COPY as they are

    def __init__(self, url: str, *, connect_seconds: float = CONNECT_SECONDS) -> None:
        super().__init__()
        self.url = url
        self.where = safe_url(url)
        self.connect_seconds = connect_seconds
        self._db: PgDatabase | None = None
        self._xid: str | None = None
        self._pid = 0
        self._committing = False
        self._doubt: _Doubt | None = None
        self._partitions_at = 0.0
        """When to create the coming days' partitions next (:meth:`_keep_partitions`)."""

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def open(self, give_up_at: Callable[[], float]) -> None:
        try:
            bytes_dumper = binary_bytes_dumper()
        except ImportError:
            raise SinkFailed(NO_PSYCOPG) from None

        try:
            self._db = connect_pg(self.url, create=True, timeout=self.connect_seconds)
        except PgUnavailable as exc:
            raise SinkFailed(str(exc), unavailable=True) from None
        except RecordingError as exc:
            raise SinkFailed(str(exc)) from None
        self._db.conn.adapters.register_dumper(bytearray, bytes_dumper)
        self._partitions_at = 0.0

    def _keep_partitions(self) -> None:
        """Today's partitions and the next days' (on connecting, then daily), outside any
        batch's transaction; a failure (a role without DDL rights, a lock not granted in
        time) only means the rows go to the default partition until the next try."""
        assert self._db is not None
        try:
            self._partitions_at = ensure_partitions_pg(self._db, move_limit=WRITER_MOVE_LIMIT)
        except POSTGRES.errors:
            if self._db.conn.broken:
                raise
            self._partitions_at = time.time() + PARTITIONS_RETRY_SECONDS

    def write(self, ops: list[Op], give_up_at: Callable[[], float]) -> int:
        """Store ``ops`` in one transaction; see :meth:`Sink.write`.

        After a failure with ``unavailable`` set, the next call must bring the same batch
        (or its :func:`~acp_proxy.recorder.writer.rows.sanitized` copy): if the failed attempt did
        commit, that call stores nothing and returns what the attempt wrote.
        """
        if self._db is None:
            self.open(give_up_at)
        try:
            if time.time() >= self._partitions_at:
                self._keep_partitions()
            doubt, self._doubt = self._doubt, None
            if (
                doubt is not None
                and doubt.key == _batch_key(ops)
                and self._outcome(doubt, give_up_at) == "committed"
            ):
                for st, cid in doubt.ids:
                    st.db_id = cid
                self._settle([st for st, _ in doubt.ids], doubt.closed)
                return doubt.written
            return self._apply(ops)
        except POSTGRES.errors as exc:
            failure = self._failed(exc)
            if doubt is not None and self._doubt is None and failure.unavailable:
                self._doubt = doubt  # still unresolved: ask again after reconnecting
            raise failure from None

    def _outcome(self, doubt: _Doubt, give_up_at: Callable[[], float]) -> str | None:
        """What became of the doubtful transaction: committed, aborted (or None if unknown).

        Still in progress means its server process has not yet read the COMMIT, nor seen
        that its client is gone, and may yet commit: sending the batch again would then
        store it twice (or wait on its rows, then fail). That process is ended
        (``pg_terminate_backend``, allowed on one's own sessions), which settles it either
        way; until it has, the batch waits (:class:`SinkFailed`, ``unavailable``).
        """
        status = self._xact_status(doubt.xid)
        if status == "in progress":
            self._execute("SELECT pg_terminate_backend(?)", (doubt.pid,))
            while status == "in progress" and time.monotonic() < give_up_at():
                time.sleep(0.05)
                status = self._xact_status(doubt.xid)
            if status == "in progress":
                self._doubt = doubt
                raise SinkFailed(
                    f"{self.where}: an earlier attempt at this batch is still in progress",
                    unavailable=True,
                )
        return status

    def interrupt(self) -> None:
        """Shut the connection's socket down: a call waiting on a server that never answers
        (stopped, hung) fails at once, as if the connection were lost (a ``COMMIT`` then
        stays in doubt, see :meth:`doubtful`)."""
        db = self._db
        if db is None:
            return
        with contextlib.suppress(Exception):
            sock = socket.socket(fileno=os.dup(db.conn.pgconn.socket))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    def doubtful(self, ops: list[Op]) -> int:
        doubt = self._doubt
        if doubt is None or doubt.key != _batch_key(ops):
            return 0
        return doubt.written

    def settle_later(
        self,
        rows: list[RowState],
        doubt: dict[RowState, tuple[int, int]],
        ends: dict[RowState, dict[str, Any]],
    ) -> None:
        from acp_proxy.recorder.ipc import LOCATION_ENV
        from acp_proxy.recorder.writer.settle_pg import start

        pending = self._doubt
        ids = {st: cid for st, cid in (pending.ids if pending is not None else [])}
        plan_rows = []
        for st in rows:
            cid = st.db_id if st.db_id is not None else ids.get(st)
            if cid is None:
                continue
            frames, nbytes = doubt.get(st, (0, 0))
            end = {k: column_value(v) for k, v in ends.get(st, {}).items()}
            plan_rows.append(
                {
                    "id": cid,
                    "frames": st.losses.frames,
                    "bytes": st.losses.nbytes,
                    "doubt_frames": frames,
                    "doubt_bytes": nbytes,
                    "end": end,
                }
            )
        if not plan_rows:
            return
        plan = {
            "rows": plan_rows,
            "doubt": {"xid": pending.xid, "pid": pending.pid} if pending is not None else None,
        }
        start(self.url, LOCATION_ENV, plan)

    def _xact_status(self, xid: str) -> str | None:
        row = self._execute("SELECT pg_xact_status(?::xid8)", (xid,)).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(Exception):
                self._db.close()
            self._db = None

    def _failed(self, exc: BaseException) -> SinkFailed:
        """The error of a failed batch; a lost connection is closed (reconnect next time)."""
        db = self._db
        lost = db is None or db.conn.broken or db.conn.closed or is_unavailable(exc)
        if lost:
            self.close()
            return SinkFailed(f"{self.where}: {describe_error(exc)}", unavailable=True)
        return SinkFailed(f"{self.where}: {describe_error(exc)}")

    # -- primitives ----------------------------------------------------------------------

    def _execute(self, sql: str, params: Sequence[Any]) -> Any:
        assert self._db is not None
        return self._db.execute(sql, params)

    def _insert_connection(self, sql: str, params: list[Any]) -> int:
        row = self._execute(sql + " RETURNING id", params).fetchone()
        assert row is not None
        return int(row[0])

    def _begin(self) -> None:
        """Open the batch's transaction, mark it a frame writer and note its id, in one
        round trip (the mark comes first: before any frame id is drawn)."""
        assert self._db is not None
        cur = self._db.conn.execute(f"BEGIN; {TAKE_WRITER_LOCK}; SELECT pg_current_xact_id()::text")
        cur.nextset()  # one round trip: BEGIN's result, the lock's, then the id's
        cur.nextset()
        row = cur.fetchone()
        self._xid = str(row[0]) if row else None
        self._pid = self._db.conn.info.backend_pid

    def _commit(self) -> None:
        assert self._db is not None
        self._committing = True
        self._db.execute("COMMIT")
        self._committing = False

    def _rollback(self) -> None:
        if self._db is not None and not self._db.conn.broken:
            with contextlib.suppress(Exception):
                self._db.execute("ROLLBACK")

    def _aborted(self, ops: list[Op], opened: list[RowState], closed: list[int]) -> None:
        if self._committing and self._xid is not None:
            written = sum(
                len(op.frames) for op in ops if type(op) is RowsOp and op.conn.db_id is not None
            )
            ids = [(st, st.db_id) for st in opened]
            self._doubt = _Doubt(self._xid, self._pid, _batch_key(ops), ids, list(closed), written)
        self._committing = False

    def _insert_frames(self, rows: list[tuple[Any, ...]]) -> None:
        assert self._db is not None
        with self._db.conn.cursor() as cur, cur.copy(_FRAME_COPY) as copy:
            copy.set_types(_FRAME_TYPES)
            write = copy.write_row
            for r in rows:
                if r[6] > BIG_FRAME_BYTES or _NUL_ESCAPE in r[5]:  # may hold a NUL: slow way
                    write((*r[:INDEX_START], *[_index_value(v) for v in r[INDEX_START:]]))
                else:  # the rows' missing values are None (Rows(null=None)): as they are
                    write(r)

    def _insert_stderr(self, rows: list[tuple[Any, ...]]) -> None:
        assert self._db is not None
        with self._db.conn.cursor() as cur, cur.copy(_STDERR_COPY) as copy:
            copy.set_types(_STDERR_TYPES)
            write = copy.write_row
            for r in rows:
                write(r)


def _index_value(value: Any) -> Any:
    """An index column for PostgreSQL: a missing value (None, or 0) is NULL; no NUL in text."""
    if value is None or value.__class__ is int:
        return None
    if "\x00" in value:
        return value.replace("\x00", "\\u0000")
    return value


def _batch_key(ops: list[Op]) -> list[tuple[int, Any]]:
    """What identifies a batch across a retry (its sanitized copy has the same key)."""
    key: list[tuple[int, Any]] = []
    for op in ops:
        if type(op) is RowsOp:
            first = op.frames[0][1] if op.frames else None
            key.append((id(op.conn), (len(op.frames), first, len(op.stderr))))
        elif type(op) is ControlOp:
            key.append((id(op.conn), op.op))
        else:
            key.append((id(op.conn), "facts"))
    return key
