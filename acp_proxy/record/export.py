"""The JSONL export format of a recording: writing it, reading it, importing it.

One JSON object per line, keys sorted, UTF-8, ``\\n`` after every line::

    {"created_by":"acp-proxy 0.1.0","format":"acp-proxy-recording","redacted":false,...}
    {"connection":1,"started_at":...,"transport":"stdio","type":"connection",...}
    {"connection":1,"direction":"c2a","mono_ns":...,"seq":1,"text":"{...}\\n","ts":...,...}
    ...
    {"connections":1,"events":0,"frames":2,"stderr":1,"type":"end"}

A frame's raw bytes are kept exactly: as ``text`` when they are valid UTF-8, as ``base64``
otherwise. Export and import both stream (one row or line at a time), so memory stays flat
on recordings of any size. ``docs/export.md`` is the public description of the format;
:data:`FORMAT_VERSION` changes when a reader of the previous version could misread a file.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from acp_proxy import __version__
from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.record.reader import json_column
from acp_proxy.record.redact import dumps_compact, redact_argv, redact_bytes, redact_frame
from acp_proxy.record.redact import redact_value as _redact_value
from acp_proxy.record.schema import RecordingError, migrate

FORMAT_NAME = "acp-proxy-recording"
FORMAT_VERSION = 1
CREATED_BY = f"acp-proxy {__version__}"

JSON_COLUMNS = frozenset({"agent_command", "client_info", "agent_info", "headers", "meta"})
"""Connection columns that hold JSON text; exported as JSON values."""

_BATCH = 500
_SQLITE_MAGIC = b"SQLite format 3\x00"


class ExportFormatError(RecordingError):
    """An export file cannot be read; the message names the line and is meant for users."""


@dataclass(slots=True)
class ExportSummary:
    """What an export wrote."""

    connections: int = 0
    frames: int = 0
    stderr_lines: int = 0
    events: int = 0
    redacted: int = 0
    """Records whose exported copy differs from the recording because of redaction."""


@dataclass(slots=True)
class ImportSummary:
    """What an import added: counts, and the new id of every imported connection."""

    connections: dict[int, int] = field(default_factory=dict)
    """Connection id in the file -> connection id in the database."""
    frames: int = 0
    stderr_lines: int = 0
    events: int = 0
    format_version: int = FORMAT_VERSION
    created_by: str | None = None


# -- writing ---------------------------------------------------------------------------------


def _line(obj: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # integers beyond 64 bits: the stdlib writes them
        text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return text.encode() + b"\n"


def _raw_fields(raw: bytes) -> dict[str, str]:
    try:
        return {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def _put_raw(record: dict[str, Any], raw: bytes, clean: bytes, stats: ExportSummary) -> None:
    """Store ``clean`` (the redacted copy of ``raw``, or ``raw`` itself) in ``record``."""
    if clean is not raw and clean != raw:
        record["redacted"] = True
        stats.redacted += 1
    record.update(_raw_fields(clean))


def _connection_columns(db: sqlite3.Connection) -> list[str]:
    return [str(r[1]) for r in db.execute("PRAGMA table_info(connections)")]


def _redact_field(name: str, value: Any) -> tuple[Any, bool]:
    if value is None:
        return value, False
    if name == "agent_command" and isinstance(value, list):
        return redact_argv(value)
    new, changed = _redact_value({name: value})
    return new[name], changed


def iter_export(
    db: sqlite3.Connection,
    *,
    connection_id: int | None = None,
    redact: bool = True,
    summary: ExportSummary | None = None,
) -> Iterator[bytes]:
    """The lines of an export of ``db`` (each ending in ``\\n``), streamed.

    ``connection_id`` limits it to one connection (a :class:`RecordingError` if absent);
    ``redact`` replaces secrets in the exported copy (see :mod:`acp_proxy.record.redact`).
    """
    stats = summary if summary is not None else ExportSummary()
    columns = _connection_columns(db)
    if not columns or "id" not in columns:
        raise RecordingError("the database has no connections table")
    query = f"SELECT {', '.join(columns)} FROM connections"
    args: list[Any] = []
    if connection_id is not None:
        query += " WHERE id = ?"
        args.append(connection_id)
    conn_rows = db.execute(query + " ORDER BY id", args).fetchall()
    if connection_id is not None and not conn_rows:
        raise RecordingError(f"no connection {connection_id} in this recording")
    yield _line(
        {
            "type": "header",
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "created_by": CREATED_BY,
            "redacted": redact,
        }
    )
    for row in conn_rows:
        record: dict[str, Any] = {"type": "connection"}
        changed = False
        for name, value in zip(columns, row, strict=True):
            if name == "id":
                record["connection"] = value
                continue
            if name in JSON_COLUMNS:
                value = json_column(value)
            if redact:
                value, hit = _redact_field(name, value)
                changed = changed or hit
            record[name] = value
        if changed:
            record["redacted"] = True
            stats.redacted += 1
        stats.connections += 1
        yield _line(record)
        cid = row[columns.index("id")]
        yield from _export_frames(db, cid, redact, stats)
        yield from _export_stderr(db, cid, redact, stats)
        yield from _export_events(db, "connection_id = ?", [cid], redact, stats)
    if connection_id is None:
        yield from _export_events(db, "connection_id IS NULL", [], redact, stats)
    yield _line(
        {
            "type": "end",
            "connections": stats.connections,
            "frames": stats.frames,
            "stderr": stats.stderr_lines,
            "events": stats.events,
        }
    )


def _export_frames(
    db: sqlite3.Connection, cid: int, redact: bool, stats: ExportSummary
) -> Iterator[bytes]:
    cur = db.execute(
        "SELECT seq, ts, mono_ns, direction, raw, binary FROM frames "
        "WHERE connection_id = ? ORDER BY seq",
        (cid,),
    )
    for seq, ts, mono_ns, direction, raw, binary in cur:
        raw = bytes(raw)
        record: dict[str, Any] = {
            "type": "frame",
            "connection": cid,
            "seq": seq,
            "direction": direction,
            "ts": ts,
            "mono_ns": mono_ns,
        }
        if binary:
            record["binary"] = True
        _put_raw(record, raw, redact_frame(raw, binary=bool(binary)) if redact else raw, stats)
        stats.frames += 1
        yield _line(record)


def _export_stderr(
    db: sqlite3.Connection, cid: int, redact: bool, stats: ExportSummary
) -> Iterator[bytes]:
    cur = db.execute(
        "SELECT seq, ts, mono_ns, raw FROM stderr_lines WHERE connection_id = ? ORDER BY seq",
        (cid,),
    )
    for seq, ts, mono_ns, raw in cur:
        raw = bytes(raw)
        record: dict[str, Any] = {
            "type": "stderr",
            "connection": cid,
            "seq": seq,
            "ts": ts,
            "mono_ns": mono_ns,
        }
        _put_raw(record, raw, redact_bytes(raw) if redact else raw, stats)
        stats.stderr_lines += 1
        yield _line(record)


def _export_events(
    db: sqlite3.Connection, where: str, args: list[Any], redact: bool, stats: ExportSummary
) -> Iterator[bytes]:
    cur = db.execute(
        f"SELECT connection_id, ts, kind, detail FROM events WHERE {where} ORDER BY id", args
    )
    for cid, ts, kind, detail in cur:
        value = json_column(detail)
        record: dict[str, Any] = {"type": "event", "connection": cid, "ts": ts, "kind": kind}
        if redact:
            value, changed = _redact_field("detail", value)
            if changed:
                record["redacted"] = True
                stats.redacted += 1
        record["detail"] = value
        stats.events += 1
        yield _line(record)


def check_intact(db: sqlite3.Connection) -> None:
    """Refuse a damaged recording before anything is written (:class:`RecordingError`).

    Export to a stream cannot take back lines it has written, so it reads every page once
    first (SQLite's ``quick_check``: page structure, record formats, NOT NULL and UNIQUE
    constraints; about as fast as reading the file).
    """
    try:
        (result,) = db.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"the recording is damaged: {exc}") from None
    if result != "ok":
        lines = [line for line in str(result).splitlines() if not line.startswith("***")]
        raise RecordingError(f"the recording is damaged: {'; '.join(lines) or result}")


def export_recording(
    db: sqlite3.Connection,
    out: IO[bytes],
    *,
    connection_id: int | None = None,
    redact: bool = True,
) -> ExportSummary:
    """Write the export of ``db`` to the binary stream ``out``; returns what was written."""
    summary = ExportSummary()
    write = out.write
    for line in iter_export(db, connection_id=connection_id, redact=redact, summary=summary):
        write(line)
    return summary


# -- reading ---------------------------------------------------------------------------------


def _parse_line(line: bytes, lineno: int) -> dict[str, Any]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            if not line.endswith(b"\n"):
                raise ExportFormatError(
                    f"line {lineno}: cut short (the file is truncated)"
                ) from None
            where = f"{exc.msg} at column {exc.colno}"
            raise ExportFormatError(f"line {lineno}: not valid JSON ({where})") from None
    if not isinstance(value, dict):
        raise ExportFormatError(f"line {lineno}: expected a JSON object")
    return value


def _check_header(first: bytes) -> dict[str, Any]:
    if first.startswith(_SQLITE_MAGIC):
        raise ExportFormatError(
            "this is a SQLite recording, not an export file (usage: acp-proxy import FILE DB)"
        )
    try:
        header = _parse_line(first, 1)
    except ExportFormatError:
        header = {}
    if header.get("type") != "header" or header.get("format") != FORMAT_NAME:
        raise ExportFormatError(
            f'not an acp-proxy export: line 1 is not a header with "format": "{FORMAT_NAME}"'
        )
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ExportFormatError(f"line 1: bad format version {version!r}")
    if version > FORMAT_VERSION:
        raise ExportFormatError(
            f"export format version {version} is newer than this acp-proxy understands "
            f"({FORMAT_VERSION}); upgrade acp-proxy"
        )
    return header


def iter_records(stream: IO[bytes] | Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Validated ``(line number, record)`` pairs of an export, header and end line included.

    Raises :class:`ExportFormatError` for anything that is not a complete, well-formed export
    of a version this code understands - including a missing end line (a truncated file).
    """
    lineno = 0
    ended = False
    counts = {"connection": 0, "frame": 0, "stderr": 0, "event": 0}
    for line in stream:
        lineno += 1
        if lineno == 1:
            yield 1, _check_header(line)
            continue
        if ended:
            if not line.strip():
                continue
            raise ExportFormatError(f"line {lineno}: data after the end line")
        record = _parse_line(line, lineno)
        kind = record.get("type")
        if kind == "end":
            ended = True
            for key, name in (
                ("connections", "connection"),
                ("frames", "frame"),
                ("stderr", "stderr"),
                ("events", "event"),
            ):
                if key in record and record[key] != counts[name]:
                    raise ExportFormatError(
                        f"line {lineno}: the end line counts {record[key]} {key} but the file "
                        f"has {counts[name]}"
                    )
        elif kind in counts:
            counts[str(kind)] += 1
        else:
            raise ExportFormatError(f"line {lineno}: unknown record type {kind!r}")
        yield lineno, record
    if lineno == 0:
        raise ExportFormatError("the file is empty, not an acp-proxy export")
    if not ended:
        raise ExportFormatError(
            f"the file ends at line {lineno} without its end line (it is truncated)"
        )


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
    if value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool)):
        return value
    return dumps_compact(value).decode()


