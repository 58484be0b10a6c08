"""Importing a JSONL export into a store: every record checked, one transaction.

:func:`import_stream` reads the records :func:`acp_proxy.formats.jsonl.iter_records` yields,
checks each field (one clear line naming the line number for what is wrong), and inserts
them in bulk into a new or existing recording, all or nothing; connections already there
(the same :func:`~acp_proxy.formats.jsonl.connection_digest`) can be skipped or grown.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.formats.jsonl import (
    INT64_MAX,
    INT64_MIN,
    INT_COLUMNS,
    MAX_UNIX_TIME,
    TIME_COLUMNS,
    ExportFormatError,
    ImportSummary,
    connection_columns,
    connection_digest,
    escape_strings,
    escape_surrogates,
    iter_records,
)
from acp_proxy.formats.redact import dumps_compact
from acp_proxy.store.columns import FRAME_COLUMN_NAMES
from acp_proxy.store.engine import (
    BulkInserter,
    Database,
    engine_of,
    one_row,
)
from acp_proxy.store.schema import RecordingError

_BATCH = 500


def _need(record: dict[str, Any], key: str, types: tuple[type, ...], lineno: int) -> Any:
    value = record.get(key)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        what = record.get("type")
        raise ExportFormatError(f"line {lineno}: {what} record needs {key!r} ({value!r} given)")
    return value


def _raw_of(record: dict[str, Any], lineno: int) -> bytes:
    text = record.get("text")
    b64 = record.get("base64")
    if (text is None) == (b64 is None):
        raise ExportFormatError(f'line {lineno}: needs exactly one of "text" and "base64"')
    if text is not None:
        if not isinstance(text, str):
            raise ExportFormatError(f'line {lineno}: "text" must be a string')
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            raise ExportFormatError(f'line {lineno}: "text" is not valid Unicode') from None
    if not isinstance(b64, str):
        raise ExportFormatError(f'line {lineno}: "base64" must be a string')
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ExportFormatError(f'line {lineno}: "base64" is not valid base64') from None


def _dump_column(value: Any) -> Any:
    """A JSON value as SQLite stores it: scalars as they are, the rest as compact JSON text."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    return _json_text(value)


def _json_text(value: Any) -> str:
    """``value`` as compact JSON text; a lone surrogate in a string becomes its escape text.

    (The stored JSON then decodes to the six characters ``\\ud800``, which every reader
    can print, rather than to a character no UTF-8 output can hold.)
    """
    try:
        return dumps_compact(value).decode()
    except (TypeError, UnicodeEncodeError):
        return dumps_compact(escape_strings(value)).decode()


def _time(record: dict[str, Any], key: str, lineno: int, *, required: bool = True) -> Any:
    """``record[key]`` as a unix time an import accepts (or None when not ``required``)."""
    value = record.get(key)
    if value is None and not required:
        return None
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_UNIX_TIME
    ):
        what = record.get("type")
        raise ExportFormatError(
            f"line {lineno}: {what} record needs {key!r} as a unix time in seconds "
            f"(0 to {MAX_UNIX_TIME:.0f}; {_short(value)} given)"
        )
    return value


def _integer(
    record: dict[str, Any], key: str, lineno: int, low: int, high: int, *, required: bool = True
) -> Any:
    """``record[key]`` as an integer in ``low..high`` (or None when not ``required``)."""
    value = record.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        what = record.get("type")
        raise ExportFormatError(
            f"line {lineno}: {what} record needs {key!r} as an integer from {low} to {high} "
            f"({_short(value)} given)"
        )
    return value


def _short(value: Any) -> str:
    text = escape_surrogates(repr(value))
    return text if len(text) <= 40 else text[:39] + "…"


# -- importing -------------------------------------------------------------------------------

FRAME_COLUMNS = FRAME_COLUMN_NAMES
STDERR_COLUMNS = ("connection_id", "seq", "ts", "mono_ns", "raw")


