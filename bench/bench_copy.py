"""Benchmark: ``acp-proxy copy`` between a SQLite file and a local PostgreSQL, and back.

The recording is bench_export.py's (default 1M frames of realistic v2 traffic, one
connection). In one run, through the real CLI, it measures wall time, frames/s, MB/s of raw
frames and each command's peak RSS (memory must not grow with the recording) for:

- ``copy FILE URL`` (into an empty database: the schema is created, frames go by COPY),
- ``copy URL FILE`` (the result streams out of PostgreSQL),
- ``copy FILE FILE``, and ``export --no-redact FILE | import - FILE`` for comparison.

PostgreSQL is a private server started for the run (``initdb``/``pg_ctl``, as the tests
do; Debian's ``postgresql`` package), unless ``--url`` names an empty database.

Usage::

    python bench/bench_copy.py [--frames 1000000] [--url postgresql://...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_export import generate, run

from acp_proxy.store.pg import safe_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--url", help="an empty PostgreSQL database (default: start one)")
    parser.add_argument("--keep", type=Path, help="keep the files in this directory")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-copy-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        url = args.url
        if url is None:
            from tests.pg_server import PgServer

            server = PgServer(tmp / "pg")
            server.init()
            server.start()
            url = server.database()
        db = tmp / "bench.db"
        start = time.perf_counter()
        size = generate(db, args.frames)
        print(
            f"generated {args.frames:,} frames, {size / 1e6:.1f} MB of raw frames "
            f"in {time.perf_counter() - start:.1f} s; PostgreSQL at {safe_url(url)}"
        )
        n = args.frames
        run("copy file -> PG", "-", ["copy", "-q", str(db), url], n, size)
        run("copy PG -> file", "-", ["copy", "-q", url, str(tmp / "back.db")], n, size)
        run("copy file -> file", "-", ["copy", "-q", str(db), str(tmp / "copy.db")], n, size)
        plain = tmp / "plain.jsonl"
        run("export --no-redact", str(plain), ["export", str(db), "--no-redact"], n, size)
        run("import (file -> file)", "-", ["import", str(plain), str(tmp / "imp.db")], n, size)
    finally:
        if server is not None:
            server.stop("immediate")
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
