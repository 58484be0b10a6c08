"""Benchmark: the recorder's storage step alone, PostgreSQL against SQLite, in one run.

The same batches of frame rows (built once by the recorder's own :class:`Rows`, so
parsing is not measured) are written by each engine's sink in process, batch after batch
as the writer does: one transaction per batch. Two shapes:

- ``one connection``: one flood, batches of 3,400 frames (what ``bench_proxy.py`` sends);
- ``400 connections``: a fleet's writer, every batch holding 5 frames of each of 400
  WebSocket connections.

Printed per shape and engine: frames/s (wall), the writing thread's CPU, and, for
PostgreSQL, the server's CPU for the same work (its backend process, read from /proc) and
the ratio to SQLite's frames/s. PostgreSQL is a private server started from
``tests/pg_server.py`` (or ``--pg-url``).

Then the recorder end to end against its storage step alone, into SQLite, on the same
``--e2e-frames`` frames of one stdio flood (``bench_agent.py``'s ~313-byte chunks, in the
64 KiB reads a pump makes), alternating ``--e2e-runs`` times:

- ``storage alone``: the batches of rows built beforehand by :class:`Rows` (not timed),
  written by a :class:`SqliteSink` batch after batch from a thread at the writer process's
  priority (SCHED_IDLE, so a loaded machine starves both alike);
- ``end to end``: the chunks handed to a ``Recorder(backend="process")`` as the stdio
  proxy's pumps hand them (journal, shipper, pipe, writer process: IPC decode, rows, sink),
  timed until every frame is committed and the writer has exited.

It prints both rates, their ratio (the issue's target: end to end at least 0.8x the storage
step alone) and the CPU per frame of each part (the writer's rows and sink threads, the
whole writer process, and this process meanwhile: the proxy side's journal, shipper and
pipe), which says where the time goes. End to end needs two cores (the writer's two threads
overlap only while SQLite runs without the GIL) where storage alone needs one, so a load
that takes a core lowers the ratio.

Usage::

    python bench/bench_sink.py [--batches 60] [--pg-url postgresql://USER@HOST/DB]
        [--e2e-frames 200000] [--e2e-runs 3] [--only e2e|engines]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_agent import chunk_frame  # noqa: E402
from bench_pg import BenchPostgres  # noqa: E402

from acp_proxy.recorder.handle import BATCH_BYTES, Recorder  # noqa: E402
from acp_proxy.recorder.ipc import Chunk, Control, Whole  # noqa: E402
from acp_proxy.recorder.writer.rows import Op, Rows  # noqa: E402
from acp_proxy.recorder.writer.sink import Sink, SqliteSink  # noqa: E402
from acp_proxy.recorder.writer.sink_pg import PostgresSink  # noqa: E402

LINE = (
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":'
    b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
    + b"z" * 200
    + b'"}}}}\n'
)
SHAPES = {"one connection": (1, 3400), "400 connections": (400, 5)}


def batches(sink: Sink, connections: int, per: int, count: int) -> list[list[Op]]:
    """Open the connections through ``sink``, then build the frame batches (whose rows
    carry the connection ids by then, as the writer's do)."""
    rows = Rows(sink.null)
    opens = [Control(k, "open", {"transport": "ws", "started_at": 1.0}) for k in range(connections)]
    sink.write(rows.build(opens), lambda: time.monotonic() + 30)
    out = []
    for _ in range(count):
        items: list[Any] = [
            Whole(k, "a2c", time.time(), time.monotonic_ns(), LINE, False)
            for k in range(connections)
            for _ in range(per)
        ]
        out.append(rows.build(items))
    return out


def backend_cpu(sink: PostgresSink) -> float:
    assert sink._db is not None
    pid = sink._db.conn.info.backend_pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(sink: Sink, shape: tuple[int, int], count: int) -> tuple[float, float, float | None]:
    sink.open(lambda: time.monotonic() + 30)
    todo = batches(sink, *shape, count)
    server0 = backend_cpu(sink) if isinstance(sink, PostgresSink) else None
    cpu0, t0 = time.thread_time(), time.perf_counter()
    frames = 0
    for ops in todo:
        frames += sink.write(ops, lambda: time.monotonic() + 30)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    server = backend_cpu(sink) - server0 if server0 is not None else None
    sink.close()
    return frames / wall, cpu, server


READ_BYTES = 65536
"""What one read of a stdio pump returns at most (its chunks)."""


def flood_chunks(frames: int) -> list[bytes]:
    data = b"".join(chunk_frame(n) for n in range(frames))
    return [data[at : at + READ_BYTES] for at in range(0, len(data), READ_BYTES)]


def idle_thread(work: Any) -> Any:
    """Run ``work()`` in a thread at SCHED_IDLE (the writer process's priority); its result."""
    out: list[Any] = []

    def run() -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]
        out.append(work())

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def storage_alone(db: Path, chunks: list[bytes]) -> tuple[float, float, float]:
    """(frames/s, sink CPU s, rows CPU s): the chunks' rows stored as the writer's sink does."""
    sink = SqliteSink(db)
    sink.open(lambda: time.monotonic() + 30)
    rows = Rows(sink.null)
    opened = Control(1, "open", {"transport": "stdio", "started_at": time.time()})
    sink.write(rows.build([opened]), lambda: time.monotonic() + 30)
    per = BATCH_BYTES // READ_BYTES
    cpu = time.thread_time()
    todo = [
        rows.build([Chunk(1, "a2c", time.time(), time.monotonic_ns(), c, 0) for c in part])
        for part in (chunks[at : at + per] for at in range(0, len(chunks), per))
    ]
    rows_cpu = time.thread_time() - cpu

    def write() -> tuple[int, float, float]:
        cpu0, t0 = time.thread_time(), time.perf_counter()
        frames = sum(sink.write(ops, lambda: time.monotonic() + 30) for ops in todo)
        return frames, time.perf_counter() - t0, time.thread_time() - cpu0

    frames, wall, cpu = idle_thread(write)
    sink.close()
    return frames / wall, cpu, rows_cpu