class _Importer:
    def __init__(self, db: Database, *, skip_duplicates: bool = False) -> None:
        self.db = db
        self.columns = set(connection_columns(db))
        if not self.columns:
            raise RecordingError("the database is not an acp-proxy recording (no connections)")
        self.skip_duplicates = skip_duplicates and "digest" in self.columns
        (last,) = one_row(db, "SELECT coalesce(max(id), 0) FROM connections")
        self.last_existing_id = int(last)
        """Connections up to this id were in the database before the import."""
        self.summary = ImportSummary()
        self.indexers: dict[int, ConnectionIndexer] = {}
        self.derive_facts: dict[int, set[str]] = {}
        self.frames: list[tuple[Any, ...]] = []
        self.stderr: list[tuple[Any, ...]] = []
        self.bulk = BulkInserter(db)

    def connection(self, record: dict[str, Any], lineno: int) -> None:
        old = _integer(record, "connection", lineno, INT64_MIN, INT64_MAX)
        if old in self.summary.connections:
            raise ExportFormatError(f"line {lineno}: connection {old} appears twice")
        _time(record, "started_at", lineno)
        _need(record, "transport", (str,), lineno)
        values: dict[str, Any] = {}
        for key, value in record.items():
            if key in ("type", "connection", "redacted", "id", "digest"):
                continue
            if key not in self.columns:
                continue
            if key in TIME_COLUMNS:
                value = _time(record, key, lineno, required=key == "started_at")
            elif key in INT_COLUMNS:
                low, high = INT_COLUMNS[key]
                required = key in ("frames_dropped", "bytes_dropped")
                value = _integer(record, key, lineno, low, high, required=required)
            values[key] = _dump_column(value)
        self.flush()
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        sql = f"INSERT INTO connections ({names}) VALUES ({marks}) RETURNING id"
        new = int(one_row(self.db, sql, list(values.values()))[0])
        self.summary.connections[old] = new
        self.indexers[old] = ConnectionIndexer()
        missing = {"protocol_version", "client_info", "agent_info"} - set(record)
        if missing:
            self.derive_facts[old] = missing

    def _connection_of(self, record: dict[str, Any], lineno: int) -> int:
        old = _integer(record, "connection", lineno, INT64_MIN, INT64_MAX)
        new = self.summary.connections.get(old)
        if new is None:
            raise ExportFormatError(
                f"line {lineno}: connection {old} has no connection line before it"
            )
        return new

    def frame(self, record: dict[str, Any], lineno: int) -> None:
        cid = self._connection_of(record, lineno)
        seq = _integer(record, "seq", lineno, 0, INT64_MAX)
        direction = record.get("direction")
        if direction not in ("c2a", "a2c"):
            raise ExportFormatError(
                f'line {lineno}: "direction" must be "c2a" or "a2c" ({direction!r} given)'
            )
        ts = _time(record, "ts", lineno)
        mono_ns = _integer(record, "mono_ns", lineno, INT64_MIN, INT64_MAX)
        binary = record.get("binary", False)
        if not isinstance(binary, bool):
            raise ExportFormatError(f'line {lineno}: "binary" must be true or false')
        raw = _raw_of(record, lineno)
        cols = self.indexers[record["connection"]].index(direction, raw)
        self.frames.append(
            (
                cid,
                seq,
                ts,
                mono_ns,
                direction,
                raw,
                len(raw),
                int(binary),
                *(escape_surrogates(v) if isinstance(v, str) else v for v in cols.values()),
                lineno,
            )
        )
        self.summary.frames += 1
        if len(self.frames) >= _BATCH:
            self.flush(end=False)

    def stderr_line(self, record: dict[str, Any], lineno: int) -> None:
        cid = self._connection_of(record, lineno)
        seq = _integer(record, "seq", lineno, 0, INT64_MAX)
        ts = _time(record, "ts", lineno)
        mono_ns = _integer(record, "mono_ns", lineno, INT64_MIN, INT64_MAX)
        self.stderr.append((cid, seq, ts, mono_ns, _raw_of(record, lineno), lineno))
        self.summary.stderr_lines += 1
        if len(self.stderr) >= _BATCH:
            self.flush(end=False)

    def event(self, record: dict[str, Any], lineno: int) -> None:
        cid = None if record.get("connection") is None else self._connection_of(record, lineno)
        ts = _time(record, "ts", lineno)
        kind = escape_surrogates(_need(record, "kind", (str,), lineno))
        detail = record.get("detail")
        text = None if detail is None else _json_text(detail)
        self.flush()
        if cid is None and self.skip_duplicates and self._has_event(ts, kind, text):
            return
        self.db.execute(
            "INSERT INTO events (connection_id, ts, kind, detail) VALUES (?, ?, ?, ?)",
            (cid, ts, kind, text),
        )
        self.summary.events += 1

    def _has_event(self, ts: float, kind: str, detail: str | None) -> bool:
        """Whether a recording-wide event just like this one is already in the database."""
        found = self.db.execute(
            "SELECT 1 FROM events WHERE connection_id IS NULL AND ts = ? AND kind = ? "
            "AND (detail = ? OR (detail IS NULL AND ?)) LIMIT 1",
            (ts, kind, detail, detail is None),
        ).fetchone()
        return found is not None

    def flush(self, *, end: bool = True) -> None:
        """Write the buffered frames and stderr lines; ``end``: and finish the bulk insert
        (before any other statement)."""
        try:
            if self.frames:
                self.bulk.write("frames", FRAME_COLUMNS, [r[:-1] for r in self.frames])
            if self.stderr:
                self.bulk.write("stderr_lines", STDERR_COLUMNS, [r[:-1] for r in self.stderr])
            if end:
                self.bulk.end()
        except engine_of(self.db).integrity_errors as exc:
            self.bulk.end(exc)
            raise ExportFormatError(self._duplicate(exc)) from None
        self.frames.clear()
        self.stderr.clear()

    def _duplicate(self, exc: Exception) -> str:
        detail = getattr(getattr(exc, "diag", None), "message_detail", None)
        if detail:  # PostgreSQL names the row (its batch may be written already)
            return f"a frame or stderr seq appears twice in its connection ({detail})"
        seen: set[tuple[str, int, int]] = set()
        for table, rows in (("frame", self.frames), ("stderr", self.stderr)):
            for row in rows:
                key = (table, row[0], row[1])
                if key in seen:
                    return f"line {row[-1]}: {table} seq {row[1]} appears twice in its connection"
                seen.add(key)
        return "a frame or stderr seq appears twice in its connection"

    def finish(self) -> None:
        self.flush()
        for old, missing in self.derive_facts.items():
            facts = self.indexers[old].facts
            values = {
                "protocol_version": facts.protocol_version,
                "client_info": _dump_column(facts.client_info),
                "agent_info": _dump_column(facts.agent_info),
            }
            sets = {k: values[k] for k in missing if values[k] is not None}
            if sets:
                self.db.execute(
                    f"UPDATE connections SET {', '.join(f'{k} = ?' for k in sets)} WHERE id = ?",
                    [*sets.values(), self.summary.connections[old]],
                )
        if "digest" in self.columns:
            self._deduplicate()

    def _deduplicate(self) -> None:
        """Database each imported connection's digest; with ``skip_duplicates`` drop the ones
        already in the database (compared with the rows that were there before the import).

        Only rows with the same start time, transport and frame count can be the same, so
        digests of older rows are computed (and stored, once the row is closed) only for
        those candidates: a large recording is not read for nothing.
        """
        for old, new in list(self.summary.connections.items()):
            digest = connection_digest(self.db, new)
            self.db.execute("UPDATE connections SET digest = ? WHERE id = ?", (digest, new))
            if not self.skip_duplicates:
                continue
            same = self._existing_with_digest(new, digest)
            if same is None:
                earlier = self._earlier_copy_of(new)
                if earlier is not None:
                    self._grow(old, new, earlier)
                continue
            for table, attr in (
                ("frames", "frames"),
                ("stderr_lines", "stderr_lines"),
                ("events", "events"),
            ):
                cur = self.db.execute(f"DELETE FROM {table} WHERE connection_id = ?", (new,))
                setattr(self.summary, attr, getattr(self.summary, attr) - cur.rowcount)
            self.db.execute("DELETE FROM connections WHERE id = ?", (new,))
            del self.summary.connections[old]
            self.summary.skipped[old] = same

    def _existing_with_digest(self, new: int, digest: str) -> int | None:
        candidates = self.db.execute(
            "SELECT c.id, c.digest, c.ended_at FROM connections c, connections n "
            "WHERE n.id = ? AND c.id <= ? AND c.started_at = n.started_at "
            "AND c.transport = n.transport "
            "AND (SELECT count(*) FROM frames WHERE connection_id = c.id) = "
            "(SELECT count(*) FROM frames WHERE connection_id = n.id) ORDER BY c.id",
            (new, self.last_existing_id),
        ).fetchall()
        for cid, stored, ended_at in candidates:
            if stored is None:
                stored = connection_digest(self.db, cid)
                if ended_at is not None:  # a connection still recording may grow
                    self.db.execute("UPDATE connections SET digest = ? WHERE id = ?", (stored, cid))
            if stored == digest:
                return int(cid)
        return None

    def _earlier_copy_of(self, new: int) -> int | None:
        """A connection that was in the database before the import and holds the first
        frames of ``new`` exactly (the same identity facts, the same frames so far): the
        same connection, copied while it was still recording."""
        candidates = self.db.execute(
            "SELECT c.id, (SELECT count(*) FROM frames WHERE connection_id = c.id) "
            "FROM connections c, connections n "
            "WHERE n.id = ? AND c.id <= ? AND c.started_at = n.started_at "
            "AND c.transport = n.transport ORDER BY c.id",
            (new, self.last_existing_id),
        ).fetchall()
        (total,) = one_row(self.db, "SELECT count(*) FROM frames WHERE connection_id = ?", (new,))
        for cid, count in candidates:
            count = int(count)
            if count >= int(total):
                continue  # not shorter: a duplicate was looked for already
            if connection_digest(self.db, int(cid), None) == connection_digest(self.db, new, count):
                return int(cid)
        return None

    def _grow(self, old: int, new: int, earlier: int) -> None:
        """Add to ``earlier`` what ``new`` has beyond it (frames and stderr lines of higher
        seqs, events it lacks), take ``new``'s connection columns (its end, counts, facts)
        and drop ``new``: the database holds the connection once, whole."""
        db = self.db
        added = 0
        for table, attr in (("frames", "frames"), ("stderr_lines", "stderr_lines")):
            (last,) = one_row(
                db,
                f"SELECT coalesce(max(seq), -1) FROM {table} WHERE connection_id = ?",
                (earlier,),
            )
            cur = db.execute(
                f"UPDATE {table} SET connection_id = ? WHERE connection_id = ? AND seq > ?",
                (earlier, new, last),
            )
            if table == "frames":
                added = cur.rowcount
            cur = db.execute(f"DELETE FROM {table} WHERE connection_id = ?", (new,))
            setattr(self.summary, attr, getattr(self.summary, attr) - cur.rowcount)
        cur = db.execute(
            "DELETE FROM events WHERE connection_id = ? AND EXISTS (SELECT 1 FROM events e "
            "WHERE e.connection_id = ? AND e.ts = events.ts AND e.kind = events.kind "
            "AND (e.detail = events.detail OR (e.detail IS NULL AND events.detail IS NULL)))",
            (new, earlier),
        )
        self.summary.events -= cur.rowcount
        db.execute("UPDATE events SET connection_id = ? WHERE connection_id = ?", (earlier, new))
        columns = sorted(self.columns - {"id", "digest"})
        names = ", ".join(columns)
        db.execute(
            f"UPDATE connections SET ({names}) = (SELECT {names} FROM connections WHERE id = ?) "
            "WHERE id = ?",
            (new, earlier),
        )
        db.execute("DELETE FROM connections WHERE id = ?", (new,))
        (ended,) = one_row(db, "SELECT ended_at FROM connections WHERE id = ?", (earlier,))
        digest = connection_digest(db, earlier) if ended is not None else None
        db.execute("UPDATE connections SET digest = ? WHERE id = ?", (digest, earlier))
        del self.summary.connections[old]
        self.summary.grown[old] = (earlier, added)


