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
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from acp_proxy import __version__
from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.formats.redact import RedactRules, dumps_compact, rules_for
from acp_proxy.store.columns import FRAME_COLUMN_NAMES
from acp_proxy.store.engine import (
    BulkInserter,
    Database,
    engine_of,
    one_row,
    stream_rows,
    table_columns,
)
from acp_proxy.store.reader import json_column
from acp_proxy.store.schema import RecordingError

FORMAT_NAME = "acp-proxy-recording"
FORMAT_VERSION = 1
CREATED_BY = f"acp-proxy {__version__}"

JSON_COLUMNS = frozenset({"agent_command", "client_info", "agent_info", "headers", "meta"})
"""Connection columns that hold JSON text; exported as JSON values."""

_BATCH = 500
_SQLITE_MAGIC = b"SQLite format 3\x00"

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_UNIX_TIME = 253402300799.0
"""The last second of the year 9999: the largest wall-clock time an import accepts."""

TIME_COLUMNS = frozenset({"started_at", "ended_at", "last_seen_at"})
"""Connection columns holding unix times (seconds): finite, 0 .. :data:`MAX_UNIX_TIME`."""

INT_COLUMNS: dict[str, tuple[int, int]] = {
    "pid": (0, INT64_MAX),
    "proxy_pid": (0, INT64_MAX),
    "exit_status": (INT64_MIN, INT64_MAX),
    "protocol_version": (0, INT64_MAX),
    "frames_dropped": (0, INT64_MAX),
    "bytes_dropped": (0, INT64_MAX),
}
"""Connection columns holding integers, with the range an import accepts."""

DERIVED_COLUMNS = frozenset({"digest"})
"""Connection columns an export leaves out (the importer computes them again)."""

OMITTED_WHEN_NULL = frozenset({"last_seen_at", "end_reason", "host"})
"""Columns newer than the format's first version: exported only when set, so a recording
without them exports to the same bytes as before they existed."""

