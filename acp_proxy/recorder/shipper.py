"""The proxy's side of the writer process: start it, ship it the journal, account for it.

Python threads share one interpreter lock. When indexing and SQLite ran as threads of the
proxy, a forwarding thread that woke up for a frame often had to wait for the lock behind
them (docs/performance.md, "The recorder's constants"). So the proxy keeps only the
:class:`~acp_proxy.recorder.journal.ProxyJournal` and one shipper thread, which sends the
journal's batches (:func:`~acp_proxy.recorder.ipc.encode_batch`) down a pipe to the writer
process (:mod:`acp_proxy.recorder.writer.main`, at the lowest priority). A clean end is a
:class:`~acp_proxy.recorder.ipc.Fin` batch, then end of input; ``SIGUSR1`` first tells
the writer the proxy is exiting, so it stops waiting for a locked database soon.

On its stdout the writer reports :class:`~acp_proxy.recorder.ipc.Progress` lines, and
for ``--metrics`` a line of its measures (:func:`~acp_proxy.recorder.ipc.parse_measures`)
whenever they change; its warnings go straight to the shared stderr. If it dies, what it
never wrote is counted here and put on the connection rows (:meth:`Shipper.settle_lost`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from acp_proxy.recorder.ipc import (
    LOCATION_ENV,
    REDACT_RULES_ENV,
    STDERR,
    Chunk,
    End,
    Fin,
    Item,
    Whole,
    encode_batch,
    frames_in,
    parse_measures,
    parse_progress,
)
from acp_proxy.recorder.journal import ProxyJournal
from acp_proxy.recorder.writer.priority import lower_priority
from acp_proxy.store.location import database_url

if TYPE_CHECKING:
    from acp_proxy.formats.redact import RedactRules

INTERRUPT_SETTLE_SECONDS = 5.0
"""After Ctrl-C at exit (or a stuck writer), how long to count what was lost (seconds)."""


class Shipped:
    """What the proxy knows of one connection, to settle its row if the writer dies.

    (A plain class, not a dataclass: ``dataclasses`` is not imported before the stdio
    proxy forwards.)"""

    __slots__ = ("close_fields", "frames", "nbytes", "open_fields")

    def __init__(self, open_fields: dict[str, Any]) -> None:
        self.open_fields = open_fields
        self.close_fields: dict[str, Any] | None = None
        self.frames = 0  # complete frames sent to the writer
        self.nbytes = 0


def _idle_child() -> None:
    """In the writer process between fork and exec: the lowest priority (it stays so)."""
    lower_priority(whole_process=True)


class WriterProcess:
    """The proxy's handle on the writer process: start it, send batches, follow its progress."""

    def __init__(
        self,
        path: Path | str,
        *,
        lock_retry: float,
        queue_bytes: int,
        batch_bytes: int,
        on_exit: Callable[[], None],
        otlp: bool = True,
        redact: RedactRules | None = None,
    ):
        # An ignored signal stays ignored across exec: the writer cannot be killed by the
        # SIGUSR1 ``draining`` sends before its own handler is installed.
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
                    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        env = None if otlp else {**os.environ, "OTEL_SDK_DISABLED": "true"}  # said already
        url = database_url(path)  # a URL may hold a password: never on a command line
        if url is not None:
            env = {**(env or os.environ), LOCATION_ENV: url}
            where = "-"  # the writer takes the URL from LOCATION_ENV
        else:
            where = str(Path(path).resolve())
        # Always set: the writer redacts by these rules, or (empty) not at all.
        env = {**(env or os.environ), REDACT_RULES_ENV: redact.to_json() if redact else ""}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                # -P: not the working directory first on sys.path. Editors start the proxy
                # in the user's project, whose own orjson.py or sqlite3/ must not be used.
                "-P",
                "-m",
                "acp_proxy.recorder.writer.main",
                where,
                repr(lock_retry),
                str(queue_bytes),
                str(batch_bytes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Its own process group: Ctrl-C in the terminal is for the proxy to handle. Not
            # its own session, which on Linux would be its own autogroup, where its lower
            # priority would count for nothing against the forwarding process.
            process_group=0,
            # At the lowest priority from the start: its interpreter's start-up and imports
            # run while the agent starts, and must not delay the agent's first answer.
            preexec_fn=_idle_child,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin.fileno()
        self._stdout: IO[bytes] = self.proc.stdout
        self.frames_written = 0
        self.batches = 0
        self.index_cpu = 0.0
        self.sqlite_cpu = 0.0
        self.dropped = 0
        self.queued_bytes = 0
        self.unsaved = False
        self.in_doubt = 0  # frames whose COMMIT the server never answered (maybe stored)
        self.store_away = False  # the database server is away now
        self.outages = 0
        self.progressed_at = time.monotonic()  # when frames_written last grew
        self.measures: dict[str, Any] = {}  # the writer's Measures.snapshot(), as last reported
        self._ready = False  # it reported once: its SIGUSR1 handler is installed
        self._drain_wanted = False
        self._lock = threading.Lock()
        self._on_exit = on_exit
        self.reader = threading.Thread(target=self._read, name="acp-proxy-progress", daemon=True)
        self.reader.start()

    def send(self, buffers: list[bytes]) -> None:
        """Write one encoded batch; OSError when the writer process is gone."""
        for buf in buffers:
            view = memoryview(buf)
            while view:
                view = view[os.write(self._stdin, view) :]

    def draining(self) -> None:
        """Tell the writer process the proxy is exiting (it bounds its wait for a lock from now).

        Sent once it has started (before, the signal would kill it); until then, the first
        progress line it reports sends it.
        """
        with self._lock:
            self._drain_wanted = True
            ready = self._ready
        if ready:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGUSR1)

    def finish(self) -> None:
        """No more batches: the writer process writes what it has and exits."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def exit_status(self, timeout: float) -> int | None:
        """Its exit status, waiting up to ``timeout`` seconds for it (None: still running)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Stop the writer process now. Its stdin is left to the shipper thread to close (it may be
        writing to it: closing the descriptor under it could hand the number to a file
        opened meanwhile)."""
        with contextlib.suppress(OSError):
            self.proc.kill()

    def _read(self) -> None:
        for line in self._stdout:
            if not self._ready:
                with self._lock:
                    self._ready = True
                    drain = self._drain_wanted
                if drain:
                    with contextlib.suppress(OSError):
                        self.proc.send_signal(signal.SIGUSR1)
            measures = parse_measures(line)
            if measures is not None:  # durations, findings, OTLP counts (for --metrics)
                self.measures = measures
                continue
            progress = parse_progress(line)
            if progress is not None:
                if progress.frames_written != self.frames_written:
                    self.progressed_at = time.monotonic()
                self.frames_written = progress.frames_written
                self.batches = progress.batches
                self.index_cpu = progress.index_cpu
                self.sqlite_cpu = progress.sqlite_cpu
                self.dropped = progress.dropped
                self.queued_bytes = progress.queued_bytes
                self.unsaved = progress.unsaved
                self.in_doubt = progress.in_doubt
                self.store_away = progress.store_away
                self.outages = progress.outages
        with contextlib.suppress(OSError):
            self._stdout.close()
        self._on_exit()  # its output ended: it exited (or is about to)


class Shipper:
    """Ships a journal to a writer process, and settles what a dead writer never wrote."""

    def __init__(
        self,
        journal: ProxyJournal,
        path: Path | str,
        *,
        lock_retry: float,
        queue_bytes: int,
        batch_bytes: int,
        warn: Callable[[str], None],
        otlp: bool = True,
        redact: RedactRules | None = None,
    ) -> None:
        self.journal = journal
        self.redact = redact
        self.path = path
        self.lock_retry = lock_retry
        self.warn = warn
        self.died = False  # it exited on its own: settle its losses at close
        self.stopping = False
        self._keys: dict[Any, int] = {}
        self.connections: dict[Any, Shipped] = {}
        self.writer = WriterProcess(
            path,
            on_exit=self._writer_exited,
            lock_retry=lock_retry,
            queue_bytes=queue_bytes,
            batch_bytes=batch_bytes,
            otlp=otlp,
            redact=redact,
        )
        # Queue items live for a batch, long enough to reach the oldest generation, so full
        # collections come often; with start-up's objects frozen they scan only the few
        # objects made since, holding the forwarding threads' lock for less.
        gc.freeze()
        self.thread = threading.Thread(target=self._loop, name="acp-proxy-shipper", daemon=True)
        self.thread.start()

    def track(self, conn: Any, fields: dict[str, Any]) -> None:
        """A connection opened (its row's fields, for :meth:`settle_lost`)."""
        if self.redact is not None:  # settle_lost may write them: as the writer would
            fields = self.redact.control("open", fields)
        self.connections[conn] = Shipped(dict(fields))

    def closing(self, conn: Any, fields: dict[str, Any]) -> None:
        shipped = self.connections.get(conn)
        if shipped is not None:
            if self.redact is not None:
                fields = self.redact.control("close", fields)
            shipped.close_fields = dict(fields)

    def _loop(self) -> None:
        try:
            while True:
                items = self.journal.take()
                if items is None:
                    break
                self._ship(items)
            if self.journal.failed is None:
                self._ship([Fin()])
        finally:
            self.writer.finish()

    def _ship(self, items: list[Item]) -> None:
        if self.journal.failed is None:
            try:
                self.writer.send(encode_batch(items, self._keys))
            except OSError as exc:
                code = self.writer.exit_status(0.5)  # it has gone or is going: say how
                why = f"status {code}" if code is not None else str(exc)
                reason = f"recording disabled: the writer process exited ({why})"
                if self.journal.disable(reason):  # (its reader thread may have noticed)
                    self.died = True
                    self.warn(f"{reason}; forwarding continues")
            else:
                self._count_shipped(items)
                return
        for item in items:  # lost with the writer process: counted here
            # (Drops items need nothing: with the writer gone, every count is the journal's)
            if isinstance(item, (Chunk, Whole, End)) and item[1] != STDERR:
                self.journal.lose(item[0], *frames_in(item))

    def _count_shipped(self, items: list[Item]) -> None:
        """Add what ``items`` bring to their connections' recordings (see
        :meth:`settle_lost`). Once a recorded frame, in the proxy: kept lean."""
        conn: Any = None
        shipped: Shipped | None = None
        for item in items:
            if isinstance(item, Whole):
                frames, size = 1, len(item[4])
            elif isinstance(item, (Chunk, End)):
                frames, size = frames_in(item)
            else:
                continue
            if item[1] == STDERR:
                continue
            if item[0] is not conn:
                conn = item[0]
                shipped = self.connections.get(conn)
            if shipped is not None:
                shipped.frames += frames
                shipped.nbytes += size

    def _writer_exited(self) -> None:
        """The writer process's output ended (its reader thread calls this)."""
        if self.stopping or self.journal.failed is not None:
            return  # expected: close() asked it to finish, or it was stopped
        if not self.journal.disable("recording disabled: the writer process exited"):
            return
        self.died = True
        code = self.writer.exit_status(0.5)
        self.warn(
            "recording disabled: the writer process exited"
            f"{f' (status {code})' if code is not None else ''}; forwarding continues"
        )

    def stop_now(self) -> None:
        """Stop the writer process now (Ctrl-C at exit, or it made no progress).

        The shipper counts what it can no longer send; then the connection rows get the
        losses and the end the writer never wrote.
        """
        self.journal.disable(self.journal.failed or "recording stopped")
        self.writer.kill()
        self.thread.join(INTERRUPT_SETTLE_SECONDS)
        self.writer.exit_status(INTERRUPT_SETTLE_SECONDS)
        self.settle_lost(INTERRUPT_SETTLE_SECONDS)

    def settle_lost(self, timeout: float) -> None:
        """The writer process is gone: put what it never wrote on the connection rows.

        Lost = frames dropped here (never sent) plus frames sent that the database does
        not hold (they were in the pipe, or in the writer's memory). The rows also get
        the end the writer never received (``end_reason`` ``recorder-lost`` if the
        connection had not ended). A row the writer never created is created here. If the
        database cannot be opened within ``timeout`` seconds, every frame sent counts as
        lost.
        """
        # (the database only now: the forwarding process never imports it before)
        from acp_proxy.store.columns import note_losses, recorded_totals
        from acp_proxy.store.engine import engine_for
        from acp_proxy.store.schema import RecordingError

        errors: tuple[type[BaseException], ...] = (UnicodeError, ValueError)
        db: Any = None
        try:
            engine = engine_for(self.path)
            errors = (*errors, *engine.errors)
            db = engine.open(self.path, create=False, timeout=timeout)
        except RecordingError as exc:
            db = None
            self.warn(f"recording: could not note the lost frames on the connection row: {exc}")
        try:
            for conn, shipped in self.connections.items():
                opened = shipped.open_fields
                db_id, frames, nbytes = None, 0, 0
                if db is not None:  # this proxy's connection started at that instant
                    db_id, frames, nbytes = recorded_totals(
                        db, opened.get("proxy_pid"), opened.get("started_at")
                    )
                self.journal.lose(
                    conn, max(0, shipped.frames - frames), max(0, shipped.nbytes - nbytes)
                )
                shipped.frames, shipped.nbytes = frames, nbytes  # counted once
                if db is None:
                    continue
                losses = self.journal.losses(conn)
                end = dict(shipped.close_fields or {"end_reason": "recorder-lost"})
                end.setdefault("ended_at", time.time())
                note_losses(db, db_id, opened, end, losses.frames, losses.nbytes)
        except errors as exc:
            self.warn(f"recording: could not note the lost frames on the connection row: {exc}")
        finally:
            if db is not None:
                db.close()


def writer_pids(proxy_pid: int) -> list[int]:
    """Pids of the writer processes a proxy runs now (Linux ``/proc``; empty elsewhere).

    For the benchmark and the tests, which measure and check the writer from outside.
    """
    found: list[int] = []
    with contextlib.suppress(OSError):
        entries = os.listdir("/proc")
        for entry in entries:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                if ppid != proxy_pid:
                    continue
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if b"acp_proxy.recorder.writer.main" in fh.read():
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found
