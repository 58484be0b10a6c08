"""Benchmark: the inspector's first search on a PostgreSQL store (default 200k frames).

Before: the inspector built its own index of the whole store in memory (SQLite FTS5 fed
from the database) at its first search, every time it started. Now it searches the
database's own full-text index (:class:`acp_proxy.store.search.PgSearchIndex`, what
``acp-proxy search`` keeps), brought up to date incrementally. Each case runs in a fresh
process (the inspector's first search after it starts): wall time and peak RSS, with the
load average, in the same run:

- memory: the old in-memory index of the whole store, then the search;
- database, built: the first search ever (the database's index is built, once);
- database, current: a later start, nothing new to index;
- database, +N: after N frames recorded since (only those are indexed).

Usage::

    python bench/bench_pg_search.py [--frames 200000] [--new 2000] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_pg import BenchPostgres  # noqa: E402
from tests.acp.generate import frames, frames_per_turn  # noqa: E402

CASE = """
import sys, time
from acp_proxy.store.pg import connect_pg
from acp_proxy.store.search import SearchIndex, open_pg_search_index
import sqlite_utils
from acp_proxy.store.engine import memory_database
url, how, text = sys.argv[1:]
start = time.perf_counter()
if how == "memory":
    source = connect_pg(url, create=False, readonly=True)
    index = SearchIndex(source, sqlite_utils.Database(memory_database(autocommit=False)),
                        in_file=False)
    index.update()
else:
    index = open_pg_search_index(url)
    index.update()
hits = index.search(text, limit=200)
seconds = time.perf_counter() - start
index.close()
# (VmHWM, not ru_maxrss: Linux keeps the parent's ru_maxrss across exec)
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(seconds, len(hits), hwm)
"""


def case(url: str, how: str, text: str) -> tuple[float, int, float]:
    """(seconds, hits, peak RSS in MB) of one first search in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CASE, url, how, text],
        capture_output=True,
        check=True,
        env=env,
    )
    seconds, hits, rss = done.stdout.split()
    return float(seconds), int(hits), int(rss) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--new", type=int, default=2000, help="Frames recorded since.")
    parser.add_argument("--pg-url", help="An existing database to use (its tables emptied).")
    opts = parser.parse_args()
    from acp_proxy.store.pg import connect_pg
    from tests.helpers import insert_frames

    with tempfile.TemporaryDirectory(prefix="bench-pg-search-") as tmp:
        pg = BenchPostgres(opts.pg_url, Path(tmp))
        try:
            url = pg.fresh()
            db = connect_pg(url, create=True)
            db.execute("DROP TABLE IF EXISTS search_docs, search_state CASCADE")
            db.close()
            turns = max(1, opts.frames // frames_per_turn(93))
            start = time.perf_counter()
            insert_frames(url, frames(turns, 93), connection={"ended_at": time.time()}, index=True)
            print(f"generated {turns * frames_per_turn(93)} frames in PostgreSQL in "
                  f"{time.perf_counter() - start:.0f}s")  # fmt: skip
            print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            text = f"question {turns - 1}"
            results = [("memory (before)", *case(url, "memory", text))]
            results.append(("database, built", *case(url, "database", text)))
            results.append(("database, current", *case(url, "database", text)))
            new_turns = max(1, opts.new // frames_per_turn(93))
            insert_frames(url, frames(new_turns, 93), index=True)
            results.append((f"database, +{opts.new}", *case(url, "database", text)))
            for name, seconds, hits, rss in results:
                print(f"{name:<20} {seconds:7.2f}s  {hits:3d} hits  peak RSS {rss:6.0f} MB")
            before = results[0][1]
            print(
                f"first search after a start: {before:.2f}s in memory, "
                f"{results[2][1]:.2f}s on the database's index ({before / results[2][1]:.0f}x), "
                f"{results[3][1]:.2f}s with {opts.new} new frames"
            )
            print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            pg.close()


if __name__ == "__main__":
    main()
