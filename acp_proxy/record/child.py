"""The recorder's writer process: indexing and SQLite away from the forwarding process.

Python threads share one interpreter lock. When the indexer and the SQLite writer ran as
threads of the proxy, a forwarding thread that woke up for a frame often had to wait for
the lock behind them, and when the OS preempted a low-priority recorder thread *holding*
the lock, forwarding waited for the scheduler: measured, round trips through a recording
proxy then had a p99.9 of 4-10 ms. So the proxy keeps only the bounded queue (and its
spool) and one shipper thread, and a child process (``python -m acp_proxy.record.child``,
at lower priority) runs the same indexer and SQLite writer on what it is sent.

The protocol on the child's stdin is a sequence of batches, each an 8-byte little-endian
length and a :mod:`marshal` list of queue items in which the connection object is replaced
by a small integer key (see :func:`encode_batch`). Two more item kinds exist only here:
``("drops", key, frames, bytes)`` adds losses the proxy counted to the connection row,
and an ``open`` control creates the connection. On its stdout the child reports progress
lines (``p frames batches index_cpu sqlite_cpu dropped queued_bytes``); its warnings go
straight to the shared stderr. End of stdin means: write what arrived, then exit. That
is also what happens when the proxy is killed, so a ``kill -9`` of the proxy loses nothing
that reached the child.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_proxy.record.writer import ConnectionRecorder, Recorder

CHUNK, FRAME, GAP, END, CONTROL = range(5)
"""Queue item tags (the items are described in :mod:`acp_proxy.record.writer`)."""

RECORDER_NICE = 10
"""Niceness of the writer where SCHED_IDLE is not available."""

WRITER_GC_THRESHOLD = 20_000
"""Allocations between young-generation collections in the writer (Python's default: 700).

The writer allocates a dict per parsed frame and a tuple per row, nearly all freed at
once; the default collected every few hundred frames, for a few % of the indexer's time."""

DROPS = "drops"
"""Item tag: losses counted by the proxy, added to the connection row by the child."""

_HEADER = 8


def _portable(value: Any) -> Any:
    """``value`` as something :mod:`marshal` can carry (JSON-like data passes as is)."""
    if value is None or isinstance(value, (str, int, float, bytes, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_portable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _portable(v) for k, v in value.items()}
    return str(value)


def encode_batch(items: list[tuple[Any, ...]], keys: dict[ConnectionRecorder, int]) -> bytes:
    """One length-prefixed batch for the child: items with connections replaced by keys."""
    out: list[tuple[Any, ...]] = []
    for item in items:
        conn = item[1]
        key = keys.get(conn)
        if key is None:
            key = keys[conn] = len(keys) + 1
        if item[0] == CONTROL:  # (tag, conn, op, fields)
            out.append((CONTROL, key, item[2], _portable(item[3])))
        elif item[0] == DROPS:
            out.append((DROPS, key, item[2], item[3]))
        else:
            if item[0] in (CHUNK, FRAME) and type(item[5]) is not bytes:
                item = (*item[:5], bytes(item[5]), *item[6:])
            out.append((item[0], key, *item[2:]))
    blob = marshal.dumps(out)
    return len(blob).to_bytes(_HEADER, "little") + blob


class WriterProcess:
    """The proxy's handle on the child: start it, send batches, follow its progress."""

    def __init__(
        self,
        path: Path,
        *,
        lock_retry: float,
        queue_bytes: int,
        batch_bytes: int,
        on_exit: Callable[[], None],
    ):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                # -P: not the working directory first on sys.path. Editors start the proxy
                # in the user's project, whose own orjson.py or sqlite3/ must not be used.
                "-P",
                "-m",
                "acp_proxy.record.child",
                str(path.resolve()),
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
        self._on_exit = on_exit
        self.reader = threading.Thread(target=self._read, name="acp-proxy-progress", daemon=True)
        self.reader.start()

    def send(self, blob: bytes) -> None:
        """Write one encoded batch; OSError when the child is gone."""
        view = memoryview(blob)
        while view:
            view = view[os.write(self._stdin, view) :]

    def finish(self) -> None:
        """No more batches: the child writes what it has and exits."""
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
        """Stop the child now. Its stdin is left to the shipper thread to close (it may be
        writing to it: closing the descriptor under it could hand the number to a file
        opened meanwhile)."""
        with contextlib.suppress(OSError):
            self.proc.kill()

    def _read(self) -> None:
        for line in self._stdout:
            parts = line.split()
            if len(parts) == 7 and parts[0] == b"p":
                self.frames_written = int(parts[1])
                self.batches = int(parts[2])
                self.index_cpu = float(parts[3])
                self.sqlite_cpu = float(parts[4])
                self.dropped = int(parts[5])
                self.queued_bytes = int(parts[6])
        with contextlib.suppress(OSError):
            self._stdout.close()
        self._on_exit()  # its output ended: it exited (or is about to)


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
                    if b"acp_proxy.record.child" in fh.read():
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        data = os.read(fd, min(n, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def serve(recorder: Recorder, fd: int, report: IO[str]) -> None:
    """Feed batches read from ``fd`` to ``recorder`` until end of input, then close it."""
    from acp_proxy.record.writer import ConnectionRecorder

    conns: dict[int, ConnectionRecorder] = {}
    stop = threading.Event()
    # issue 16 hook (1/2): live OTLP export of what is recorded; None unless configured
    from acp_proxy.record.otlp_live import attach_live_export, finish_live_export

    live = attach_live_export(recorder)

    def progress() -> None:
        last = None
        while True:
            done = stop.wait(0.1)
            with recorder._cond:
                queued = recorder._queued_bytes
            dropped = sum(c.frames_dropped for c in conns.values())
            line = (
                f"p {recorder.frames_written} {recorder.batches_committed} "
                f"{recorder.index_cpu:.3f} {recorder.sqlite_cpu:.3f} {dropped} {queued}\n"
            )
            if line != last or done:
                with contextlib.suppress(OSError, ValueError):
                    report.write(line)
                    report.flush()
                last = line
            if done:
                return

    reporter = threading.Thread(target=progress, daemon=True)
    reporter.start()
    while True:
        header = _read_exact(fd, _HEADER)
        if header is None:
            break
        blob = _read_exact(fd, int.from_bytes(header, "little"))
        if blob is None:
            break
        items: list[tuple[Any, ...]] = []
        for item in marshal.loads(blob):
            key = item[1]
            if item[0] == DROPS:
                conn = conns.get(key)
                if conn is not None:
                    with recorder._cond:
                        conn.frames_dropped += item[2]
                        conn.bytes_dropped += item[3]
                    # an empty update: the row is rewritten with the counts even if no
                    # frame of this connection comes any more
                    items.append((CONTROL, conn, "update", {}))
                continue
            conn = conns.get(key)
            if conn is None:
                conn = conns[key] = ConnectionRecorder(recorder, {}, announce=False)
                recorder._connections.append(conn)
            if item[0] == CONTROL and item[2] == "close":
                conn.closed = True
            items.append((item[0], conn, *item[2:]))
        recorder._feed(items)
    # Connections the proxy did not close (it was killed) stay marked as running.
    for conn in conns.values():
        conn.closed = True
    finish_live_export(live, recorder)  # issue 16 hook (2/2): last spans, drop rows
    recorder.close(report=False)
    stop.set()
    reporter.join()


def _lower_priority(nice: int) -> None:
    """Run below everything else: SCHED_IDLE where there is one (Linux), else ``nice``.

    A normal task that wakes up preempts a SCHED_IDLE one at once; a nice 10 task
    merely has a smaller share, and the kernel lets it finish its slice first
    (milliseconds added to a round trip through the proxy, measured). The writer
    then takes mostly CPU time nothing else wants, which is the point: forward first.
    It is not starved on a busy machine: Linux still gives a SCHED_IDLE task a small
    weight (3, against 1024 for a nice 0 task), so it goes on, slowly. (Going back to
    the normal policy for the final drain would need privileges an editor's user lacks.)
    """
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        with contextlib.suppress(OSError):
            os.nice(nice)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the child (``python -m acp_proxy.record.child DB RETRY QUEUE BATCH``)."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _lower_priority(RECORDER_NICE)  # before the imports: they are most of the start-up
    from acp_proxy.record.writer import LINGER_SECONDS, Recorder

    gc.freeze()  # what the imports made is never garbage: keep it out of collections
    gc.set_threshold(WRITER_GC_THRESHOLD)
    path, retry, queue_bytes, batch_bytes = args[0], float(args[1]), int(args[2]), int(args[3])
    recorder = Recorder(
        path,
        queue_bytes=queue_bytes,
        spool_bytes=0,
        lock_retry=retry,
        batch_bytes=batch_bytes,
        open_now=False,
    )
    recorder.linger = LINGER_SECONDS / 2  # the proxy gathers for the other half
    serve(recorder, sys.stdin.fileno(), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
