"""Writes to a recording outside the live recorder: re-derived index columns, prepared rows.

The recorder (:mod:`acp_proxy.recorder.handle`) owns writing live traffic. The few other
writes live here, each one function with its own transaction: ``reindex``'s updates
(:func:`update_index_columns`, :func:`update_connection_facts`) and inserting prepared
connections and frames (:func:`insert_connection`, :func:`insert_frames`, used by test
helpers and generators that build big recordings without running a proxy). Callers pass a
connection opened for writing: ``schema.connect(path, create=...)`` or, for PostgreSQL,
``pg.connect_pg(url, create=...)`` (the same SQL runs on both).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from acp_proxy.acp.exchanges import InitializeFacts
from acp_proxy.acp.index import INDEX_COLUMNS, ConnectionIndexer, IndexColumns
from acp_proxy.store.columns import CONNECTION_COLUMN_NAMES, JSON_CONNECTION_COLUMNS
from acp_proxy.store.engine import engine_of
from acp_proxy.store.pg import PgDatabase
from acp_proxy.wire.frame import Direction

_CONNECTION_WRITABLE = frozenset(CONNECTION_COLUMN_NAMES)


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


@dataclass(frozen=True, slots=True)
class Capture:
    """What :func:`insert_frames` makes a frame of: its bytes and, optionally, times and index
    columns.

    Not a :class:`~acp_proxy.wire.frame.Frame` (and not named one): it has no id, connection
    or sequence number yet (:func:`insert_frames` assigns them), and a time left out (None,
    not 0) is filled in from the sequence number.

    ``columns`` None: derived by :class:`ConnectionIndexer` when :func:`insert_frames` is
    asked to index, else left NULL (as an old recording before ``reindex``).
    """

    direction: Direction
    raw: bytes
    ts: float | None = None
    mono_ns: int | None = None
    columns: IndexColumns | None = None
    binary: bool = False


WritableDatabase = sqlite3.Connection | PgDatabase
"""A recording opened for writing: SQLite or PostgreSQL."""


@contextmanager
def write_transaction(db: WritableDatabase) -> Iterator[None]:
    """One transaction around the block, unless the caller already holds one (then theirs).

    Rolled back when the block raises (anything, ``KeyboardInterrupt`` included), committed
    when it ends. (On PostgreSQL inside a caller's transaction: a savepoint of it.)
    """
    with engine_of(db).write_transaction(db):
        yield


def insert_connection(db: WritableDatabase, **columns: Any) -> int:
    """Insert a connection row; JSON columns (``agent_command``...) take Python values.

    ``started_at`` and ``transport`` default to 0 and ``stdio``. Returns the row id.
    """
    unknown = set(columns) - _CONNECTION_WRITABLE
    if unknown:
        raise ValueError(f"not connection columns: {sorted(unknown)}")
    values = {"started_at": 0.0, "transport": "stdio", **columns}
    for name in JSON_CONNECTION_COLUMNS & set(values):
        if not isinstance(values[name], str) and values[name] is not None:
            values[name] = _json(values[name])
    names = list(values)
    row = db.execute(
        f"INSERT INTO connections ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}) "
        "RETURNING id",
        [values[n] for n in names],
    ).fetchone()
    assert row is not None
    if "id" in values:
        engine_of(db).after_explicit_id(db, "connections")
    return int(row[0])


def insert_frames(
    db: WritableDatabase,
    connection_id: int,
    frames: Iterable[Capture | tuple[Direction, bytes]],
    *,
    index: bool = False,
    first_seq: int = 1,
    start_ts: float = 0.0,
) -> int:
    """Append frames to a connection in one transaction; return how many.

    Sequence numbers count from ``first_seq``; a frame without times gets ``start_ts`` and
    ``mono_ns = seq * 1000``. ``index=True`` derives the index columns of frames that carry
    none, as the recorder does. Streams: ``frames`` may be a generator of any length.
    """
    indexer = ConnectionIndexer() if index else None
    count = 0

    def rows() -> Iterator[tuple[Any, ...]]:
        nonlocal count
        for seq, item in enumerate(frames, first_seq):
            f = item if isinstance(item, Capture) else Capture(item[0], item[1])
            cols = f.columns
            if cols is None and indexer is not None:
                cols = indexer.index(f.direction, f.raw)
            values: Sequence[str | None] = cols.values() if cols else (None,) * len(INDEX_COLUMNS)
            count += 1
            yield (
                connection_id,
                seq,
                start_ts if f.ts is None else f.ts,
                seq * 1000 if f.mono_ns is None else f.mono_ns,
                f.direction,
                f.raw,
                len(f.raw),
                int(f.binary),
                *values,
            )

    with write_transaction(db):
        db.executemany(
            'INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, raw, size, "binary", '
            f"{', '.join(INDEX_COLUMNS)}) VALUES ({', '.join('?' for _ in range(15))})",
            rows(),
        )
        if indexer is not None and indexer.facts.changed:
            update_connection_facts(db, connection_id, indexer.facts)
    return count


def update_index_columns(
    db: WritableDatabase,
    updates: Sequence[tuple[Any, ...]],
    patches: Sequence[tuple[str | None, str | None, int]],
) -> None:
    """One ``reindex`` batch in one transaction.

    ``updates``: (every :data:`INDEX_COLUMNS` value..., frame id); ``patches``: (method,
    session id, frame id) for a response recorded before its request, which learns its
    method (and session, if it had none) once the request is seen.
    """
    with write_transaction(db):
        if updates:
            db.executemany(
                f"UPDATE frames SET {', '.join(c + ' = ?' for c in INDEX_COLUMNS)} WHERE id = ?",
                updates,
            )
        if patches:
            db.executemany(
                "UPDATE frames SET method = ?, session_id = coalesce(session_id, ?) WHERE id = ?",
                patches,
            )


def update_connection_facts(
    db: WritableDatabase, connection_id: int, facts: InitializeFacts
) -> None:
    """Store the connection facts derived from ``initialize`` (version, client, agent)."""
    db.execute(
        "UPDATE connections SET protocol_version = ?, client_info = ?, agent_info = ? WHERE id = ?",
        [
            facts.protocol_version,
            _json(facts.client_info),
            _json(facts.agent_info),
            connection_id,
        ],
    )


def insert_stderr_lines(
    db: WritableDatabase, connection_id: int, lines: Iterable[tuple[int, float, int, bytes]]
) -> None:
    """Append an agent's stderr lines, (seq, ts, mono_ns, raw) each, to a connection."""
    with write_transaction(db):
        db.executemany(
            "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) "
            "VALUES (?, ?, ?, ?, ?)",
            ((connection_id, *line) for line in lines),
        )


def insert_event(
    db: WritableDatabase, connection_id: int | None, ts: float, kind: str, detail: Any
) -> None:
    """Add one recorder event (``detail`` a Python value, stored as JSON text)."""
    db.execute(
        "INSERT INTO events (connection_id, ts, kind, detail) VALUES (?, ?, ?, ?)",
        (connection_id, ts, kind, detail if isinstance(detail, str) else _json(detail)),
    )