# -- importing -------------------------------------------------------------------------------


class _Importer:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.columns = set(_connection_columns(db))
        if not self.columns:
            raise RecordingError("the database is not an acp-proxy recording (no connections)")
        self.summary = ImportSummary()
        self.indexers: dict[int, ConnectionIndexer] = {}
        self.derive_facts: dict[int, set[str]] = {}
        self.frames: list[tuple[Any, ...]] = []
        self.stderr: list[tuple[Any, ...]] = []

    def connection(self, record: dict[str, Any], lineno: int) -> None:
        old = _need(record, "connection", (int,), lineno)
        if old in self.summary.connections:
            raise ExportFormatError(f"line {lineno}: connection {old} appears twice")
        _need(record, "started_at", (int, float), lineno)
        _need(record, "transport", (str,), lineno)
        values: dict[str, Any] = {}
        for key, value in record.items():
            if key in ("type", "connection", "redacted", "id") or key not in self.columns:
                continue
            values[key] = _dump_column(value)
        self.flush()
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cur = self.db.execute(
            f"INSERT INTO connections ({names}) VALUES ({marks})", list(values.values())
        )
        new = int(cur.lastrowid or 0)
        self.summary.connections[old] = new
        self.indexers[old] = ConnectionIndexer()
        missing = {"protocol_version", "client_info", "agent_info"} - set(record)
        if missing:
            self.derive_facts[old] = missing

    def _connection_of(self, record: dict[str, Any], lineno: int) -> int:
        old = _need(record, "connection", (int,), lineno)
        new = self.summary.connections.get(old)
        if new is None:
            raise ExportFormatError(
                f"line {lineno}: connection {old} has no connection line before it"
            )
        return new

    def frame(self, record: dict[str, Any], lineno: int) -> None:
        cid = self._connection_of(record, lineno)
        seq = _need(record, "seq", (int,), lineno)
        direction = record.get("direction")
        if direction not in ("c2a", "a2c"):
            raise ExportFormatError(
                f'line {lineno}: "direction" must be "c2a" or "a2c" ({direction!r} given)'
            )
        ts = _need(record, "ts", (int, float), lineno)
        mono_ns = _need(record, "mono_ns", (int,), lineno)
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
                *cols.values(),
                lineno,
            )
        )
        self.summary.frames += 1
        if len(self.frames) >= _BATCH:
            self.flush()

    def stderr_line(self, record: dict[str, Any], lineno: int) -> None:
        cid = self._connection_of(record, lineno)
        seq = _need(record, "seq", (int,), lineno)
        ts = _need(record, "ts", (int, float), lineno)
        mono_ns = _need(record, "mono_ns", (int,), lineno)
        self.stderr.append((cid, seq, ts, mono_ns, _raw_of(record, lineno), lineno))
        self.summary.stderr_lines += 1
        if len(self.stderr) >= _BATCH:
            self.flush()

    def event(self, record: dict[str, Any], lineno: int) -> None:
        cid = None if record.get("connection") is None else self._connection_of(record, lineno)
        ts = _need(record, "ts", (int, float), lineno)
        kind = _need(record, "kind", (str,), lineno)
        detail = record.get("detail")
        self.flush()
        self.db.execute(
            "INSERT INTO events (connection_id, ts, kind, detail) VALUES (?, ?, ?, ?)",
            (cid, ts, kind, None if detail is None else dumps_compact(detail).decode()),
        )
        self.summary.events += 1

    def flush(self) -> None:
        try:
            if self.frames:
                self.db.executemany(
                    "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, raw, size, "
                    "binary, kind, rpc_id, method, session_id, update_kind, entity_type, "
                    "entity_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (row[:-1] for row in self.frames),
                )
            if self.stderr:
                self.db.executemany(
                    "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (row[:-1] for row in self.stderr),
                )
        except sqlite3.IntegrityError:
            raise ExportFormatError(self._duplicate()) from None
        self.frames.clear()
        self.stderr.clear()

    def _duplicate(self) -> str:
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


