"""Full-text search over a recording: an SQLite FTS5 index kept with sqlite-utils.

The index is derived from the frames' raw bytes and can be thrown away and rebuilt at any
time. It lives in the recording file itself, in two tables of its own:

- ``search_docs``: one row per searchable document, with an FTS5 table
  (``search_docs_fts``, created and kept in sync by sqlite-utils' ``enable_fts`` triggers)
  over its ``text`` and ``method``. A document is one frame, except that a run of
  consecutive message chunks of one session (``agent_message_chunk``,
  ``user_message_chunk``, ``agent_thought_chunk``... of the same message) is joined into one
  document, so a word split across chunks is still found; the hit names the run's first
  frame and its last.
- ``search_state``: the id (and connection, seq, CRC-32) of the last frame indexed.
  :meth:`SearchIndex.update` indexes only frames with a larger id, so a search of a growing
  (even live) recording costs only the new frames. If that frame is gone or is another
  frame now (frames removed, ids reused) the index is rebuilt.

What is indexed: message and prompt text, tool calls (title, content, output), other
updates and results by their string values, error responses as ``error CODE message``, and
every method name. A **read-only** recording (no write permission on it or its directory)
is never written to: an up-to-date index saved in it is used as it is, otherwise the index
is built in memory for that search and dropped (:attr:`SearchIndex.in_file` is False).

:func:`open_search_index` is the entry point for the CLI and for the inspector's text
filter (the same index). What a query means and what text a frame is indexed by are in
:mod:`acp_proxy.store.search_text`; this module keeps the index and runs the queries.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from acp_proxy.store.connection_aggregates import writable_without_migrating
from acp_proxy.store.engine import database_url, engine_of, memory_database, stream_rows
from acp_proxy.store.pg import (
    SEARCH_LOCK,
    PgDatabase,
    connect_pg,
    describe_error,
    ensure_search_tables_pg,
)
from acp_proxy.store.reader import RecordingReader, settled_frame_id
from acp_proxy.store.rows import FRAME_COLUMNS, frame_of_row
from acp_proxy.store.schema import RecordingError, connect, open_readonly
from acp_proxy.store.search_text import (
    TEXT_CAP,
    document_of,
    query_phrases,
    snippet,
)
from acp_proxy.wire.frame import Frame

DOCS = "search_docs"
STATE = "search_state"
_INDEX_TABLES = (DOCS, f"{DOCS}_fts", STATE)


def has_saved_index(db: sqlite_utils.Database) -> bool:
    """Whether ``db`` holds a whole saved index (every table of it; derived data that a
    user may have dropped in part)."""
    names = set(db.table_names())
    return all(name in names for name in _INDEX_TABLES)


IndexProgress = Callable[[int], Callable[[int], None]]
"""How an index update reports: called once with the number of frames it is about to
index, it returns the callback then called with the number indexed so far."""

_PROGRESS_EVERY = 1000


def _upper_bound(db: sqlite3.Connection | PgDatabase) -> int | None:
    """The highest frame id an update may index now (None: every frame there is).

    PostgreSQL: :func:`~acp_proxy.store.reader.settled_frame_id`, since several writers
    commit ids out of order: an id skipped now would never be indexed later.
    """
    return None if engine_of(db).ids_in_commit_order else settled_frame_id(db)


def _frames_after(
    db: sqlite3.Connection | PgDatabase, after_id: int, upto: int | None
) -> Iterator[Frame]:
    """The one place this module reads frames: every frame with a larger id (up to
    ``upto``, from :func:`_upper_bound`), streamed."""
    if upto is not None:  # PostgreSQL: ids up to the settled one, streamed
        rows = stream_rows(
            db,
            f"SELECT {FRAME_COLUMNS} FROM frames WHERE id > ? AND id <= ? "
            "ORDER BY connection_id, seq",
            (after_id, upto),
        )
        return map(frame_of_row, rows)
    return RecordingReader(db).frames(after_id=after_id)


def _count_after(db: sqlite3.Connection | PgDatabase, after_id: int, upto: int | None) -> int:
    """How many frames :func:`_frames_after` will yield (for progress)."""
    sql, args = "SELECT count(*) FROM frames WHERE id > ?", [after_id]
    if upto is not None:
        sql, args = sql + " AND id <= ?", [after_id, upto]
    row = db.execute(sql, args).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the frame (first of a joined run), its session and a snippet."""

    connection_id: int
    session_id: str | None
    frame_id: int
    seq: int
    last_seq: int
    frames: int
    field: str
    method: str | None
    variant: str | None
    snippet: str

    def to_json(self) -> dict[str, Any]:
        return {
            "connection": self.connection_id,
            "session": self.session_id,
            "frame": self.frame_id,
            "seq": self.seq,
            "last_seq": self.last_seq,
            "frames": self.frames,
            "field": self.field,
            "method": self.method,
            "variant": self.variant,
            "snippet": self.snippet,
        }


