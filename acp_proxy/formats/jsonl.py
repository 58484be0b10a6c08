"""The JSONL export format of a recording: its definition, writing it and reading it back.

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
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from acp_proxy import __version__
from acp_proxy.formats.redact import redact_argv, redact_bytes, redact_frame
from acp_proxy.formats.redact import redact_value as _redact_value
from acp_proxy.store.columns import JSON_CONNECTION_COLUMNS
from acp_proxy.store.engine import (
    SQLITE_MAGIC,
    Database,
    stream_rows,
    table_columns,
)
from acp_proxy.store.rows import json_column
from acp_proxy.store.schema import RecordingError

FORMAT_NAME = "acp-proxy-recording"
FORMAT_VERSION = 1
CREATED_BY = f"acp-proxy {__version__}"

JSON_COLUMNS = JSON_CONNECTION_COLUMNS
"""Connection columns that hold JSON text; exported as JSON values."""


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


def connection_columns(db: Database) -> list[str]:
    return table_columns(db, "connections")


def _redact_field(name: str, value: Any) -> tuple[Any, bool]:
    if value is None:
        return value, False
    if name == "agent_command" and isinstance(value, list):
        return redact_argv(value)
    new, changed = _redact_value({name: value})
    return new[name], changed


def iter_export(
    db: Database,
    *,
    connection_id: int | None = None,
    connection_ids: Sequence[int] | None = None,
    redact: bool = True,
    summary: ExportSummary | None = None,
) -> Iterator[bytes]:
    """The lines of an export of ``db`` (each ending in ``\\n``), streamed.

    ``connection_id`` (or several, ``connection_ids``) limits it to those connections (a
    :class:`RecordingError` if one is absent; recording-wide events are then left out);
    ``redact`` replaces secrets in the exported copy (see :mod:`acp_proxy.formats.redact`).
    """
    stats = summary if summary is not None else ExportSummary()
    columns = connection_columns(db)
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
            if name in DERIVED_COLUMNS or (value is None and name in OMITTED_WHEN_NULL):
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
    if not selected:
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


def _export_frames(db: Database, cid: int, redact: bool, stats: ExportSummary) -> Iterator[bytes]:
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
        _put_raw(record, raw, redact_frame(raw, binary=bool(binary)) if redact else raw, stats)
        stats.frames += 1
        yield _line(record)


def _export_stderr(db: Database, cid: int, redact: bool, stats: ExportSummary) -> Iterator[bytes]:
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
        _put_raw(record, raw, redact_bytes(raw) if redact else raw, stats)
        stats.stderr_lines += 1
        yield _line(record)


def _export_events(
    db: Database, where: str, args: list[Any], redact: bool, stats: ExportSummary
) -> Iterator[bytes]:
    cur = stream_rows(
        db, f"SELECT connection_id, ts, kind, detail FROM events WHERE {where} ORDER BY id", args
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


def export_recording(
    db: Database,
    out: IO[bytes],
    *,
    connection_id: int | None = None,
    connection_ids: Sequence[int] | None = None,
    redact: bool = True,
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
    if first.startswith(SQLITE_MAGIC):
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


def escape_strings(value: Any) -> Any:
    """``value`` with :func:`escape_surrogates` applied to every string in it (keys too)."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, list):
        return [escape_strings(v) for v in value]
    if isinstance(value, dict):
        return {escape_surrogates(str(k)): escape_strings(v) for k, v in value.items()}
    return value


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
