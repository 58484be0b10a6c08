"""The recorder's writer process: rows and the database away from the forwarding process.

``python -m acp_proxy.record.child DB RETRY QUEUE BATCH`` (``DB`` ``-``: the PostgreSQL URL
is in the environment, :data:`~acp_proxy.record.shipper.LOCATION_ENV`) reads batches
(:func:`~acp_proxy.record.ipc.read_batch`) from its stdin into its own
:class:`~acp_proxy.record.journal.Journal` (which waits instead of dropping, so the pipe
fills and the proxy's journal holds the backlog), and runs the same
:class:`~acp_proxy.record.pipeline.WriterPipeline` (rows, then a
:mod:`~acp_proxy.record.sink`) that ``ACP_PROXY_RECORDER=thread`` runs inside
the proxy. See :mod:`acp_proxy.record.shipper` for the other end.

End of stdin means: write what arrived, then exit. After the proxy's
:class:`~acp_proxy.record.ipc.Fin` that is a clean end. Without it the proxy died (``kill
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

from acp_proxy.record.priority import SWITCH_INTERVAL, lower_priority

if TYPE_CHECKING:
    from acp_proxy.record.pipeline import WriterPipeline

WRITER_GC_THRESHOLD = 20_000
"""Allocations between young-generation collections in the writer (Python's default: 700).

The writer allocates a dict per parsed frame and a tuple per row, nearly all freed at
once; the default collected every few hundred frames, for a few % of the rows thread's time."""

PG_SWITCH_SECONDS = 0.0005
"""The writer's GIL switch interval when it records into PostgreSQL (Python's default: 5 ms;
into SQLite: :data:`~acp_proxy.record.priority.SWITCH_INTERVAL`).

The sink thread waits for the server several times a batch (``BEGIN``, ``COPY``, ``COMMIT``)
and then waits for the GIL while the rows thread runs Python: up to a switch interval each
time, while the server has nothing to do. Measured (200k frames, 7 alternating runs): 0.5 ms
recorded about 13% more frames/s; 0.1 ms and 1 ms no better."""

PROGRESS_SECONDS = 0.1
"""How often the writer reports its progress to the proxy."""


def serve(pipeline: WriterPipeline, fd: int, report: IO[str]) -> None:
    """Run ``pipeline`` on batches read from ``fd`` until end of input, then finish it."""
    from acp_proxy.record.ipc import Control, Fin, Item, read_batch

    journal = pipeline.journal
    stop = threading.Event()

    def progress() -> None:
        import json

        last = None
        timed = 0
        while True:
            done = stop.wait(PROGRESS_SECONDS)
            line = (
                f"p {pipeline.frames_written} {pipeline.batches_committed} "
                f"{pipeline.index_cpu:.3f} {pipeline.sqlite_cpu:.3f} {pipeline.dropped()} "
                f"{journal.queued_bytes()} {int(pipeline.unsaved)} {pipeline.in_doubt} "
                f"{int(pipeline.store_away)} {pipeline.outages}\n"
            )
            if pipeline.timings.changes != timed:  # the histograms, for --metrics
                timed = pipeline.timings.changes
                line = f"h {json.dumps(pipeline.timings.snapshot(), separators=(',', ':'))}\n{line}"
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
    """Entry point of the child (``python -m acp_proxy.record.child DB RETRY QUEUE BATCH``)."""
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # until the drain handler is installed
    lower_priority(whole_process=True)  # before the imports: they are most of the start-up
    import os

    from acp_proxy.console import warn
    from acp_proxy.record.journal import LINGER_SECONDS, Journal
    from acp_proxy.record.pipeline import WriterPipeline, sink_for
    from acp_proxy.record.shipper import LOCATION_ENV

    gc.freeze()  # what the imports made is never garbage: keep it out of collections
    gc.set_threshold(WRITER_GC_THRESHOLD)
    path, retry, queue_bytes, batch_bytes = args[0], float(args[1]), int(args[2]), int(args[3])
    switch = SWITCH_INTERVAL
    if path == "-":  # a PostgreSQL URL, passed in the environment (it may hold a password)
        path = os.environ.pop(LOCATION_ENV, "")
        switch = PG_SWITCH_SECONDS
    sys.setswitchinterval(switch)
    journal = Journal(
        queue_bytes=queue_bytes,
        batch_bytes=batch_bytes,
        linger=LINGER_SECONDS / 2,  # the proxy gathers for the other half
        warn=warn,
    )
    from acp_proxy.record.otlp_live import live_observer  # live OTLP export, if asked for

    pipeline = WriterPipeline(
        journal, sink_for(path), lock_retry=retry, warn=warn, observer=live_observer()
    )
    signal.signal(signal.SIGUSR1, lambda *_: pipeline.drain())
    serve(pipeline, sys.stdin.fileno(), sys.stdout)
    # a late SIGUSR1 must not kill it while the interpreter shuts down (it resets handlers)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    return 0


if __name__ == "__main__":
    sys.exit(main())
