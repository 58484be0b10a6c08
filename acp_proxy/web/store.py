"""The inspector's JSON shapes over :class:`~acp_proxy.store.reader.RecordingReader`.

No SQL here: every read goes through the reader. Every request opens a fresh read-only
reader (:func:`read_connection`), so the inspector sees what WAL writers (this or other proxy
processes) committed a moment ago, never takes a write lock and never creates a file beside
the recording. A PostgreSQL store (a ``postgresql://`` URL) is read through a few
read-only connections kept open (:class:`~acp_proxy.store.pool.ReadPool`); each query sees what was
committed before it, as with SQLite's WAL. Frame lists use keyset pagination on frame ids
(``after_id`` / ``before_id`` plus a limit, never ``OFFSET``): a page costs the same at the
start and the end of a 100k-frame recording, and nothing here reads a whole recording into
memory. Large frames are only ever read whole by :func:`frame_detail` (one frame) and
:func:`frame_raw`.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from acp_proxy.acp.preview import frame_preview
from acp_proxy.store.engine import SQLITE, RecordingUrl, database_errors, parse_location
from acp_proxy.store.live_tail import LiveTail
from acp_proxy.store.liveness import END_REASONS
from acp_proxy.store.pg import describe_error
from acp_proxy.store.pool import ReadPool
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import ConnectionRow, FrameFilter, SessionSpan, display_name
from acp_proxy.store.schema import RecordingError
from acp_proxy.wire.frame import Frame

__all__ = [
    "DIRECTIONS",
    "FrameFilter",
    "connection_json",
    "db_state",
    "follow_frames",
    "frame_detail",
    "frame_raw",
    "frame_summary_json",
    "list_frames",
    "open_checked",
    "read_connection",
]

MAX_LIMIT = 1000
DEFAULT_LIMIT = 200
PREVIEW_BYTES = 400
DETAIL_MAX_BYTES = 2 * 1024 * 1024
"""A frame bigger than this is shown cut in the page; the exact bytes stay downloadable."""

DIRECTIONS = ("c2a", "a2c")


Location = Path | RecordingUrl
"""Where the inspected recording is: a SQLite file or a PostgreSQL database."""


def location(value: str | Path) -> Location:
    """A recording argument as the inspector keeps it (a URL as a :class:`RecordingUrl`)."""
    return parse_location(value)


def location_key(where: Location) -> str:
    """The recording's identity for the inspector's caches (a file by its real path)."""
    return str(where) if isinstance(where, RecordingUrl) else str(where.resolve())


def location_label(where: Location) -> str:
    """The recording's short name for the page title: a file's name, a database's URL."""
    return str(where) if isinstance(where, RecordingUrl) else where.name


def damaged(path: Path, exc: BaseException) -> RecordingError:
    """The one line every command gives for a recording SQLite cannot read."""
    return RecordingError(f"{path}: the recording is damaged: {exc}")


PG_POOL = ReadPool()


@contextlib.contextmanager
def _read_pg(where: RecordingUrl) -> Iterator[RecordingReader]:
    db = PG_POOL.take(where)
    healthy = False
    try:
        try:
            yield RecordingReader(db, source=str(where))
            healthy = True
        except database_errors() as exc:
            raise RecordingError(f"{where}: {describe_error(exc)}") from None
    finally:
        PG_POOL.give_back(where, db, healthy)


@contextlib.contextmanager
def read_connection(path: str | Path) -> Iterator[RecordingReader]:
    """A fresh read-only reader of the recording at ``path`` (closed on exit); for a
    PostgreSQL URL a pooled connection (:class:`~acp_proxy.store.pool.ReadPool`).

    Raises :class:`RecordingError` with a one-line message when the file is missing, is not
    SQLite, is not a recording, comes from a newer acp-proxy, or is damaged (or the database
    cannot be reached, or fails).
    """
    where = location(path)
    if isinstance(where, RecordingUrl):
        with _read_pg(where) as pg_reader:
            yield pg_reader
        return
    p = where
    reader = RecordingReader.open(p, timeout=10.0)
    try:
        try:
            yield reader
        except SQLITE.damaged_errors as exc:
            raise damaged(p, exc) from None
    finally:
        reader.close()


def open_checked(path: str | Path) -> None:
    """Refuse (:class:`RecordingError`) a recording ``web`` could not show, before serving.

    Opening checks the header and the schema; this also reads the ends of the tables, so a
    truncated or damaged file fails here with the line ``ls`` would give, instead of the
    inspector starting on what looks like an empty recording.
    """
    with read_connection(path) as reader:
        reader.check_intact()