def import_stream(
    stream: IO[bytes] | Iterable[bytes],
    db: Database,
    *,
    skip_duplicates: bool = False,
) -> ImportSummary:
    """Import an export read from ``stream`` into ``db`` in one transaction (all or nothing).

    ``skip_duplicates``: leave out every connection whose :func:`connection_digest` equals
    that of a connection already in ``db`` (listed in :attr:`ImportSummary.skipped`).
    """
    with engine_of(db).import_transaction(db):
        importer = _Importer(db, skip_duplicates=skip_duplicates)
        handlers = {
            "connection": importer.connection,
            "frame": importer.frame,
            "stderr": importer.stderr_line,
            "event": importer.event,
        }
        try:
            for lineno, record in iter_records(stream):
                kind = record["type"]
                if kind == "header":
                    importer.summary.format_version = record["version"]
                    created_by = record.get("created_by")
                    importer.summary.created_by = (
                        created_by if isinstance(created_by, str) else None
                    )
                elif kind != "end":
                    handlers[kind](record, lineno)
            importer.finish()
        except BaseException as exc:
            importer.bulk.end(exc)
            raise
    return importer.summary


def import_export(
    source: Path | str | IO[bytes], db: Database, *, skip_duplicates: bool = False
) -> ImportSummary:
    """Import an export file (a path or a binary stream) into the open recording ``db``.

    Connections get new ids (see :attr:`ImportSummary.connections`); frames get their index
    columns derived again. Everything happens in one transaction: on any error nothing is
    imported and an :class:`ExportFormatError` (or :class:`RecordingError`) says why.
    ``db`` may be any recording connection, e.g. an in-memory one
    (:func:`~acp_proxy.store.engine.memory_database`; the schema is created if it is
    empty). ``skip_duplicates``: see :func:`import_stream` (``acp-proxy import`` skips them
    unless ``--allow-duplicates``).
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise RecordingError(f"no such file: {path}")
        if path.is_dir():
            raise RecordingError(f"{path} is a directory, not an export file")
        with path.open("rb") as stream:
            return import_stream(stream, db, skip_duplicates=skip_duplicates)
    return import_stream(source, db, skip_duplicates=skip_duplicates)
