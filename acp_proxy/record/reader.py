"""Reading recordings back: connections and frames, streamed in order.

Readers open the file without creating it and never load a whole recording: frames come
from a cursor, one row at a time, so a million-frame recording reads in flat memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_proxy.record.schema import RecordingError, connect
from acp_proxy.wire.frame import Direction
from acp_proxy.wire.jsonrpc import parse_json


@dataclass(frozen=True, slots=True)
class ConnectionRow:
    """A recorded connection with its frame count and byte total."""

    id: int
    started_at: float
    ended_at: float | None
    transport: str
    agent_command: list[str] | None
    cwd: str | None
    pid: int | None
    exit_status: int | None
    protocol_version: int | None
    client_info: Any
    agent_info: Any
    label: str | None
    peer: str | None
    headers: Any
    frames_dropped: int
    bytes_dropped: int
    frame_count: int
    byte_count: int

    @property
    def duration(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


@dataclass(frozen=True, slots=True)
class FrameRow:
    """A recorded frame with its derived index columns."""

    id: int
    connection_id: int
    seq: int
    ts: float
    mono_ns: int
    direction: Direction
    raw: bytes
    size: int
    binary: bool
    kind: str | None
    rpc_id: str | None
    method: str | None
    session_id: str | None
    update_kind: str | None
    entity_type: str | None
    entity_id: str | None


FRAME_COLUMNS = (
    "id, connection_id, seq, ts, mono_ns, direction, raw, size, binary, kind, rpc_id, method, "
    "session_id, update_kind, entity_type, entity_id"
)


def open_recording(path: str | Path) -> sqlite3.Connection:
    """Open an existing recording for reading; :class:`RecordingError` if it is not one."""
    return connect(path, create=False)


def json_column(text: Any) -> Any:
    """The value of a JSON text column (``agent_info``, ``headers``...); non-JSON as is."""
    if not isinstance(text, str):
        return text
    value, problem = parse_json(text.encode())
    return text if problem is not None else value


def list_connections(db: sqlite3.Connection) -> list[ConnectionRow]:
    """All connections, oldest first, with frame counts and sizes."""
    rows = db.execute(
        """
        SELECT c.id, c.started_at, c.ended_at, c.transport, c.agent_command, c.cwd, c.pid,
               c.exit_status, c.protocol_version, c.client_info, c.agent_info, c.label, c.peer,
               c.headers, c.frames_dropped, c.bytes_dropped,
               (SELECT count(*) FROM frames f WHERE f.connection_id = c.id),
               (SELECT coalesce(sum(size), 0) FROM frames f WHERE f.connection_id = c.id)
        FROM connections c ORDER BY c.id
        """
    ).fetchall()
    return [
        ConnectionRow(
            r[0],
            r[1],
            r[2],
            r[3],
            json_column(r[4]),
            r[5],
            r[6],
            r[7],
            r[8],
            json_column(r[9]),
            json_column(r[10]),
            r[11],
            r[12],
            json_column(r[13]),
            r[14],
            r[15],
            r[16],
            r[17],
        )
        for r in rows
    ]


def get_connection(db: sqlite3.Connection, connection_id: int) -> ConnectionRow:
    for row in list_connections(db):
        if row.id == connection_id:
            return row
    raise RecordingError(f"no connection {connection_id} in this recording")


def iter_frames(
    db: sqlite3.Connection,
    *,
    connection_id: int | None = None,
    session_id: str | None = None,
    after_id: int = 0,
) -> Iterator[FrameRow]:
    """Frames in recording order (connection, then sequence number), streamed."""
    where = ["id > ?"]
    args: list[Any] = [after_id]
    if connection_id is not None:
        where.append("connection_id = ?")
        args.append(connection_id)
    if session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    cur = db.execute(
        f"SELECT {FRAME_COLUMNS} FROM frames WHERE {' AND '.join(where)} "
        "ORDER BY connection_id, seq",
        args,
    )
    for r in cur:
        yield FrameRow(
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            bytes(r[6]),
            r[7],
            bool(r[8]),
            r[9],
            r[10],
            r[11],
            r[12],
            r[13],
            r[14],
            r[15],
        )