def db_state(reader: RecordingReader) -> tuple[int, int, float, int]:
    """A cheap fingerprint of what changed (see :meth:`RecordingReader.change_mark`)."""
    return reader.change_mark()


def connection_json(
    reader: RecordingReader, row: ConnectionRow, sessions: list[SessionSpan]
) -> dict[str, Any]:
    """One connection as the page shows it (``live`` is true only while it is recorded)."""
    command = row.agent_command
    agent = display_name(row.agent_info)
    if agent is None and isinstance(command, list) and command:
        agent = " ".join(str(a) for a in command)
    return {
        "id": row.id,
        "started_at": row.started_at,
        "ended_at": row.ended_at,
        "state": row.state,
        "state_reason": row.state_reason,
        "live": row.running,
        "last_seen_at": row.last_seen_at,
        "end_reason": row.end_reason,
        "end_note": END_REASONS.get(row.end_reason or ""),
        "duration": row.duration,
        "last_frame_at": reader.last_frame_at(row.id),
        "transport": row.transport,
        "agent_command": command,
        "cwd": row.cwd,
        "pid": row.pid,
        "exit_status": row.exit_status,
        "protocol_version": row.protocol_version,
        "client": display_name(row.client_info),
        "client_info": row.client_info,
        "agent": agent,
        "agent_info": row.agent_info,
        "label": row.label,
        "peer": row.peer,
        "host": row.host,
        "frames_dropped": row.frames_dropped,
        "frame_count": row.frame_count,
        "sessions": [
            {
                "session_id": s.session_id,
                "frame_count": s.frame_count,
                "first_seq": s.first_seq,
                "started_at": s.started_at,
                "last_frame_at": s.last_frame_at,
                "duration": None
                if s.started_at is None or s.last_frame_at is None
                else s.last_frame_at - s.started_at,
            }
            for s in sorted(sessions, key=lambda s: s.first_seq)
        ],
    }


def _preview(raw: bytes, size: int) -> str:
    text = raw.decode("utf-8", "backslashreplace")
    if len(raw) >= size:
        text = text.rstrip("\r\n")
    return text


def _summary(reader: RecordingReader, f: Frame) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": f.id,
        "connection_id": f.connection_id,
        "seq": f.seq,
        "ts": f.ts,
        "direction": f.direction,
        "size": f.size,
        "binary": f.binary,
        "kind": f.kind,
        "rpc_id": f.rpc_id,
        "method": f.method,
        "session_id": f.session_id,
        "update_kind": f.update_kind,
        "entity_type": f.entity_type,
        "entity_id": f.entity_id,
        "preview": _preview(f.raw, f.size),
        "truncated": len(f.raw) < f.size,
        "pair": None,
    }
    shown = frame_preview(f.raw, f.size, kind=f.kind, method=f.method, update_kind=f.update_kind)
    item["label"] = shown.label
    item["summary"] = shown.summary
    item["text"] = shown.text
    item["message_id"] = shown.message_id or (
        f.entity_id if f.entity_type in ("agent_message", "user_message", "agent_thought") else None
    )
    item["error"] = shown.error
    if f.kind in ("request", "response") and f.rpc_id is not None:
        item["pair"] = pair_of(reader, f)
    return item


def pair_of(reader: RecordingReader, f: Frame) -> dict[str, Any]:
    """The other half of a request/response pair (paired per direction), with latency."""
    assert f.kind is not None and f.rpc_id is not None
    role = "request" if f.kind == "request" else "response"
    other = reader.pair_of(f.connection_id, f.seq, f.direction, f.kind, f.rpc_id)
    if other is None:
        return {"id": None, "seq": None, "latency_ms": None, "role": role}
    latency = other.mono_ns - f.mono_ns if role == "request" else f.mono_ns - other.mono_ns
    return {"id": other.id, "seq": other.seq, "latency_ms": latency / 1e6, "role": role}