IDENTITY_COLUMNS = ("started_at", "transport", "agent_command", "cwd", "pid", "peer", "host")
"""The connection facts that, with its frames, make up its :func:`connection_digest`."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as its JSON escape (``\\ud800``, 6 chars).

    JSON may hold a lone surrogate (``"\\ud800"``: a JavaScript peer that cut a string
    between the halves of a pair); Python decodes it, but no UTF-8 text can hold it, so
    SQLite and stdout refuse it. Its escape is what the peer sent, and valid JSON text.
    """
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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
    skipped: dict[int, int] = field(default_factory=dict)
    """Connection id in the file -> the connection already in the database it duplicates
    (``skip_duplicates``; its frames, stderr and events were not imported)."""
    grown: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Connection id in the file -> (the connection in the database it continues, the frames
    added to that one): the database held an earlier, shorter copy of the same connection
    (copied while it was still recording); only what is new was added to it
    (``skip_duplicates``)."""
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
    """Database ``clean`` (the redacted copy of ``raw``, or ``raw`` itself) in ``record``."""
    if clean is not raw and clean != raw:
        record["redacted"] = True
        stats.redacted += 1
    record.update(_raw_fields(clean))


def _connection_columns(db: Database) -> list[str]:
    return table_columns(db, "connections")


def iter_export(
    db: Database,
    *,
    connection_id: int | None = None,
    connection_ids: Sequence[int] | None = None,
    redact: bool | RedactRules | None = True,
    summary: ExportSummary | None = None,
) -> Iterator[bytes]:
    """The lines of an export of ``db`` (each ending in ``\\n``), streamed.

    ``connection_id`` (or several, ``connection_ids``) limits it to those connections (a
    :class:`RecordingError` if one is absent; recording-wide events are then left out);
    ``redact`` replaces secrets in the exported copy (see :mod:`acp_proxy.formats.redact`;
    True: the built-in rules, or a rule set).
    """
    rules = rules_for(redact)
    stats = summary if summary is not None else ExportSummary()
    columns = _connection_columns(db)
    if not columns or "id" not in columns:
        raise RecordingError("the database has no connections table")
    wanted = list(connection_ids or ())
    if connection_id is not None:
        wanted.append(connection_id)
    selected = connection_id is not None or connection_ids is not None
    query = f"SELECT {', '.join(columns)} FROM connections"
    if selected:
        query += f" WHERE id IN ({', '.join('?' for _ in wanted) or 'NULL'})"
    conn_rows = db.execute(query + " ORDER BY id", wanted).fetchall()
    missing = sorted(set(wanted) - {row[columns.index("id")] for row in conn_rows})
    if missing:
        raise RecordingError(f"no connection {missing[0]} in this recording")
    yield _line(
        {
            "type": "header",
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "created_by": CREATED_BY,
            "redacted": rules is not None,
        }
    )
    for row in conn_rows:
        record: dict[str, Any] = {"type": "connection"}
        changed = False
        for name, value in zip(columns, row, strict=True):
            if name == "id":
                record["connection"] = value
                continue
            if name in DERIVED_COLUMNS or (value is None and name in OMITTED_WHEN_NULL):
                continue
            if name in JSON_COLUMNS:
                value = json_column(value)
            if rules is not None:
                value, hit = rules.field_value(name, value)
                changed = changed or hit
            record[name] = value
        if changed:
            record["redacted"] = True
            stats.redacted += 1
        stats.connections += 1
        yield _line(record)
        cid = row[columns.index("id")]
        yield from _export_frames(db, cid, rules, stats)
        yield from _export_stderr(db, cid, rules, stats)
        yield from _export_events(db, "connection_id = ?", [cid], rules, stats)
    if not selected:
        yield from _export_events(db, "connection_id IS NULL", [], rules, stats)
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
    db: Database, cid: int, rules: RedactRules | None, stats: ExportSummary
) -> Iterator[bytes]:
    cur = stream_rows(
        db,
        'SELECT seq, ts, mono_ns, direction, raw, "binary" FROM frames '
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
        _put_raw(record, raw, rules.frame(raw, binary=bool(binary)) if rules else raw, stats)
        stats.frames += 1
        yield _line(record)


def _export_stderr(
    db: Database, cid: int, rules: RedactRules | None, stats: ExportSummary
) -> Iterator[bytes]:
    cur = stream_rows(
        db,
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
        _put_raw(record, raw, rules.line(raw) if rules else raw, stats)
        stats.stderr_lines += 1
        yield _line(record)


def _export_events(
    db: Database, where: str, args: list[Any], rules: RedactRules | None, stats: ExportSummary
) -> Iterator[bytes]:
    cur = stream_rows(
        db, f"SELECT connection_id, ts, kind, detail FROM events WHERE {where} ORDER BY id", args
    )
    for cid, ts, kind, detail in cur:
        value = json_column(detail)
        record: dict[str, Any] = {"type": "event", "connection": cid, "ts": ts, "kind": kind}
        if rules is not None:
            value, changed = rules.field_value("detail", value)
            if changed:
                record["redacted"] = True
                stats.redacted += 1
        record["detail"] = value
        stats.events += 1
        yield _line(record)


def export_recording(
    db: Database,
    out: IO[bytes],
    *,
    connection_id: int | None = None,
    connection_ids: Sequence[int] | None = None,
    redact: bool | RedactRules | None = True,
) -> ExportSummary:
    """Write the export of ``db`` to the binary stream ``out``; returns what was written."""
    summary = ExportSummary()
    write = out.write
    lines = iter_export(
        db,
        connection_id=connection_id,
        connection_ids=connection_ids,
        redact=redact,
        summary=summary,
    )
    for line in lines:
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


def escape_strings(value: Any) -> Any:
    """``value`` with :func:`escape_surrogates` applied to every string in it (keys too)."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, list):
        return [escape_strings(v) for v in value]
    if isinstance(value, dict):
        return {escape_surrogates(str(k)): escape_strings(v) for k, v in value.items()}
    return value


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


