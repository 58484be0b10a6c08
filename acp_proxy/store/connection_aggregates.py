"""Stored per-connection aggregates: the SQL of the ``connection_aggregates`` table.

Derived data, like the search index: a row per ended connection, with a ``key`` that says
which state of the connection it was derived from (:mod:`acp_proxy.analysis.aggregates`
builds it and decides what the JSON ``data`` holds), its frame and byte totals, and the
rest as JSON text. The table is created on first write, in the recording itself (a SQLite
file or a PostgreSQL database); a recording that cannot be written (a read-only file or
role, a standby) simply has none, and every reader works without it. Dropping the table
loses nothing: it is derived again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_proxy.store.engine import (
    Database,
    database_errors,
    database_url,
    engine_for,
    one_row,
    table_columns,
)
from acp_proxy.store.schema import SCHEMA_VERSION, RecordingError

TABLE = "connection_aggregates"

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    "connection_id BIGINT PRIMARY KEY, key TEXT NOT NULL, frames BIGINT NOT NULL, "
    "bytes BIGINT NOT NULL, data TEXT)"
)

_CHUNK = 500
"""Connections per query (SQLite takes at most 32,766 parameters)."""


@dataclass(frozen=True, slots=True)
class StoredAggregate:
    """One connection's stored row: what it was derived from, its totals, the rest as JSON."""

    connection_id: int
    key: str
    frames: int
    bytes: int
    data: str | None


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def read_aggregates(db: Database, ids: Sequence[int]) -> dict[int, StoredAggregate]:
    """The stored rows of those connections (none when the table does not exist)."""
    if not ids or not table_columns(db, TABLE):
        return {}
    out: dict[int, StoredAggregate] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" for _ in chunk)
        for cid, key, frames, size, data in db.execute(
            f"SELECT connection_id, key, frames, bytes, data FROM {TABLE} "
            f"WHERE connection_id IN ({marks})",
            list(chunk),
        ).fetchall():
            out[int(cid)] = StoredAggregate(int(cid), str(key), int(frames), int(size), data)
    return out


def last_seqs(db: Database, ids: Sequence[int]) -> dict[int, int]:
    """Each connection's last sequence number (0 without frames): one index probe each."""
    out: dict[int, int] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" for _ in chunk)
        for cid, seq in db.execute(
            "SELECT c.id, (SELECT max(seq) FROM frames f WHERE f.connection_id = c.id) "
            f"FROM connections c WHERE c.id IN ({marks})",
            list(chunk),
        ).fetchall():
            out[int(cid)] = int(seq or 0)
    return out


def frame_totals(db: Database, connection_id: int) -> tuple[int, int]:
    """(frames, bytes) of one connection."""
    row = one_row(
        db,
        "SELECT count(*), coalesce(sum(size), 0) FROM frames WHERE connection_id = ?",
        (connection_id,),
    )
    return int(row[0]), int(row[1])  # (numeric sums on PostgreSQL)


def _writable_file(path: Path) -> bool:
    parent = path.parent if str(path.parent) else Path(".")
    return os.access(path, os.W_OK) and os.access(parent, os.W_OK)


def _open_current_file(path: Path) -> sqlite3.Connection | None:
    """The file opened for writing, if it may be written and has the current schema (a
    reader never migrates a recording, so an older one keeps no aggregates)."""
    if not _writable_file(path):
        return None
    try:
        conn = sqlite3.connect(path, timeout=1.0, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA busy_timeout = 1000")  # a recorder commits far more often
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION:
            return conn
    except sqlite3.Error:
        pass
    conn.close()
    return None


def _open_current_pg(location: str | Path) -> Any:
    """A connection to the database that may write, if its schema is the current one (a
    reader never migrates or converts a store), else None."""
    from acp_proxy.store.pg import connect_pg, schema_version_pg
    from acp_proxy.store.pg_partitions import is_partitioned_pg

    url = database_url(location)
    assert url is not None
    try:
        db = connect_pg(url, create=False, readonly=True, timeout=5.0)
    except RecordingError:
        return None
    try:
        if schema_version_pg(db) == SCHEMA_VERSION and is_partitioned_pg(db):
            db.execute("SET default_transaction_read_only = off")
            return db
    except database_errors():
        pass
    db.close()
    return None


def writable_without_migrating(location: str | Path) -> bool:
    """Whether a reader may write derived data into this PostgreSQL store: it can be
    written and needs no migration (a reader never migrates or converts a store)."""
    db = _open_current_pg(location)
    if db is None:
        return False
    db.close()
    return True


def write_aggregates(location: str | Path, rows: Sequence[StoredAggregate]) -> bool:
    """Store (or replace) those rows, creating the table if need be; False when the
    recording cannot be written (nothing is stored then, which is not an error)."""
    if not rows:
        return True
    db: Any
    if database_url(location) is None:
        db = _open_current_file(Path(location))
        if db is None:
            return False
    else:
        db = _open_current_pg(location)
        if db is None:
            return False
    try:
        with engine_for(location).write_transaction(db):
            db.execute(_CREATE)
            db.executemany(
                f"INSERT INTO {TABLE} (connection_id, key, frames, bytes, data) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (connection_id) DO UPDATE SET "
                "key = excluded.key, frames = excluded.frames, bytes = excluded.bytes, "
                "data = excluded.data",
                [(r.connection_id, r.key, r.frames, r.bytes, r.data) for r in rows],
            )
        return True
    except database_errors():
        return False  # read-only role, standby, locked for too long: derive again next time
    finally:
        db.close()


def forget_aggregates(db: Any, ids: Sequence[int]) -> None:
    """Drop the stored rows of those connections (their frames' derived columns changed),
    on ``db`` opened for writing, inside the caller's transaction if any."""
    if not ids or not table_columns(db, TABLE):
        return
    for chunk in _chunks(ids):
        marks = ",".join("?" for _ in chunk)
        db.execute(f"DELETE FROM {TABLE} WHERE connection_id IN ({marks})", list(chunk))