def list_frames(
    reader: RecordingReader,
    flt: FrameFilter,
    *,
    after_id: int | None = None,
    before_id: int | None = None,
    limit: int = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """One page of frame summaries in id order (one connection) or time order (all, on a
    file: :attr:`~acp_proxy.store.reader.RecordingReader.pages_by_time`).

    ``after_id``: the page after that id (the default, ``0``, is the first page);
    ``before_id``: the page ending just before that id (a huge value gives the last page).
    ``has_more_after`` / ``has_more_before`` tell whether another page exists.
    """
    limit = max(1, min(int(limit), MAX_LIMIT))
    backwards = before_id is not None and after_id is None
    by_time = flt.connection_id is None and reader.pages_by_time  # "All frames", on a file
    rows, more = reader.frame_page(
        flt,
        after_id=after_id or 0,
        before_id=before_id if backwards else None,
        limit=limit,
        preview=PREVIEW_BYTES,
        by_time=by_time,
    )
    frames = [_summary(reader, r) for r in rows]
    if backwards:
        has_before = more
        has_after = bool(frames) and reader.frame_exists(
            flt, after_id=frames[-1]["id"], by_time=by_time
        )
    else:
        has_after = more
        has_before = bool(frames) and reader.frame_exists(
            flt, before_id=frames[0]["id"], by_time=by_time
        )
    return {
        "frames": frames,
        "has_more_before": has_before,
        "has_more_after": has_after,
        "max_id": reader.max_frame_id(),
    }


def follow_frames(
    reader: RecordingReader, flt: FrameFilter, tail: LiveTail, max_id: int, *, limit: int
) -> dict[str, Any]:
    """The frames committed since ``tail`` last looked, in id order (the live push).

    ``max_id`` is the highest frame id this poll saw (read before anything else); see
    :mod:`acp_proxy.store.live_tail` for why that order matters with several writers.
    """
    tail.noted(time.monotonic(), max_id, reader.frame_writers())
    rows, more = reader.live_frames(flt, tail, limit=max(1, limit), preview=PREVIEW_BYTES)
    tail.fetched(((r.id, r.connection_id, r.seq) for r in rows), complete=not more)
    return {"frames": [_summary(reader, r) for r in rows], "has_more_after": more}


def frame_summary_json(reader: RecordingReader, frame_id: int) -> dict[str, Any] | None:
    """One frame as a list row shows it (the shape of :func:`list_frames`' frames)."""
    f = reader.frame_summary(frame_id, head=PREVIEW_BYTES)
    return None if f is None else _summary(reader, f)


def frame_detail(reader: RecordingReader, frame_id: int) -> dict[str, Any] | None:
    """One frame with its exact bytes (as text when valid UTF-8, else base64 and hex)."""
    f = reader.frame_summary(frame_id, head=DETAIL_MAX_BYTES)
    if f is None:
        return None
    item = _summary(reader, f)
    del item["preview"]
    raw = f.raw
    item["truncated"] = len(raw) < f.size
    item["shown_bytes"] = len(raw)
    try:
        text: str | None = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = None
        if item["truncated"] and exc.start >= len(raw) - 3:
            # The cut may have split a character: valid up to the cut still counts as text.
            try:
                text = raw[: exc.start].decode("utf-8")
            except UnicodeDecodeError:
                text = None
    item["utf8"] = text is not None
    item["text"] = text
    item["base64"] = None if text is not None else base64.b64encode(raw).decode("ascii")
    item["hex"] = None if text is not None else raw[:65536].hex(" ")
    return item


EXPORT_PAGE = 1000


def export_page(
    reader: RecordingReader, flt: FrameFilter, *, after_id: int
) -> tuple[bytes, int | None]:
    """One page of the filtered frames as JSON lines (``acp-proxy export``'s frame records,
    plus the frame ``id``) and the cursor of the next page (``None`` after the last)."""
    by_time = flt.connection_id is None and reader.pages_by_time
    rows, more = reader.frame_page(
        flt,
        after_id=after_id,
        before_id=None,
        limit=EXPORT_PAGE,
        preview=2**31 - 1,
        by_time=by_time,
    )
    out = bytearray()
    for f in rows:
        record: dict[str, Any] = {
            "type": "frame",
            "id": f.id,
            "connection": f.connection_id,
            "seq": f.seq,
            "direction": f.direction,
            "ts": f.ts,
            "mono_ns": f.mono_ns,
        }
        if f.binary:
            record["binary"] = True
        try:
            record["text"] = f.raw.decode("utf-8")
        except UnicodeDecodeError:
            record["base64"] = base64.b64encode(f.raw).decode("ascii")
        out += orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    return bytes(out), (rows[-1].id if more and rows else None)


def frame_raw(reader: RecordingReader, frame_id: int) -> bytes | None:
    """The exact bytes of one frame."""
    return reader.frame_raw(frame_id)
