"""Retention: whole connections that ended before a cut, deleted with everything of theirs.

One rule on both engines (and in docs/fleet.md's SQL): a connection is prunable when its
end, ``COALESCE(ended_at, last_seen_at, started_at)``, is before the cut. A connection whose
row was never closed (a killed proxy) ends at its last heartbeat, as every view says
(:mod:`~acp_proxy.store.liveness`); one still recording refreshes its heartbeat every
:data:`~acp_proxy.store.liveness.HEARTBEAT_SECONDS`, and the cut is at least
:data:`MIN_AGE_SECONDS` ago (far more than
:data:`~acp_proxy.store.liveness.STALE_SECONDS`), so it is never prunable.

:func:`prune` deletes the connections' frames, stderr lines, events, search documents
(``search_docs``, whose FTS5 table SQLite's triggers keep in step) and rows, each connection
with all of its rows in one transaction; on PostgreSQL a daily partition whose every row is
prunable is dropped whole instead (:mod:`~acp_proxy.store.pg_partitions`), and afterwards
the rows left in the default partition are moved into partitions of their days.
``dry_run`` counts the same and changes nothing.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acp_proxy.store.engine import engine_of, one_row, table_columns

if TYPE_CHECKING:
    from acp_proxy.store.engine import Database

MIN_AGE_SECONDS = 60
"""The shortest ``--older-than``: a minute (a live heartbeat is seconds old)."""

_UNITS = {"d": 86400, "h": 3600, "m": 60}
_AGE = re.compile(r"(\d+)([dhm])")

PRUNABLE = "COALESCE(ended_at, last_seen_at, started_at) < ?"
"""The rule, on ``connections``: it ended (or its heartbeat stopped) before the cut."""

DOOMED = "acp_prune_doomed"

DERIVED_TABLES = ("connection_aggregates",)
"""Per-connection rows derived from the frames (``ls``/``stats`` totals), where a store has them."""
"""The temporary table of the connection ids being pruned."""


def parse_age(text: str) -> int:
    """``30d``, ``12h``, ``90m`` in seconds; a ValueError says what is wrong."""
    match = _AGE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration: a number and d, h or m (30d, 12h, 90m)")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds < MIN_AGE_SECONDS:
        raise ValueError(f"{text!r} is too short: at least 1m")
    return seconds


@dataclass
class Pruned:
    """What a prune removed (or, dry run, would remove)."""

    connections: int = 0
    frames: int = 0
    bytes: int = 0
    """The frames' bytes (their ``size``)."""
    stderr_lines: int = 0
    events: int = 0
    search_docs: int = 0
    partitions: list[str] = field(default_factory=list)
    """The partitions dropped whole (PostgreSQL)."""


def prune(db: Database, cut: float, *, host: str | None = None, dry_run: bool = False) -> Pruned:
    """Delete the connections (of ``host``, else all) that ended before ``cut``, with all
    their rows; ``dry_run``: only count them.

    Each connection goes with all its rows in one transaction. On PostgreSQL that is one
    transaction for all (its writers never wait on row deletes); SQLite has one writer at a
    time, so there the deletes go in slices of about :data:`SLICE_FRAMES` frames, each its
    own short transaction, and a proxy recording meanwhile waits far less than its lock
    retry window (30 s) however much is pruned.
    """
    engine = engine_of(db)
    has_search = bool(table_columns(db, "search_docs"))
    derived = [t for t in DERIVED_TABLES if table_columns(db, t)]
    where = PRUNABLE
    args: list[object] = [cut]
    if host is not None:
        where = f"{where} AND host = ?"
        args.append(host)
    slices: list[list[int]] = []
    with engine.write_transaction(db):
        db.execute(f"CREATE TEMP TABLE {DOOMED} (id BIGINT PRIMARY KEY)")
        try:
            db.execute(f"INSERT INTO {DOOMED} (id) SELECT id FROM connections WHERE {where}", args)
            done = _count(db, has_search)
            if done.connections:
                done.partitions = engine.prunable_partitions(db, DOOMED, cut)
            if not dry_run and done.connections:
                if engine.ids_in_commit_order:  # one writer at a time: slices
                    slices = _slices(db)
                else:
                    engine.drop_partitions(db, done.partitions)  # first: fewer rows to delete
                    _delete(db, f"SELECT id FROM {DOOMED}", [], has_search, derived)
        finally:
            db.execute(f"DROP TABLE {DOOMED}")
    for ids in slices:
        time.sleep(SLICE_PAUSE_SECONDS)  # a waiting writer's turn
        with engine.write_transaction(db):
            _delete(db, ", ".join("?" for _ in ids), ids, has_search, derived)
    if not dry_run:
        engine.tidy_partitions(db)  # what is left in the default partition, by day
    return done


SLICE_FRAMES = 50_000
"""About how many frames one slice of a SQLite prune deletes (a connection is never split)."""

SLICE_CONNECTIONS = 500
"""The most connections in one slice (parameters of one statement)."""

SLICE_PAUSE_SECONDS = 0.02
"""The pause before each slice, for a writer waiting on the lock to take it."""


def _slices(db: Database) -> list[list[int]]:
    """The doomed connections in slices of about :data:`SLICE_FRAMES` frames each."""
    sizes = dict(
        db.execute(
            f"SELECT connection_id, count(*) FROM frames WHERE connection_id IN "
            f"(SELECT id FROM {DOOMED}) GROUP BY connection_id"
        ).fetchall()
    )
    slices: list[list[int]] = [[]]
    held = 0
    for (cid,) in db.execute(f"SELECT id FROM {DOOMED} ORDER BY id").fetchall():
        frames = int(sizes.get(cid, 0))
        if slices[-1] and (held + frames > SLICE_FRAMES or len(slices[-1]) >= SLICE_CONNECTIONS):
            slices.append([])
            held = 0
        slices[-1].append(int(cid))
        held += frames
    return [s for s in slices if s]


def _count(db: Database, has_search: bool) -> Pruned:
    ids = f"connection_id IN (SELECT id FROM {DOOMED})"
    (connections,) = one_row(db, f"SELECT count(*) FROM {DOOMED}")
    frames, nbytes = one_row(db, f"SELECT count(*), COALESCE(SUM(size), 0) FROM frames WHERE {ids}")
    (lines,) = one_row(db, f"SELECT count(*) FROM stderr_lines WHERE {ids}")
    (events,) = one_row(db, f"SELECT count(*) FROM events WHERE {ids}")
    docs = one_row(db, f"SELECT count(*) FROM search_docs WHERE {ids}")[0] if has_search else 0
    return Pruned(int(connections), int(frames), int(nbytes), int(lines), int(events), int(docs))


def _delete(db: Database, ids: str, args: list[int], has_search: bool, derived: list[str]) -> None:
    """Delete the connections ``ids`` (a subquery or ``?`` marks of ``args``) and their rows."""
    search = ["search_docs"] if has_search else []
    for table in ("frames", "stderr_lines", "events", *search, *derived):
        db.execute(f"DELETE FROM {table} WHERE connection_id IN ({ids})", args)
    db.execute(f"DELETE FROM connections WHERE id IN ({ids})", args)
