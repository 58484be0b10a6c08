"""Benchmark: ``acp-proxy prune`` on a SQLite file and on PostgreSQL, rows deleted vs dropped.

Each case is a fresh store of ``--frames`` frames (default 1M, 200 bytes each) in 500
connections that ended 40 days ago, beside one connection still recording (1000 frames);
``prune --older-than 30d`` (timed in process: open, prune, close) removes the 500. Cases:

- ``sqlite``: a SQLite file (rows deleted: the baseline of the ratios);
- ``pg rows``: PostgreSQL, the live connection's frames in the same day's partition as the old
  ones, so that partition cannot be dropped and its rows are deleted;
- ``pg drop``: PostgreSQL, the live connection's frames today: the old day's partitions are
  dropped whole.

Also the conversion of a store of the layout before partitions holding ``--frames`` frames
(the migration the first writable open runs), timed in process, and what partitions cost the
recorder: a binary ``COPY`` of a quarter of ``--frames`` frames (as the sink writes them) into
either layout, alternated, best of two each. PostgreSQL is a private
server (as the tests start one) unless ``--pg-url`` names a database to empty and use.

Usage::

    python bench/bench_prune.py [--frames 1000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_pg import BenchPostgres

from acp_proxy.commands.prune import summary
from acp_proxy.store.engine import open_database
from acp_proxy.store.pg import PG_MIGRATIONS, connect_pg
from acp_proxy.store.pg_partitions import DAY, ensure_partitions_pg
from acp_proxy.store.retention import prune
from acp_proxy.store.schema import connect

CONNECTIONS = 500
LIVE_FRAMES = 1000
OLD = time.time() - 40 * DAY


def _sqlite_store(path: Path, frames: int) -> None:
    db = connect(path, create=True)
    per = frames // CONNECTIONS
    db.execute("BEGIN")
    db.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO connections (id, started_at, ended_at, transport) "
        "SELECT i, ?, ?, 'stdio' FROM n",
        (CONNECTIONS, OLD - 60, OLD),
    )
    db.execute(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
        "SELECT i / ? + 1, i % ? + 1, ?, i, 'c2a', 200, randomblob(200) FROM n",
        (per * CONNECTIONS - 1, per, per, OLD - 30),
    )
    _live(db, time.time())
    db.execute("COMMIT")
    db.close()


def _live(db: Any, ts: float) -> None:
    execute = db.execute
    (cid,) = execute(
        "INSERT INTO connections (started_at, last_seen_at, transport) "
        "VALUES (?, ?, 'stdio') RETURNING id",
        (ts, time.time() + 3600),  # a heartbeat that stays fresh for the whole run
    ).fetchone()
    for seq in range(1, LIVE_FRAMES + 1):
        execute(
            "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
            "VALUES (?, ?, ?, 0, 'c2a', 3, ?)",
            (cid, seq, ts, b"{}\n"),
        )


def _pg_fill(url: str, frames: int, live_ts: float | None) -> None:
    db = connect_pg(url, create=True)
    per = frames // CONNECTIONS
    db.execute(
        "INSERT INTO connections (id, started_at, ended_at, transport) "
        "SELECT i, ?, ?, 'stdio' FROM generate_series(1, ?) AS i",
        (OLD - 60, OLD, CONNECTIONS),
    )
    db.execute(
        "SELECT setval(pg_get_serial_sequence('connections', 'id'), "
        "(SELECT max(id) FROM connections))"
    )
    db.execute(
        "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
        "VALUES (1, 0, ?, 0, 'c2a', 200, ?)",
        (OLD - 30, b"x" * 200),
    )
    ensure_partitions_pg(db)  # the old day's partition (the first row moved into it)
    db.execute(
        "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
        "SELECT i / ? + 1, i % ? + 1, ?, i, 'c2a', 200, "
        "convert_to(repeat(md5(i::text), 7) || '........', 'UTF8') "
        "FROM generate_series(0, ?) AS i",
        (per, per, OLD - 30, per * CONNECTIONS - 2),
    )
    if live_ts is not None:
        _live(db, live_ts)
    db.execute("VACUUM ANALYZE frames")
    db.close()


def _old_layout(url: str, frames: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("CREATE TABLE acp_proxy_schema (version INTEGER NOT NULL)")
        pg.execute("INSERT INTO acp_proxy_schema VALUES (%s)", (len(PG_MIGRATIONS),))
        for migration in PG_MIGRATIONS:
            pg.execute(migration)
        pg.execute(
            "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
            "SELECT i / 2000 + 1, i %% 2000 + 1, %s, i, 'c2a', 200, "
            "convert_to(repeat(md5(i::text), 7) || '........', 'UTF8') "
            "FROM generate_series(0, %s) AS i",
            (OLD, frames - 1),
        )
        pg.execute("VACUUM ANALYZE frames")


def _copy_into(url: str, frames: int, *, partitioned: bool) -> float:
    """Seconds to ``COPY`` frames in as the recorder's sink does, into either layout."""
    import psycopg

    if partitioned:
        connect_pg(url, create=True).close()
    else:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute("CREATE TABLE acp_proxy_schema (version INTEGER NOT NULL)")
            for migration in PG_MIGRATIONS:
                pg.execute(migration)
    raw = b'{"jsonrpc":"2.0","method":"session/update","params":{"x":"' + b"y" * 150 + b'"}}\n'
    now = time.time()
    rows = [(1, i, now, i, "a2c", len(raw), raw, "session/update") for i in range(frames)]
    with psycopg.connect(url, autocommit=True) as pg:
        started = time.perf_counter()
        with pg.transaction(), pg.cursor() as cur:
            sql = (
                "COPY frames (connection_id, seq, ts, mono_ns, direction, size, raw, method) "
                "FROM STDIN (FORMAT BINARY)"
            )
            with cur.copy(sql) as copy:
                copy.set_types(["int8", "int8", "float8", "int8", "text", "int8", "bytea", "text"])
                for row in rows:
                    copy.write_row(row)
        return time.perf_counter() - started


