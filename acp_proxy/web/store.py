"""Read-only queries behind the inspector's JSON endpoints.

Every call opens a fresh read-only SQLite connection (``mode=ro``), so the inspector sees
what WAL writers (this or other proxy processes) committed a moment ago and never takes a
write lock. Frame lists use keyset pagination on ``frames.id`` (``after_id`` / ``before_id``
plus a limit): a page costs the same at the start and the end of a 100k-frame recording,
and nothing here reads a whole recording into memory. Large frames are only ever read whole
by :func:`frame_detail` (one frame) and :func:`frame_raw`.
"""

from __future__ import annotations

import base64
import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_proxy.record.reader import json_column
from acp_proxy.record.schema import RecordingError, connect

MAX_LIMIT = 1000
DEFAULT_LIMIT = 200
PREVIEW_BYTES = 400
DETAIL_MAX_BYTES = 2 * 1024 * 1024
"""A frame bigger than this is shown cut in the page; the exact bytes stay downloadable."""

DIRECTIONS = ("c2a", "a2c")


@contextlib.contextmanager
def read_connection(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A fresh read-only connection to the recording at ``path`` (closed on exit).

    Raises :class:`RecordingError` with a one-line message when the file is missing, is not
    SQLite, is not a recording, or comes from a newer acp-proxy.
    """
    p = Path(path)
    conn = connect(p, create=False, readonly=True, timeout=10.0)
    try:
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            raise RecordingError(f"{p}: the recording is damaged: {exc}") from None
    finally:
        conn.close()


def _name_of(info: Any) -> str | None:
    if isinstance(info, dict):
        name = info.get("title") or info.get("name")
        if isinstance(name, str) and name:
            version = info.get("version")
            return f"{name} {version}" if isinstance(version, str) and version else name
    return None


def db_state(conn: sqlite3.Connection) -> tuple[int, int, float]:
    """A cheap fingerprint of what changed: (max frame id, connection count, sum of ends)."""
    max_id = conn.execute("SELECT coalesce(max(id), 0) FROM frames").fetchone()[0]
    count, ends = conn.execute(
        "SELECT count(*), total(ended_at) + total(coalesce(protocol_version, 0)) "
        "+ total(length(agent_info)) FROM connections"
    ).fetchone()
    return int(max_id), int(count), float(ends)


def list_connections(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Connections, oldest first, each with its sessions and frame counts.

    Counts come from indexes (``UNIQUE(connection_id, seq)`` and ``frames_session``), so this
    stays cheap on big recordings.
    """
    out: list[dict[str, Any]] = []
    rows = conn.execute(
        "SELECT id, started_at, ended_at, transport, agent_command, cwd, pid, exit_status, "
        "protocol_version, client_info, agent_info, label, peer, frames_dropped "
        "FROM connections ORDER BY id"
    ).fetchall()
    sessions = _sessions_by_connection(conn)
    for r in rows:
        cid = int(r[0])
        command = json_column(r[4])
        client_info = json_column(r[9])
        agent_info = json_column(r[10])
        count, max_seq = conn.execute(
            "SELECT count(*), coalesce(max(seq), 0) FROM frames WHERE connection_id = ?", (cid,)
        ).fetchone()
        last_ts = None
        if max_seq:
            row = conn.execute(
                "SELECT ts FROM frames WHERE connection_id = ? AND seq = ?", (cid, max_seq)
            ).fetchone()
            last_ts = row[0] if row else None
        agent = _name_of(agent_info)
        if agent is None and isinstance(command, list) and command:
            agent = " ".join(str(a) for a in command)
        out.append(
            {
                "id": cid,
                "started_at": r[1],
                "ended_at": r[2],
                "duration": None if r[2] is None else r[2] - r[1],
                "last_frame_at": last_ts,
                "transport": r[3],
                "agent_command": command,
                "cwd": r[5],
                "pid": r[6],
                "exit_status": r[7],
                "protocol_version": r[8],
                "client": _name_of(client_info),
                "client_info": client_info,
                "agent": agent,
                "agent_info": agent_info,
                "label": r[11],
                "peer": r[12],
                "frames_dropped": r[13],
                "frame_count": int(count),
                "sessions": sessions.get(cid, []),
            }
        )
    return out


def _sessions_by_connection(conn: sqlite3.Connection) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    rows = conn.execute(
        "SELECT session_id, connection_id, count(*), min(seq), max(seq) FROM frames "
        "WHERE session_id IS NOT NULL GROUP BY session_id, connection_id"
    ).fetchall()
    for sid, cid, count, first_seq, last_seq in rows:
        ts = dict(
            conn.execute(
                "SELECT seq, ts FROM frames WHERE connection_id = ? AND seq IN (?, ?)",
                (cid, first_seq, last_seq),
            ).fetchall()
        )
        first, last = ts.get(first_seq), ts.get(last_seq)
        out.setdefault(int(cid), []).append(
            {
                "session_id": sid,
                "frame_count": int(count),
                "first_seq": first_seq,
                "started_at": first,
                "last_frame_at": last,
                "duration": None if first is None or last is None else last - first,
            }
        )
    for items in out.values():
        items.sort(key=lambda s: s["first_seq"])
    return out


def distinct_values(conn: sqlite3.Connection, column: str) -> list[dict[str, Any]]:
    """Distinct values of an indexed column (``method`` or ``update_kind``) with counts."""
    if column not in ("method", "update_kind"):
        raise ValueError(column)
    rows = conn.execute(
        f"SELECT {column}, count(*) FROM frames WHERE {column} IS NOT NULL "
        f"GROUP BY {column} ORDER BY {column}"
    ).fetchall()
    return [{"value": v, "count": int(n)} for v, n in rows]


@dataclass(frozen=True, slots=True)
class FrameFilter:
    """The frame list's filters; ``None`` means "any"."""

    connection_id: int | None = None
    session_id: str | None = None
    direction: str | None = None
    method: str | None = None
    update_kind: str | None = None
    kind: str | None = None
    text: str | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if self.connection_id is not None:
            clauses.append("connection_id = ?")
            args.append(self.connection_id)
        if self.session_id is not None:
            clauses.append("session_id = ?")
            args.append(self.session_id)
        if self.direction is not None:
            clauses.append("direction = ?")
            args.append(self.direction)
        if self.method is not None:
            clauses.append("method = ?")
            args.append(self.method)
        if self.update_kind is not None:
            clauses.append("update_kind = ?")
            args.append(self.update_kind)
        if self.kind is not None:
            clauses.append("kind = ?")
            args.append(self.kind)
        if self.text:
            # Byte search in the raw frame: what was on the wire, not a re-serialization.
            clauses.append("instr(raw, ?) > 0")
            args.append(self.text.encode("utf-8"))
        return clauses, args


_SUMMARY_COLUMNS = (
    "id, connection_id, seq, ts, mono_ns, direction, size, binary, kind, rpc_id, method, "
    "session_id, update_kind, entity_type, entity_id, substr(raw, 1, ?)"
)


def _preview(raw: bytes, size: int) -> str:
    text = raw.decode("utf-8", "backslashreplace")
    if len(raw) >= size:
        text = text.rstrip("\r\n")
    return text


def _summary(conn: sqlite3.Connection, r: tuple[Any, ...]) -> dict[str, Any]:
    raw = bytes(r[15])
    item: dict[str, Any] = {
        "id": r[0],
        "connection_id": r[1],
        "seq": r[2],
        "ts": r[3],
        "direction": r[5],
        "size": r[6],
        "binary": bool(r[7]),
        "kind": r[8],
        "rpc_id": r[9],
        "method": r[10],
        "session_id": r[11],
        "update_kind": r[12],
        "entity_type": r[13],
        "entity_id": r[14],
        "preview": _preview(raw, r[6]),
        "truncated": len(raw) < r[6],
        "pair": None,
    }
    if r[8] in ("request", "response") and r[9] is not None:
        item["pair"] = pair_of(conn, r[1], r[2], r[5], r[8], r[9], r[4])
    return item


def pair_of(
    conn: sqlite3.Connection,
    connection_id: int,
    seq: int,
    direction: str,
    kind: str,
    rpc_id: str,
    mono_ns: int,
) -> dict[str, Any] | None:
    """The other half of a request/response pair, paired per direction, with latency.

    A request travelling ``c2a`` is answered by the first later ``a2c`` response with the
    same exact id text on the same connection (and the other way round).
    """
    other = "a2c" if direction == "c2a" else "c2a"
    if kind == "request":
        row = conn.execute(
            "SELECT id, seq, mono_ns FROM frames WHERE connection_id = ? AND rpc_id = ? "
            "AND direction = ? AND kind = 'response' AND seq > ? ORDER BY seq LIMIT 1",
            (connection_id, rpc_id, other, seq),
        ).fetchone()
        if row is None:
            return {"id": None, "seq": None, "latency_ms": None, "role": "request"}
        return {
            "id": row[0],
            "seq": row[1],
            "latency_ms": (row[2] - mono_ns) / 1e6,
            "role": "request",
        }
    row = conn.execute(
        "SELECT id, seq, mono_ns FROM frames WHERE connection_id = ? AND rpc_id = ? "
        "AND direction = ? AND kind = 'request' AND seq < ? ORDER BY seq DESC LIMIT 1",
        (connection_id, rpc_id, other, seq),
    ).fetchone()
    if row is None:
        return {"id": None, "seq": None, "latency_ms": None, "role": "response"}
    return {"id": row[0], "seq": row[1], "latency_ms": (mono_ns - row[2]) / 1e6, "role": "response"}


def list_frames(
    conn: sqlite3.Connection,
    flt: FrameFilter,
    *,
    after_id: int | None = None,
    before_id: int | None = None,
    limit: int = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """One page of frame summaries in id order.

    ``after_id``: the page after that id (the default, ``0``, is the first page);
    ``before_id``: the page ending just before that id (a huge value gives the last page).
    ``has_more_after`` / ``has_more_before`` tell whether another page exists.
    """
    limit = max(1, min(int(limit), MAX_LIMIT))
    clauses, args = flt.where()
    backwards = before_id is not None and after_id is None
    if backwards:
        clauses.append("id < ?")
        args.append(before_id)
        order = "DESC"
    else:
        clauses.append("id > ?")
        args.append(after_id or 0)
        order = "ASC"
    where = " AND ".join(clauses)
    rows = conn.execute(
        f"SELECT {_SUMMARY_COLUMNS} FROM frames WHERE {where} ORDER BY id {order} LIMIT ?",
        [PREVIEW_BYTES, *args, limit + 1],
    ).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    if backwards:
        rows.reverse()
    frames = [_summary(conn, r) for r in rows]
    if backwards:
        has_before = more
        has_after = bool(frames) and _exists(conn, flt, "id > ?", frames[-1]["id"])
    else:
        has_after = more
        has_before = bool(frames) and _exists(conn, flt, "id < ?", frames[0]["id"])
    return {
        "frames": frames,
        "has_more_before": has_before,
        "has_more_after": has_after,
        "max_id": int(conn.execute("SELECT coalesce(max(id), 0) FROM frames").fetchone()[0]),
    }


def _exists(conn: sqlite3.Connection, flt: FrameFilter, clause: str, value: int) -> bool:
    clauses, args = flt.where()
    clauses.append(clause)
    row = conn.execute(
        f"SELECT 1 FROM frames WHERE {' AND '.join(clauses)} LIMIT 1", [*args, value]
    ).fetchone()
    return row is not None


def frame_detail(conn: sqlite3.Connection, frame_id: int) -> dict[str, Any] | None:
    """One frame with its exact bytes (as text when valid UTF-8, else base64 and hex)."""
    row = conn.execute(
        "SELECT id, connection_id, seq, ts, mono_ns, direction, size, binary, kind, rpc_id, "
        "method, session_id, update_kind, entity_type, entity_id, substr(raw, 1, ?) "
        "FROM frames WHERE id = ?",
        (DETAIL_MAX_BYTES, frame_id),
    ).fetchone()
    if row is None:
        return None
    item = _summary(conn, (*row[:15], b""))
    del item["preview"]
    raw = bytes(row[15])
    item["truncated"] = len(raw) < row[6]
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


def frame_raw(conn: sqlite3.Connection, frame_id: int) -> bytes | None:
    """The exact bytes of one frame."""
    row = conn.execute("SELECT raw FROM frames WHERE id = ?", (frame_id,)).fetchone()
    return None if row is None else bytes(row[0])


def connection_exists(conn: sqlite3.Connection, connection_id: int) -> bool:
    return (
        conn.execute("SELECT 1 FROM connections WHERE id = ?", (connection_id,)).fetchone()
        is not None
    )


def session_connections(conn: sqlite3.Connection, session_id: str) -> list[int]:
    """The connections on which ``session_id`` appears."""
    rows = conn.execute(
        "SELECT DISTINCT connection_id FROM frames WHERE session_id = ? ORDER BY connection_id",
        (session_id,),
    ).fetchall()
    return [int(r[0]) for r in rows]


def iter_frames_after(
    conn: sqlite3.Connection, connection_id: int, after_seq: int = 0
) -> Iterator[tuple[int, str, bytes, int, bool]]:
    """(seq, direction, raw, mono_ns, binary) of one connection after ``after_seq``, streamed."""
    cur = conn.execute(
        "SELECT seq, direction, raw, mono_ns, binary FROM frames WHERE connection_id = ? "
        "AND seq > ? ORDER BY seq",
        (connection_id, after_seq),
    )
    for r in cur:
        yield int(r[0]), str(r[1]), bytes(r[2]), int(r[3]), bool(r[4])
