"""Idle read-only PostgreSQL connections kept for a long-running reader (the inspector).

Connecting costs a TCP and password handshake, too much for every request and every live
poll of the inspector; :class:`ReadPool` keeps a few connections per URL open instead.
"""

from __future__ import annotations

import contextlib
import threading

from acp_proxy.store.engine import RecordingUrl, database_errors, open_database
from acp_proxy.store.pg import PgDatabase


class ReadPool:
    """Idle read-only PostgreSQL connections, per URL, reused across requests and polls.

    A connection goes back only when it is healthy and idle (no transaction left open, its
    stream cursors closed); one the server dropped is closed, and the next request connects
    afresh, so a restarted database is read again as soon as it is back.
    """

    MAX_IDLE = 4

    def __init__(self) -> None:
        self._idle: dict[str, list[PgDatabase]] = {}
        self._lock = threading.Lock()

    def take(self, where: RecordingUrl) -> PgDatabase:
        """An open connection to ``where``: an idle one that still answers, else a new one."""
        while True:
            with self._lock:
                idle = self._idle.get(where.url)
                db = idle.pop() if idle else None
            if db is None:
                break
            try:  # one the server dropped while idle (a restart) fails here, not in a request
                db.execute("SELECT 1")
                return db
            except database_errors():
                with contextlib.suppress(*database_errors()):
                    db.close()
        fresh = open_database(where, timeout=10.0)
        assert isinstance(fresh, PgDatabase)
        return fresh

    def give_back(self, where: RecordingUrl, db: PgDatabase, healthy: bool) -> None:
        """Return ``db`` after a request: kept if ``healthy`` and idle, else closed."""
        if healthy and not db.closed:
            try:
                from psycopg.pq import TransactionStatus

                healthy = db.conn.info.transaction_status == TransactionStatus.IDLE
                if healthy:
                    db.execute("CLOSE ALL")  # abandoned stream cursors
            except database_errors():
                healthy = False
        if healthy and not db.closed:
            with self._lock:
                idle = self._idle.setdefault(where.url, [])
                if len(idle) < self.MAX_IDLE:
                    idle.append(db)
                    return
        with contextlib.suppress(*database_errors()):
            db.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            pools, self._idle = self._idle, {}
        for idle in pools.values():
            for db in idle:
                with contextlib.suppress(*database_errors()):
                    db.close()