@dataclass(slots=True)
class _Run:
    """A run of message chunks being joined into one document (written when it ends)."""

    doc_id: int | None  # None: not written yet
    connection_id: int
    session_id: str | None
    frame_id: int
    seq: int
    method: str | None
    variant: str
    entity_id: str | None
    last_frame_id: int
    last_seq: int
    frames: int
    length: int
    pieces: list[str] = field(default_factory=list)


class SearchIndex:
    """The FTS5 index of one recording: :meth:`update` it, then :meth:`search` it.

    ``source`` is the recording (frames are read from it: a SQLite file or a PostgreSQL
    database); ``store`` is where the index tables live: the same file, or an in-memory
    database for a read-only recording. (:class:`PgSearchIndex` keeps them in PostgreSQL.)
    """

    BEGIN: tuple[str, ...] = ("BEGIN IMMEDIATE",)
    """What starts the update's transaction (and serialises concurrent updates)."""

    def __init__(
        self,
        source: sqlite3.Connection | PgDatabase,
        store: Any,
        *,
        in_file: bool,
    ):
        self.source = source
        self.store = store
        self.in_file = in_file
        self._runs: dict[tuple[int, str | None], _Run | None] = {}
        self._ensure_tables()

    def _ensure_tables(self) -> None:
        db = self.store
        if has_saved_index(db):
            return
        for name in (f"{DOCS}_fts", DOCS, STATE):  # what is left of a partly dropped index
            db.execute(f"DROP TABLE IF EXISTS {name}")
        docs, state = db.table(DOCS), db.table(STATE)
        docs.create(
            {
                "id": int,
                "connection_id": int,
                "session_id": str,
                "frame_id": int,
                "seq": int,
                "last_frame_id": int,
                "last_seq": int,
                "frames": int,
                "field": str,
                "method": str,
                "variant": str,
                "entity_id": str,
                "text": str,
            },
            pk="id",
        )
        docs.create_index(["connection_id", "session_id", "last_frame_id"])
        docs.enable_fts(["text", "method"], create_triggers=True)
        state.create(
            {
                "id": int,
                "last_frame_id": int,
                "last_connection_id": int,
                "last_seq": int,
                "last_crc": int,
            },
            pk="id",
        )
        state.insert({"id": 1, "last_frame_id": 0})

    def _state(self) -> tuple[int, tuple[int, int, int] | None]:
        """(last frame indexed, its (connection, seq, CRC-32 of its bytes) then)."""
        row = self.store.execute(
            f"SELECT last_frame_id, last_connection_id, last_seq, last_crc FROM {STATE} "
            "WHERE id = 1"
        ).fetchone()
        if not row or not row[0]:
            return 0, None
        return int(row[0]), (row[1], row[2], row[3])

    def _stale(self, last: int, where: tuple[int, int, int] | None) -> bool:
        """Whether the frame indexed last is gone or is another frame now (ids were reused)."""
        if not last:
            return False
        row = self.source.execute(
            "SELECT connection_id, seq, raw FROM frames WHERE id = ?", [last]
        ).fetchone()
        return row is None or (row[0], row[1], zlib.crc32(row[2])) != where

    def _newest(self) -> int:
        row = self.source.execute("SELECT coalesce(max(id), 0) FROM frames").fetchone()
        return int(row[0]) if row else 0

    @property
    def on_server(self) -> bool:
        """The recording is a database server's: its connection may drop and come back, and
        a search that failed on it is worth one retry on a fresh connection."""
        return not isinstance(self.source, sqlite3.Connection)

    def saved_copy_behind(self) -> bool:
        """An index saved in a SQLite recording that frames recorded since have left behind
        (a reader that never writes the file keeps a copy in memory instead)."""
        return self.in_file and not self.on_server and not self.up_to_date()

    def up_to_date(self) -> bool:
        """Whether every frame of the recording is indexed (two reads, no lock)."""
        last, where = self._state()
        return self._newest() == last and not self._stale(last, where)

    def update(self, progress: IndexProgress | None = None) -> int:
        """Index the frames added since the last update; return how many were indexed.

        Up to date: two reads, no lock. Otherwise one write transaction on the index's
        database (state re-read inside it, so concurrent searches never index a frame twice).
        If the frame indexed last is gone or is another frame now, the index is rebuilt.
        ``progress`` (:data:`IndexProgress`) hears how many frames there are to index, then every
        thousand indexed.
        """
        if self.up_to_date():
            return 0
        db = self.store
        count = 0
        for statement in self.BEGIN:
            db.execute(statement)
        try:
            last, where = self._state()
            if self._stale(last, where):
                db.execute(f"DELETE FROM {DOCS}")
                self._runs.clear()
                last = 0
            upto = _upper_bound(self.source)
            report = None
            if progress is not None:
                report = progress(_count_after(self.source, last, upto))
            for frame in _frames_after(self.source, last, upto):
                self._index(frame)
                if frame.id > last:
                    last = frame.id
                    where = (frame.connection_id, frame.seq, zlib.crc32(frame.raw))
                count += 1
                if report is not None and count % _PROGRESS_EVERY == 0:
                    report(count)
            self._flush_all()
            if count and where is not None:
                db.execute(
                    f"UPDATE {STATE} SET last_frame_id = ?, last_connection_id = ?, last_seq = ?, "
                    "last_crc = ? WHERE id = 1",
                    [last, *where],
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._runs.clear()
            raise
        return count

    def _open_run(self, key: tuple[int, str | None]) -> _Run | None:
        """The message run a chunk of ``key`` (connection, session) may continue."""
        if key in self._runs:
            return self._runs[key]
        session = "session_id IS NULL" if key[1] is None else "session_id = ?"
        row = self.store.execute(
            f"SELECT id, frame_id, seq, method, variant, entity_id, last_frame_id, last_seq, "
            f"frames, length(text), field FROM {DOCS} "
            f"WHERE connection_id = ? AND {session} ORDER BY last_frame_id DESC LIMIT 1",
            [key[0]] if key[1] is None else [key[0], key[1]],
        ).fetchone()
        run = None
        if row and row[10] == "message":
            run = _Run(row[0], key[0], key[1], *row[1:10])
        self._runs[key] = run
        return run

    def _flush(self, run: _Run) -> None:
        text = "".join(run.pieces)
        run.pieces.clear()
        if run.doc_id is None:
            cur = self.store.execute(
                f"INSERT INTO {DOCS} (connection_id, session_id, frame_id, seq, last_frame_id, "
                "last_seq, frames, field, method, variant, entity_id, text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 'message', ?, ?, ?, ?) RETURNING id",
                [
                    run.connection_id,
                    run.session_id,
                    run.frame_id,
                    run.seq,
                    run.last_frame_id,
                    run.last_seq,
                    run.frames,
                    run.method,
                    run.variant,
                    run.entity_id,
                    text,
                ],
            )
            (doc_id,) = cur.fetchone()
            run.doc_id = int(doc_id)
        else:
            self.store.execute(
                f"UPDATE {DOCS} SET text = text || ?, last_frame_id = ?, last_seq = ?, "
                "frames = ? WHERE id = ? AND last_frame_id != ?",
                [text, run.last_frame_id, run.last_seq, run.frames, run.doc_id, run.last_frame_id],
            )

    def _close_run(self, key: tuple[int, str | None]) -> None:
        run = self._runs.pop(key, None)
        if run is not None:
            self._flush(run)

    def _flush_all(self) -> None:
        for run in self._runs.values():
            if run is not None:
                self._flush(run)

    def _index(self, frame: Frame) -> None:
        field, text = document_of(frame)
        key = (frame.connection_id, frame.session_id)
        variant = frame.update_kind
        if field == "message" and variant is not None:
            run = self._open_run(key)
            if run is not None and run.variant == variant and run.entity_id == frame.entity_id:
                extra = text[: max(0, TEXT_CAP - run.length)]
                run.length += len(extra)
                run.pieces.append(extra)
                run.last_frame_id, run.last_seq = frame.id, frame.seq
                run.frames += 1
                return
            self._close_run(key)
            self._runs[key] = _Run(
                None,
                frame.connection_id,
                frame.session_id,
                frame.id,
                frame.seq,
                frame.method,
                variant,
                frame.entity_id,
                frame.id,
                frame.seq,
                1,
                len(text),
                [text],
            )
            return
        if frame.session_id is not None:
            self._close_run(key)
            self._runs[key] = None
        self.store.execute(
            f"INSERT INTO {DOCS} (connection_id, session_id, frame_id, seq, last_frame_id, "
            "last_seq, frames, field, method, variant, entity_id, text) "
            "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
            [
                frame.connection_id,
                frame.session_id,
                frame.id,
                frame.seq,
                frame.id,
                frame.seq,
                field,
                frame.method,
                variant,
                frame.entity_id,
                text,
            ],
        )

    def search(
        self,
        text: str,
        *,
        connection_id: int | None = None,
        session_id: str | None = None,
        limit: int = 50,
    ) -> list[Hit]:
        """Documents matching every phrase of ``text`` (:func:`query_phrases`, no query
        syntax), in recording order, each with its :func:`snippet`."""
        phrases = query_phrases(text)
        match, args, documents = self._match(phrases)
        where, args = _where(
            [match],
            args,
            connection_id,
            session_id,
            limit,
            beside_recording=self.in_file,
        )
        rows = self.store.execute(
            f"SELECT {_HIT_COLUMNS}, d.text FROM {documents} "
            f"WHERE {' AND '.join(where)} ORDER BY d.connection_id, d.seq LIMIT ?",
            args,
        ).fetchall()
        return _hits(rows, phrases)

    def _match(self, phrases: list[str]) -> tuple[str, list[Any], str]:
        """The match term, its arguments and the documents it reads (as ``d``): each phrase
        an FTS5 quoted phrase."""
        query = " ".join(f'"{phrase}"' for phrase in phrases)
        return (
            f"{DOCS}_fts MATCH ?",
            [query],
            f"{DOCS}_fts JOIN {DOCS} d ON d.id = {DOCS}_fts.rowid",
        )

    def close(self) -> None:
        if not self.in_file:
            self.store.close()
        self.source.close()


_HIT_COLUMNS = (
    "d.connection_id, d.session_id, d.frame_id, d.seq, d.last_seq, d.frames, d.field, "
    "d.method, d.variant"
)
"""A hit's columns of the documents table ``d``, before its snippet (both engines)."""


def _hits(rows: list[Any], phrases: list[str]) -> list[Hit]:
    """Hits of rows of :data:`_HIT_COLUMNS` and the document's text, each with its
    :func:`snippet` of ``phrases`` (both engines)."""
    words = [phrase.split() for phrase in phrases]
    hits = []
    for cid, sid, frame_id, seq, last_seq, frames, fld, method, variant, doc in rows:
        cut = snippet(doc or "", words)
        hits.append(Hit(cid, sid, frame_id, seq, last_seq, frames, fld, method, variant, cut))
    return hits


def _where(
    where: list[str],
    args: list[Any],
    connection_id: int | None,
    session_id: str | None,
    limit: int,
    *,
    beside_recording: bool,
) -> tuple[list[str], list[Any]]:
    """A search's WHERE terms and arguments: the match, then the optional filters, then LIMIT.

    ``beside_recording``: the documents are in the recording's own database, so only those
    of connections it still has are hits. A connection deleted since it was indexed (a
    retention purge, or by hand) is then never found again, nor shown in a snippet.
    """
    where, args = list(where), list(args)
    if beside_recording:
        where.append("EXISTS (SELECT 1 FROM connections c WHERE c.id = d.connection_id)")
    if connection_id is not None:
        where.append("d.connection_id = ?")
        args.append(connection_id)
    if session_id is not None:
        where.append("d.session_id = ?")
        args.append(session_id)
    args.append(limit)
    return where, args


class PgSearchIndex(SearchIndex):
    """The index of a recording in PostgreSQL, kept in that database: the same documents
    (and runs of message chunks) as :class:`SearchIndex`, matched by PostgreSQL's own
    full-text search (a ``tsvector`` column under a GIN index, ``phraseto_tsquery``).

    ``source`` reads frames (a result streams while the index is written) and ``store``
    writes the index: two connections to the same database. The update is serialised by
    an advisory lock, as SQLite's ``BEGIN IMMEDIATE`` does.
    """

    BEGIN = ("BEGIN", f"SELECT pg_advisory_xact_lock({SEARCH_LOCK})")

    def _ensure_tables(self) -> None:
        ensure_search_tables_pg(self.store)

    def _match(self, phrases: list[str]) -> tuple[str, list[Any], str]:
        """Every phrase as ``phraseto_tsquery`` over the ``tsvector`` column, with FTS5-like
        snippets made by :func:`snippet`."""
        match = " && ".join("phraseto_tsquery('simple', ?)" for _ in phrases)
        return f"d.words @@ ({match})", list(phrases), f"{DOCS} d"

    def close(self) -> None:
        self.store.close()
        self.source.close()


def writable(path: Path) -> bool:
    """Whether the index may be written into the recording (the file and its directory)."""
    return os.access(path, os.W_OK) and os.access(path.parent if str(path.parent) else ".", os.W_OK)


def open_pg_search_index(url: str, progress: IndexProgress | None = None) -> SearchIndex:
    """A PostgreSQL recording's index, in the database; in memory (SQLite FTS5, fed from the
    database) when the index cannot be written there (a read-only role, a standby)."""
    import psycopg

    source = connect_pg(url, create=False, readonly=True, application_name="acp-proxy search")
    try:
        store = connect_pg(url, create=False, application_name="acp-proxy search")
    except RecordingError:
        source.close()
        raise
    index: SearchIndex
    try:
        index = PgSearchIndex(source, store, in_file=True)
        index.update(progress)
        return index
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction):
        store.close()
    except psycopg.Error as exc:
        store.close()
        source.close()
        raise RecordingError(f"{source.source}: {describe_error(exc)}") from None
    index = SearchIndex(source, sqlite_utils.Database(memory=True), in_file=False)
    return _brought_up_to_date(index, progress)


