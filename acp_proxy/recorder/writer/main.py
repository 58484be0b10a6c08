"""The recorder's writer process: rows and the database away from the forwarding process.

``python -m acp_proxy.recorder.writer.main DB RETRY QUEUE BATCH`` (``DB`` ``-``: the PostgreSQL URL
is in the environment, :data:`~acp_proxy.recorder.ipc.LOCATION_ENV`) reads batches
(:func:`~acp_proxy.recorder.ipc.read_batch`) from its stdin into its own
:class:`~acp_proxy.recorder.journal.WriterJournal` (which waits instead of dropping, so the pipe
fills and the proxy's journal holds the backlog), and runs the same
:class:`~acp_proxy.recorder.writer.pipeline.Pipeline` (rows, then a
:mod:`~acp_proxy.recorder.writer.sink`) that ``ACP_PROXY_RECORDER=thread`` runs inside
the proxy. See :mod:`acp_proxy.recorder.shipper` for the other end.

End of stdin means: write what arrived, then exit. After the proxy's
:class:`~acp_proxy.recorder.ipc.Fin` that is a clean end. Without it the proxy died (``kill
-9``): the writer still writes everything it was sent (so a killed proxy loses nothing that
reached it), then closes every connection row the proxy left open with ``end_reason``
``proxy-lost`` and the losses it knows of.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
import time
from typing import IO, TYPE_CHECKING

from acp_proxy.recorder.writer.priority import SWITCH_INTERVAL, lower_priority

if TYPE_CHECKING:
    from acp_proxy.recorder.writer.pipeline import Pipeline

WRITER_GC_THRESHOLD = 20_000
"""Allocations between young-generation collections in the writer (Python's default: 700).

The writer allocates a dict per parsed frame and a tuple per row, nearly all freed at
once; the default collected every few hundred frames, for a few % of the rows thread's time."""

PG_SWITCH_SECONDS = 0.0005
"""The writer's GIL switch interval when it records into PostgreSQL (Python's default: 5 ms;
into SQLite: :data:`~acp_proxy.recorder.writer.priority.SWITCH_INTERVAL`).

The sink thread waits for the server several times a batch (``BEGIN``, ``COPY``, ``COMMIT``)
and then waits for the GIL while the rows thread runs Python: up to a switch interval each
time, while the server has nothing to do (measured: docs/performance.md, "The recorder's
constants")."""

PROGRESS_SECONDS = 0.1
"""How often the writer reports its progress to the proxy."""


def serve(pipeline: Pipeline, fd: int, report: IO[str]) -> None:
    """Run ``pipeline`` on batches read from ``fd`` until end of input, then finish it."""
    from acp_proxy.recorder.ipc import (
        Control,
        Fin,
        Item,
        Progress,
        measures_line,
        progress_line,
        read_batch,
    )
    from acp_proxy.recorder.journal import WriterJournal

    journal = pipeline.journal
    assert isinstance(journal, WriterJournal), "the writer process's pipeline"
    stop = threading.Event()

    def progress() -> None:
        last = None
        measured = -1
        while True:
            done = stop.wait(PROGRESS_SECONDS)
            line = progress_line(
                Progress(
                    pipeline.frames_written,
                    pipeline.batches_committed,
                    pipeline.index_cpu,
                    pipeline.sqlite_cpu,
                    pipeline.dropped(),
                    journal.queued_bytes(),
                    bool(pipeline.unsaved),
                    pipeline.in_doubt,
                    pipeline.store_away,
                    pipeline.outages,
                )
            )
            measures = pipeline.measures
            if measures.changes != measured:  # durations, findings, OTLP counts: --metrics
                measured = measures.changes
                line = measures_line(measures.snapshot()) + line
            if line != last or done:
                with contextlib.suppress(OSError, ValueError):
                    report.write(line)
                    report.flush()
                last = line
            if done:
                return

    reporter = threading.Thread(target=progress, daemon=True)
    reporter.start()
    pipeline.start()
    finished = False
    opened: dict[int, None] = {}
    while True:
        try:
            items = read_batch(fd, int)
        except (OSError, ValueError, EOFError, TypeError, IndexError) as exc:
            journal.warn(f"recording: the writer could not read from the proxy ({exc})")
            items = None
        if items is None:
            break
        batch: list[Item] = []
        for item in items:
            if type(item) is Fin:
                finished = True
                continue
            if type(item) is Control:
                if item.op == "open":
                    opened[item.conn] = None
                elif item.op == "close":
                    opened.pop(item.conn, None)
            batch.append(item)
        if batch:
            journal.feed(batch)
    if not finished and opened:
        # The proxy died before closing these connections: close them for it.
        now = time.time()
        journal.feed(
            [Control(key, "close", {"ended_at": now, "end_reason": "proxy-lost"}) for key in opened]
        )
    journal.stop()
    pipeline.join()
    stop.set()
    reporter.join()


def main(argv: list[str] | None = None) -> int:
    """The writer process (``python -m acp_proxy.recorder.writer.main DB RETRY QUEUE BATCH``)."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # until the drain handler is installed
    lower_priority(whole_process=True)  # before the imports: they are most of the start-up
    import os

    from acp_proxy.console import warn
    from acp_proxy.recorder.ipc import LOCATION_ENV
    from acp_proxy.recorder.journal import LINGER_SECONDS, WriterJournal
    from acp_proxy.recorder.writer.pipeline import Pipeline, sink_for

    gc.freeze()  # what the imports made is never garbage: keep it out of collections
    gc.set_threshold(WRITER_GC_THRESHOLD)
    path, retry, queue_bytes, batch_bytes = args[0], float(args[1]), int(args[2]), int(args[3])
    switch = SWITCH_INTERVAL
    if path == "-":  # a PostgreSQL URL, passed in the environment (it may hold a password)
        path = os.environ.pop(LOCATION_ENV, "")
        switch = PG_SWITCH_SECONDS
    sys.setswitchinterval(switch)
    journal = WriterJournal(
        queue_bytes=queue_bytes,
        batch_bytes=batch_bytes,
        linger=LINGER_SECONDS / 2,  # the proxy gathers for the other half
        warn=warn,
    )
    from acp_proxy.recorder.writer.otlp_live import live_observer  # live OTLP export, if asked for

    pipeline = Pipeline(
        journal, sink_for(path), lock_retry=retry, warn=warn, observer=live_observer()
    )
    signal.signal(signal.SIGUSR1, lambda *_: pipeline.drain())
    serve(pipeline, sys.stdin.fileno(), sys.stdout)
    # a late SIGUSR1 must not kill it while the interpreter shuts down (it resets handlers)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
