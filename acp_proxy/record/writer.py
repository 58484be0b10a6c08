"""The recorder: a bounded queue feeding a two-stage writer that commits in batches.

Transports hand the recorder copies of what they forwarded and return at once:
:meth:`ConnectionRecorder.stream` takes a raw chunk of a byte stream (stdio), and
:meth:`ConnectionRecorder.frame` one whole message (WebSocket). Producers only timestamp
and append to a deque under a lock; no splitting, parsing or SQLite happens on the
forwarding path.

Two threads do the rest. The *indexer* cuts streams into lines
(:class:`~acp_proxy.wire.framing.LineFramer`), numbers frames, derives the index columns
(:class:`~acp_proxy.acp.index.ConnectionIndexer`) and builds rows; the *SQLite writer*
inserts a batch per transaction and commits (WAL). SQLite releases the GIL while it works,
so both stages overlap. A batch is at most :data:`BATCH_FRAMES` frames or
:data:`BATCH_BYTES` bytes, so the recording is at most about one batch behind. With the
process backend (the commands') these two threads run in a writer process
(:mod:`acp_proxy.record.child`), and in the proxy a shipper thread sends it the queue.

Past the queue's memory budget, chunks go to a spool file; past the spool's budget, or when
SQLite fails (disk full, read-only file, a lock held longer than the retry window), frames
are dropped, counted on the connection row (``frames_dropped``/``bytes_dropped``) and
reported with one warning line per incident; forwarding never waits.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any

import orjson

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.console import warn
from acp_proxy.record.child import (
    CHUNK,
    CONTROL,
    DROPS,
    END,
    FRAME,
    GAP,
    RECORDER_NICE,
    WriterProcess,
    encode_batch,
)
from acp_proxy.record.schema import RecordingError, connect
from acp_proxy.record.spool import Spool, SpoolRef
from acp_proxy.wire.frame import A2C, C2A, Direction
from acp_proxy.wire.framing import LineFramer

DEFAULT_QUEUE_BYTES = 16 * 1024 * 1024
"""Backlog held in memory (bytes waiting for the writer) beyond which frames are spooled.

Past it, frames go to the spool file on disk (:data:`DEFAULT_SPOOL_BYTES`), and past that
they are dropped and counted. 16 MiB is many seconds of real editor traffic, or about a
twentieth of a second of a saturated stream of small frames. A single frame larger than
the budget is not affected: the bytes of a line that has not ended yet do not count
against it.
"""

DEFAULT_SPOOL_BYTES = 1024 * 1024 * 1024
"""Backlog allowed in the spool file (beside the recording) before frames are dropped.

The trade-off: memory stays bounded by :data:`DEFAULT_QUEUE_BYTES` whatever the flood, at
the price of up to this much temporary disk while the writer catches up (1 GiB is about
3.4 million 300-byte frames, half a minute of writing). The file is anonymous and emptied
as soon as the writer has caught up. 0 turns spooling off.
"""

SPOOLED_ITEM_COST = 160
"""About the memory (bytes) one spooled queue item still takes (its reference)."""

MIN_SPOOLED_ITEMS = 1024
"""Spooled items allowed whatever the memory budget (see :meth:`Recorder._spill`)."""

LINGER_SECONDS = 0.1
"""How long the indexer lets items gather after the first one before taking a batch.

This bounds how far behind the recording is at low load (and so what ``kill -9`` can
lose). Fewer, bigger batches hold the GIL less often against forwarding: measured,
100 ms gave a lower round-trip p99 while recording than 20 ms.
"""

BATCH_FRAMES = 20_000
"""Most queue items taken for one transaction."""

BATCH_BYTES = 1024 * 1024
"""Most raw bytes taken from the queue for one transaction (a bigger single frame still goes).

About 3,400 frames of 300 bytes. 2 MiB measured no faster and cost the writer process
about 10 MB more (two batches of rows in flight and a bigger queue).
"""

INCIDENT_QUIET_SECONDS = 2.0
"""A loss incident ends after this long without losses (then a new loss warns again)."""

INTERRUPT_SETTLE_SECONDS = 5.0
"""After Ctrl-C at exit, how long to count what was lost before giving up (seconds)."""

CHILD_QUEUE_BATCHES = 2
"""Batches the writer process queues before it stops reading (the pipe then fills)."""

BACKEND_ENV = "ACP_PROXY_RECORDER"
"""Set to ``thread`` to run the recorder's writer as threads instead of a child process."""

STATS_ENV = "ACP_PROXY_STATS"
"""Set to print the recorder's counters and CPU time on stderr at exit (benchmarks)."""

HARD_LIMIT_BYTES = 2 * 1024 * 1024 * 1024
"""Beyond this much queued, even the rest of a line being recorded is dropped."""

OPEN_LOCK_WAIT_SECONDS = 0.2
"""How long start-up waits for a locked database before opening it on the writer thread."""

LOCK_RETRY_ENV = "ACP_PROXY_LOCK_RETRY_SECONDS"
DEFAULT_LOCK_RETRY_SECONDS = 30.0


def lock_retry_seconds() -> float:
    """How long a batch is retried while another process holds the database lock.

    ``ACP_PROXY_LOCK_RETRY_SECONDS`` overrides the default of 30 seconds.
    """
    try:
        return max(0.0, float(os.environ.get(LOCK_RETRY_ENV, DEFAULT_LOCK_RETRY_SECONDS)))
    except ValueError:
        return DEFAULT_LOCK_RETRY_SECONDS


warn_stderr = warn  # the default warning sink (kept for callers of the old name)


# Queue items are plain tuples, cheapest to build on the forwarding threads:
#   (_CHUNK, conn, stream, ts, mono_ns, data, done)  a piece of a byte stream; done: how
#                                                many of its bytes complete lines
#   (_FRAME, conn, direction, ts, mono_ns, raw, binary)   one whole message
# (data / raw is a SpoolRef instead of bytes when the item's bytes were spooled to disk)
#   (_GAP, conn, stream, partial)                bytes of ``stream`` were dropped here;
#                                                partial: they ended inside a line
#   (_END, conn, stream, ts, mono_ns, inside)    end of ``stream``: flush its last line
#                                                (inside: it had no newline yet)
#   (_CONTROL, conn, op, fields)                 open | update | event | close
_CHUNK, _FRAME, _GAP, _END, _CONTROL = CHUNK, FRAME, GAP, END, CONTROL
STDERR = "stderr"
"""The stream name of the agent's stderr (frames use the directions ``c2a``/``a2c``)."""