def open_search_index(path: str | Path, progress: IndexProgress | None = None) -> SearchIndex:
    """The recording's search index, brought up to date (in memory if the file is read-only);
    ``progress`` hears how that goes (:data:`IndexProgress`).

    ``path`` may be a PostgreSQL URL (:func:`open_pg_search_index`). Raises
    :class:`~acp_proxy.store.schema.RecordingError` for a file that is no recording.
    """
    url = database_url(path)
    if url is not None:
        return open_pg_search_index(url, progress)
    p = Path(path)
    if writable(p):
        conn = connect(p, create=False)
        try:
            index = SearchIndex(conn, sqlite_utils.Database(conn), in_file=True)
            index.update(progress)
            return index
        except sqlite3.OperationalError as exc:
            conn.close()
            if "readonly" not in str(exc):
                raise
    # an index saved before the file became read-only, else one in memory
    index = _saved_or_in_memory(open_readonly(p), lambda: sqlite_utils.Database(memory=True))
    return index if index.in_file else _brought_up_to_date(index, progress)


def _brought_up_to_date(index: SearchIndex, progress: IndexProgress | None) -> SearchIndex:
    """``index`` after an update (closed if the update fails)."""
    try:
        index.update(progress)
    except BaseException:
        index.close()
        raise
    return index


