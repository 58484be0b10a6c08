"""Benchmark: recorded/s of a fleet-shaped load, into SQLite and into PostgreSQL, in one run.

``acp-proxy ws --record STORE --upstream ECHO`` serves ``--connections`` WebSocket
connections at once (the shape of a team's hosted agents), each sending ``--frames``
JSON-RPC frames that the echo server returns (so 2 x frames are recorded per connection).
The clock runs from the first frame sent until the proxy, told to stop once every echo
arrived, has exited with the recording complete. recorded/s = frames in the store / that
time. The same run with ``--record`` a SQLite file and a PostgreSQL URL (a private server
from ``tests/pg_server.py``, or ``--pg-url``), alternating ``--runs`` times; the table
gives each run and the medians, PostgreSQL's as a ratio of SQLite's.

Usage::

    python bench/bench_fleet.py [--connections 200] [--frames 500] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_pg import BenchPostgres  # noqa: E402
from bench_ws import background, throughput  # noqa: E402


def stored_frames(store: str) -> int:
    if store.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(store) as pg:
            return int(pg.execute("SELECT count(*) FROM frames").fetchone()[0])
    con = sqlite3.connect(store)
    try:
        return int(con.execute("SELECT count(*) FROM frames").fetchone()[0])
    finally:
        con.close()


def empty(store: str, pg: BenchPostgres) -> None:
    if store == pg.url:
        pg.fresh()
        return
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)


def run(
    exe: str, store: str, pg: BenchPostgres, echo: str, args: argparse.Namespace
) -> tuple[float, int, float]:
    """One measured run: (recorded/s, frames recorded, seconds)."""
    empty(store, pg)
    argv = [exe, "ws", "--listen", "127.0.0.1:0", "--heartbeat", "0", "--record", store]
    with background([*argv, "--upstream", echo], url_from_stderr=True) as url:
        start = time.perf_counter()
        asyncio.run(throughput(url, args.frames, args.size, args.connections))
    seconds = time.perf_counter() - start  # (the proxy has exited: told to, on leaving)
    recorded = stored_frames(store)
    return recorded / seconds, recorded, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--frames", type=int, default=500, help="frames sent per connection")
    ap.add_argument("--size", type=int, default=300, help="approximate frame size (bytes)")
    ap.add_argument("--runs", type=int, default=3, help="alternating runs per store")
    ap.add_argument("--pg-url", help="PostgreSQL database (emptied first; default: own server)")
    args = ap.parse_args()
    exe = shutil.which("acp-proxy")
    if exe is None:
        raise SystemExit("acp-proxy is not installed: pip install -e .")
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-fleet-"))
    pg = BenchPostgres(args.pg_url, tmp)
    stores = {"SQLite": str(tmp / "fleet.db"), "PostgreSQL": pg.url}
    rates: dict[str, list[float]] = {name: [] for name in stores}
    expected = 2 * args.connections * args.frames + 2  # and bench_ws's warm-up frame
    print(
        f"{args.connections} WebSocket connections x {args.frames} frames of ~{args.size} B "
        f"(echoed: {expected:,} frames to record), {args.runs} alternating runs, "
        f"{os.cpu_count()} CPUs\n"
    )
    print("| run | store | recorded | seconds | recorded/s |")
    print("|---:|---|---:|---:|---:|")
    try:
        with background([sys.executable, str(HERE / "bench_ws.py"), "--echo-server"], False) as e:
            for n in range(1, args.runs + 1):
                for name, store in stores.items():
                    fps, recorded, seconds = run(exe, store, pg, e, args)
                    rates[name].append(fps)
                    note = "" if recorded >= expected else f" (expected {expected:,})"
                    print(f"| {n} | {name} | {recorded:,}{note} | {seconds:.2f} | {fps:,.0f} |")
    finally:
        pg.close()
        shutil.rmtree(tmp, ignore_errors=True)
    sqlite, pg = statistics.median(rates["SQLite"]), statistics.median(rates["PostgreSQL"])
    print(
        f"\nmedian recorded/s: SQLite {sqlite:,.0f}, PostgreSQL {pg:,.0f} ({pg / sqlite:.2f}x); "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
