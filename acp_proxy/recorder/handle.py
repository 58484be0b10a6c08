"""The recorder as transports see it: :class:`Recorder` and its :class:`ConnectionRecorder`.

Transports hand the recorder copies of what they forwarded and return at once:
:meth:`ConnectionRecorder.stream` takes a raw chunk of a byte stream (stdio), and
:meth:`ConnectionRecorder.frame` one whole message (WebSocket). The parts behind it, in
order (each module's first lines say more):

- :mod:`~acp_proxy.recorder.journal`: the bounded queue the forwarding threads append to,
  its spool file, gaps and every loss counted on the proxy side;
- :mod:`~acp_proxy.recorder.shipper`: with the process backend (the commands'), one thread
  shipping the journal's batches (:mod:`~acp_proxy.recorder.ipc`) to the writer process
  (:mod:`~acp_proxy.recorder.writer.main`);
- :mod:`~acp_proxy.recorder.writer.pipeline`: the writer's two threads, in the writer process or
  (``ACP_PROXY_RECORDER=thread``) in the proxy itself: :mod:`~acp_proxy.recorder.writer.rows` cuts
  streams into frames, numbers and indexes them; a :mod:`~acp_proxy.recorder.writer.sink`
  (:class:`~acp_proxy.recorder.writer.sink.SqliteSink`, or
  :class:`~acp_proxy.recorder.writer.sink_pg.PostgresSink` for a ``postgresql://`` URL) commits a
  batch per transaction.

A batch is at most :data:`BATCH_BYTES` bytes, so the recording is at most about one batch
behind. Past the queue's memory budget, chunks go to a spool file; past the spool's
budget, or when the database fails (disk full, read-only file, a lock held longer than the
retry window), frames are dropped, counted on the connection row
(``frames_dropped``/``bytes_dropped``) and reported with one warning line per incident;
forwarding never waits. A PostgreSQL server that is away (down, restarting, cut off) is
waited for instead: the backlog stays in the queue and its spool (in the temporary
directory, as the recording has no folder) until the server is back.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_proxy.console import warn
from acp_proxy.counters import COUNTERS
from acp_proxy.recorder.ipc import STDERR, Whole
from acp_proxy.recorder.journal import LINGER_SECONDS, ProxyJournal
from acp_proxy.recorder.shipper import Shipper
from acp_proxy.recorder.writer.priority import SWITCH_INTERVAL
from acp_proxy.recorder.writer.switches import otlp_asked
from acp_proxy.store.location import place_of

if TYPE_CHECKING:
    from acp_proxy.recorder.writer.pipeline import Pipeline
    from acp_proxy.recorder.writer.sink import Sink

__all__ = ["STDERR", "ConnectionRecorder", "Recorder"]

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

if TYPE_CHECKING:
    from acp_proxy.formats.redact import RedactRules


BATCH_BYTES = 1024 * 1024
"""Most raw bytes taken from the queue for one transaction (a bigger single frame still goes).