def import_stream(stream: IO[bytes] | Iterable[bytes], db: sqlite3.Connection) -> ImportSummary:
    """Import an export read from ``stream`` into ``db`` in one transaction (all or nothing)."""
    if not db.in_transaction:
        migrate(db)
    outer = db.in_transaction
    db.execute("SAVEPOINT acp_proxy_import" if outer else "BEGIN IMMEDIATE")
    try:
        importer = _Importer(db)
        handlers = {
            "connection": importer.connection,
            "frame": importer.frame,
            "stderr": importer.stderr_line,
            "event": importer.event,
        }
        for lineno, record in iter_records(stream):
            kind = record["type"]
            if kind == "header":
                importer.summary.format_version = record["version"]
                created_by = record.get("created_by")
                importer.summary.created_by = created_by if isinstance(created_by, str) else None
            elif kind != "end":
                handlers[kind](record, lineno)
        importer.finish()
    except BaseException:
        if outer:
            db.execute("ROLLBACK TO acp_proxy_import")
            db.execute("RELEASE acp_proxy_import")
        else:
            db.execute("ROLLBACK")
        raise
    db.execute("RELEASE acp_proxy_import" if outer else "COMMIT")
    return importer.summary


def import_export(source: Path | str | IO[bytes], db: sqlite3.Connection) -> ImportSummary:
    """Import an export file (a path or a binary stream) into the open recording ``db``.

    Connections get new ids (see :attr:`ImportSummary.connections`); frames get their index
    columns derived again. Everything happens in one transaction: on any error nothing is
    imported and an :class:`ExportFormatError` (or :class:`RecordingError`) says why.
    ``db`` may be any recording connection, e.g. ``sqlite3.connect(":memory:")`` (the
    schema is created if the database is empty).
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise RecordingError(f"no such file: {path}")
        if path.is_dir():
            raise RecordingError(f"{path} is a directory, not an export file")
        with path.open("rb") as stream:
            return import_stream(stream, db)
    return import_stream(source, db)
