"""One engine object per backend: what differs between SQLite and PostgreSQL, in one place.

Every query of acp-proxy is written once, in the SQL both engines speak (``?`` placeholders,
translated for PostgreSQL by :func:`~acp_proxy.store.pg.translate`; ``"binary"`` quoted,
``CASE`` not boolean sums, ``1 = 1`` not ``1``, text ordered in Python where the order is
shown, since PostgreSQL's collation is the server's). What differs between the engines is a
method of :class:`SqliteEngine` or :class:`PostgresEngine`: opening a location, the columns of
a table, streaming a result, bulk inserts, an import's transaction, the exceptions they raise
and the transactions writing frames right now. :func:`engine_of` picks the engine of an open
database, :func:`engine_for` the one a recording location names. Nothing outside
:mod:`acp_proxy.store` imports ``sqlite3`` or ``psycopg`` or asks which engine it has
(import-linter's ``engines-in-store`` contract).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from acp_proxy.store.location import RecordingUrl as RecordingUrl
from acp_proxy.store.location import database_url as database_url
from acp_proxy.store.location import location_name as location_name
from acp_proxy.store.location import parse_location as parse_location
from acp_proxy.store.location import unknown_scheme as unknown_scheme
from acp_proxy.store.pg import (
    FRAME_WRITERS,
    NO_PSYCOPG,
    PgDatabase,
    connect_pg,
    frames_transaction,
    migrate_pg,
    psycopg_installed,
    safe_url,
    translate,
)
from acp_proxy.store.pg_partitions import (
    PARTITIONED,
    droppable_partitions_pg,
    ensure_partitions_pg,
)
from acp_proxy.store.schema import RecordingError, connect, migrate

SqliteConnection = sqlite3.Connection
"""An open SQLite recording (the writer's sink holds one)."""

Database = sqlite3.Connection | PgDatabase
"""An open recording: a SQLite connection or a PostgreSQL one (same SQL, ``?`` placeholders)."""

STREAM_ROWS = 100
"""Rows PostgreSQL sends per round trip while :func:`stream_rows` streams (frames are large)."""

_CURSOR_BATCH = 1000
"""Rows a PostgreSQL server-side cursor fetches at a time (:func:`stream`)."""

_cursor_numbers = itertools.count(1)


class BulkInserter:
    """Rows into tables in bulk: ``executemany`` on SQLite; on PostgreSQL one ``COPY`` kept
    open across batches (the server stores rows while the next batch is read) until
    :meth:`end`, which must come before any other statement on the connection.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._open: tuple[str, Any, Any, Any] | None = None  # table, cursor, manager, copy

    def write(self, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (tuples in ``columns`` order) into ``table``."""
        names = ", ".join(f'"{c}"' for c in columns)
        db = self.db
        if not isinstance(db, PgDatabase):
            marks = ", ".join("?" for _ in columns)
            db.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
            return
        if self._open is not None and self._open[0] != table:
            self.end()
        if self._open is None:
            cur = db.conn.cursor()
            manager = cur.copy(f"COPY {table} ({names}) FROM STDIN")
            self._open = (table, cur, manager, manager.__enter__())
        write_row = self._open[3].write_row
        for row in rows:
            write_row(row)

    def end(self, error: BaseException | None = None) -> None:
        """Finish the open ``COPY`` (abort it with ``error``)."""
        if self._open is None:
            return
        _, cur, manager, _ = self._open
        self._open = None
        try:
            if error is None:
                manager.__exit__(None, None, None)
            else:
                with contextlib.suppress(Exception):
                    manager.__exit__(type(error), error, None)
        finally:
            cur.close()


class Engine:
    """What every engine says about itself (the methods are each engine's own)."""

    name: str
    """The engine's key (:func:`engine_for`, one sink per engine)."""
    label: str
    """Its name in messages and statistics."""
    remote: bool
    """A server, reached over the network (no folder of its own; connecting may wait)."""
    ids_in_commit_order: bool
    """Frame ids are committed in order (one writer at a time), so an id is a time order;
    else several writers commit them out of order (see :mod:`~acp_proxy.store.live_tail`)."""
    text_holds_nul: bool
    """A stored text may hold NUL (else no stored text equals a parameter with one)."""
    failure: str
    """What a failing read means, in an error message."""


SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file."""


class SqliteEngine(Engine):
    """The SQLite engine: a recording is a file."""

    name = "sqlite"
    label = "SQLite"
    remote = False
    ids_in_commit_order = True
    text_holds_nul = True
    failure = "the recording is damaged"

    def missing_driver(self) -> str | None:
        """What a bare install lacks to use this engine (None: nothing)."""
        return None

    def source_name(self, db: Database) -> str:
        """How an open database is named in messages (a file's connection: unnamed)."""
        return ""

    @contextmanager
    def write_transaction(self, db: Database) -> Iterator[None]:
        """One transaction around the block, unless the caller already holds one (then
        theirs): rolled back when the block raises (anything), committed when it ends."""
        assert isinstance(db, sqlite3.Connection)
        if db.in_transaction:
            yield
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def after_explicit_id(self, db: Database, table: str) -> None:
        """Nothing: SQLite's next rowid already follows the highest one."""

    def shown(self, location: str | Path) -> str:
        """How a location is named in messages (never a password)."""
        return str(location)

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """What a failing statement, a damaged file or a lost connection raises."""
        return (sqlite3.Error,)

    @property
    def integrity_errors(self) -> tuple[type[Exception], ...]:
        """The exceptions a violated UNIQUE constraint raises."""
        return (sqlite3.IntegrityError,)

    @property
    def damaged_errors(self) -> tuple[type[Exception], ...]:
        """What reading a damaged (or not-a-database) file raises."""
        return (sqlite3.DatabaseError,)

    def is_locked(self, exc: BaseException) -> bool:
        """Whether ``exc`` says another process holds the database lock (worth retrying)."""
        text = str(exc)
        return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)

    def variable_limit(self, db: SqliteConnection) -> int:
        """How many parameters one statement may bind."""
        return db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)

    def check_intact(self, db: Database) -> None:
        """Refuse a damaged recording (:class:`~acp_proxy.store.schema.RecordingError`):
        SQLite's ``quick_check`` reads every page once (page structure, record formats, NOT
        NULL and UNIQUE constraints; about as fast as reading the file)."""
        assert isinstance(db, sqlite3.Connection)
        try:
            (result,) = db.execute("PRAGMA quick_check(1)").fetchone()
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"the recording is damaged: {exc}") from None
        if result != "ok":
            lines = [line for line in str(result).splitlines() if not line.startswith("***")]
            raise RecordingError(f"the recording is damaged: {'; '.join(lines) or result}")

    def open(
        self, location: str | Path, *, create: bool, readonly: bool = False, timeout: float = 30.0
    ) -> Database:
        """Open the recording file at ``location``."""
        return connect(Path(location), create=create, readonly=readonly, timeout=timeout)

    def table_columns(self, db: Database, table: str) -> list[str]:
        """The columns of ``table`` in order (empty when there is no such table)."""
        return [str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")]

    def stream(self, db: Database, sql: str, args: Iterable[Any] = ()) -> Iterator[Any]:
        """The rows of ``sql`` one at a time: the cursor itself (no per-row cost added)."""
        assert isinstance(db, sqlite3.Connection)
        return db.execute(sql, list(args))

    def stream_rows(
        self, db: Database, sql: str, args: Sequence[Any] = ()
    ) -> Iterator[tuple[Any, ...]]:
        """The rows of a query, streamed (SQLite's cursor already reads row by row)."""
        # A loop, not ``yield from``: a generator closed after its database (a reader gone
        # away, a failed copy) must not close the cursor of a closed connection, which
        # raises ("Exception ignored in: <generator object stream_rows>" on stderr).
        for row in db.execute(sql, tuple(args)):  # noqa: UP028
            yield row

    def frame_writers(self, db: Database) -> frozenset[str]:
        """None: SQLite's one writer at a time commits frame ids in order."""
        return frozenset()

    def prunable_partitions(self, db: Database, doomed: str, cut: float) -> list[str]:
        """None: a SQLite recording has no partitions (see :mod:`~acp_proxy.store.retention`)."""
        return []

    def drop_partitions(self, db: Database, names: list[str]) -> None:
        """Nothing to drop (no partitions)."""

    def tidy_partitions(self, db: Database) -> None:
        """Nothing to tidy (no partitions)."""

    @contextmanager
    def import_transaction(self, db: Database) -> Iterator[None]:
        """One transaction for an import (a savepoint inside the caller's), schema migrated."""
        assert isinstance(db, sqlite3.Connection)
        if not db.in_transaction:
            migrate(db)
        outer = db.in_transaction
        db.execute("SAVEPOINT acp_proxy_import" if outer else "BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if outer:
                db.execute("ROLLBACK TO acp_proxy_import")
                db.execute("RELEASE acp_proxy_import")
            else:
                db.execute("ROLLBACK")
            raise
        db.execute("RELEASE acp_proxy_import" if outer else "COMMIT")


class PostgresEngine(Engine):
    """The PostgreSQL engine: a recording is a database named by a ``postgresql://`` URL."""

    name = "postgresql"
    label = "PostgreSQL"
    remote = True
    ids_in_commit_order = False
    text_holds_nul = False  # PostgreSQL's text holds no NUL
    failure = "the database failed"

    def missing_driver(self) -> str | None:
        """What a bare install lacks to use this engine (None: nothing), found without
        importing psycopg (the forwarding process never does)."""
        return None if psycopg_installed() else NO_PSYCOPG

    def source_name(self, db: Database) -> str:
        """How an open database is named in messages (its URL without the password)."""
        assert isinstance(db, PgDatabase)
        return db.source

    @contextmanager
    def write_transaction(self, db: Database) -> Iterator[None]:
        """One transaction around the block (inside a caller's transaction: a savepoint of
        it), rolled back when the block raises, committed when it ends."""
        assert isinstance(db, PgDatabase)
        with frames_transaction(db):
            yield

    def after_explicit_id(self, db: Database, table: str) -> None:
        """An explicit id does not move PostgreSQL's identity sequence: move it past the row."""
        db.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        )

    def shown(self, location: str | Path) -> str:
        """How a location is named in messages (never a password)."""
        return safe_url(str(location))

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """What a failing statement or a lost connection raises (psycopg's errors)."""
        import psycopg

        return (psycopg.Error,)

    @property
    def integrity_errors(self) -> tuple[type[Exception], ...]:
        """The exceptions a violated UNIQUE constraint raises."""
        import psycopg

        return (psycopg.errors.IntegrityError,)

    @property
    def damaged_errors(self) -> tuple[type[Exception], ...]:
        """What a failing read raises (the server keeps its pages intact: a lost server)."""
        return self.errors

    def check_intact(self, db: Database) -> None:
        """Nothing to check: a PostgreSQL server keeps its own pages intact."""

    def open(
        self, location: str | Path, *, create: bool, readonly: bool = False, timeout: float = 30.0
    ) -> Database:
        """Open the database at the URL ``location``."""
        url = database_url(location) or str(location)
        return connect_pg(url, create=create, readonly=readonly, timeout=timeout)

    def table_columns(self, db: Database, table: str) -> list[str]:
        """The columns of ``table`` in order (empty when there is no such table)."""
        rows = db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND table_schema = current_schema() ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def stream(self, db: Database, sql: str, args: Iterable[Any] = ()) -> Iterator[Any]:
        """The rows of ``sql`` through a server-side cursor (``WITH HOLD``: it lives outside a
        transaction, and other queries may run on the connection between two fetches),
        closed when the iteration ends or is abandoned."""
        assert isinstance(db, PgDatabase)
        cur = db.conn.cursor(name=f"acp_stream_{id(db)}_{next(_cursor_numbers)}", withhold=True)
        try:
            cur.itersize = _CURSOR_BATCH
            cur.execute(translate(sql), tuple(args) or None)
            yield from cur
        finally:
            if not db.closed:
                cur.close()

    def stream_rows(
        self, db: Database, sql: str, args: Sequence[Any] = ()
    ) -> Iterator[tuple[Any, ...]]:
        """The rows of a query, streamed in chunks of :data:`STREAM_ROWS` rows (psycopg's
        plain ``execute`` would fetch a whole result into memory first)."""
        assert isinstance(db, PgDatabase)
        with db.conn.cursor() as cur:
            yield from cur.stream(translate(sql), tuple(args), size=STREAM_ROWS)

    def frame_writers(self, db: Database) -> frozenset[str]:
        """The transactions writing frames right now (see :mod:`~acp_proxy.store.live_tail`)."""
        return frozenset(str(r[0]) for r in db.execute(FRAME_WRITERS, []).fetchall())

    def prunable_partitions(self, db: Database, doomed: str, cut: float) -> list[str]:
        """The daily partitions of frames and stderr lines whose every row belongs to a
        connection of the temporary table ``doomed`` (analyzed first, for the deletes' plans)
        or that are empty and older than ``cut`` (see :mod:`~acp_proxy.store.retention`)."""
        assert isinstance(db, PgDatabase)
        db.execute(f"ANALYZE {doomed}")
        return [
            name
            for table in PARTITIONED
            for name in droppable_partitions_pg(db, table, doomed, cut)
        ]

    def drop_partitions(self, db: Database, names: list[str]) -> None:
        """Drop these partitions (in the caller's transaction)."""
        for name in names:
            db.execute(f"DROP TABLE {name}")

    def tidy_partitions(self, db: Database) -> None:
        """The coming days' partitions created, and every row the default partition holds
        moved into its day's (so that it too can be dropped by day)."""
        assert isinstance(db, PgDatabase)
        ensure_partitions_pg(db)

    @contextmanager
    def import_transaction(self, db: Database) -> Iterator[None]:
        """One transaction for an import (a savepoint inside the caller's), schema migrated."""
        assert isinstance(db, PgDatabase)
        if db.conn.info.transaction_status == 0:  # idle: not inside the caller's transaction
            migrate_pg(db)
        with frames_transaction(db):
            yield


AnyEngine = SqliteEngine | PostgresEngine
"""Either engine, with its methods."""

SQLITE = SqliteEngine()
POSTGRES = PostgresEngine()


def engine_of(db: Database) -> AnyEngine:
    """The engine of an open database."""
    return POSTGRES if isinstance(db, PgDatabase) else SQLITE


def engine_for(location: str | os.PathLike[str]) -> AnyEngine:
    """The engine a recording location names (a ``postgresql://`` URL, else a SQLite file)."""
    return POSTGRES if database_url(location) is not None else SQLITE


def table_columns(db: Database, table: str) -> list[str]:
    """The columns of ``table`` in order (empty when there is no such table)."""
    return engine_of(db).table_columns(db, table)


def stream(db: Database, sql: str, args: Iterable[Any] = ()) -> Iterator[tuple[Any, ...]]:
    """The rows of ``sql`` one at a time, in flat memory; other queries may run between two."""
    return engine_of(db).stream(db, sql, args)


def stream_rows(db: Database, sql: str, args: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
    """The rows of one query, streamed: memory stays flat however many rows it returns."""
    return engine_of(db).stream_rows(db, sql, args)


def frame_writers(db: Database) -> frozenset[str]:
    """The transactions writing frames right now (PostgreSQL; SQLite: none)."""
    return engine_of(db).frame_writers(db)


def check_intact(db: Database) -> None:
    """Refuse a damaged recording before anything is written (:class:`RecordingError`)."""
    engine_of(db).check_intact(db)


def memory_database(*, autocommit: bool = True) -> sqlite3.Connection:
    """A new empty SQLite database in memory (an imported export, a search index),
    usable from any thread; ``autocommit``: no implicit transactions (as the recordings)."""
    if autocommit:
        return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    return sqlite3.connect(":memory:", check_same_thread=False)


def one_row(db: Database, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...]:
    """The one row a query always returns (an aggregate, ``INSERT ... RETURNING``)."""
    row = db.execute(sql, list(args)).fetchone()
    assert row is not None
    return tuple(row)


def database_errors() -> tuple[type[BaseException], ...]:
    """What a damaged file or a lost database raises (``sqlite3``'s and psycopg's errors)."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.DatabaseError,)
    return (sqlite3.DatabaseError, psycopg.Error)


def store_errors(location: str | Path) -> tuple[type[BaseException], ...]:
    """What a failing statement on the recording at ``location`` raises."""
    return engine_for(location).errors


def create_database(location: str | Path) -> Database:
    """Open the recording at ``location`` for writing, created (and given the schema) when it
    is not there: a file path or a ``postgresql://`` URL, each with its engine's own
    connect timeout (``import``, ``copy``'s destination)."""
    url = database_url(location)
    return connect_pg(url, create=True) if url else connect(Path(location), create=True)


def open_database(
    location: str | Path, *, writable: bool = False, timeout: float = 30.0
) -> Database:
    """Open an existing recording, a file path or a ``postgresql://`` URL.

    Read-only unless ``writable`` (``reindex``); never creates a store. Raises
    :class:`~acp_proxy.store.schema.RecordingError` (one line, no password) when it is not
    there or not one.
    """
    engine = engine_for(location)
    return engine.open(location, create=False, readonly=not writable, timeout=timeout)