def _prune(store: str) -> tuple[float, str]:
    """Prune, timed in process (open, prune, close: no interpreter start-up counted)."""
    cut = time.time() - 30 * DAY
    started = time.perf_counter()
    db = open_database(store, writable=True)
    try:
        done = prune(db, cut)
    finally:
        db.close()
    took = time.perf_counter() - started
    return took, "\n  ".join(summary(done, cut, dry_run=False, host=None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--pg-url", help="a database to empty and use (default: start one)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-prune-"))
    base.chmod(0o755)
    pg = BenchPostgres(args.pg_url, base)
    results: dict[str, float] = {}
    try:
        path = base / "fleet.db"
        _sqlite_store(path, args.frames)
        size = path.stat().st_size
        results["sqlite"], out = _prune(str(path))
        print(f"sqlite   {results['sqlite']:7.2f}s  ({size / 1e6:.0f} MB file)\n  {out}")
        for name, live_ts in (("pg rows", OLD), ("pg drop", time.time())):
            url = pg.server.database() if pg.server is not None else pg.fresh()
            _pg_fill(url, args.frames, live_ts)
            results[name], out = _prune(url)
            print(f"{name}  {results[name]:7.2f}s\n  {out}")
        url = pg.server.database() if pg.server is not None else pg.fresh()
        _old_layout(url, args.frames)
        started = time.perf_counter()
        connect_pg(url, create=False).close()  # the writable open: migrated
        results["convert"] = time.perf_counter() - started
        print(f"convert  {results['convert']:7.2f}s  (a store of {args.frames} frames)")
        for name in ("copy plain", "copy partitioned", "copy plain", "copy partitioned"):
            url = pg.server.database() if pg.server is not None else pg.fresh()
            took = _copy_into(url, args.frames // 4, partitioned=name.endswith("partitioned"))
            results[name] = min(results.get(name, took), took)
        print(
            f"recorder COPY of {args.frames // 4} frames: unpartitioned "
            f"{results['copy plain']:.2f}s, partitioned {results['copy partitioned']:.2f}s "
            "(best of 2)"
        )
    finally:
        pg.close()
        shutil.rmtree(base, ignore_errors=True)
    base_time = results["sqlite"]
    print(
        f"ratios to sqlite: pg rows {results['pg rows'] / base_time:.2f}, "
        f"pg drop {results['pg drop'] / base_time:.3f}; "
        f"pg drop / pg rows {results['pg drop'] / results['pg rows']:.3f}"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
