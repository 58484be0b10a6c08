"""The writer side's two threads: journal, then :mod:`~.rows`, then a :mod:`~.sink`.

The *rows* thread takes batches from a :class:`~acp_proxy.recorder.journal.Journal` and turns
them into operations; the *sink* thread stores each batch in one transaction. SQLite
releases the GIL while it works, so both stages overlap; one batch waits while one is
written. The same pipeline runs in the writer process (fed from its pipe) and, with
``ACP_PROXY_RECORDER=thread``, inside the proxy (fed by the forwarding threads).

Failures never stop it: a batch the sink cannot store (disk full, read-only file, a lock
held past the deadline) is counted on its connections' rows, whose changes and counts are
kept and written with the next batch that commits; a batch holding a value the database
cannot take (a lone surrogate in an index column) is stored again with its text made
safe; anything else unexpected disables recording with one line, and what comes after is
counted. A database server that cannot be reached (PostgreSQL: down, restarting, network
cut) is an outage, not a failure: the batch is kept and tried again with backoff (up to
:data:`OUTAGE_BACKOFF_SECONDS` apart), so the backlog waits in the journal and its spool
(and past the spool's budget is dropped and counted there); one line says when the
outage began and one when the database came back. Once the proxy exits
(:meth:`Pipeline.drain`), a lock or an outage is waited for at most
:data:`DRAIN_LOCK_SECONDS` in all. While connections are open, their rows' ``last_seen_at``
is refreshed every :data:`~acp_proxy.store.liveness.HEARTBEAT_SECONDS`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from acp_proxy.recorder.ipc import STDERR, Control, Item, frames_in
from acp_proxy.recorder.journal import Journal
from acp_proxy.recorder.writer.measures import Measures
from acp_proxy.recorder.writer.priority import lower_priority
from acp_proxy.recorder.writer.rows import ControlOp, Op, Rows, RowsOp, sanitized
from acp_proxy.recorder.writer.sink import Sink, SinkFailed, SqliteSink
from acp_proxy.store.engine import POSTGRES, SQLITE, engine_for
from acp_proxy.store.liveness import HEARTBEAT_SECONDS

DRAIN_LOCK_SECONDS = 3.0
"""Once the proxy exits, how long in all the writer waits for a database another process
locks, or for a database server that is away."""

OUTAGE_BACKOFF_SECONDS = 2.0
"""The longest wait between two attempts to reach a database server that is away."""

STUCK_CALL_SECONDS = 5.0
"""Once the exit drain is over, how long one call to the database may go unanswered (a
stopped or hung server) before its connection is cut (:meth:`Sink.interrupt`). A drain that
goes on answering (a big backlog written batch after batch) is never cut."""


class OpsObserver(Protocol):
    """Sees every batch of operations in order, off the forwarding path (live OTLP export).

    :meth:`observe` may return operations (event rows) to store with the batch;
    :meth:`finish` is called once everything was observed, before the sink closes.
    """

    def observe(self, ops: Sequence[Op]) -> list[Op]: ...

    def finish(self) -> list[Op]: ...


class Pipeline:
    """Runs rows and sink threads over one journal until it is stopped and drained."""

    def __init__(
        self,
        journal: Journal,
        sink: Sink,
        *,
        lock_retry: float,
        warn: Callable[[str], None],
        observer: OpsObserver | None = None,
    ) -> None:
        self.journal = journal
        self.observer = observer
        self.sink = sink
        self.rows = Rows(sink.null)
        self.lock_retry = lock_retry
        self.warn = warn
        self.frames_written = 0
        self.batches_committed = 0
        self.index_cpu = 0.0
        self.sqlite_cpu = 0.0
        self.unsaved = False  # some row's end or counts could not be written at all
        self._batches: deque[list[Op] | None] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._carry: list[Op] = []  # row changes to write with the next batch
        self._broken: str | None = None  # an unexpected failure disabled recording
        self._failure = ""  # why the last batch could not be stored
        self._stopped_at: float | None = None
        self._outage: float | None = None  # when the database server went away (monotonic)
        self._outage_gave_up = False  # it stayed away through the exit drain
        self._call_since: float | None = None  # when the database call under way began
        self.outages = 0  # times the database server went away (metrics: outages total)
        self.measures = Measures(warn=warn)  # durations and live findings, for --metrics
        self.measures.otlp = getattr(observer, "live", None)  # its spans sent and dropped
        self._backoff = 0.0
        self._woken = threading.Event()  # drain() cuts an outage's wait short
        self._batch_deadline = 0.0
        self._next_beat = 0.0
        self.in_doubt = 0  # frames of batches whose COMMIT was never answered (maybe stored)
        self._doubt: dict[Any, tuple[int, int]] = {}  # ... per connection: frames, bytes
        self._ends: dict[Any, dict[str, Any]] = {}  # ends that could not be written
        self._guard: threading.Thread | None = None  # cuts a call stuck past the drain
        self.threads = [
            threading.Thread(target=self._rows_loop, name="acp-proxy-rows", daemon=True),
            threading.Thread(target=self._sink_loop, name="acp-proxy-sink", daemon=True),
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def dropped(self) -> int:
        """Frames counted as not recorded, over all connections."""
        return sum(st.losses.frames for st in list(self.rows.states.values()))

    # -- rows ----------------------------------------------------------------------------

    def _rows_loop(self) -> None:
        lower_priority()
        try:
            while True:
                items = self.journal.take()
                if items is None:
                    break
                cpu = time.thread_time()
                ops = self._build(items)
                self.index_cpu += time.thread_time() - cpu
                self.measures.observe_ops(ops)
                if self.observer is not None:
                    ops.extend(self._observe(self.observer.observe, ops))
                self._hand_over(ops)
            if self.observer is not None:
                self._hand_over(self._observe(self.observer.finish))
        finally:
            with self._cond:
                self._batches.append(None)
                self._cond.notify_all()

    def _hand_over(self, ops: list[Op]) -> None:
        with self._cond:
            while self._batches:
                self._cond.wait()
            self._batches.append(ops)
            self._cond.notify_all()

    def _observe(self, call: Callable[..., list[Op]], *args: Any) -> list[Op]:
        """Run an observer call; one that fails is detached with one line, never the recording."""
        try:
            return call(*args)
        except Exception as exc:
            self.observer = None
            self.warn(f"OTLP export stopped: {type(exc).__name__}: {exc}")
            return []

    def _build(self, items: list[Item]) -> list[Op]:
        try:
            return self.rows.build(items)
        except Exception as exc:  # a bug: keep the connections' rows, count their frames
            self._break(f"the recorder failed ({type(exc).__name__}: {exc})")
            ops: list[Op] = []
            for item in items:
                st = self.rows.state(item[0])
                frames, size = _brought(item)
                st.losses.add(frames, size)
                if isinstance(item, Control):
                    ops.append(ControlOp(st, item[1], item[2]))
                else:
                    ops.append(ControlOp(st, "update", {}))
            return ops

    # -- sink ----------------------------------------------------------------------------

    def drain(self) -> None:
        """The proxy is exiting (and its client waits): bound the wait for a lock from now."""
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        self._woken.set()
        if self._guard is None:
            self._guard = threading.Thread(
                target=self._cut_stuck_call, name="acp-proxy-drain-guard", daemon=True
            )
            self._guard.start()

    def _cut_stuck_call(self) -> None:
        """Past the drain and its slack, a database call still waiting is cut (bounded exit)."""
        assert self._stopped_at is not None
        sink_thread = self.threads[1]
        time.sleep(max(0.0, self._stopped_at + DRAIN_LOCK_SECONDS - time.monotonic()))
        while sink_thread.is_alive():
            sink_thread.join(STUCK_CALL_SECONDS / 10)
            since = self._call_since
            if since is not None and time.monotonic() - since > STUCK_CALL_SECONDS:
                self._outage_gave_up = True  # no more attempts: the exit waits for none
                self.sink.interrupt()

    def _give_up_at(self) -> float:
        """When to stop waiting for a locked database (monotonic) in the current batch.

        :data:`lock_retry` after the batch's first attempt, and no later than
        :data:`DRAIN_LOCK_SECONDS` after the proxy said it exits.
        """
        deadline = self._batch_deadline
        if self._stopped_at is not None:
            deadline = min(deadline, self._stopped_at + DRAIN_LOCK_SECONDS)
        return deadline

    def _sink_loop(self) -> None:
        lower_priority()
        while True:
            with self._cond:
                while not self._batches:
                    if not self._cond.wait(self._beat_wait()):
                        break
                ops = self._batches.popleft() if self._batches else []
                self._cond.notify_all()
            if ops is None:
                break
            if ops:
                cpu = time.thread_time()
                self._write(ops)
                self.sqlite_cpu += time.thread_time() - cpu
            self._beat()
        if self._carry:
            self._write([])  # the last changes and counts: one more try
        if self._carry or self._doubt:
            self.unsaved = True
        if self._outage_gave_up:  # the rows get their counts once the server answers
            self.sink.settle_later(list(self.rows.states.values()), self._doubt, self._ends)
        if self._carry and self.journal.failed is None and not self._outage_gave_up:
            # (else its line said so, or the outage's)
            why = f" ({self._failure})" if self._failure else ""
            self.warn(
                "recording: could not write the end and the loss counts of the connection "
                f"row(s) to {self.sink.where}{why}"
            )
        self.sink.close()

    def _beat_wait(self) -> float:
        return max(0.05, self._next_beat - time.monotonic())

    def _beat(self) -> None:
        now = time.monotonic()
        if now >= self._next_beat and self.sink.is_open:
            self._next_beat = now + HEARTBEAT_SECONDS
            self.sink.heartbeat(time.time())

    def _open(self) -> bool:
        try:
            self.sink.open(self._give_up_at)
            return True
        except SinkFailed as exc:
            self._failure = str(exc)
            if exc.unavailable:
                self._outage_began(str(exc))
                return False
            if self.journal.disable(f"recording disabled: {exc}"):
                self.warn(f"recording disabled: {exc}; forwarding continues")
            return False

    def _write(self, ops: list[Op]) -> None:
        if self._carry:
            ops = [*self._carry, *ops]
            self._carry = []
        if not ops:
            return
        self._batch_deadline = time.monotonic() + self.lock_retry
        while True:
            if self._outage_gave_up:  # the server stayed away past the exit drain
                self._lose(ops, None, doubtful=self.sink.doubtful(ops))
                return
            if not self.sink.is_open and not self._open():
                if self._outage is not None and self._wait_for_database():
                    continue
                self._lose(ops, None)
                return
            if self._broken is not None:  # only the rows' own changes are still tried
                self._lose(ops, None)
                ops, self._carry = self._carry, []
            try:
                written = self._store(ops)
            except SinkFailed as exc:
                self._failure = str(exc)
                if exc.unavailable:
                    self._outage_began(str(exc))
                    if self._wait_for_database():
                        continue
                    self._lose(ops, None, doubtful=self.sink.doubtful(ops))
                    return
                if exc.locked and self.batches_committed == 0:  # locked since the start
                    self._lose(
                        ops,
                        f"{self.sink.engine} failed: {exc}",
                        line=(
                            f"recording disabled while {self.sink.where} is locked by another "
                            f"process ({exc}); forwarding continues"
                        ),
                    )
                    return
                self._lose(ops, f"{self.sink.engine} failed: {exc}")
                return
            except Exception as exc:
                self._break(f"the recorder failed ({type(exc).__name__}: {exc})")
                self._lose(ops, None)
                return
            break
        self.frames_written += written
        self.batches_committed += 1
        self.journal.committed()
        if self._outage is not None:
            away = time.monotonic() - self._outage
            self._outage = None
            self.warn(
                f"recording: database {self.sink.where} back after {away:.1f} s; the frames "
                "that waited are being written"
            )

    @property
    def store_away(self) -> bool:
        """The database server is away now (an outage is being waited out)."""
        return self._outage is not None

    def _outage_began(self, reason: str) -> None:
        """The database server is away: say so once, then keep the batches for it."""
        if self._outage is None:
            self._outage = time.monotonic()
            self.outages += 1
            self._backoff = 0.05
            self.warn(f"recording: database unreachable ({reason}); frames wait in the spool")

    def _wait_for_database(self) -> bool:
        """Wait before trying an away server again; False once the exit drain is over."""
        if self._stopped_at is not None:
            left = self._stopped_at + DRAIN_LOCK_SECONDS - time.monotonic()
            if left <= 0:
                self._outage_gave_up = True
                return False
        else:
            left = OUTAGE_BACKOFF_SECONDS
        if self._woken.is_set():  # draining: the deadline counts from now on
            time.sleep(min(self._backoff, left))
        else:
            self._woken.wait(min(self._backoff, left))
        self._backoff = min(self._backoff * 2, OUTAGE_BACKOFF_SECONDS)
        return True

    def _store(self, ops: list[Op]) -> int:
        self._call_since = time.monotonic()  # the drain guard cuts only a call never answered
        try:
            return self.sink.write(ops, self._give_up_at)
        except SinkFailed:
            raise
        except (UnicodeError, ValueError, OverflowError, TypeError):
            # a value the database cannot take: store the batch with safe text
            self._call_since = time.monotonic()
            return self.sink.write(sanitized(ops), self._give_up_at)
        finally:
            self._call_since = None

    def _lose(
        self, ops: list[Op], reason: str | None, *, line: str | None = None, doubtful: int = 0
    ) -> None:
        """Count the frames of ``ops`` as lost; keep its row changes for the next batch.

        ``reason`` starts an incident (one warning line, ``line`` if given). ``doubtful``:
        the batch's COMMIT was never answered, so its frames may be stored; they are
        counted in :attr:`in_doubt`, never as lost."""
        for op in ops:
            if isinstance(op, ControlOp) and op.op == "close":
                self._ends[op.conn] = op.fields
        if doubtful:
            self.in_doubt += doubtful
            for op in ops:
                if isinstance(op, RowsOp) and op.frames:
                    was = self._doubt.get(op.conn, (0, 0))
                    size = sum(r[6] for r in op.frames)
                    self._doubt[op.conn] = (was[0] + len(op.frames), was[1] + size)
            self._carry = []  # its row changes went with it, or not: settled later
            return
        lost = 0
        carry: list[Op] = []
        for op in ops:
            if isinstance(op, RowsOp):
                if op.frames:
                    op.conn.losses.add(len(op.frames), sum(r[6] for r in op.frames))
                    lost += len(op.frames)
                    carry.append(ControlOp(op.conn, "update", {}))
            elif isinstance(op, ControlOp) and op.op != "event":
                carry.append(op)
        self._carry = carry
        if lost and reason is not None:
            self.journal.incident(reason, line=line)

    def _break(self, reason: str) -> None:
        if self._broken is None:
            self._broken = reason
            if self.journal.disable(f"recording disabled: {reason}"):
                self.warn(f"recording disabled: {reason}; forwarding continues")

    def join(self) -> None:
        """Wait for both threads to finish (after the journal was stopped)."""
        for t in self.threads:
            t.join()


def _postgres_sink(location: str | Path) -> Sink:
    from acp_proxy.recorder.writer.sink_pg import PostgresSink  # psycopg only when asked for

    return PostgresSink(str(location))


_SINKS: dict[str, Callable[[str | Path], Sink]] = {
    SQLITE.name: lambda location: SqliteSink(Path(location)),
    POSTGRES.name: _postgres_sink,
}
"""One sink per engine, by :attr:`~acp_proxy.store.engine.SqliteEngine.name`."""


def sink_for(location: str | Path) -> Sink:
    """The sink for a recording location: a ``postgresql://`` URL, else a SQLite file."""
    return _SINKS[engine_for(location).name](location)


def _brought(item: Any) -> tuple[int, int]:
    """(frames, bytes) of the connection's recording in ``item`` (stderr lines aside)."""
    if item[1] == STDERR:
        return 0, 0
    return frames_in(item)
