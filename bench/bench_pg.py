"""The PostgreSQL database of the benchmarks that record into one (shared by them).

``--pg-url`` if given, else a private server started from ``tests/pg_server.py`` on a free
port and a directory of its own (Debian's ``postgresql``), stopped at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


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

    def fresh(self) -> str:
        """Empty the recording tables (every run counts only its own frames); the URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as pg:
            if pg.execute("SELECT to_regclass('frames')").fetchone() != (None,):
                pg.execute("TRUNCATE frames, stderr_lines, events, connections")
        return self.url

    def close(self) -> None:
        if self.server is not None:
            self.server.stop("immediate")