# Rows are bound the cheap way: Python's sqlite3 binds int, float, str and bytearray
# directly but sends bytes and None through its adaptation machinery (an exception
# raised and cleared per value: about 1 us each, measured). So raw bytes travel as
# bytearray (stored as the same BLOB) and a missing index value as 0, which NULLIF()
# turns back into NULL (0 never equals a text value, so nothing else becomes NULL).
_FRAME_INSERT = (
    "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, raw, size, binary, "
    "kind, rpc_id, method, session_id, update_kind, entity_type, entity_id) VALUES "
)
_FRAME_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, " + ", ".join(["NULLIF(?, 0)"] * 6) + ")"
_FRAME_COLUMNS = 15
_STDERR_INSERT = "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) VALUES "
_STDERR_ROW = "(?, ?, ?, ?, ?)"
_STDERR_COLUMNS = 5

ROWS_PER_STATEMENT = 1000
"""Rows one multi-row INSERT carries (fewer if SQLite allows fewer parameters).

``executemany`` releases and retakes the GIL around every row's ``sqlite3_step``; while
the indexer thread runs Python, each retake waits up to a switch interval, so per-row
statements crawl. One statement of many rows binds them all, then runs them in one step
without the GIL: measured, 35% less CPU per row and no convoy with the indexer.
A prepared statement of 2,000 rows took 12 MB of memory, one of 1,000 about a half.
"""

SWITCH_INTERVAL = 0.0002
"""GIL switch interval (seconds) a recording process runs with (Python's default: 5 ms).

Set by the :class:`Recorder`, so in the proxy and in the writer process alike. A
forwarding thread whose read just returned waits at most this long for the GIL while the
shipper (or, with threads, the indexer) runs Python; in the writer, the SQLite thread gets
the GIL back this soon after each statement (measured there: a few % more frames/s).
"""


class ConnectionRecorder:
    """One recorded connection: the handle a transport writes frames through.

    Thread-safe: both forwarding directions and the stderr pump may call it at once.
    Frames are numbered in the order they reach the recorder's queue.
    """

    def __init__(
        self, recorder: Recorder, fields: dict[str, Any], *, announce: bool = True
    ) -> None:
        self._recorder = recorder
        self.db_id: int | None = None  # set by the SQLite writer once the row exists
        self.frames_dropped = 0
        self.bytes_dropped = 0
        self.indexer = ConnectionIndexer()
        self.closed = False
        # indexer-thread state
        self._seq = 0
        self._stderr_seq = 0
        self._framers: dict[str, LineFramer] = {}
        self._skip_partial: set[str] = set()
        # producer-side state (under the recorder's lock): streams whose queued bytes end
        # inside a line, and streams with dropped bytes (True: they ended inside a line)
        self._open: set[str] = set()
        self._gaps: dict[str, bool] = {}
        self._shipped_drops = (0, 0)  # losses already sent to the writer process
        self._shipped = [0, 0]  # complete frames (and their bytes) sent to it
        self._close_fields: dict[str, Any] | None = None
        # what identifies its row (see Recorder._settle_lost)
        self._identity = (fields.get("proxy_pid"), fields.get("started_at"))
        if announce:
            recorder._put_control((_CONTROL, self, "open", fields))

    def stream(self, direction: Direction | str, data: bytes) -> None:
        """Record a chunk of a newline-framed byte stream that was just forwarded.

        ``direction`` is ``c2a``, ``a2c`` or :data:`STDERR`. Lines are cut by the writer;
        call :meth:`stream_end` at end of stream so a last line without a newline counts.
        """
        if data:
            self._recorder._put_chunk(self, direction, data)

    def stream_end(self, direction: Direction | str) -> None:
        """The stream ended: its last unterminated line (if any) becomes a frame."""
        self._recorder._put_end(self, direction)

    def frame(self, direction: Direction, raw: bytes, *, binary: bool = False) -> None:
        """Record one whole frame (a WebSocket message) that was just forwarded."""
        self._recorder._put_frames(
            self, [(_FRAME, self, direction, time.time(), time.monotonic_ns(), raw, binary)]
        )

    def stderr(self, raw: bytes) -> None:
        """Record one whole line the agent wrote to stderr."""
        self._recorder._put_frames(
            self, [(_FRAME, self, STDERR, time.time(), time.monotonic_ns(), raw, False)]
        )

    def update(self, **fields: Any) -> None:
        """Set columns of the connection row (pid, label, exit_status...)."""
        self._recorder._put_control((_CONTROL, self, "update", fields))

    def event(self, kind: str, detail: Any = None) -> None:
        """Record a connection-level event (a signal, a close code...)."""
        self._recorder._put_control(
            (_CONTROL, self, "event", {"kind": kind, "detail": detail, "ts": time.time()})
        )

    def close(self, **fields: Any) -> None:
        """The connection ended: record ``ended_at`` and any final fields."""
        if self.closed:
            return
        self.closed = True
        fields.setdefault("ended_at", time.time())
        self._close_fields = fields
        self._recorder._put_control((_CONTROL, self, "close", fields))


