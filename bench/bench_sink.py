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

Usage::

    python bench/bench_sink.py [--batches 60] [--pg-url postgresql://USER@HOST/DB]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_pg import BenchPostgres  # noqa: E402

from acp_proxy.recorder.ipc import Control, Whole  # noqa: E402
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--batches", type=int, default=60, help="batches per shape and engine")
    ap.add_argument("--pg-url", help="PostgreSQL database (emptied first; default: own server)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-sink-"))
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