def connection_digest(db: Database, connection_id: int, frames: int | None = None) -> str:
    """A content digest of one recorded connection: its identity facts and every frame.

    SHA-256 over the :data:`IDENTITY_COLUMNS` (as canonical JSON) and, in ``seq`` order,
    each frame's direction, length and raw bytes. Two connections with the same digest are
    the same recording of the same conversation (e.g. one export imported twice); ids,
    timestamps of frames and derived columns do not enter it. Stored in
    ``connections.digest`` by ``acp-proxy import``. ``frames``: of its first that many frames
    only (what an earlier copy of a connection that was still recording holds).
    """
    row = db.execute(
        f"SELECT {', '.join(IDENTITY_COLUMNS)} FROM connections WHERE id = ?", (connection_id,)
    ).fetchone()
    if row is None:
        raise RecordingError(f"no connection {connection_id} in this recording")
    facts = [
        json_column(v) if k in JSON_COLUMNS else v
        for k, v in zip(IDENTITY_COLUMNS, row, strict=True)
    ]
    digest = hashlib.sha256()
    digest.update(json.dumps(facts, sort_keys=True, ensure_ascii=True, default=str).encode())
    limit = "" if frames is None else f" LIMIT {int(frames)}"
    for direction, raw in stream_rows(
        db,
        f"SELECT direction, raw FROM frames WHERE connection_id = ? ORDER BY seq{limit}",
        (connection_id,),
    ):
        data = bytes(raw)
        digest.update(b"\n%s %d\n" % (str(direction).encode(), len(data)))
        digest.update(data)
    return digest.hexdigest()


# -- importing -------------------------------------------------------------------------------

FRAME_COLUMNS = FRAME_COLUMN_NAMES
STDERR_COLUMNS = ("connection_id", "seq", "ts", "mono_ns", "raw")


class _Importer:
    def __init__(self, db: Database, *, skip_duplicates: bool = False) -> None:
        self.db = db
        self.columns = set(_connection_columns(db))
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


# -- copying ---------------------------------------------------------------------------------


def select_connections(
    db: Database, connection_ids: Sequence[int] = (), session_id: str | None = None
) -> list[int] | None:
    """The connections a copy of part of ``db`` takes (None: all of them, and the
    recording-wide events); :class:`RecordingError` naming what is not in ``db``.

    ``session_id`` picks every connection that carries frames of that session (whole: its
    ``initialize`` and everything else, so the copy replays); with ``connection_ids`` too,
    only those of them that carry it.
    """
    if not connection_ids and session_id is None:
        return None
    chosen: list[int] = []
    if connection_ids:
        wanted = sorted(set(connection_ids))
        marks = ", ".join("?" for _ in wanted)
        found = {
            int(r[0])
            for r in db.execute(f"SELECT id FROM connections WHERE id IN ({marks})", wanted)
        }
        missing = [c for c in wanted if c not in found]
        if missing:
            raise RecordingError(f"no connection {missing[0]} in this recording")
        chosen = wanted
    if session_id is not None:
        having = [
            int(r[0])
            for r in db.execute(
                "SELECT DISTINCT connection_id FROM frames WHERE session_id = ? "
                "ORDER BY connection_id",
                (session_id,),
            )
        ]
        if not having:
            raise RecordingError(f"no session {session_id!r} in this recording")
        if connection_ids:
            having = [c for c in having if c in set(chosen)]
            if not having:
                raise RecordingError(f"session {session_id!r} is not in the connection(s) given")
        chosen = having
    return chosen


def count_frames(db: Database, connection_ids: Sequence[int] | None = None) -> int:
    """How many frames ``db`` holds (in those connections)."""
    if connection_ids is None:
        return int(one_row(db, "SELECT count(*) FROM frames")[0])
    marks = ", ".join("?" for _ in connection_ids) or "NULL"
    sql = f"SELECT count(*) FROM frames WHERE connection_id IN ({marks})"
    return int(one_row(db, sql, list(connection_ids))[0])


def copy_recording(
    source: Database,
    destination: Database,
    *,
    connection_ids: Sequence[int] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Copy the recording ``source`` (those connections) into ``destination``, byte-exact.

    An unredacted export of ``source`` streamed straight into :func:`import_stream` (no
    file, memory flat): raw bytes, seqs, times, stderr lines, events and connection columns
    are kept; connections get new ids in ``destination`` (the mapping is in the summary);
    one already there (the same :func:`connection_digest`) is skipped, so copying twice does
    not duplicate. ``progress`` is called with the number of frames read so far.
    """
    read = ExportSummary()
    lines = iter_export(source, connection_ids=connection_ids, redact=False, summary=read)
    if progress is not None:
        lines = _reporting(lines, read, progress)
    return import_stream(lines, destination, skip_duplicates=True)


def _reporting(
    lines: Iterator[bytes], read: ExportSummary, progress: Callable[[int], None]
) -> Iterator[bytes]:
    for n, line in enumerate(lines):
        if not n % 1000:
            progress(read.frames)
        yield line
    progress(read.frames)