class Recorder:
    """Owns the queue and the writer for one database file.

    ``path=None`` makes a recorder that records nothing (pass-through mode) but keeps the
    same interface, so transports have one code path. ``backend="process"`` (what the
    commands use) runs the indexer and the SQLite writer in a child process fed by one
    shipper thread (:mod:`acp_proxy.record.child`); ``"thread"`` runs them as threads of
    this process. ``ACP_PROXY_RECORDER=thread`` forces threads.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        spool_bytes: int = DEFAULT_SPOOL_BYTES,
        warn: Callable[[str], None] = warn_stderr,
        lock_retry: float | None = None,
        batch_bytes: int = BATCH_BYTES,
        backend: str = "thread",
        open_now: bool = True,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.queue_bytes = queue_bytes
        self.spool_bytes = spool_bytes
        self.batch_bytes = batch_bytes
        self.warn = warn
        self.lock_retry = lock_retry_seconds() if lock_retry is None else lock_retry
        self._queue: deque[tuple[Any, ...]] = deque()
        self._taken: deque[tuple[Any, ...]] = deque()  # swapped out, not indexed yet (indexer's)
        self._queued_bytes = 0  # all bytes queued, in memory or spooled
        self._backlog = 0  # memory held by queued complete frames (what the budget bounds)
        self._spool: Spool | None = None  # created at the first overflow
        self._spool_failed = False
        self._spooled_bytes = 0  # the part of _queued_bytes in the spool
        self._spooled_items = 0  # queue items whose bytes are in the spool
        self.spool_peak_bytes = 0  # most bytes ever waiting in the spool (stats)
        self._cond = threading.Condition(threading.Lock())
        self._stop = False
        self._idle = False  # the indexer waits for the queue to become non-empty
        self._urgent = False  # a control item is queued: take a batch without lingering
        # Inside a loss incident (queue full, or SQLite failing): warned once, over when
        # batches commit again, the queue is below half its budget and nothing was lost
        # for INCIDENT_QUIET_SECONDS (a nearly full disk must not flap the warning).
        self._incident = False
        self._last_loss = 0.0
        self._carry: list[tuple[Any, ...]] = []  # control ops to retry with the next batch
        self._db: sqlite3.Connection | None = None
        self._failed: str | None = None
        self._open_later = False
        self._connections: list[ConnectionRecorder] = []
        # indexer -> SQLite writer hand-off (one batch waits while one is written)
        self._batches: deque[list[tuple[Any, ...]] | None] = deque()
        self._batch_cond = threading.Condition(threading.Lock())
        self._threads: list[threading.Thread] = []
        self.batches_committed = 0
        self.frames_written = 0
        self.index_cpu = 0.0  # CPU seconds spent by the indexer thread
        self.sqlite_cpu = 0.0  # ... and by the SQLite writer thread
        self.linger = LINGER_SECONDS
        self._child: WriterProcess | None = None
        self._child_died = False  # it exited on its own: settle its losses at close
        self._child_keys: dict[ConnectionRecorder, int] = {}
        self._lossy: set[ConnectionRecorder] = set()  # losses counted here, not yet shipped
        if os.environ.get(BACKEND_ENV) == "thread":
            backend = "thread"
        if self.path is not None:
            if sys.getswitchinterval() > SWITCH_INTERVAL:
                sys.setswitchinterval(SWITCH_INTERVAL)
            # Opened (created, migrated) before anything is forwarded, so once the proxy
            # has passed a byte on, the file is a recording; a failure is reported now.
            # Only a lock held by another process is waited for on the writer thread
            # instead (forwarding must not wait for it; frames queue meanwhile).
            self._open_later = not open_now or not self._open_db(OPEN_LOCK_WAIT_SECONDS)
            if backend == "process" and self._failed is None and self._start_child():
                return
            self._threads = [
                threading.Thread(target=self._index_loop, name="acp-proxy-indexer", daemon=True),
                threading.Thread(target=self._sqlite_loop, name="acp-proxy-sqlite", daemon=True),
            ]
            for t in self._threads:
                t.start()

    def _start_child(self) -> bool:
        """Hand the writing to a child process; False (threads then) if it cannot start."""
        assert self.path is not None
        try:
            child = WriterProcess(
                self.path,
                on_exit=self._writer_exited,
                lock_retry=self.lock_retry,
                # This side holds the backlog (in memory up to the budget, then spooled);
                # the writer only needs the next batches, and waits for room beyond that.
                queue_bytes=min(self.queue_bytes, CHILD_QUEUE_BATCHES * self.batch_bytes),
                batch_bytes=self.batch_bytes,
            )
        except OSError:
            return False
        if self._db is not None:  # the child opens its own connection
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        self._child = child
        # Both sides gather for half the linger, so the recording stays as far behind.
        self.linger = LINGER_SECONDS / 2
        # Queue items live for a batch, long enough to reach the oldest generation, so full
        # collections come often; with start-up's objects frozen they scan only the few
        # objects made since, holding the forwarding threads' lock for less.
        gc.freeze()
        shipper = threading.Thread(target=self._ship_loop, name="acp-proxy-shipper", daemon=True)
        shipper.start()
        # close() waits for both: everything shipped, then the child done (its output ends)
        self._threads = [shipper, child.reader]
        return True

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

    def _over_budget(self, backlog: int) -> bool:
        """Would ``backlog`` more bytes of complete frames exceed the budget? (lock held)"""
        return self._failed is not None or (
            self._backlog > 0 and self._backlog + backlog > self.queue_bytes
        )

    def _start_incident(self, reason: str | None = None) -> None:
        """Warn once per incident (call with the lock held)."""
        self._last_loss = time.monotonic()
        if not self._incident:
            self._incident = True
            why = reason or self._failed or "the recorder is behind (queue full)"
            self.warn(f"recording: dropping frames, {why}; forwarding continues")

    def _put_chunk(self, conn: ConnectionRecorder, stream: str, data: bytes) -> None:
        """Queue a stream chunk, or drop (and count) what the budget does not allow.

        The budget bounds the *backlog of complete frames*; the bytes of a line that has
        not ended yet do not count, so one frame bigger than the budget is recorded whole
        (memory then grows with that frame, up to :data:`HARD_LIMIT_BYTES` queued). Over
        budget, a line already being recorded is still finished; what follows is dropped.
        """
        if self.path is None:
            return
        ts = time.time()
        mono = time.monotonic_ns()
        with self._cond:
            keep = b""
            in_memory = self._queued_bytes - self._spooled_bytes
            if self._failed is None:
                done = data.rfind(b"\n") + 1  # the bytes that complete lines
                fits = in_memory + len(data) <= HARD_LIMIT_BYTES
                if fits and not self._over_budget(done):
                    self._accept(conn, stream, ts, mono, data, done)
                    return
                ref = self._spill(data)
                if ref is not None:
                    self._accept(conn, stream, ts, mono, ref, done)
                    return
                if fits and stream in conn._open:
                    end = data.find(b"\n")
                    keep = data if end < 0 else data[: end + 1]
                    self._accept(conn, stream, ts, mono, keep, end + 1)
            rest = data[len(keep) :]
            if rest:
                conn._open.discard(stream)
                if stream != STDERR:
                    conn.frames_dropped += rest.count(b"\n")
                    conn.bytes_dropped += len(rest)
                    self._lossy.add(conn)
                conn._gaps[stream] = not rest.endswith(b"\n")
                self._start_incident()

    def _accept(
        self,
        conn: ConnectionRecorder,
        stream: str,
        ts: float,
        mono: int,
        data: bytes | SpoolRef,
        done: int,
    ) -> None:
        """Queue ``data`` (lock held), after a gap marker if bytes before it were dropped."""
        gap = conn._gaps.pop(stream, None)
        if gap is not None:
            self._queue.append((_GAP, conn, stream, gap))
        self._queue.append((_CHUNK, conn, stream, ts, mono, data, done))
        self._queued_bytes += len(data)
        if type(data) is not SpoolRef:
            self._backlog += done
        if done == len(data):
            conn._open.discard(stream)
        else:
            conn._open.add(stream)
        self._wake()

    def _spill(self, data: bytes) -> SpoolRef | None:
        """Append ``data`` to the spool (lock held); None if it cannot take it (then drop).

        The references left in memory are bounded too: at most the memory budget's worth
        (:data:`SPOOLED_ITEM_COST` each, at least :data:`MIN_SPOOLED_ITEMS`). Stream chunks
        are large, so that bound matters only for floods of small whole messages.
        """
        if (
            self.spool_bytes <= 0
            or self._spool_failed
            or self._spooled_bytes + len(data) > self.spool_bytes
            or self._spooled_items >= max(MIN_SPOOLED_ITEMS, self.queue_bytes // SPOOLED_ITEM_COST)
        ):
            return None
        try:
            if self._spool is None:
                assert self.path is not None
                self._spool = Spool(self.path.resolve().parent)
            ref = self._spool.append(data)
        except OSError as exc:
            self._spool_failed = True
            self._start_incident(f"the spool file failed ({exc})")
            return None
        self._spooled_bytes += len(data)
        self._spooled_items += 1
        self.spool_peak_bytes = max(self.spool_peak_bytes, self._spooled_bytes)
        return ref

    def _put_frames(self, conn: ConnectionRecorder, items: list[tuple[Any, ...]]) -> None:
        if self.path is None:
            return
        size = sum(len(i[5]) for i in items)
        with self._cond:
            in_memory = self._queued_bytes - self._spooled_bytes
            if self._over_budget(size) or in_memory + size > HARD_LIMIT_BYTES:
                spilled = []
                for item in items:
                    ref = self._spill(item[5]) if self._failed is None else None
                    if ref is None:
                        break
                    spilled.append((*item[:5], ref, item[6]))
                if len(spilled) == len(items):
                    self._queue.extend(spilled)
                    self._queued_bytes += size
                    self._wake()
                    return
                for item in spilled:  # all or nothing (the bytes stay in the file, unused)
                    self._spooled_bytes -= len(item[5])
                    self._spooled_items -= 1
                if items[0][2] != STDERR:
                    conn.frames_dropped += len(items)
                    conn.bytes_dropped += size
                    self._lossy.add(conn)
                self._start_incident()
                return
            self._queue.extend(items)
            self._queued_bytes += size
            self._backlog += size
            self._wake()

    def _put_end(self, conn: ConnectionRecorder, stream: str) -> None:
        if self.path is None:
            return
        with self._cond:
            gap = conn._gaps.pop(stream, None)
            if gap is not None:
                self._queue.append((_GAP, conn, stream, False))
                if gap and stream != STDERR:
                    conn.frames_dropped += 1  # the dropped tail had no newline: one more frame
                    self._lossy.add(conn)
            inside = stream in conn._open  # the stream ends inside a line: one more frame
            conn._open.discard(stream)
            self._queue.append((_END, conn, stream, time.time(), time.monotonic_ns(), inside))
            self._wake()

    def _put_control(self, item: tuple[Any, ...]) -> None:
        if self.path is None:
            return
        with self._cond:
            self._queue.append(item)
            # A connection opening, ending or changing is written without lingering, so
            # `ls` and the web inspector show it at once.
            self._urgent = True
            self._cond.notify()

    # -- lifecycle -------------------------------------------------------------------------

    def close(self, timeout: float = 60.0, *, report: bool = True) -> None:
        """Flush everything queued, close open connections and stop the writer.

        Waits as long as the writer makes progress (giving up after ``timeout`` seconds
        without any) and says on stderr what it is doing when that takes over a second.
        Ctrl-C stops the wait: what is still queued is then not recorded. ``report=False``
        (the writer process) leaves those messages to the proxy.
        """
        for conn in self._connections:
            conn.close()
        if not self._threads:
            return
        with self._cond:
            self._stop = True
            self._wake()
        child = self._child
        started = last_progress = time.monotonic()
        written = self._written()
        told = False
        try:
            for t in self._threads:
                while t.is_alive():
                    t.join(0.25)
                    now = time.monotonic()
                    if self._written() != written:
                        written, last_progress = self._written(), now
                    elif now - last_progress > timeout:
                        break
                    if report and not told and now - started > 1.0 and t.is_alive():
                        told = True
                        self.warn(
                            f"recording: writing the last {self._behind() / 1e6:.1f} MB queued "
                            f"to {self.path} (Ctrl-C stops; what is not written yet is lost)"
                        )
        except KeyboardInterrupt:
            behind = self._behind()
            if child is None:
                self.warn(
                    f"recording: interrupted; the {behind / 1e6:.1f} MB still queued were not "
                    "recorded (the connection stays marked as running)"
                )
                return
            with contextlib.suppress(KeyboardInterrupt):
                self._stop_child(child)
            lost = sum(c.frames_dropped for c in self._connections)
            some = "at least " if self._threads[0].is_alive() else ""  # still counting
            self.warn(
                f"recording: interrupted; {some}{lost:,} frame(s) ({behind / 1e6:.1f} MB) "
                "still queued were not recorded (counted on the connection row)"
            )
            return
        stuck = any(t.is_alive() for t in self._threads)
        dropped = sum(c.frames_dropped for c in self._connections)
        if child is not None:
            if stuck:
                self._stop_child(child)
            else:
                code = child.exit_status(5)
                if code not in (0, None) and not self._child_died:
                    self._child_died = True  # during the final drain: nobody else noticed
                    self.warn(
                        f"recording: the writer process exited (status {code}) before "
                        "writing everything"
                    )
                if self._child_died:
                    self._settle_lost(self.lock_retry)
            self.frames_written = child.frames_written
            self.batches_committed = child.batches
            self.index_cpu, self.sqlite_cpu = child.index_cpu, child.sqlite_cpu
            if self._child_died or stuck:
                dropped = sum(c.frames_dropped for c in self._connections)
            else:
                dropped = child.dropped + sum(
                    c.frames_dropped - c._shipped_drops[0] for c in self._connections
                )
        if not report:
            return
        if stuck:
            self.warn("recording: the writer made no progress; the last frames may be lost")
        elif told:
            self.warn(f"recording: done, {self.frames_written:,} frames recorded")
        if os.environ.get(STATS_ENV):
            self.warn(
                f"stats: {self.frames_written} frames in {self.batches_committed} batches; "
                f"CPU indexer {self.index_cpu:.2f} s, SQLite {self.sqlite_cpu:.2f} s; "
                f"spool peak {self.spool_peak_bytes / 1e6:.1f} MB"
            )
        if dropped:
            where = "" if self._failed else " (see frames_dropped)"
            self.warn(f"recording: {dropped} frame(s) were not recorded{where}")

    def _writer_exited(self) -> None:
        """The writer process's output ended (its reader thread calls this)."""
        with self._cond:
            if self._stop or self._failed is not None:
                return  # expected: close() asked it to finish, or it was stopped
            self._child_died = True
            self._incident = True
            self._failed = "recording disabled: the writer process exited"
        code = self._child.exit_status(0.5) if self._child is not None else None
        self.warn(
            f"{self._failed}{f' (status {code})' if code is not None else ''}; forwarding continues"
        )

    def _settle_lost(self, timeout: float) -> None:
        """The writer process is gone: put what it never wrote on the connection rows.

        Lost = frames dropped here (never sent) plus frames sent that the database does
        not hold (they were in the pipe, or in the writer's memory). The rows also get
        the end time and exit status the writer never received. If the database cannot
        be opened within ``timeout`` seconds, every frame sent counts as lost.
        """
        assert self.path is not None
        try:
            db = connect(self.path, create=False, timeout=timeout)
        except RecordingError as exc:
            db = None
            self.warn(f"recording: could not note the lost frames on the connection row: {exc}")
        try:
            for conn in self._connections:
                db_id = None
                if db is not None:  # this proxy's connection started at that instant
                    found = db.execute(
                        "SELECT id FROM connections WHERE proxy_pid = ? AND started_at = ?",
                        conn._identity,
                    ).fetchone()
                    db_id = found[0] if found else None
                recorded = (0, 0)
                if db is not None and db_id is not None:
                    row = db.execute(
                        "SELECT count(*), coalesce(sum(size), 0) FROM frames "
                        "WHERE connection_id = ?",
                        (db_id,),
                    ).fetchone()
                    recorded = (int(row[0]), int(row[1]))
                with self._cond:  # the shipper may still be counting (after Ctrl-C)
                    conn.frames_dropped += max(0, conn._shipped[0] - recorded[0])
                    conn.bytes_dropped += max(0, conn._shipped[1] - recorded[1])
                if db is None or db_id is None:
                    continue
                fields = {k: _column_value(v) for k, v in (conn._close_fields or {}).items()}
                sets = "".join(f", {k} = coalesce({k}, ?)" for k in fields)
                db.execute(
                    f"UPDATE connections SET frames_dropped = ?, bytes_dropped = ?{sets} "
                    "WHERE id = ?",
                    (conn.frames_dropped, conn.bytes_dropped, *fields.values(), db_id),
                )
        except sqlite3.Error as exc:
            self.warn(f"recording: could not note the lost frames on the connection row: {exc}")
        finally:
            if db is not None:
                db.close()

    def _stop_child(self, child: WriterProcess) -> None:
        """Stop the writer process now (Ctrl-C at exit, or it made no progress).

        The shipper counts what it can no longer send; then the connection rows get the
        losses and the end the writer never wrote.
        """
        with self._cond:
            self._failed = self._failed or "recording stopped"
        child.kill()
        self._threads[0].join(INTERRUPT_SETTLE_SECONDS)
        child.exit_status(INTERRUPT_SETTLE_SECONDS)
        self._settle_lost(INTERRUPT_SETTLE_SECONDS)

    def _written(self) -> int:
        """Frames committed so far (by the writer process, if there is one)."""
        return self._child.frames_written if self._child is not None else self.frames_written

    def _behind(self) -> int:
        """Bytes queued and not written yet, here and in the writer process."""
        with self._cond:
            behind = self._queued_bytes
        return behind + (self._child.queued_bytes if self._child is not None else 0)

    # -- the process backend: ship to the writer process, or (there) take its batches ----

    def _ship_loop(self) -> None:
        """Send queued items to the writer process in order (the process backend's thread)."""
        child = self._child
        assert child is not None
        try:
            while True:
                items = self._take()
                if items is None:
                    break
                self._ship(child, [*items, *self._drop_items()])
            self._ship(child, self._drop_items())
        finally:
            child.finish()

    def _ship(self, child: WriterProcess, items: list[tuple[Any, ...]]) -> None:
        if not items:
            return
        if self._failed is None:
            try:
                child.send(encode_batch(items, self._child_keys))
            except OSError as exc:
                code = child.exit_status(0.5)  # it has gone or is going: say how
                why = f"status {code}" if code is not None else str(exc)
                with self._cond:
                    first = self._failed is None  # (its reader thread may have noticed)
                    if first:
                        self._failed = f"recording disabled: the writer process exited ({why})"
                        self._child_died = True
                    self._incident = True
                if first:
                    self.warn(f"{self._failed}; forwarding continues")
            else:
                for item in items:  # what the database should get (see _settle_lost)
                    tag = item[0]
                    if tag in (_CHUNK, _FRAME, _END) and item[2] != STDERR:
                        frames, size = _frames_in(item)
                        shipped = item[1]._shipped
                        shipped[0] += frames
                        shipped[1] += size
                return
        with self._cond:  # lost with the writer process: counted here
            for item in items:
                tag = item[0]
                if tag == DROPS:  # not delivered: still to be counted here
                    was = item[1]._shipped_drops
                    item[1]._shipped_drops = (was[0] - item[2], was[1] - item[3])
                    self._lossy.add(item[1])
                elif tag in (_CHUNK, _FRAME, _END) and item[2] != STDERR:
                    conn: ConnectionRecorder = item[1]
                    frames, size = _frames_in(item)
                    conn.frames_dropped += frames
                    conn.bytes_dropped += size

    def _drop_items(self) -> list[tuple[Any, ...]]:
        """Losses counted here since the last batch, for the writer process to record.

        Only for connections whose row the writer has been asked to create (their open
        went out in an earlier batch); the others' losses wait for the next batch.
        """
        out: list[tuple[Any, ...]] = []
        with self._cond:
            for conn in [c for c in self._lossy if c in self._child_keys]:
                self._lossy.discard(conn)
                now = (conn.frames_dropped, conn.bytes_dropped)
                if now != conn._shipped_drops:
                    was = conn._shipped_drops
                    out.append((DROPS, conn, now[0] - was[0], now[1] - was[1]))
                    conn._shipped_drops = now
        return out

    def _feed(self, items: list[tuple[Any, ...]]) -> None:
        """Queue items received from the proxy (the writer process's side).

        Instead of dropping, this waits while the queue is over its budget: the pipe then
        fills and the proxy's own queue (and spool) takes the backlog.
        """
        size = backlog = 0
        urgent = False
        for item in items:
            tag = item[0]
            if tag == _CHUNK:
                size += len(item[5])
                backlog += item[6]
            elif tag == _FRAME:
                size += len(item[5])
                backlog += len(item[5])
            elif tag == _CONTROL:
                urgent = True
        with self._cond:
            while self._queued_bytes >= self.queue_bytes and self._queue:
                self._cond.wait(0.01)
            self._queue.extend(items)
            self._queued_bytes += size
            self._backlog += backlog
            if urgent:
                self._urgent = True
            self._cond.notify()

    # -- stage 1: the indexer thread ---------------------------------------------------------

    def _wake(self) -> None:
        """Wake the indexer if it idles or a batch is ready (lock held).

        Otherwise it wakes by itself after :data:`LINGER_SECONDS`: fewer wake-ups means
        less GIL contention with the forwarding threads and bigger, cheaper batches.
        """
        if self._idle or self._stop or self._queued_bytes >= self.batch_bytes:
            self._cond.notify()

    def _take(self) -> list[tuple[Any, ...]] | None:
        """Wait for queued items and take up to one batch's worth; None when stopping.

        The lock is held only to swap the whole queue out (O(1)): the forwarding threads
        take the same lock to queue a chunk, so popping item by item under it made them
        wait whole milliseconds at a time. Batches are cut from the swapped-out items
        afterwards, and the budget counters drop as each batch is taken, as before.
        """
        if not self._taken:
            with self._cond:
                while not self._queue and not self._stop:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                if not self._queue:
                    return None
                # Let a burst gather (bounded: the recording stays < LINGER_SECONDS behind).
                deadline = time.monotonic() + self.linger
                while not self._stop and not self._urgent and self._queued_bytes < self.batch_bytes:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                self._urgent = False
                self._taken, self._queue = self._queue, self._taken
        out: list[tuple[Any, ...]] = []
        taken = backlog = spooled = spooled_bytes = 0
        pending = self._taken
        while pending and taken < self.batch_bytes and len(out) < BATCH_FRAMES:
            item = pending.popleft()
            out.append(item)
            tag = item[0]
            if tag in (_CHUNK, _FRAME):
                data = item[5]
                taken += len(data)
                if type(data) is SpoolRef:
                    spooled += 1
                    spooled_bytes += len(data)
                else:
                    backlog += item[6] if tag == _CHUNK else len(data)
        with self._cond:
            self._queued_bytes -= taken
            self._backlog -= backlog
            self._spooled_items -= spooled
            self._spooled_bytes -= spooled_bytes
        if spooled:
            return self._unspool(out)
        return out

    def _unspool(self, items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Read spooled bytes back into ``items``; close the spool once nothing refers to it."""
        out: list[tuple[Any, ...]] = []
        for item in items:
            ref = item[5] if item[0] == _CHUNK or item[0] == _FRAME else None
            if type(ref) is not SpoolRef:
                out.append(item)
                continue
            try:
                out.append((*item[:5], ref.read(), item[6]))
            except OSError as exc:  # our own file, already written: should not happen
                conn: ConnectionRecorder = item[1]
                with self._cond:
                    if item[2] != STDERR:
                        conn.frames_dropped += 1
                        conn.bytes_dropped += len(ref)
                        self._lossy.add(conn)
                    self._start_incident(f"the spool file could not be read back ({exc})")
                partial = item[0] == _CHUNK and item[6] < len(ref)
                out.append((_GAP, conn, item[2], partial))
        with self._cond:
            done = self._spool if self._spooled_items == 0 else None
            if done is not None:
                self._spool = None  # the next overflow starts a fresh, empty file
        if done is not None:
            done.close()
        return out

    def _index_loop(self) -> None:
        _lower_priority()
        try:
            while True:
                items = self._take()
                if items is None:
                    break
                cpu = time.thread_time()
                ops = self._index(items)
                self.index_cpu += time.thread_time() - cpu
                with self._batch_cond:
                    while self._batches:
                        self._batch_cond.wait()
                    self._batches.append(ops)
                    self._batch_cond.notify_all()
        finally:
            with self._batch_cond:
                self._batches.append(None)
                self._batch_cond.notify_all()

    def _index(self, items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Turn queue items into write operations, in order.

        Operations: ``("rows", conn, frame_rows, stderr_rows)``, ``("control", conn, op,
        fields)`` and ``("facts", conn, (version, client_info, agent_info))``. A row's
        first column is the connection id if known yet; the SQLite writer fills it in.
        """
        ops: list[tuple[Any, ...]] = []
        cur_conn: ConnectionRecorder | None = None
        frame_rows: list[tuple[Any, ...]] = []
        stderr_rows: list[tuple[Any, ...]] = []
        touched: dict[ConnectionRecorder, None] = {}

        def flush() -> None:
            nonlocal frame_rows, stderr_rows
            if cur_conn is not None and (frame_rows or stderr_rows):
                ops.append(("rows", cur_conn, frame_rows, stderr_rows))
                frame_rows, stderr_rows = [], []

        for item in items:
            tag = item[0]
            conn: ConnectionRecorder = item[1]
            if conn is not cur_conn:
                flush()
                cur_conn = conn
            if tag == _CHUNK:
                stream = item[2]
                framer = conn._framers.get(stream)
                if framer is None:
                    framer = conn._framers[stream] = LineFramer()
                lines = framer.feed(item[5])
                if lines and stream in conn._skip_partial:
                    # The start of this line was dropped: the rest is lost too.
                    conn._skip_partial.discard(stream)
                    lost = lines.pop(0)
                    if stream != STDERR:
                        with self._cond:
                            conn.frames_dropped += 1
                            conn.bytes_dropped += len(lost)
                if lines:
                    self._rows(conn, stream, item[3], item[4], lines, frame_rows, stderr_rows)
            elif tag == _FRAME:
                self._rows(
                    conn,
                    item[2],
                    item[3],
                    item[4],
                    [item[5]],
                    frame_rows,
                    stderr_rows,
                    binary=item[6],
                )
            elif tag == _GAP:
                framer = conn._framers.get(item[2])
                start = framer.close() if framer is not None else None
                if start is not None and item[2] != STDERR:
                    # this line's end was in the dropped bytes (the frame counted there)
                    with self._cond:
                        conn.bytes_dropped += len(start)
                if item[3]:  # the next bytes finish a line whose start was dropped
                    conn._skip_partial.add(item[2])
                else:
                    conn._skip_partial.discard(item[2])
            elif tag == _END:
                framer = conn._framers.pop(item[2], None)
                last = framer.close() if framer is not None else None
                if last is not None:
                    if item[2] in conn._skip_partial:
                        if item[2] != STDERR:
                            with self._cond:
                                conn.frames_dropped += 1
                                conn.bytes_dropped += len(last)
                    else:
                        self._rows(conn, item[2], item[3], item[4], [last], frame_rows, stderr_rows)
                conn._skip_partial.discard(item[2])
            else:  # _CONTROL
                flush()
                ops.append(("control", conn, item[2], item[3]))
            if conn.indexer.facts.changed:
                touched[conn] = None
        flush()
        for conn in touched:
            facts = conn.indexer.facts
            facts.changed = False
            ops.append(
                (
                    "facts",
                    conn,
                    (facts.protocol_version, _json(facts.client_info), _json(facts.agent_info)),
                )
            )
        return ops

    @staticmethod
    def _rows(
        conn: ConnectionRecorder,
        stream: str,
        ts: float,
        mono: int,
        lines: list[bytes],
        frame_rows: list[tuple[Any, ...]],
        stderr_rows: list[tuple[Any, ...]],
        *,
        binary: bool = False,
    ) -> None:
        if stream == STDERR:
            for raw in lines:
                conn._stderr_seq += 1
                stderr_rows.append((conn.db_id, conn._stderr_seq, ts, mono, bytearray(raw)))
            return
        values = conn.indexer.values
        direction: Direction = C2A if stream == C2A else A2C
        append = frame_rows.append
        seq = conn._seq
        bin_flag = int(binary)
        cid = conn.db_id  # None until the row exists; the SQLite stage fills it in then
        for raw in lines:
            seq += 1
            append(
                (
                    cid,
                    seq,
                    ts,
                    mono,
                    direction,
                    bytearray(raw),
                    len(raw),
                    bin_flag,
                    *values(direction, raw, 0),
                )
            )
        conn._seq = seq

    # -- stage 2: the SQLite writer thread -------------------------------------------------

    def _open_db(self, lock_wait: float | None = None) -> bool:
        """Open the database; False (nothing reported) if it stayed locked ``lock_wait`` s.

        ``lock_wait=None`` waits :attr:`lock_retry` and reports any failure.
        """
        assert self.path is not None
        try:
            self._db = connect(
                self.path, create=True, timeout=self.lock_retry if lock_wait is None else lock_wait
            )
            # Our own retry loop (lock_retry) decides how long to wait for another writer.
            self._db.execute("PRAGMA busy_timeout = 50")
        except RecordingError as exc:
            cause = exc.__cause__
            locked = isinstance(cause, sqlite3.OperationalError) and (
                "locked" in str(cause) or "busy" in str(cause)
            )
            if locked and lock_wait is not None:
                return False
            self._fail(str(exc))
        except (sqlite3.Error, OSError) as exc:
            self._fail(f"cannot open {self.path}: {exc}")
        return True

    def _sqlite_loop(self) -> None:
        _lower_priority()
        if self._open_later:
            self._open_db()
        while True:
            with self._batch_cond:
                while not self._batches:
                    self._batch_cond.wait()
                ops = self._batches.popleft()
                self._batch_cond.notify_all()
            if ops is None:
                break
            if self._db is None:
                self._count_lost(ops)
                continue
            cpu = time.thread_time()
            self._write_batch(ops)
            self.sqlite_cpu += time.thread_time() - cpu
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self._db.close()

    def _fail(self, reason: str) -> None:
        with self._cond:
            self._failed = f"recording disabled: {reason}"
            self._incident = True
        self.warn(f"{self._failed}; forwarding continues")

    def _count_lost(self, ops: list[tuple[Any, ...]]) -> int:
        lost = 0
        with self._cond:
            for op in ops:
                if op[0] == "rows":
                    conn: ConnectionRecorder = op[1]
                    conn.frames_dropped += len(op[2])
                    conn.bytes_dropped += sum(r[6] for r in op[2])
                    lost += len(op[2])
        return lost

    def _write_batch(self, ops: list[tuple[Any, ...]]) -> None:
        assert self._db is not None
        deadline = time.monotonic() + self.lock_retry
        delay = 0.01
        if self._carry:
            ops = [*self._carry, *ops]
            self._carry = []
        while True:
            try:
                self._apply(ops)
                self.batches_committed += 1
                with self._cond:
                    if (
                        self._incident
                        and self._failed is None
                        and self._backlog < self.queue_bytes // 2
                        and time.monotonic() - self._last_loss > INCIDENT_QUIET_SECONDS
                    ):
                        self._incident = False
                return
            except sqlite3.OperationalError as exc:
                text = str(exc)
                if ("locked" in text or "busy" in text) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)
                    continue
                self._lose(ops, text)
                return
            except sqlite3.Error as exc:
                self._lose(ops, str(exc))
                return

    def _lose(self, ops: list[tuple[Any, ...]], reason: str) -> None:
        if self._count_lost(ops):  # counted on the connections; one warning per incident
            with self._cond:
                self._start_incident(f"SQLite failed: {reason}")
        # Connection rows and their updates are small: keep them for the next attempt.
        self._carry = [op for op in ops if op[0] != "rows"]

    def _apply(self, ops: list[tuple[Any, ...]]) -> None:
        db = self._db
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        try:
            seen: dict[ConnectionRecorder, None] = {}
            written = 0
            for op in ops:
                conn: ConnectionRecorder = op[1]
                seen[conn] = None
                if op[0] == "rows":
                    cid = conn.db_id
                    if cid is None:  # its row could not be written
                        with self._cond:
                            conn.frames_dropped += len(op[2])
                            conn.bytes_dropped += sum(r[6] for r in op[2])
                        continue
                    if op[2]:
                        rows = _with_id(op[2], cid)
                        _insert(db, _FRAME_INSERT, _FRAME_ROW, _FRAME_COLUMNS, rows)
                        written += len(op[2])
                    if op[3]:
                        rows = _with_id(op[3], cid)
                        _insert(db, _STDERR_INSERT, _STDERR_ROW, _STDERR_COLUMNS, rows)
                elif op[0] == "control":
                    self._control(db, conn, op[2], op[3])
                elif conn.db_id is not None:  # facts
                    db.execute(
                        "UPDATE connections SET protocol_version = ?, client_info = ?, "
                        "agent_info = ? WHERE id = ?",
                        (*op[2], conn.db_id),
                    )
            for conn in seen:
                if conn.frames_dropped and conn.db_id is not None:
                    db.execute(
                        "UPDATE connections SET frames_dropped = ?, bytes_dropped = ? WHERE id = ?",
                        (conn.frames_dropped, conn.bytes_dropped, conn.db_id),
                    )
            db.execute("COMMIT")
            self.frames_written += written
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            if any(op[0] == "control" and op[2] == "open" for op in ops):
                for op in ops:
                    if op[0] == "control" and op[2] == "open":
                        op[1].db_id = None
            raise

    @staticmethod
    def _control(
        db: sqlite3.Connection, conn: ConnectionRecorder, op: str, raw_fields: dict[str, Any]
    ) -> None:
        fields = {k: _column_value(v) for k, v in raw_fields.items()}
        if op == "open":
            if conn.db_id is not None:
                return
            cols = ", ".join(fields)
            marks = ", ".join("?" for _ in fields)
            cur = db.execute(
                f"INSERT INTO connections ({cols}) VALUES ({marks})", list(fields.values())
            )
            conn.db_id = int(cur.lastrowid or 0)
        elif conn.db_id is None:
            return
        elif op == "event":
            db.execute(
                "INSERT INTO events (connection_id, ts, kind, detail) VALUES (?, ?, ?, ?)",
                (conn.db_id, raw_fields["ts"], raw_fields["kind"], _json(raw_fields["detail"])),
            )
        else:  # update | close
            if op == "close":
                fields["frames_dropped"] = conn.frames_dropped
                fields["bytes_dropped"] = conn.bytes_dropped
            if fields:
                sets = ", ".join(f"{k} = ?" for k in fields)
                db.execute(
                    f"UPDATE connections SET {sets} WHERE id = ?", [*fields.values(), conn.db_id]
                )


