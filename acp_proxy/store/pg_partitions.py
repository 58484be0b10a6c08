"""PostgreSQL's frames and stderr lines in daily partitions: the layout, kept and dropped.

``frames`` and ``stderr_lines`` are declaratively range-partitioned on ``ts`` (Unix seconds),
one partition per UTC day named ``frames_YYYYMMDD`` (``stderr_lines_YYYYMMDD``), so that
``acp-proxy prune`` drops a whole day of rows (a file unlinked) instead of deleting them row
by row. A partitioned table's unique constraints must include its partition key: the primary
key is ``(id, ts)`` and the per-connection one ``(connection_id, seq, ts)`` (ids still come
from one identity sequence, and a frame written twice, as a retried batch would, has the same
``ts`` and is still refused). Every index is the unpartitioned table's, per partition, so a
reader's plan is the same index scan under a ``Merge Append``.

- :func:`convert_pg` turns a store of the unpartitioned layout into this one, inside the
  schema migration's transaction and lock (:func:`~acp_proxy.store.pg.migrate_pg`): the old
  table is not rewritten but attached as the partition ``frames_legacy`` holding everything
  up to the end of the current day (one scan to check its bounds and the build of the two new
  unique indexes; its old ones are dropped); an empty one is just replaced.
- :func:`ensure_partitions_pg` creates the partitions of today and :data:`DAYS_AHEAD` days
  after it, as the recorder's writer does when it connects and once a day after. A
  ``DEFAULT`` partition takes any row outside them (a clock far off, an import of old
  frames), so no insert ever fails for lack of a partition; the same call moves the rows the
  default holds into partitions of their own days, so they too can be dropped by day (a
  writer only while they are few, :data:`WRITER_MOVE_LIMIT`; ``prune`` all of them).
- :func:`droppable_partitions_pg` names the partitions whose every row belongs to a
  connection being pruned (or that are empty and end before the cut).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class PgDatabase(Protocol):
    """What this module needs of :class:`~acp_proxy.store.pg.PgDatabase` (which imports
    this module: no import back)."""

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any: ...

    def transaction(self) -> Any: ...


DAY = 86400
"""Seconds in one partition."""

DAYS_AHEAD = 2
"""Partitions created beyond today's, so a writer never waits on DDL at midnight."""

PARTITIONED = ("frames", "stderr_lines")
"""The tables kept in daily partitions."""

WRITER_MOVE_LIMIT = 10_000
"""The most default-partition rows a writer moves into their days' partitions (milliseconds)."""

PARTITION_LOCK = 0x61637070  # pg_advisory_xact_lock key: "acpp"

LOCK_TIMEOUT = "3s"
"""How long creating a partition waits for a lock (a long reader of the default partition)
before giving up until next time: the rows meanwhile go to the default partition."""

_INDEXES = {
    "frames": [
        ("frames_session", "(session_id, connection_id, seq)"),
        ("frames_rpc_id", "(connection_id, rpc_id) WHERE rpc_id IS NOT NULL"),
        ("frames_method_update", "(method, update_kind)"),
    ],
    "stderr_lines": [],
}
"""The secondary indexes of the unpartitioned tables (schema migrations 1 and 2)."""


