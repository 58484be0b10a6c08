"""The recorder's journal: the bounded queue between forwarding and writing, and its losses.

Transports hand the journal copies of what they forwarded (through
:class:`~acp_proxy.recorder.handle.ConnectionRecorder`) and return at once: producers only
timestamp and append an :mod:`~acp_proxy.recorder.ipc` item to a deque under a lock; no
splitting, parsing or SQLite happens on the forwarding path. A consumer (the
:mod:`~acp_proxy.recorder.shipper` thread, or the writer's rows thread) :meth:`Journal.take`\\ s
batches of at most ``batch_bytes`` bytes or :data:`BATCH_FRAMES` items.

Past the memory budget, chunks go to a :class:`~acp_proxy.recorder.spool.Spool` file; past
the spool's budget, or once recording is disabled, they are dropped: the journal marks the
gap in the stream (so the writer does not glue two halves of different lines together),
counts what was lost per connection and warns once per incident. Every loss counted on the
proxy side is counted here (:meth:`Journal.lose`), and reaches the writer as a
:class:`~acp_proxy.recorder.ipc.Drops` item at the end of the next batch taken.

A burst (at least :data:`BURST_MIN_BYTES` within one linger: a flood of updates, a session's
history replayed, a big tool output) is held until it pauses, up to :data:`BURST_HOLD_SECONDS`
and :data:`BURST_HOLD_BYTES`, and taken after it: while it lasts, the consumer's work (the
shipper's encoding, the writer's rows and SQLite) does not compete with forwarding for the
CPU (measured: docs/websocket.md, "The WebSocket hop"). A longer burst is taken as it comes
after that, until it pauses.

That is the :class:`ProxyJournal`. The writer process runs a :class:`WriterJournal`, fed
by :meth:`WriterJournal.feed` from its pipe: that one never drops (it waits while over
budget, so the pipe fills and the proxy's journal holds the backlog).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from acp_proxy.recorder.spool import Spool, SpoolRef

BATCH_FRAMES = 20_000
"""Most queue items taken for one transaction."""

SPOOLED_ITEM_COST = 160
"""About the memory (bytes) one spooled queue item still takes (its reference)."""

MIN_SPOOLED_ITEMS = 1024
"""Spooled items allowed whatever the memory budget (see :meth:`Journal._spill`)."""

RUN_BYTES = 256 * 1024
"""The most stream bytes one spooled queue item (a run of reads) stands for."""

HARD_LIMIT_BYTES = 2 * 1024 * 1024 * 1024
"""Beyond this much queued, even the rest of a line being recorded is dropped."""

BURST_MIN_BYTES = 256 * 1024
"""Bytes gathered within one linger that make a burst (5 MiB/s at the proxy's linger)."""

BURST_HOLD_SECONDS = 0.5
"""The longest a burst is held before its batches are taken (:meth:`Journal.take`)."""

BURST_HOLD_BYTES = 8 * 1024 * 1024
"""The most bytes a burst is held for (at most half the memory budget)."""

BURST_END_SECONDS = 0.01
"""A burst has ended when nothing was queued for this long."""

INCIDENT_QUIET_SECONDS = 2.0
"""A loss incident ends after this long without losses (then a new loss warns again)."""


LINGER_SECONDS = 0.1
"""How long the journal lets items gather after the first one before a batch is taken.

This bounds how far behind the recording is at low load (and so what ``kill -9`` can
lose). Fewer, bigger batches hold the GIL less often against forwarding (measured:
docs/performance.md, "The recorder's constants").
"""


class _Lane:
    """The journal's state for one connection."""

    __slots__ = ("announced", "gaps", "losses", "open", "reported")

    def __init__(self) -> None:
        self.open: set[str] = set()  # streams whose queued bytes end inside a line
        self.gaps: dict[str, bool] = {}  # streams with dropped bytes (True: inside a line)
        self.losses = Losses()  # everything lost on this side
        self.reported = (0, 0)  # the part of it already put in a Drops item
        self.announced = False  # its open was taken: the consumer knows the connection


class Journal:
    """A bounded, spooling queue of :mod:`~acp_proxy.recorder.ipc` items for one recording:
    its consumer's side, losses and incidents. Filled as a :class:`ProxyJournal` (from the
    transports) or a :class:`WriterJournal` (from the writer process's pipe).

    Connections are any hashable keys (the proxy's connection handles; the writer
    process's integer keys). Thread-safe: producers and one consumer.
    """

    holds_bursts = False
    """Whether :meth:`take` holds a burst until it pauses (the proxy's journal does)."""

    def __init__(
        self,
        *,
        queue_bytes: int,
        batch_bytes: int,
        linger: float,
        warn: Callable[[str], None],
        spool_bytes: int = 0,
        spool_dir: Path | None = None,
    ) -> None:
        self.queue_bytes = queue_bytes
        self.batch_bytes = batch_bytes
        self.spool_bytes = spool_bytes if spool_dir is not None else 0
        self.spool_dir = spool_dir
        self.linger = linger
        self.warn = warn
        self._queue: deque[Item] = deque()
        self._taken: deque[Item] = deque()  # swapped out, not handed out yet (consumer's)
        self._queued_bytes = 0  # all bytes queued, in memory or spooled
        self._backlog = 0  # memory held by queued complete frames (what the budget bounds)
        self._spool: Spool | None = None  # created at the first overflow
        self._spool_failed = False
        self._spooled_bytes = 0  # the part of _queued_bytes in the spool
        self._spooled_items = 0  # queue items whose bytes are in the spool
        self.spool_peak_bytes = 0  # most bytes ever waiting in the spool (stats)
        # Producers take the lock itself (``with self._lock``): the Condition's own
        # ``__enter__``/``__exit__`` are Python calls, on the forwarding path once a frame.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = False
        self._idle = False  # the consumer waits for the queue to become non-empty
        self._urgent = False  # a control item is queued: take a batch without lingering
        # Inside a loss incident (queue full, or the writer failing): warned once, over
        # when batches commit again, the queue is below half its budget and nothing was
        # lost for INCIDENT_QUIET_SECONDS (a nearly full disk must not flap the warning).
        self._incident = False
        self._last_loss = 0.0
        self.failed: str | None = None  # recording disabled: why (everything now drops)
        self._lanes: dict[Any, _Lane] = {}
        self._lossy: set[Any] = set()  # connections with losses not reported yet
        self._wake_bytes = batch_bytes  # queued bytes that wake the consumer early
        self._may_hold = True  # no burst was cut short by the hold's bounds since a pause

    # -- losses ----------------------------------------------------------------------------

    def lose(self, conn: Any, frames: int, nbytes: int) -> None:
        """Count frames of ``conn`` lost after the journal handed them out."""
        with self._cond:
            lane = self._lanes.get(conn)
            if lane is not None:
                self._lose(conn, lane, frames, nbytes)

    def losses(self, conn: Any) -> Losses:
        """Everything of ``conn`` this journal counted as lost."""
        return self._lanes[conn].losses

    def unreported_frames(self) -> int:
        """Frames counted here and not yet handed out in a :class:`Drops` item."""
        with self._cond:
            return sum(lane.losses.frames - lane.reported[0] for lane in self._lanes.values())

    def _lose(self, conn: Any, lane: _Lane, frames: int, nbytes: int) -> None:
        lane.losses.add(frames, nbytes)
        self._lossy.add(conn)

    def _drops(self) -> list[Item]:
        """Drops items for connections the consumer knows (lock held)."""
        out: list[Item] = []
        for conn in list(self._lossy):
            lane = self._lanes[conn]
            if not lane.announced:
                continue  # its open has not gone out yet: sent before it, it would be lost
            self._lossy.discard(conn)
            now = lane.losses.pair()
            was = lane.reported
            if now != was:
                out.append(Drops(conn, now[0] - was[0], now[1] - was[1]))
                lane.reported = now
        return out

    # -- incidents -------------------------------------------------------------------------

    def _start_incident(self, reason: str | None = None, line: str | None = None) -> None:
        """Warn once per incident (call with the lock held); ``line``: the whole line."""
        self._last_loss = time.monotonic()
        if not self._incident:
            self._incident = True
            why = reason or self.failed or "the recorder is behind (queue full)"
            self.warn(line or f"recording: dropping frames, {why}; forwarding continues")

    def incident(self, reason: str, *, line: str | None = None) -> None:
        """The writer lost frames (its counts are its own): warn once per incident."""
        with self._cond:
            self._start_incident(reason, line)

    def committed(self) -> None:
        """The writer committed a batch: the incident is over once things are quiet."""
        with self._cond:
            if (
                self._incident
                and self.failed is None
                and self._backlog < self.queue_bytes // 2
                and time.monotonic() - self._last_loss > INCIDENT_QUIET_SECONDS
            ):
                self._incident = False

    def disable(self, reason: str) -> bool:
        """Recording is disabled from now on (what comes is dropped); True the first time.

        ``reason`` is the whole line without the ``; forwarding continues`` tail; the
        caller warns with it (it may add details first).
        """
        with self._cond:
            first = self.failed is None
            if first:
                self.failed = reason
            self._incident = True
            return first

    # -- the consumer ----------------------------------------------------------------------

    def _over_budget(self, backlog: int) -> bool:
        """Would ``backlog`` more bytes of complete frames exceed the budget? (lock held)"""
        return self.failed is not None or (
            self._backlog > 0 and self._backlog + backlog > self.queue_bytes
        )

    def _accept(
        self,
        conn: Any,
        lane: _Lane,
        stream: str,
        ts: float,
        mono: int,
        data: bytes | SpoolRef,
        done: int,
    ) -> None:
        """Queue ``data`` (lock held), after a gap marker if bytes before it were dropped."""
        gap = lane.gaps.pop(stream, None)
        if gap is not None:
            self._queue.append(Gap(conn, stream, gap))
        self._queue.append(Chunk(conn, stream, ts, mono, data, done))
        self._queued_bytes += len(data)
        if type(data) is not SpoolRef:
            self._backlog += done
        if done == len(data):
            lane.open.discard(stream)
        else:
            lane.open.add(stream)
        self._wake()

    def _spill(self, data: bytes) -> SpoolRef | None:
        """Append ``data`` to the spool (lock held); None if it cannot take it (then drop).

        The references left in memory are bounded too: at most the memory budget's worth
        (:data:`SPOOLED_ITEM_COST` each, at least :data:`MIN_SPOOLED_ITEMS`). Stream chunks
        are large, so that bound matters only for floods of small whole messages.
        """
        if not self._spool_room(len(data)):
            return None
        try:
            ref = self._open_spool().append(data)
        except OSError as exc:
            self._spool_broke(exc)
            return None
        self._spooled(len(data), 1)
        return ref

    def _spool_room(self, size: int, items: int = 1) -> bool:
        """Can the spool take ``size`` more bytes in ``items`` more queue items? (lock held)"""
        return not (
            self.spool_bytes <= 0
            or self._spool_failed
            or self._spooled_bytes + size > self.spool_bytes
            or self._spooled_items + items
            > max(MIN_SPOOLED_ITEMS, self.queue_bytes // SPOOLED_ITEM_COST)
        )

    def _open_spool(self) -> Spool:
        if self._spool is None:
            assert self.spool_dir is not None
            self._spool = Spool(self.spool_dir)
        return self._spool

    def _spool_broke(self, exc: OSError) -> None:
        self._spool_failed = True
        self._start_incident(f"the spool file failed ({exc})")

    def _spooled(self, size: int, items: int) -> None:
        self._spooled_bytes += size
        self._spooled_items += items
        self.spool_peak_bytes = max(self.spool_peak_bytes, self._spooled_bytes)

    def _spill_read(
        self, conn: Any, lane: _Lane, stream: str, ts: float, mono: int, data: bytes, done: int
    ) -> bool:
        """Spool one read of a stream and queue it (lock held); False if the spool cannot
        take it (then it is dropped).

        A read that follows its connection's run, the last item of the queue and the end of
        the spool file, joins that run (up to :data:`RUN_BYTES`): a backlog of many small
        reads (a client and an agent exchanging line after line while the database is away)
        costs the queue one item per run, so the bound on spooled items, which keeps their
        references within the memory budget, does not fill up long before the spool's
        bytes do (it did: frames dropped with room in the spool). Each read keeps its own
        stream, place in the order and timestamps (:meth:`Spool.pieces`).
        """
        last = self._queue[-1] if self._queue else None
        if (
            type(last) is Chunk
            and last[0] == conn
            and stream not in lane.gaps
            and type(last[4]) is SpoolRef
            and last[4].pieces
            and len(last[4]) + len(data) <= RUN_BYTES
            and self._spool_room(len(data), 0)
        ):
            run: SpoolRef = last[4]
            try:
                joined = self._open_spool().extend_run(run, stream, ts, mono, data, done)
            except OSError as exc:
                self._spool_broke(exc)
                return False
            if joined:
                self._spooled(len(data), 0)
                # (a run's ``done`` is unused until it is read back into its chunks)
                self._queued_bytes += len(data)
                if done == len(data):
                    lane.open.discard(stream)
                else:
                    lane.open.add(stream)
                self._wake()
                return True
        if not self._spool_room(len(data)):
            return False
        try:
            ref = self._open_spool().append_piece(stream, ts, mono, data, done)
        except OSError as exc:
            self._spool_broke(exc)
            return False
        self._spooled(len(data), 1)
        self._accept(conn, lane, stream, ts, mono, ref, done)
        return True

    def _wake(self) -> None:
        """Wake the consumer if it idles or a batch is ready (lock held).

        Otherwise it wakes by itself after ``linger``: fewer wake-ups means less GIL
        contention with the forwarding threads and bigger, cheaper batches.
        """
        if self._idle or self._stop or self._queued_bytes >= self._wake_bytes:
            self._cond.notify()

    def stop(self) -> None:
        """No more items: :meth:`take` returns what is left, then None."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    @property
    def stopping(self) -> bool:
        return self._stop

    def queued_bytes(self) -> int:
        with self._cond:
            return self._queued_bytes

    def spooled_bytes(self) -> int:
        """The part of :meth:`queued_bytes` waiting in the spool file."""
        with self._cond:
            return self._spooled_bytes

    def take(self) -> list[Item] | None:
        """Wait for queued items and take up to one batch's worth; None when stopped.

        The lock is held only to swap the whole queue out (O(1)): the forwarding threads
        take the same lock to queue a chunk, so popping item by item under it made them
        wait whole milliseconds at a time. Batches are cut from the swapped-out items
        afterwards, and the budget counters drop as each batch is taken. The losses
        counted since the last batch follow it as :class:`Drops` items.
        """
        if not self._taken:
            with self._cond:
                while not self._queue and not self._stop:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                if not self._queue:
                    drops = self._drops()
                    return drops or None
                # Let a burst gather (bounded: the recording stays < linger behind).
                deadline = time.monotonic() + self.linger
                while not self._stop and not self._urgent and self._queued_bytes < self.batch_bytes:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                if self.holds_bursts:
                    self._hold_burst()
                self._urgent = False
                self._taken, self._queue = self._queue, self._taken
        out: list[Item] = []
        taken = backlog = spooled = spooled_bytes = 0
        opened: list[Any] = []
        pending = self._taken
        while pending and taken < self.batch_bytes and len(out) < BATCH_FRAMES:
            item = pending.popleft()
            out.append(item)
            if isinstance(item, (Chunk, Whole)):
                data = item[4]
                taken += len(data)
                if type(data) is SpoolRef:
                    spooled += 1
                    spooled_bytes += len(data)
                else:
                    backlog += item[5] if isinstance(item, Chunk) else len(data)
            elif isinstance(item, Control) and item[1] == "open":
                opened.append(item[0])
        with self._cond:
            self._queued_bytes -= taken
            self._backlog -= backlog
            self._spooled_items -= spooled
            self._spooled_bytes -= spooled_bytes
            for conn in opened:
                lane = self._lanes.get(conn)
                if lane is not None:
                    lane.announced = True
            if self._lossy:
                out.extend(self._drops())
        if spooled:
            return self._unspool(out)
        return out

    def _hold_burst(self) -> None:
        """Let a burst end before it is taken (lock held; see the module's docstring).

        Ended by a pause of :data:`BURST_END_SECONDS`, a control item (taken at once), the
        journal stopping, or the hold's bounds; after the bounds, no burst is held again
        until one pause (a burst that goes on is then recorded as it comes).
        """
        if self._queued_bytes < BURST_MIN_BYTES:
            self._may_hold = True  # not a burst: traffic paused since the last one
            return
        if self._stop or self._urgent or not self._may_hold:
            return
        cap = min(BURST_HOLD_BYTES, self.queue_bytes // 2)
        until = time.monotonic() + BURST_HOLD_SECONDS
        self._wake_bytes = cap  # producers do not wake the consumer for each item meanwhile
        try:
            while not (self._stop or self._urgent):
                left = until - time.monotonic()
                if left <= 0 or self._queued_bytes >= cap:
                    self._may_hold = False  # held as long as allowed: take the rest as it comes
                    return
                seen = self._queued_bytes
                self._cond.wait(min(BURST_END_SECONDS, left))
                if self._queued_bytes == seen:
                    return  # it paused: the burst is over
        finally:
            self._wake_bytes = self.batch_bytes

    def _unspool(self, items: list[Item]) -> list[Item]:
        """Read spooled bytes back into ``items``; close the spool once nothing refers to it."""
        out: list[Item] = []
        for item in items:
            if not isinstance(item, (Chunk, Whole)):
                out.append(item)
                continue
            ref = item[4]
            if type(ref) is not SpoolRef:
                out.append(item)
                continue
            try:
                if ref.pieces:  # a run of reads: each its own chunk again
                    conn = item[0]
                    pieces = list(ref.spool.pieces(ref))
                    out.extend(Chunk(conn, *piece) for piece in pieces)
                else:
                    out.append(item._replace(data=ref.read()))
            except OSError as exc:  # our own file, already written: should not happen
                conn = item[0]
                with self._cond:
                    if item[1] != STDERR:
                        self._lose(conn, self._lanes[conn], max(1, ref.pieces), len(ref))
                    self._start_incident(f"the spool file could not be read back ({exc})")
                partial = isinstance(item, Chunk) and item[5] < len(ref)
                out.append(Gap(conn, item[1], partial))
        with self._cond:
            done = self._spool if self._spooled_items == 0 else None
            if done is not None:
                self._spool = None  # the next overflow starts a fresh, empty file
        if done is not None:
            done.close()
        return out


class ProxyJournal(Journal):
    """The proxy's journal: transports put what they forwarded in it and never wait; past
    its budgets it spools, then drops and counts what it dropped. It holds bursts."""

    holds_bursts = True

    # -- producers -------------------------------------------------------------------------

    def open(self, conn: Any, fields: dict[str, Any]) -> None:
        """A new connection: its row is created before anything else of it is written."""
        with self._cond:
            self._lanes[conn] = _Lane()
        self.control(conn, "open", fields)

    def control(self, conn: Any, op: str, fields: dict[str, Any]) -> None:
        """Queue a change to the connection row, written without lingering."""
        with self._cond:
            self._queue.append(Control(conn, op, fields))
            # A connection opening, ending or changing is written without lingering, so
            # `ls` and the web inspector show it at once.
            self._urgent = True
            self._cond.notify()

    def note(self, conn: Any, op: str, fields: dict[str, Any]) -> None:
        """Queue a connection-level fact (an event) that may linger with the frames.

        An HTTP connection records an ``http`` event per request: taken without lingering,
        each request cost a batch (and a commit) of its own (docs/http.md#benchmark).
        """
        with self._cond:
            self._queue.append(Control(conn, op, fields))
            self._wake()

    def chunk(self, conn: Any, stream: str, data: bytes) -> None:
        """Queue a stream chunk, or drop (and count) what the budget does not allow.

        The budget bounds the *backlog of complete frames*; the bytes of a line that has
        not ended yet do not count, so one frame bigger than the budget is recorded whole
        (memory then grows with that frame, up to :data:`HARD_LIMIT_BYTES` queued). Over
        budget, a line already being recorded is still finished; what follows is dropped.
        """
        ts = time.time()
        mono = time.monotonic_ns()
        with self._cond:
            lane = self._lanes[conn]
            keep = b""
            in_memory = self._queued_bytes - self._spooled_bytes
            if self.failed is None:
                done = data.rfind(b"\n") + 1  # the bytes that complete lines
                fits = in_memory + len(data) <= HARD_LIMIT_BYTES
                if fits and not self._over_budget(done):
                    # a line longer than the memory budget (a huge frame in progress): its
                    # pieces wait in the spool, not in memory, where there is one
                    if in_memory + len(data) > self.queue_bytes and self._spill_read(
                        conn, lane, stream, ts, mono, data, done
                    ):
                        return
                    self._accept(conn, lane, stream, ts, mono, data, done)
                    return
                if self._spill_read(conn, lane, stream, ts, mono, data, done):
                    return
                if fits and stream in lane.open:
                    end = data.find(b"\n")
                    keep = data if end < 0 else data[: end + 1]
                    self._accept(conn, lane, stream, ts, mono, keep, end + 1)
            rest = data[len(keep) :]
            if rest:
                lane.open.discard(stream)
                if stream != STDERR:
                    self._lose(conn, lane, rest.count(b"\n"), len(rest))
                lane.gaps[stream] = not rest.endswith(b"\n")
                self._start_incident()

    def frames(self, conn: Any, items: list[Whole]) -> None:
        """Queue whole frames (all or none), or drop and count them."""
        size = len(items[0][4]) if len(items) == 1 else sum([len(i[4]) for i in items])
        with self._lock:
            in_memory = self._queued_bytes - self._spooled_bytes
            if self._over_budget(size) or in_memory + size > HARD_LIMIT_BYTES:
                spilled: list[Whole] = []
                for item in items:
                    ref = self._spill(item.data) if self.failed is None else None
                    if ref is None:
                        break
                    spilled.append(item._replace(data=ref))
                if len(spilled) == len(items):
                    self._queue.extend(spilled)
                    self._queued_bytes += size
                    self._wake()
                    return
                for item in spilled:  # all or nothing (the bytes stay in the file, unused)
                    self._spooled_bytes -= len(item.data)
                    self._spooled_items -= 1
                if items[0].stream != STDERR:
                    self._lose(conn, self._lanes[conn], len(items), size)
                self._start_incident()
                return
            self._queue.extend(items)
            self._queued_bytes += size
            self._backlog += size
            self._wake()

    def end(self, conn: Any, stream: str) -> None:
        """End of ``stream``: its last unterminated line (if any) becomes a frame."""
        with self._cond:
            lane = self._lanes[conn]
            gap = lane.gaps.pop(stream, None)
            if gap is not None:
                self._queue.append(Gap(conn, stream, False))
                if gap and stream != STDERR:
                    self._lose(conn, lane, 1, 0)  # the dropped tail had no newline: a frame
            inside = stream in lane.open  # the stream ends inside a line: one more frame
            lane.open.discard(stream)
            self._queue.append(End(conn, stream, time.time(), time.monotonic_ns(), inside))
            self._wake()


class WriterJournal(Journal):
    """The writer process's journal, fed whole batches from its pipe: it never drops (it
    waits while over budget, so the pipe fills and the proxy's journal holds the backlog)."""

    def feed(self, items: list[Item]) -> None:
        """Queue items as they are (the writer process's journal, fed from its pipe).

        Instead of dropping, this waits while the queue is over its budget.
        """
        size = backlog = 0
        urgent = False
        for item in items:
            if isinstance(item, Chunk):
                size += len(item[4])
                backlog += item[5]
            elif isinstance(item, Whole):
                size += len(item[4])
                backlog += len(item[4])
            elif isinstance(item, Control):
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
