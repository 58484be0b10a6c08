"""The recorder: a bounded queue feeding one writer thread that commits in batches.

Transports call :meth:`ConnectionRecorder.frames` from their forwarding loops; that only
timestamps, numbers and enqueues (no parsing, no SQLite). The writer thread classifies
frames (:class:`~acp_proxy.acp.index.ConnectionIndexer`), inserts whatever has queued up
since its last commit in one transaction, and commits (WAL), so it is at most one batch
behind. When the queue is over its byte budget or SQLite fails (disk full, read-only
file, a lock held too long), frames are dropped, counted on the connection row and
reported once per incident; forwarding never waits.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.record.schema import RecordingError, connect
from acp_proxy.wire.frame import Direction

DEFAULT_QUEUE_BYTES = 256 * 1024 * 1024
"""Frames waiting for the writer may hold at most this many bytes before new ones drop."""

LOCK_RETRY_SECONDS = 30.0
"""How long a batch is retried while another process holds the database lock."""


def warn_stderr(message: str) -> None:
    """Default warning sink: one line on the proxy's stderr."""
    try:
        sys.stderr.write(f"acp-proxy: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


@dataclass(slots=True)
class _FrameItem:
    conn: ConnectionRecorder
    seq: int
    direction: Direction
    ts: float
    mono_ns: int
    raw: bytes
    binary: bool


@dataclass(slots=True)
class _StderrItem:
    conn: ConnectionRecorder
    seq: int
    ts: float
    mono_ns: int
    raw: bytes


@dataclass(slots=True)
class _Control:
    conn: ConnectionRecorder
    op: str  # open | update | event | close
    fields: dict[str, Any]


_Item = _FrameItem | _StderrItem | _Control


class ConnectionRecorder:
    """One recorded connection: the handle a transport writes frames through.

    Thread-safe: both forwarding directions and the stderr pump may call it at once.
    """

    def __init__(self, recorder: Recorder, fields: dict[str, Any]) -> None:
        self._recorder = recorder
        self._seq = itertools.count(1)
        self._stderr_seq = itertools.count(1)
        self.db_id: int | None = None  # set by the writer thread once the row exists
        self.frames_dropped = 0
        self.bytes_dropped = 0
        self.frames_recorded = 0
        self.indexer = ConnectionIndexer()
        self.closed = False
        recorder._put_control(_Control(self, "open", fields))

    def frame(self, direction: Direction, raw: bytes, *, binary: bool = False) -> None:
        """Record one frame that was just forwarded."""
        self.frames(direction, (raw,), binary=binary)

    def frames(self, direction: Direction, raws: Iterable[bytes], *, binary: bool = False) -> None:
        """Record frames that arrived together (same timestamps, consecutive numbers)."""
        ts = time.time()
        mono = time.monotonic_ns()
        seq = self._seq
        self._recorder._put_frames(
            [_FrameItem(self, next(seq), direction, ts, mono, raw, binary) for raw in raws]
        )

    def stderr(self, raw: bytes) -> None:
        """Record one line the agent wrote to stderr."""
        self._recorder._put_frames(
            [_StderrItem(self, next(self._stderr_seq), time.time(), time.monotonic_ns(), raw)]
        )

    def update(self, **fields: Any) -> None:
        """Set columns of the connection row (pid, label, exit_status...)."""
        self._recorder._put_control(_Control(self, "update", fields))

    def event(self, kind: str, detail: Any = None) -> None:
        """Record a connection-level event (a signal, a close code...)."""
        self._recorder._put_control(_Control(self, "event", {"kind": kind, "detail": detail}))

    def close(self, **fields: Any) -> None:
        """The connection ended: record ``ended_at`` and any final fields."""
        if self.closed:
            return
        self.closed = True
        fields.setdefault("ended_at", time.time())
        self._recorder._put_control(_Control(self, "close", fields))


class Recorder:
    """Owns the writer thread and the queue for one database file.

    ``path=None`` makes a recorder that records nothing (pass-through mode) but keeps the
    same interface, so transports have one code path.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        warn: Callable[[str], None] = warn_stderr,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.queue_bytes = queue_bytes
        self.warn = warn
        self._queue: deque[_Item] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition(threading.Lock())
        self._stop = False
        self._dropping = False  # inside a drop incident (warned once)
        self._db: sqlite3.Connection | None = None
        self._failed: str | None = None
        self._connections: list[ConnectionRecorder] = []
        self._thread: threading.Thread | None = None
        self.batches_committed = 0
        if self.path is not None:
            self._thread = threading.Thread(
                target=self._run, name="acp-proxy-recorder", daemon=True
            )
            self._thread.start()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def connection(self, transport: str, **fields: Any) -> ConnectionRecorder:
        """Start recording a new connection; returns its handle immediately."""
        fields = {"transport": transport, "started_at": time.time(), **fields}
        fields.setdefault("proxy_pid", os.getpid())
        conn = ConnectionRecorder(self, fields)
        self._connections.append(conn)
        return conn

    # -- producer side (forwarding threads) --------------------------------------------

    def _put_frames(self, items: list[_FrameItem] | list[_StderrItem]) -> None:
        if self.path is None:
            return
        size = sum(len(i.raw) for i in items)
        with self._cond:
            if self._failed is not None or (
                self._queue and self._queued_bytes + size > self.queue_bytes
            ):
                for item in items:
                    if isinstance(item, _FrameItem):
                        item.conn.frames_dropped += 1
                        item.conn.bytes_dropped += len(item.raw)
                if not self._dropping:
                    self._dropping = True
                    reason = self._failed or "the recorder is behind (queue full)"
                    self.warn(f"recording: dropping frames, {reason}; forwarding continues")
                return
            if self._dropping and self._queued_bytes < self.queue_bytes // 2:
                self._dropping = False
            self._queue.extend(items)
            self._queued_bytes += size
            self._cond.notify()

    def _put_control(self, item: _Control) -> None:
        if self.path is None:
            return
        with self._cond:
            self._queue.append(item)
            self._cond.notify()

    # -- lifecycle -------------------------------------------------------------------------

    def close(self, timeout: float = 30.0) -> None:
        """Flush everything queued, close open connections and stop the writer."""
        for conn in self._connections:
            conn.close()
        if self._thread is None:
            return
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.warn("recording: the writer did not finish in time; the last frames may be lost")
        dropped = sum(c.frames_dropped for c in self._connections)
        if dropped:
            self.warn(f"recording: {dropped} frame(s) were not recorded (see frames_dropped)")

    # -- writer thread ---------------------------------------------------------------------

    def _run(self) -> None:
        assert self.path is not None
        try:
            self._db = connect(self.path, create=True)
        except RecordingError as exc:
            self._fail(str(exc))
        except (sqlite3.Error, OSError) as exc:
            self._fail(f"cannot open {self.path}: {exc}")
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if not self._queue and self._stop:
                    break
                batch = list(self._queue)
                self._queue.clear()
                self._queued_bytes = 0
            if self._db is None:
                continue  # failed: items are counted as dropped when they arrive
            self._write_batch(batch)
        if self._db is not None:
            try:
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self._db.close()
            except sqlite3.Error:
                pass

    def _fail(self, reason: str) -> None:
        with self._cond:
            self._failed = f"recording disabled: {reason}"
            dropped_now = [i for i in self._queue if isinstance(i, _FrameItem)]
            for item in dropped_now:
                item.conn.frames_dropped += 1
                item.conn.bytes_dropped += len(item.raw)
            self._queue.clear()
            self._queued_bytes = 0
        self.warn(f"{self._failed}; forwarding continues")

    def _write_batch(self, batch: list[_Item]) -> None:
        assert self._db is not None
        deadline = time.monotonic() + LOCK_RETRY_SECONDS
        delay = 0.01
        while True:
            try:
                self._apply(batch)
                self.batches_committed += 1
                return
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if ("locked" in text or "busy" in text) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)
                    continue
                self._lose(batch, text)
                return
            except sqlite3.Error as exc:
                self._lose(batch, str(exc))
                return

    def _lose(self, batch: list[_Item], reason: str) -> None:
        frames = [i for i in batch if isinstance(i, _FrameItem)]
        for item in frames:
            item.conn.frames_dropped += 1
            item.conn.bytes_dropped += len(item.raw)
        self.warn(f"recording: lost {len(frames)} frame(s): {reason}; forwarding continues")
        # Connection rows and their updates are small: keep them for the next attempt.
        controls = [i for i in batch if isinstance(i, _Control)]
        with self._cond:
            self._queue.extendleft(reversed(controls))
        time.sleep(0.2)  # a failing disk is not retried in a busy loop

    def _apply(self, batch: list[_Item]) -> None:
        db = self._db
        assert db is not None
        frame_rows: list[tuple[Any, ...]] = []
        stderr_rows: list[tuple[Any, ...]] = []
        db.execute("BEGIN IMMEDIATE")
        try:
            touched: set[ConnectionRecorder] = set()
            for item in batch:
                if isinstance(item, _FrameItem):
                    conn = item.conn
                    if conn.db_id is None:  # its row could not be written
                        conn.frames_dropped += 1
                        conn.bytes_dropped += len(item.raw)
                        continue
                    cols = conn.indexer.index(item.direction, item.raw)
                    frame_rows.append(
                        (
                            conn.db_id, item.seq, item.ts, item.mono_ns, item.direction,
                            item.raw, len(item.raw), int(item.binary), cols.kind, cols.rpc_id,
                            cols.method, cols.session_id, cols.update_kind, cols.entity_type,
                            cols.entity_id,
                        )
                    )
                    if conn.indexer.facts.changed:
                        touched.add(conn)
                elif isinstance(item, _StderrItem):
                    if item.conn.db_id is not None:
                        stderr_rows.append(
                            (item.conn.db_id, item.seq, item.ts, item.mono_ns, item.raw)
                        )
                else:
                    if frame_rows:
                        self._insert(db, frame_rows, stderr_rows)
                        frame_rows, stderr_rows = [], []
                    self._control(db, item)
            self._insert(db, frame_rows, stderr_rows)
            for conn in touched:
                facts = conn.indexer.facts
                facts.changed = False
                db.execute(
                    "UPDATE connections SET protocol_version = ?, client_info = ?, agent_info = ? "
                    "WHERE id = ?",
                    (facts.protocol_version, _json(facts.client_info), _json(facts.agent_info),
                     conn.db_id),
                )
            for conn in {i.conn for i in batch}:
                if conn.frames_dropped and conn.db_id is not None:
                    db.execute(
                        "UPDATE connections SET frames_dropped = ?, bytes_dropped = ? WHERE id = ?",
                        (conn.frames_dropped, conn.bytes_dropped, conn.db_id),
                    )
            db.execute("COMMIT")
        except BaseException:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise

    @staticmethod
    def _insert(
        db: sqlite3.Connection, frame_rows: list[tuple[Any, ...]], stderr_rows: list[tuple[Any, ...]]
    ) -> None:
        if frame_rows:
            db.executemany(
                "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, raw, size, binary, "
                "kind, rpc_id, method, session_id, update_kind, entity_type, entity_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                frame_rows,
            )
        if stderr_rows:
            db.executemany(
                "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) VALUES (?, ?, ?, ?, ?)",
                stderr_rows,
            )

    def _control(self, db: sqlite3.Connection, item: _Control) -> None:
        conn = item.conn
        fields = {k: _column_value(v) for k, v in item.fields.items()}
        if item.op == "open":
            if conn.db_id is not None:
                return
            cols = ", ".join(fields)
            marks = ", ".join("?" for _ in fields)
            cur = db.execute(f"INSERT INTO connections ({cols}) VALUES ({marks})", list(fields.values()))
            conn.db_id = int(cur.lastrowid or 0)
        elif conn.db_id is None:
            return
        elif item.op == "event":
            db.execute(
                "INSERT INTO events (connection_id, ts, kind, detail) VALUES (?, ?, ?, ?)",
                (conn.db_id, time.time(), fields["kind"], _json(item.fields.get("detail"))),
            )
        else:  # update | close
            if item.op == "close":
                fields["frames_dropped"] = conn.frames_dropped
                fields["bytes_dropped"] = conn.bytes_dropped
            if fields:
                sets = ", ".join(f"{k} = ?" for k in fields)
                db.execute(
                    f"UPDATE connections SET {sets} WHERE id = ?", [*fields.values(), conn.db_id]
                )


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _column_value(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return orjson.dumps(value).decode()
    return value