About 3,400 frames of 300 bytes (why not more: docs/performance.md, "The recorder's
constants").
"""

PG_BATCH_BYTES = 2 * BATCH_BYTES
"""The most raw bytes of one transaction into PostgreSQL (about 6,800 300-byte frames).

Each batch costs round trips (``BEGIN``, ``COPY``, ``COMMIT``) during which the server has
nothing to do, so a backlog goes faster in bigger batches, at the price of the rows they
hold in the writer (measured: docs/performance.md, "The recorder's constants"). Only a
backlog fills a batch: at a lower rate a batch holds what arrived in the linger time,
whatever this is."""

CHILD_QUEUE_BATCHES = 2
"""Batches the writer process queues before it stops reading (the pipe then fills)."""

BACKEND_ENV = "ACP_PROXY_RECORDER"
"""Set to ``thread`` to run the recorder's writer as threads instead of a writer process."""

STATS_ENV = "ACP_PROXY_STATS"
"""Set to print the recorder's counters and CPU time on stderr at exit (benchmarks)."""

OPEN_LOCK_WAIT_SECONDS = 0.2
"""How long start-up waits for a locked database before leaving the opening to the writer."""

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


def end_reason(fields: dict[str, Any]) -> str:
    """How a connection closed with ``fields`` ended (a value of liveness.END_REASONS)."""
    status = fields.get("exit_status")
    if isinstance(status, int):
        return "exited" if status >= 0 else "signal"
    return "closed"


_new = tuple.__new__
"""``_new(Whole, fields)``: a :class:`Whole` without its Python-level ``__new__`` (half the
cost, once a recorded frame)."""


class ConnectionRecorder:
    """One recorded connection: the handle a transport writes frames through.

    Thread-safe: both forwarding directions and the stderr pump may call it at once.
    Frames are numbered in the order they reach the recorder's journal.
    """

    def __init__(self, recorder: Recorder, fields: dict[str, Any]) -> None:
        self._recorder = recorder
        self._journal = recorder.journal if recorder.enabled else None
        self.closed = False
        self._transport = str(fields.get("transport", ""))
        if COUNTERS.enabled:
            COUNTERS.opened(self._transport)
        if self._journal is not None:
            recorder._opened(self, fields)

    @property
    def frames_dropped(self) -> int:
        """Frames of this connection the proxy side counted as not recorded."""
        return self._journal.losses(self).frames if self._journal is not None else 0

    @property
    def bytes_dropped(self) -> int:
        return self._journal.losses(self).nbytes if self._journal is not None else 0

    def stream(self, direction: str, data: bytes) -> None:
        """Record a chunk of a newline-framed byte stream that was just forwarded.

        ``direction`` is ``c2a``, ``a2c`` or :data:`STDERR`. Lines are cut by the writer;
        call :meth:`stream_end` at end of stream so a last line without a newline counts.
        """
        if data and self._journal is not None:
            self._journal.chunk(self, direction, data)

    def stream_end(self, direction: str) -> None:
        """The stream ended: its last unterminated line (if any) becomes a frame."""
        if self._journal is not None:
            self._journal.end(self, direction)

    def frame(self, direction: str, raw: bytes, *, binary: bool = False) -> None:
        """Record one whole frame (a WebSocket message) that was just forwarded."""
        if COUNTERS.enabled:
            COUNTERS.forwarded[direction].frame(len(raw))
        if self._journal is not None:
            item = (self, direction, time.time(), time.monotonic_ns(), raw, binary)
            self._journal.frames(self, [_new(Whole, item)])

    def frames(self, direction: str, raws: list[bytes], binary: list[bool] | None = None) -> None:
        """Record whole frames forwarded together (the lines of one read, the WebSocket
        messages of one turn): one journal call, one clock reading. ``binary``: a flag per
        frame (WebSocket binary messages); none: all text."""
        if COUNTERS.enabled:
            COUNTERS.forwarded[direction].messages(raws)
        if self._journal is not None and raws:
            ts, ns = time.time(), time.monotonic_ns()
            if binary is None:
                items = [_new(Whole, (self, direction, ts, ns, raw, False)) for raw in raws]
            else:
                items = [
                    _new(Whole, (self, direction, ts, ns, raw, flag))
                    for raw, flag in zip(raws, binary, strict=True)
                ]
            self._journal.frames(self, items)

    def stderr(self, raw: bytes) -> None:
        """Record one whole line the agent wrote to stderr."""
        if self._journal is not None:
            self._journal.frames(
                self, [Whole(self, STDERR, time.time(), time.monotonic_ns(), raw, False)]
            )

    def update(self, **fields: Any) -> None:
        """Set columns of the connection row (pid, label, exit_status...)."""
        if self._journal is not None:
            self._journal.control(self, "update", fields)

    def event(self, kind: str, detail: Any = None) -> None:
        """Record a connection-level event (a signal, a close code...): it lingers with the
        frames (the connection's end, which follows the last ones, is written at once)."""
        if self._journal is not None:
            self._journal.note(self, "event", {"kind": kind, "detail": detail, "ts": time.time()})

    def close(self, **fields: Any) -> None:
        """The connection ended: record ``ended_at``, ``end_reason`` and any final fields."""
        if self.closed:
            return
        self.closed = True
        if COUNTERS.enabled:
            COUNTERS.closed(self._transport)
        if self._journal is None:
            return
        fields.setdefault("ended_at", time.time())
        fields.setdefault("end_reason", end_reason(fields))
        self._recorder._closing(self, fields)
        self._journal.control(self, "close", fields)


class Recorder:
    """Owns the journal and the writer for one recording: a SQLite file or a PostgreSQL URL.

    ``path=None`` makes a recorder that records nothing (pass-through mode) but keeps the
    same interface, so transports have one code path. ``backend="process"`` (what the
    commands use) runs the pipeline in the writer process, fed by one shipper thread;
    ``"thread"`` runs it as threads of this process. ``ACP_PROXY_RECORDER=thread`` forces
    threads.

    A SQLite file is opened (created, migrated) here, before anything is forwarded, so once
    a byte has passed the file is a recording, and a file that cannot be used is reported
    now; only a lock another process holds is waited for by the writer (frames queue
    meanwhile). ``open_first=False`` (the stdio proxy, whose start an editor waits for)
    leaves that to the writer process too, as a PostgreSQL database always is (connecting
    may wait for the network): this process then imports no database driver, and the file
    appears once the writer has started, while the first frames wait in the journal.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        spool_bytes: int = DEFAULT_SPOOL_BYTES,
        warn: Callable[[str], None] = warn,
        lock_retry: float | None = None,
        batch_bytes: int = BATCH_BYTES,
        backend: str = "thread",
        redact: RedactRules | None = None,
        open_first: bool = True,
    ) -> None:
        self.path: Path | str | None = None  # a SQLite file, or a PostgreSQL URL
        self.where = ""  # the recording as named in messages (never a password)
        place = place_of(path) if path is not None else None
        self.engine = place.label if place is not None else "SQLite"
        spool_dir: Path | None = None
        if place is not None and place.remote:
            self.path = str(path)
            self.where = place.shown
            spool_dir = Path(tempfile.gettempdir())  # the recording has no folder here
            if batch_bytes == BATCH_BYTES:
                batch_bytes = PG_BATCH_BYTES
        elif path is not None:
            self.path = Path(path)
            self.where = str(self.path)
            spool_dir = self.path.resolve().parent
        self.warn = warn
        self.redact = redact
        self.lock_retry = lock_retry_seconds() if lock_retry is None else lock_retry
        self.batch_bytes = batch_bytes
        self.journal = ProxyJournal(
            queue_bytes=queue_bytes,
            batch_bytes=batch_bytes,
            linger=LINGER_SECONDS,
            warn=warn,
            spool_bytes=spool_bytes,
            spool_dir=spool_dir,
        )
        self._connections: list[ConnectionRecorder] = []
        self._pipeline: Pipeline | None = None
        self._sink: Sink | None = None  # opened here (open_first), for the pipeline
        self._shipper: Shipper | None = None
        self.frames_written = 0
        self.index_cpu = 0.0  # CPU seconds spent by the rows thread
        self.sqlite_cpu = 0.0  # ... and by the sink thread
        if os.environ.get(BACKEND_ENV) == "thread":
            backend = "thread"
        if self.path is None or place is None:
            return
        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
        # What a bare install lacks is said now, before a byte is forwarded, in one line.
        if place.missing_driver is not None:
            self.journal.disable(f"recording disabled: {place.missing_driver}")
            warn(f"recording disabled: {place.missing_driver}; forwarding continues")
            return
        otlp = otlp_asked()
        if otlp:
            from acp_proxy.recorder.writer.otlp_live import NO_SDK, sdk_installed

            if not sdk_installed():
                warn(NO_SDK)
                otlp = False
        if backend == "thread" or (open_first and not place.remote):
            self._open_first(place.remote)
        if backend == "process" and self.journal.failed is None:
            # With open_first=False the writer process opens the recording (creates,
            # migrates, or waits for a lock or a server that is away) while the first
            # frames wait in the journal: this process imports no database driver, so the
            # agent's first answer is not held up by them (docs/performance.md,
            # "Start-up"). A recording that cannot be opened is then one "recording
            # disabled" line from the writer, as a failure later.
            if self._sink is not None:
                self._sink.close()  # the writer process opens its own
                self._sink = None
            try:
                self._shipper = Shipper(
                    self.journal,
                    self.path,
                    lock_retry=self.lock_retry,
                    # This side holds the backlog (in memory up to the budget, then
                    # spooled); the writer only needs the next batches, and waits for room.
                    queue_bytes=min(queue_bytes, CHILD_QUEUE_BATCHES * batch_bytes),
                    batch_bytes=batch_bytes,
                    warn=warn,
                    otlp=otlp,
                    redact=redact,
                )
                # Both sides gather for half the linger, so the recording stays as far behind.
                self.journal.linger = LINGER_SECONDS / 2
                return
            except OSError as exc:  # a helper: record from this process's threads instead
                warn(
                    f"recording: no writer process ({exc.strerror or exc}: {sys.executable}); "
                    "recording in threads"
                )
        self._start_threads(otlp)

    def _open_first(self, remote: bool) -> None:
        """Open the recording in this process (see the class's text): a SQLite file now, a
        PostgreSQL database by the sink later."""
        from acp_proxy.recorder.writer.pipeline import sink_for
        from acp_proxy.recorder.writer.sink import SinkFailed

        assert self.path is not None
        sink = sink_for(self.path)
        if not remote:
            try:
                give_up = time.monotonic() + OPEN_LOCK_WAIT_SECONDS
                sink.open(lambda: give_up)
            except SinkFailed as exc:
                if not exc.locked:
                    self.journal.disable(f"recording disabled: {exc}")
                    self.warn(f"recording disabled: {exc}; forwarding continues")
        self._sink = sink

    def _start_threads(self, otlp: bool) -> None:
        """Run the pipeline as threads of this process (``backend="thread"``)."""
        from acp_proxy.recorder.writer.otlp_live import live_observer
        from acp_proxy.recorder.writer.pipeline import Pipeline, sink_for

        assert self.path is not None
        sink = self._sink if self._sink is not None else sink_for(self.path)
        observer = live_observer() if otlp else None
        self._pipeline = Pipeline(
            self.journal,
            sink,
            lock_retry=self.lock_retry,
            warn=self.warn,
            observer=observer,
            redact=self.redact,
        )
        self._pipeline.start()

    @property
    def enabled(self) -> bool:
        return self.path is not None

    @property
    def batches_committed(self) -> int:
        """Transactions committed so far (live with threads; the writer's at close)."""
        if self._pipeline is not None:
            return self._pipeline.batches_committed
        return self._shipper.writer.batches if self._shipper is not None else 0

    @property
    def spool_peak_bytes(self) -> int:
        """Most bytes ever waiting in the spool file."""
        return self.journal.spool_peak_bytes

    def connection(self, transport: str, **fields: Any) -> ConnectionRecorder:
        """Start recording a new connection; returns its handle immediately."""
        fields = {"transport": transport, "started_at": time.time(), **fields}
        fields.setdefault("proxy_pid", os.getpid())
        conn = ConnectionRecorder(self, fields)
        self._connections.append(conn)
        return conn

    def _opened(self, conn: ConnectionRecorder, fields: dict[str, Any]) -> None:
        if self._shipper is not None:
            self._shipper.track(conn, fields)
        self.journal.open(conn, fields)

    def _closing(self, conn: ConnectionRecorder, fields: dict[str, Any]) -> None:
        if self._shipper is not None:
            self._shipper.closing(conn, fields)

    # -- lifecycle -------------------------------------------------------------------------

    def _threads(self) -> list[Any]:
        if self._shipper is not None:
            return [self._shipper.thread, self._shipper.writer.reader]
        if self._pipeline is not None:
            return list(self._pipeline.threads)
        return []

    def close(self, timeout: float = 60.0) -> None:
        """Flush everything queued, close open connections and stop the writer.

        Waits as long as the writer makes progress (giving up after ``timeout`` seconds
        without any) and says on stderr what it is doing when that takes over a second.
        Ctrl-C stops the wait: what is still queued is then not recorded.
        """
        for conn in self._connections:
            conn.close()
        threads = self._threads()
        if not threads:
            return
        shipper, pipeline = self._shipper, self._pipeline
        if shipper is not None:
            shipper.stopping = True
            shipper.writer.draining()
        if pipeline is not None:
            pipeline.drain()
        self.journal.stop()
        started = last_progress = time.monotonic()
        written = self._written()
        told = False
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.25)
                    now = time.monotonic()
                    if self._written() != written:
                        written, last_progress = self._written(), now
                    elif now - last_progress > timeout:
                        break
                    if not told and now - started > 1.0 and t.is_alive():
                        told = True
                        self.warn(
                            f"recording: writing the last {self._behind() / 1e6:.1f} MB queued "
                            f"to {self.where} (Ctrl-C stops; what is not written yet is lost)"
                        )
        except KeyboardInterrupt:
            behind = self._behind()
            if shipper is None:
                self.warn(
                    f"recording: interrupted; the {behind / 1e6:.1f} MB still queued were not "
                    "recorded (the connection stays marked as running)"
                )
                return
            with contextlib.suppress(KeyboardInterrupt):
                shipper.stop_now()
            lost = sum(c.frames_dropped for c in self._connections)
            some = "at least " if shipper.thread.is_alive() else ""  # still counting
            self.warn(
                f"recording: interrupted; {some}{lost:,} frame(s) ({behind / 1e6:.1f} MB) "
                "still queued were not recorded (counted on the connection row)"
            )
            return
        stuck = any(t.is_alive() for t in threads)
        unsaved = False
        in_doubt = 0
        if shipper is not None:
            process = shipper.writer
            if stuck:
                shipper.stop_now()
            else:
                code = process.exit_status(5)
                if code not in (0, None) and not shipper.died:
                    shipper.died = True  # during the final drain: nobody else noticed
                    self.warn(
                        f"recording: the writer process exited (status {code}) before "
                        "writing everything"
                    )
                if shipper.died:
                    # bounded like the writer's own drain: the client waits for our exit
                    from acp_proxy.recorder.writer.pipeline import DRAIN_LOCK_SECONDS

                    shipper.settle_lost(min(self.lock_retry, DRAIN_LOCK_SECONDS))
            self.frames_written = process.frames_written
            self.index_cpu, self.sqlite_cpu = process.index_cpu, process.sqlite_cpu
            unsaved = process.unsaved
            in_doubt = process.in_doubt
            if shipper.died or stuck:
                dropped = sum(c.frames_dropped for c in self._connections)
            else:
                dropped = process.dropped + self.journal.unreported_frames()
        else:
            assert pipeline is not None
            self.frames_written = pipeline.frames_written
            self.index_cpu, self.sqlite_cpu = pipeline.index_cpu, pipeline.sqlite_cpu
            unsaved = pipeline.unsaved
            in_doubt = pipeline.in_doubt
            dropped = pipeline.dropped() + self.journal.unreported_frames()
        if stuck:
            self.warn("recording: the writer made no progress; the last frames may be lost")
        elif told:
            self.warn(f"recording: done, {self.frames_written:,} frames recorded")
        if os.environ.get(STATS_ENV):
            self.warn(
                f"stats: {self.frames_written} frames in {self.batches_committed} batches; "
                f"CPU indexer {self.index_cpu:.2f} s, {self.engine} {self.sqlite_cpu:.2f} s; "
                f"spool peak {self.spool_peak_bytes / 1e6:.1f} MB"
            )
        if dropped:
            where = "" if self.journal.failed or unsaved else " (see frames_dropped)"
            self.warn(f"recording: {dropped} frame(s) were not recorded{where}")
        if in_doubt:
            self.warn(
                f"recording: {in_doubt} more frame(s) may be recorded: {self.where} never "
                "answered their COMMIT"
            )

    def _written(self) -> int:
        """Frames committed so far (by the writer process, if there is one)."""
        if self._shipper is not None:
            return self._shipper.writer.frames_written
        return self._pipeline.frames_written if self._pipeline is not None else 0

    def _behind(self) -> int:
        """Bytes queued and not written yet, here and in the writer process."""
        behind = self.journal.queued_bytes()
        if self._shipper is not None:
            behind += self._shipper.writer.queued_bytes
        return behind