def day_start(ts: float) -> int:
    """The start (Unix seconds) of the UTC day holding ``ts``."""
    return int(ts // DAY) * DAY


def partition_name(table: str, start: int) -> str:
    """``frames_20261102``: the partition of ``table`` for the UTC day starting at ``start``."""
    return f"{table}_{time.strftime('%Y%m%d', time.gmtime(start))}"


def is_partitioned_pg(db: PgDatabase) -> bool:
    """Whether the store has the partitioned layout (``frames`` is a partitioned table)."""
    row = db.execute(
        "SELECT count(*) FROM pg_class WHERE relkind = 'p' AND oid IN "
        "(to_regclass('frames'), to_regclass('stderr_lines'))"
    ).fetchone()
    return bool(row and row[0] == len(PARTITIONED))


def convert_pg(db: PgDatabase, now: float | None = None) -> None:
    """Partition ``frames`` and ``stderr_lines`` (in the caller's transaction and lock)."""
    now = time.time() if now is None else now
    for table in PARTITIONED:
        found = db.execute(
            "SELECT relkind FROM pg_class WHERE oid = to_regclass(?)", (table,)
        ).fetchone()
        if found is None or found[0] == "p":
            continue
        _convert_table(db, table, now)
    ensure_partitions_pg(db, now, locked=True)


def _convert_table(db: PgDatabase, table: str, now: float) -> None:
    legacy = f"{table}_legacy"
    (has_rows,) = db.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone() or (False,)
    (top,) = db.execute(f"SELECT max(ts) FROM {table}").fetchone() or (None,)
    # the ids handed out so far (deleted frames' too): new ones continue after them
    (last,) = db.execute(f"SELECT COALESCE((SELECT max(id) FROM {table}), 0)").fetchone() or (0,)
    (issued,) = db.execute(
        f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {table}_id_seq"
    ).fetchone() or (0,)
    db.execute(f"ALTER TABLE {table} RENAME TO {legacy}")
    db.execute(f"ALTER TABLE {legacy} ALTER COLUMN id DROP IDENTITY")
    db.execute(f"ALTER TABLE {legacy} DROP CONSTRAINT {table}_pkey")
    db.execute(f"ALTER TABLE {legacy} DROP CONSTRAINT {table}_connection_id_seq_key")
    for name, _ in _INDEXES[table]:
        db.execute(f"ALTER INDEX IF EXISTS {name} RENAME TO {legacy}_{name.split('_', 1)[1]}")
    db.execute(
        f"CREATE TABLE {table} (LIKE {legacy} INCLUDING DEFAULTS, PRIMARY KEY (id, ts), "
        "UNIQUE (connection_id, seq, ts)) PARTITION BY RANGE (ts)"
    )
    db.execute(f"ALTER TABLE {table} ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY")
    for name, columns in _INDEXES[table]:
        db.execute(f"CREATE INDEX {name} ON {table} {columns}")
    if has_rows:
        # The old rows stay where they are: their table becomes the partition of all time
        # up to the end of today (or of its last row's day); the attach adopts its indexes.
        upper = day_start(max(now, float(top or now))) + DAY
        db.execute(
            f"ALTER TABLE {table} ATTACH PARTITION {legacy} FOR VALUES FROM (MINVALUE) TO ({upper})"
        )
    else:
        db.execute(f"DROP TABLE {legacy}")
    if max(last, issued):
        db.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), ?)", (max(last, issued),)
        )
    db.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")


@dataclass(frozen=True)
class Partition:
    """One partition of a partitioned table, and the time range it holds."""

    name: str
    lower: float | None
    """Its first second (None: from the beginning of time, or the default partition)."""
    upper: float | None
    """The second after its last (None: without end, or the default partition)."""
    default: bool


_BOUND = re.compile(r"FROM \((.+?)\) TO \((.+?)\)")


def _bound(text: str) -> float | None:
    text = text.strip("'")
    return None if text in ("MINVALUE", "MAXVALUE") else float(text)


def partitions_pg(db: PgDatabase, table: str) -> list[Partition]:
    """The partitions of ``table`` (none when it is not partitioned), oldest first."""
    rows = db.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(?)",
        (table,),
    ).fetchall()
    out = []
    for name, bound in rows:
        match = _BOUND.search(bound or "")
        if match is None:
            out.append(Partition(str(name), None, None, default=True))
        else:
            lower, upper = _bound(match.group(1)), _bound(match.group(2))
            out.append(Partition(str(name), lower, upper, default=False))
    out.sort(key=lambda p: (p.default, p.lower if p.lower is not None else float("-inf")))
    return out


