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


# --- replay: lazy reading ---
# The queries ``acp-proxy replay`` serves a recording with (the FrameStore protocol of
# acp_proxy.replay.script): every one is an index lookup or a cursor over one connection's
# frames through the (connection_id, seq) UNIQUE index, so serving a million-frame
# recording starts at once and reads only what the client asks for.

_SQLITE_MAGIC = b"SQLite format 3\x00"
_REPLAY_COLUMNS = "connection_id, seq, mono_ns, direction, raw, session_id"


@dataclass(frozen=True, slots=True)
class ReplayRow:
    """The columns of a frame that replay needs."""

    connection_id: int
    seq: int
    mono_ns: int
    direction: Direction
    raw: bytes
    session_id: str | None


def open_replay_source(path: str | Path) -> sqlite3.Connection:
    """Open a recording to replay: a SQLite database as is, an export file imported into
    an in-memory database (exports are read whole: they hold no index to seek in)."""
    path = Path(path)
    if not path.exists():
        raise RecordingError(f"no such recording: {path}")
    if path.is_dir():
        raise RecordingError(f"{path} is a directory, not a recording")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {exc.strerror}") from None
    if head == _SQLITE_MAGIC or not head:
        return open_recording(path)
    from acp_proxy.record.export import import_export

    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    try:
        import_export(path, db)
    except RecordingError as exc:
        db.close()
        raise RecordingError(f"{path}: {exc}") from None
    except (sqlite3.DatabaseError, OSError, ValueError) as exc:
        db.close()
        raise RecordingError(f"{path} is neither a recording nor an export file: {exc}") from None
    return db


class ReplayFrames:
    """A recording as replay reads it (see the block comment above); a damaged file raises
    :class:`RecordingError` with one line, whenever the damage is met."""

    def __init__(self, db: sqlite3.Connection, source: str = "") -> None:
        self.db = db
        self.source = source

    @classmethod
    def open(cls, path: str | Path) -> ReplayFrames:
        return cls(open_replay_source(path), str(path))

    def close(self) -> None:
        self.db.close()

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        if not all(_storable(a) for a in args):
            return  # a lone surrogate (valid JSON) equals no stored UTF-8 text
        try:
            yield from self.db.execute(sql, args)
        except sqlite3.DatabaseError as exc:
            raise RecordingError(
                f"{self.source or 'the recording'}: the recording is damaged: {exc}"
            ) from None

    def protocol_versions(self) -> dict[int, int | None]:
        return {
            int(cid): version
            for cid, version in self._query(
                "SELECT id, protocol_version FROM connections ORDER BY id"
            )
        }

    def connection_frames(
        self,
        connection_id: int,
        *,
        after_seq: int = 0,
        client_method: str | None = None,
        client_only: bool = False,
    ) -> Iterator[ReplayRow]:
        sql = f"SELECT {_REPLAY_COLUMNS}, method FROM frames WHERE connection_id = ? AND seq > ?"
        if client_method is not None and not _storable(client_method):
            client_method = None  # no stored method equals it: compared by the caller
        if client_method is not None or client_only:
            sql += " AND direction = 'c2a'"
        # The method is compared here, not in SQL: a condition on it makes SQLite read
        # the whole connection before the first row.
        for r in self._query(sql + " ORDER BY seq", (connection_id, after_seq)):
            method = r[6]
            if client_method is not None and method is not None and method != client_method:
                continue  # method is NULL for batches and frames the recorder did not index
            yield ReplayRow(r[0], r[1], r[2], r[3], bytes(r[4]), r[5])

    def response_seq(self, connection_id: int, rpc_id: str, after_seq: int) -> int | None:
        # Through the (connection_id, rpc_id) index: a few rows per id. (Asked for min(seq)
        # SQLite would rather walk the connection in seq order.)
        seqs = [
            int(seq)
            for seq, direction, kind in self._query(
                "SELECT seq, direction, kind FROM frames "
                "WHERE connection_id = ? AND rpc_id = ? AND rpc_id IS NOT NULL",
                (connection_id, rpc_id),
            )
            if seq > after_seq and direction == "a2c" and kind == "response"
        ]
        return min(seqs, default=None)

    def session_frames(self, session_id: str) -> Iterator[ReplayRow]:
        for r in self._query(
            f"SELECT {_REPLAY_COLUMNS} FROM frames WHERE session_id = ? "
            "ORDER BY connection_id, seq",
            (session_id,),
        ):
            yield ReplayRow(r[0], r[1], r[2], r[3], bytes(r[4]), r[5])

    def session_connections(self, session_id: str) -> list[int]:
        found: list[int] = []
        for (cid,) in self._query("SELECT id FROM connections ORDER BY id"):
            for _ in self._query(
                "SELECT 1 FROM frames WHERE session_id = ? AND connection_id = ? LIMIT 1",
                (session_id, cid),
            ):
                found.append(int(cid))
        return found

    def session_ids(self, limit: int) -> tuple[int, list[str]]:
        ids = [
            str(s)
            for (s,) in self._query(
                "SELECT DISTINCT session_id FROM frames WHERE session_id IS NOT NULL "
                "ORDER BY session_id"
            )
        ]
        return len(ids), ids[:limit]


def _storable(value: Any) -> bool:
    """Whether ``value`` can be bound as an SQLite parameter (text must be valid UTF-8)."""
    if not isinstance(value, str):
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