def end_to_end(
    db: Path, chunks: list[bytes], frames: int
) -> tuple[float, float, float, float, float]:
    """(frames/s, writer process CPU s, its rows thread's, its sink thread's, the proxy side's).

    The proxy side: this process's CPU meanwhile (journal, shipper, pipe writes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    # the whole flood fits the proxy's memory budget: the spool is not what is measured
    recorder = Recorder(db, backend="process", queue_bytes=512 * 1024 * 1024, warn=lambda _: None)
    conn = recorder.connection("stdio")
    t0 = time.perf_counter()
    for chunk in chunks:
        conn.stream("a2c", chunk)
    conn.stream_end("a2c")
    recorder.close()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    mine = resource.getrusage(resource.RUSAGE_SELF)
    proxy_cpu = mine.ru_utime + mine.ru_stime - own.ru_utime - own.ru_stime
    if recorder.frames_written != frames:
        raise SystemExit(f"bench_sink: {recorder.frames_written} of {frames} frames recorded")
    return frames / wall, cpu, recorder.index_cpu, recorder.sqlite_cpu, proxy_cpu


def compare_end_to_end(frames: int, runs: int, tmp: Path) -> None:
    chunks = flood_chunks(frames)
    print(f"\nend to end against storage alone (SQLite): {frames:,} frames, {runs} runs\n")
    print(
        "| run | alone/s | end to end/s | ratio | sink us/fr | rows us/fr | writer us/fr | "
        "proxy us/fr |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for run in range(runs):
        alone, sink_cpu, rows_cpu = storage_alone(tmp / f"alone-{run}.db", chunks)
        e2e, writer_cpu, index_cpu, e2e_sink_cpu, proxy_cpu = end_to_end(
            tmp / f"e2e-{run}.db", chunks, frames
        )
        ratios.append(e2e / alone)
        us = 1e6 / frames
        print(
            f"| {run + 1} | {alone:,.0f} | {e2e:,.0f} | {e2e / alone:.2f}x | "
            f"{sink_cpu * us:.2f} / {e2e_sink_cpu * us:.2f} | {rows_cpu * us:.2f} / "
            f"{index_cpu * us:.2f} | {writer_cpu * us:.2f} | {proxy_cpu * us:.2f} |"
        )
    print(
        "\n(/s: frames a second; us/fr: CPU microseconds a frame; sink and rows: storage alone /"
        " end to end;\n proxy: this process's journal, shipper and pipe)\n"
        f"(load {os.getloadavg()[0]:.2f}; "
        f"median ratio {statistics.median(ratios):.2f}x, target >= 0.80x)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--batches", type=int, default=60, help="batches per shape and engine")
    ap.add_argument("--pg-url", help="PostgreSQL database (emptied first; default: own server)")
    ap.add_argument("--e2e-frames", type=int, default=200_000, help="frames of the flood")
    ap.add_argument("--e2e-runs", type=int, default=3, help="end-to-end comparisons")
    ap.add_argument("--only", choices=("e2e", "engines"), help="one of the two parts")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-sink-"))
    if args.only != "engines":
        compare_end_to_end(args.e2e_frames, args.e2e_runs, tmp)
    if args.only == "e2e":
        return 0
    pg = BenchPostgres(args.pg_url, tmp)
    try:
        print(f"{args.batches} batches per run, {os.cpu_count()} CPUs\n")
        print("| batches of | engine | frames/s | vs SQLite | sink CPU s | server CPU s |")
        print("|---|---|---:|---:|---:|---:|")
        for name, shape in SHAPES.items():
            db = tmp / f"{shape[0]}.db"
            sqlite_fps, sqlite_cpu, _ = run(SqliteSink(db), shape, args.batches)
            pg_fps, pg_cpu, pg_server = run(PostgresSink(pg.fresh()), shape, args.batches)
            total = shape[0] * shape[1]
            label = f"{total:,} frames ({name})"
            print(f"| {label} | SQLite | {sqlite_fps:,.0f} | 1.00x | {sqlite_cpu:.2f} | - |")
            print(
                f"| {label} | PostgreSQL | {pg_fps:,.0f} | {pg_fps / sqlite_fps:.2f}x | "
                f"{pg_cpu:.2f} | {pg_server or 0:.2f} |"
            )
    finally:
        pg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
