"""The PostgreSQL database of the benchmarks that record into one (shared by them).

``--pg-url`` if given, else a private server started from ``tests/pg_server.py`` on a free
port and a directory of its own (Debian's ``postgresql``), stopped at the end. With the
private server a benchmark can also read the server's CPU time (:class:`ServerCpu`) and
record into a second database whose schema lacks the secondary indexes
(:meth:`BenchPostgres.without_secondary_indexes`, a diagnostic of what they cost).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent

SECONDARY_INDEXES = ("frames_session", "frames_method_update")
"""The frames indexes beyond its two keys (``id``, and ``(connection_id, seq)``) that every
row of a flood of ``session/update`` notifications goes into (``frames_rpc_id`` holds only
requests and responses)."""

_BARE_DB = "bench_no_secondary_indexes"


class BenchPostgres:
    """A database for a benchmark: ``url``; :meth:`fresh` empties the recording tables."""

    def __init__(self, url: str | None, base: Path) -> None:
        self.server = None
        if url is None:
            sys.path.insert(0, str(HERE.parent))
            from tests.pg_server import PgServer

            self.server = PgServer(base / "pg")
            self.server.init()
            self.server.start()
            url = self.server.url()
        self.url = url

    def fresh(self, url: str | None = None) -> str:
        """Empty the recording tables (every run counts only its own frames); the URL."""
        import psycopg

        url = url or self.url
        with psycopg.connect(url, autocommit=True) as pg:
            if pg.execute("SELECT to_regclass('frames')").fetchone() != (None,):
                pg.execute("TRUNCATE frames, stderr_lines, events, connections")
        return url

    def without_secondary_indexes(self) -> str | None:
        """A second, empty database of the private server with acp-proxy's schema minus
        :data:`SECONDARY_INDEXES`; its URL (None with ``--pg-url``: never alter a database
        the benchmark was given)."""
        if self.server is None:
            return None
        import psycopg

        from acp_proxy.store.pg import connect_pg

        with psycopg.connect(self.url, autocommit=True) as pg:
            if pg.execute("SELECT 1 FROM pg_database WHERE datname = %s", [_BARE_DB]).fetchone():
                pg.execute(f"DROP DATABASE {_BARE_DB}")
            pg.execute(f"CREATE DATABASE {_BARE_DB}")
        url = self.server.url(_BARE_DB)
        connect_pg(url, create=True).close()  # acp-proxy's own migrations
        with psycopg.connect(url, autocommit=True) as pg:
            for name in SECONDARY_INDEXES:
                pg.execute(f"DROP INDEX {name}")
        return url

    def cpu(self) -> ServerCpu | None:
        """A sampler of the private server's CPU time (None with ``--pg-url``)."""
        if self.server is None:
            return None
        pid = int((self.server.data / "postmaster.pid").read_text().split()[0])
        return ServerCpu(pid)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop("immediate")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time ``pid`` has used so far (Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


class ServerCpu(threading.Thread):
    """CPU seconds the server's processes (postmaster and its children: backends, WAL
    writer, checkpointer...) used between :meth:`start` and :meth:`finish`.

    Sampled every 20 ms, so a backend that exits is counted as of its last sample (a
    connection's backend ends with its client)."""

    def __init__(self, postmaster: int) -> None:
        super().__init__(daemon=True)
        self.postmaster = postmaster
        self._halt = threading.Event()
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}

    def _sample(self) -> None:
        for pid in [self.postmaster, *_children(self.postmaster)]:
            used = cpu_seconds(pid)
            if used is not None:
                self._last[pid] = used

    def start(self) -> None:
        self._sample()
        self._start = dict(self._last)
        super().start()

    def run(self) -> None:
        while not self._halt.wait(0.02):
            self._sample()

    def finish(self) -> float:
        self._halt.set()
        self.join()
        self._sample()
        return sum(used - self._start.get(pid, 0.0) for pid, used in self._last.items())