def ensure_partitions_pg(
    db: PgDatabase,
    now: float | None = None,
    *,
    locked: bool = False,
    move_limit: int | None = None,
) -> float:
    """Create the partitions of today and :data:`DAYS_AHEAD` days after it where missing, and
    move what the default partition holds into partitions of its days; return when it should
    run again (the start of tomorrow). ``locked``: inside the caller's transaction (the
    migration's), else in transactions of its own, none waiting long on a lock.
    ``move_limit``: leave the default partition as it is when it holds more rows than this
    (a writer must not stall on a big import's rows: ``prune`` moves them, unlimited).

    A day that cannot be created now (a lock not granted in time) is left to the next call:
    its rows go to the default partition meanwhile.
    """
    now = time.time() if now is None else now
    today = day_start(now)
    for table in PARTITIONED:
        have = partitions_pg(db, table)
        if not have:
            continue
        covered = [(p.lower, p.upper) for p in have if not p.default]
        wanted = [today + n * DAY for n in range(DAYS_AHEAD + 1)]
        default = next((p.name for p in have if p.default), None)
        if default is not None and move_limit is not None:
            (held,) = db.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {default} LIMIT {move_limit + 1}) AS d"
            ).fetchone() or (0,)
            if held > move_limit:
                default = None
        if default is not None:
            stray = db.execute(f"SELECT DISTINCT floor(ts / {DAY}) FROM {default}").fetchall()
            wanted += [int(r[0]) * DAY for r in stray]
        for start in sorted(set(wanted)):
            if any(_overlaps(start, lower, upper) for lower, upper in covered):
                continue
            if _create_day(db, table, start, default, locked=locked):
                covered.append((start, start + DAY))
    return today + DAY


def _overlaps(start: int, lower: float | None, upper: float | None) -> bool:
    lo = float("-inf") if lower is None else lower
    hi = float("inf") if upper is None else upper
    return lo < start + DAY and start < hi


def _create_day(
    db: PgDatabase, table: str, start: int, default: str | None, *, locked: bool
) -> bool:
    """One day's partition, with the default partition's rows of that day moved into it."""
    import psycopg

    name = partition_name(table, start)
    end = start + DAY
    try:
        with db.transaction():
            if not locked:
                db.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                db.execute("SELECT pg_advisory_xact_lock(?)", (PARTITION_LOCK,))
                if db.execute("SELECT to_regclass(?)", (name,)).fetchone() != (None,):
                    return True  # another writer made it meanwhile
            db.execute(f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS)")
            if default is not None:
                columns = ", ".join(
                    f'"{r[0]}"'
                    for r in db.execute(
                        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(?) "
                        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                        (table,),
                    ).fetchall()
                )
                where = f"ts >= {start} AND ts < {end}"
                db.execute(
                    f"WITH moved AS (DELETE FROM {default} WHERE {where} RETURNING {columns}) "
                    f"INSERT INTO {name} ({columns}) SELECT {columns} FROM moved"
                )
            db.execute(
                f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM ({start}) TO ({end})"
            )
    except psycopg.errors.LockNotAvailable:
        return False
    return True


def droppable_partitions_pg(db: PgDatabase, table: str, doomed: str, cut: float) -> list[str]:
    """The partitions of ``table`` that prune may drop: not the default one; every row's
    connection in the temporary table ``doomed`` (its connections are looked up one index
    probe each, never a scan of the partition), or none at all and all before ``cut``."""
    out = []
    for part in partitions_pg(db, table):
        if part.default:
            continue
        found = db.execute(
            f"WITH RECURSIVE c(id) AS (SELECT min(connection_id) FROM {part.name} "
            f"UNION ALL SELECT (SELECT min(connection_id) FROM {part.name} "
            "WHERE connection_id > c.id) FROM c WHERE c.id IS NOT NULL) "
            f"SELECT count(*), count(*) FILTER (WHERE id NOT IN (SELECT id FROM {doomed})) "
            "FROM c WHERE id IS NOT NULL"
        ).fetchone()
        connections, kept = found if found else (0, 0)
        if kept:
            continue
        if connections or (part.upper is not None and part.upper <= cut):
            out.append(part.name)
    return out