def _saved_or_in_memory(
    source: sqlite3.Connection, memory: Callable[[], sqlite_utils.Database]
) -> SearchIndex:
    """The up-to-date index saved in the SQLite recording ``source``, else a new one in the
    ``memory`` database (to be brought up to date)."""
    saved = sqlite_utils.Database(source)
    if has_saved_index(saved):
        index = SearchIndex(source, saved, in_file=True)
        if index.up_to_date():
            return index
    return SearchIndex(source, memory(), in_file=False)


def open_unwritten_index(location: str | Path, *, application_name: str) -> SearchIndex:
    """The index of a recording for a reader that never writes it (the inspector).

    PostgreSQL: the index in the database where this role may write it without migrating
    the store. An up-to-date index saved in a SQLite recording (by ``acp-proxy search``) is
    used as it is. Otherwise the same index is kept in memory, fed from a read-only
    connection of its own, and brought up to date by each search: only frames recorded
    since are indexed.
    """
    url = database_url(location)
    if url is not None and writable_without_migrating(url):
        # the database's own full-text index (what ``acp-proxy search`` keeps: derived data,
        # the one thing such a reader writes), brought up to date incrementally; a store that
        # would need migrating first is indexed in memory
        return open_pg_search_index(url)
    if url is not None:
        pg_source = connect_pg(url, create=False, readonly=True, application_name=application_name)
        return SearchIndex(pg_source, _memory_index_database(), in_file=False)
    source = connect(Path(location), create=False, readonly=True)
    return _saved_or_in_memory(source, _memory_index_database)


def _memory_index_database() -> sqlite_utils.Database:
    """An in-memory database for an index, usable from any thread (the inspector's)."""
    return sqlite_utils.Database(memory_database(autocommit=False))