def _lower_priority() -> None:
    """Make the calling thread yield the CPU to forwarding (Linux: nice is per thread).

    On a busy machine the recorder's CPU-bound threads would otherwise delay the
    forwarding threads, the agent and the editor by whole scheduler slices.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), RECORDER_NICE)


def _insert(
    db: sqlite3.Connection, insert: str, one: str, ncols: int, rows: list[tuple[Any, ...]]
) -> None:
    """INSERT ``rows`` (``one``: a row's VALUES) in a few multi-row statements.

    Full statements carry :data:`ROWS_PER_STATEMENT` rows (fewer if SQLite allows fewer
    parameters); the rest goes in statements of 1024, 512, ... rows, so every row is in
    a multi-row statement (per-row steps each wait for the GIL) and a dozen statement
    texts at most are ever prepared.
    """
    per = min(ROWS_PER_STATEMENT, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // ncols)
    per = max(per, 1)
    done = 0
    total = len(rows)
    while done < total:
        left = total - done
        count = per if left >= per else 1 << (left.bit_length() - 1)
        db.execute(
            _statement(insert, one, count), list(chain.from_iterable(rows[done : done + count]))
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


def _frames_in(item: tuple[Any, ...]) -> tuple[int, int]:
    """(frames, bytes) a chunk, frame or end item brings to a connection's recording.

    A chunk brings the lines it ends and all its bytes; an end inside a line brings that
    last line (its bytes came with the chunks).
    """
    tag = item[0]
    if tag == _CHUNK:
        return item[5].count(b"\n"), len(item[5])
    if tag == _FRAME:
        return 1, len(item[5])
    return (1 if item[5] else 0), 0  # _END


def _with_id(rows: list[tuple[Any, ...]], cid: int) -> list[tuple[Any, ...]]:
    """``rows`` with their first column set to the connection id (usually already is)."""
    if rows[0][0] == cid and rows[-1][0] == cid:
        return rows
    return [(cid, *r[1:]) for r in rows]


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _column_value(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return orjson.dumps(value).decode()
    return value
