"""Reading recordings back: every SELECT of acp-proxy lives here.

:class:`RecordingReader` is the read side of the storage seam: the CLI commands, the web
inspector, :mod:`acp_proxy.analysis.connection` and replay's loading ask it for connections,
frames and counts, and never write SQL themselves. SQLite is its first backend; a second one
(PostgreSQL...) implements the same public methods over its own connection.

Readers open the file strictly read-only (:func:`acp_proxy.store.schema.open_readonly`:
nothing is migrated, locked for writing or created beside the recording) and never load a
whole recording: frames come from a cursor, one row at a time, so a million-frame recording
reads in flat memory. Every connection row carries its derived liveness
(:func:`acp_proxy.store.liveness.connection_state`), so a connection whose recorder is gone
reads as ended (end unknown) in every view.

Both stores run the same queries: a :data:`Database` is a ``sqlite3.Connection`` or a
PostgreSQL :class:`~acp_proxy.store.pg.PgDatabase` (``postgresql://`` URLs), and the SQL
here keeps to what both engines speak (``"binary"`` quoted, ``CASE`` not boolean sums,
``1 = 1`` not ``1``, text ordered in Python where the order is shown, since PostgreSQL's
collation is the server's). The few engine-specific reads live in one place:
:func:`table_columns` (the columns of a table), :func:`stream` (a cursor that never holds a
whole result in memory) and :func:`database_errors` (what a damaged or lost store raises).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from acp_proxy.acp.preview import display_name as display_name  # re-exported: readers name rows
from acp_proxy.store.engine import (
    Database,
    database_errors,
    engine_of,
    frame_writers,
    location_name,
    open_database,
    stream,
    table_columns,
)
from acp_proxy.store.live_tail import SETTLE_SECONDS, LiveTail
from acp_proxy.store.liveness import ConnectionState, State, connection_state
from acp_proxy.store.schema import RecordingError
from acp_proxy.wire.frame import Frame
from acp_proxy.wire.jsonrpc import parse_json


def settled_frame_id(db: Database, *, wait: float = SETTLE_SECONDS) -> int:
    """The highest frame id at or below which every frame is committed (or never will be).

    With several writers (PostgreSQL) a higher id may be committed before a lower one: the
    highest visible id is noted, then the writers in progress are waited for (a batch:
    milliseconds; at most ``wait`` seconds, for a writer stuck in progress). Whatever
    reads ids up to the answer, in one pass, misses nothing committed later.
    """
    row = db.execute("SELECT coalesce(max(id), 0) FROM frames", []).fetchone()
    top = int(row[0]) if row else 0
    writers = frame_writers(db)
    deadline = time.monotonic() + wait
    while writers and time.monotonic() < deadline:
        time.sleep(0.02)
        writers &= frame_writers(db)
    return top


def _int(value: Any) -> Any:
    """An SQL sum as an int (PostgreSQL sums bigints as numeric); None stays None."""
    return None if value is None else int(value)


def _text_key(value: Any) -> tuple[bool, str]:
    """SQLite's ``ORDER BY`` of a text column (NULL first, then code points), in Python."""
    return (value is not None, "" if value is None else str(value))


@dataclass(frozen=True, slots=True)
class ConnectionRow:
    """A recorded connection with its frame count, byte total and derived state.

    ``state`` is ``running``, ``ended`` or ``unknown-end`` (the recorder is gone and never
    closed the row); ``state_reason`` a short phrase (``running``, ``exit 0``, ``ended
    (unknown end)``...); ``state_ended_at`` when it ended (for ``unknown-end`` the last
    heartbeat, may be None). ``byte_count`` is None when the caller asked for no sizes.
    """

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
    last_seen_at: float | None = None
    end_reason: str | None = None
    host: str | None = None
    state: State = "ended"
    state_reason: str = "ended"
    state_ended_at: float | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end (the last heartbeat for an unknown end); None if running."""
        end = self.state_ended_at if self.state != "running" else None
        return None if end is None else end - self.started_at

    @property
    def running(self) -> bool:
        return self.state == "running"


@dataclass(frozen=True, slots=True)
class SessionSpan:
    """One session on one connection: frame count and first/last frame."""

    session_id: str
    connection_id: int
    frame_count: int
    first_seq: int
    last_seq: int
    started_at: float | None
    last_frame_at: float | None


@dataclass(frozen=True, slots=True)
class FramePair:
    """The other half of a request/response pair (see :meth:`RecordingReader.pair_of`)."""

    id: int
    seq: int
    mono_ns: int


@dataclass(frozen=True, slots=True)
class StderrLine:
    """One line the agent wrote on stderr."""

    connection_id: int
    seq: int
    ts: float
    mono_ns: int
    raw: bytes


class EventRow(NamedTuple):
    """A recorder event (``recorder_drop``, ``websocket_close``...); ``detail`` decoded."""

    connection_id: int | None
    ts: float
    kind: str
    detail: Any


@dataclass(frozen=True, slots=True)
class FrameFilter:
    """Filters of a frame list; ``None`` means "any". ``text`` searches the raw bytes."""

    connection_id: int | None = None
    session_id: str | None = None
    direction: str | None = None
    method: str | None = None
    update_kind: str | None = None
    kind: str | None = None
    text: str | None = None


FRAME_COLUMNS = (
    'id, connection_id, seq, ts, mono_ns, direction, raw, size, "binary", kind, rpc_id, method, '
    "session_id, update_kind, entity_type, entity_id"
)
_SUMMARY_COLUMNS = (
    'id, connection_id, seq, ts, mono_ns, direction, size, "binary", kind, rpc_id, method, '
    "session_id, update_kind, entity_type, entity_id, substr(raw, 1, ?)"
)
_CONNECTION_COLUMNS = (
    "id",
    "started_at",
    "ended_at",
    "transport",
    "agent_command",
    "cwd",
    "pid",
    "exit_status",
    "protocol_version",
    "client_info",
    "agent_info",
    "label",
    "peer",
    "headers",
    "frames_dropped",
    "bytes_dropped",
    "last_seen_at",
    "end_reason",
    "host",
)
NEEDS_PAYLOAD_SQL = (
    "kind IN ('response', 'batch') OR update_kind = 'state_update' "
    "OR method IN ('session/prompt', 'initialize')"
)
"""The frames whose raw bytes :meth:`acp_proxy.acp.stats.StatsAccumulator.feed` needs."""


def json_column(text: Any) -> Any:
    """The value of a JSON text column (``agent_info``, ``headers``...); non-JSON as is."""
    if not isinstance(text, str):
        return text
    value, problem = parse_json(text.encode())
    return text if problem is not None else value


def _filter_where(flt: FrameFilter) -> tuple[list[str], list[Any]]:
    """SQL conditions and their arguments for a :class:`FrameFilter` (SQLite backend)."""
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (
        ("connection_id", flt.connection_id),
        ("session_id", flt.session_id),
        ("direction", flt.direction),
        ("method", flt.method),
        ("update_kind", flt.update_kind),
        ("kind", flt.kind),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if flt.text:
        # Byte search in the raw frame: what was on the wire, not a re-serialization.
        clauses.append("instr(raw, ?) > 0")
        args.append(flt.text.encode("utf-8"))
    return clauses, args


def frame_of_row(r: tuple[Any, ...]) -> Frame:
    """A :class:`Frame` from a row of :data:`FRAME_COLUMNS`."""
    # A tuple subclass built in one step: this runs once per frame of every analysis.
    return Frame(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8] != 0, *r[9:])


def _number(value: Any) -> float | None:
    """A stored REAL as a float, or None when it is not a finite-enough number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


class RecordingReader:
    """Every read of one recording (SQLite backend), over one open connection.

    Use :meth:`open` (a read-only connection it closes with :meth:`close` or ``with``) or
    wrap a connection you own. Methods raise :class:`RecordingError` for what the user asked
    for and is not there (``no connection 7``); ``sqlite3.DatabaseError`` from a damaged
    file passes through for the caller to word.
    """

    def __init__(self, db: Database, *, source: str = "", owned: bool = False) -> None:
        self.db = db
        self.source = source or engine_of(db).source_name(db)
        self._owned = owned
        self._columns: set[str] | None = None

    @classmethod
    def open(cls, location: str | Path, *, timeout: float = 30.0) -> RecordingReader:
        """Open the recording at ``location`` (a path or a ``postgresql://`` URL) read-only;
        :class:`RecordingError` if it is not one."""
        db = open_database(location, timeout=timeout)
        return cls(db, source=location_name(location), owned=True)

    def close(self) -> None:
        if self._owned:
            self.db.close()

    @property
    def pages_by_time(self) -> bool:
        """Whether frames of several connections are paged in ``(ts, id)`` order (SQLite),
        or in id order (PostgreSQL).

        Time order needs every page to sort the whole table, since no index has ``ts``
        (measured on PostgreSQL, 3M frames: 1.3 s a page, growing with the store; an index
        on ``ts`` would cost every recorded frame). On a team's database pages are keyset
        queries on the primary key instead: the order the database stored the frames in,
        which is their time order for one host, and across hosts off by at most the
        batches being written at once (a batch that waited out an outage comes where it was
        stored).
        """
        return engine_of(self.db).ids_in_commit_order

    def _one(self, sql: str, args: Iterable[Any] = ()) -> Any:
        """The first row of an aggregate query (one always exists)."""
        return self.db.execute(sql, list(args)).fetchone()

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections -------------------------------------------------------------------

    def _connection_select(self) -> str:
        if self._columns is None:
            self._columns = set(table_columns(self.db, "connections"))
        # Older schemas (read, never migrated, by a read-only reader) lack newer columns.
        return ", ".join(c if c in self._columns else "NULL" for c in _CONNECTION_COLUMNS)

    def _connection_rows(
        self, where: str, args: list[Any], *, sizes: bool, now: float | None, counts: bool = True
    ) -> list[ConnectionRow]:
        count = "(SELECT count(*) FROM frames f WHERE f.connection_id = c.id)" if counts else "0"
        size = "(SELECT coalesce(sum(size), 0) FROM frames f WHERE f.connection_id = c.id)"
        rows = self.db.execute(
            f"SELECT {self._connection_select()}, {count}, {size if sizes else 'NULL'} "
            f"FROM connections c {where} ORDER BY c.id",
            args,
        ).fetchall()
        when = time.time() if now is None else now
        out: list[ConnectionRow] = []
        for r in rows:
            started = _number(r[1])
            if started is None:  # text or NULL in an imported row: unknowable, not 1970
                started = math.nan
            ended = _number(r[2])
            last_seen = _number(r[16])
            exit_status = r[7] if isinstance(r[7], int) else None
            end_reason = r[17] if isinstance(r[17], str) else None
            st = connection_state(
                ended_at=ended,
                last_seen_at=last_seen,
                exit_status=exit_status,
                end_reason=end_reason,
                now=when,
            )
            out.append(
                ConnectionRow(
                    r[0],
                    started,
                    ended,
                    r[3],
                    json_column(r[4]),
                    r[5],
                    r[6],
                    exit_status,
                    r[8],
                    json_column(r[9]),
                    json_column(r[10]),
                    r[11],
                    r[12],
                    json_column(r[13]),
                    r[14],
                    r[15],
                    int(r[19]),
                    _int(r[20]),
                    last_seen,
                    end_reason,
                    r[18],
                    st.state,
                    st.reason,
                    st.ended_at,
                )
            )
        return out

    def connections(
        self,
        *,
        sizes: bool = True,
        now: float | None = None,
        host: str | None = None,
        last: int | None = None,
        counts: bool = True,
    ) -> list[ConnectionRow]:
        """All connections, oldest first, with frame counts, sizes and derived state.

        ``sizes=False`` skips the byte totals (``byte_count`` None): they read every frame
        row, while the counts come from an index; ``counts=False`` the counts too
        (``frame_count`` 0, for a caller that knows them). ``now`` is the wall clock the state is
        derived at (default: now). ``host``: only those recorded on that host; ``last``:
        only the newest that many (of those), still oldest first. The counts and sizes are
        read for the chosen connections only, which is what keeps a big store quick.
        """
        chosen, args = "", list[Any]()
        if host is not None:
            chosen, args = "WHERE host = ?", [host]
        if last is not None:
            chosen = f"{chosen} ORDER BY id DESC LIMIT ?"
            args.append(last)
        where = f"WHERE c.id IN (SELECT id FROM connections {chosen})" if chosen else ""
        return self._connection_rows(where, args, sizes=sizes, now=now, counts=counts)

    def connection(
        self, connection_id: int, *, sizes: bool = True, now: float | None = None
    ) -> ConnectionRow:
        """One connection; :class:`RecordingError` when there is none with that id."""
        rows = self._connection_rows("WHERE c.id = ?", [connection_id], sizes=sizes, now=now)
        if not rows:
            raise RecordingError(f"no connection {connection_id} in this recording")
        return rows[0]

    def connection_state(self, connection_id: int, *, now: float | None = None) -> ConnectionState:
        """How a connection stands: running, ended or ended with an unknown end (for ``ls``)."""
        row = self.connection(connection_id, sizes=False, now=now)
        return ConnectionState(row.state, row.state_ended_at, row.state_reason)

    def has_connection(self, connection_id: int) -> bool:
        return (
            self.db.execute("SELECT 1 FROM connections WHERE id = ?", (connection_id,)).fetchone()
            is not None
        )

    def connection_ids(self) -> list[int]:
        return [int(r[0]) for r in self.db.execute("SELECT id FROM connections ORDER BY id")]

    def session_connections(self, session_id: str) -> list[int]:
        """The connections on which ``session_id`` appears, in order."""
        rows = self.db.execute(
            "SELECT DISTINCT connection_id FROM frames WHERE session_id = ? ORDER BY connection_id",
            (session_id,),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def session_spans(self, connection_ids: Iterable[int] | None = None) -> list[SessionSpan]:
        """Every (session, connection) with its frame count and first/last frame time (of
        those connections only)."""
        out: list[SessionSpan] = []
        where, args = self._in(connection_ids)
        where += " AND session_id IS NOT NULL"
        rows = self.db.execute(
            "SELECT session_id, connection_id, count(*), min(seq), max(seq) FROM frames "
            f"WHERE {where} GROUP BY session_id, connection_id",
            args,
        ).fetchall()
        for sid, cid, count, first_seq, last_seq in rows:
            ts = dict(
                self.db.execute(
                    "SELECT seq, ts FROM frames WHERE connection_id = ? AND seq IN (?, ?)",
                    (cid, first_seq, last_seq),
                ).fetchall()
            )
            out.append(
                SessionSpan(
                    sid,
                    int(cid),
                    int(count),
                    first_seq,
                    last_seq,
                    ts.get(first_seq),
                    ts.get(last_seq),
                )
            )
        return out

    # -- frames, in recording order ------------------------------------------------------

    def _ordered(
        self,
        columns: str,
        *,
        connection_id: int | None = None,
        session_id: str | None = None,
        with_connection_frames: bool = False,
        after_id: int = 0,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """The one query of "frames in recording order" (connection, then sequence number)."""
        where = ["id > ?"]
        args: list[Any] = [after_id]
        if connection_id is not None:
            where.append("connection_id = ?")
            args.append(connection_id)
            if after_seq:
                where.append("seq > ?")
                args.append(after_seq)
        if session_id is not None:
            where.append(
                "(session_id = ? OR session_id IS NULL)"
                if with_connection_frames
                else "session_id = ?"
            )
            args.append(session_id)
        query = (
            f"SELECT {columns} FROM frames WHERE {' AND '.join(where)} ORDER BY connection_id, seq"
        )
        if limit is not None:
            query += " LIMIT ?"
            args.append(limit)
        return stream(self.db, query, args)

    def frames(
        self,
        *,
        connection_id: int | None = None,
        session_id: str | None = None,
        with_connection_frames: bool = False,
        after_id: int = 0,
        after_seq: int = 0,
        limit: int | None = None,
    ) -> Iterator[Frame]:
        """Frames with every column, in recording order (connection, then seq), streamed.

        ``connection_id`` (and ``after_seq``, to continue where a streaming consumer
        stopped), ``session_id`` (with ``with_connection_frames``: plus the frames of no
        session, ``initialize``...), ``after_id`` (frame ids) and ``limit`` (a batch).
        """
        cur = self._ordered(
            FRAME_COLUMNS,
            connection_id=connection_id,
            session_id=session_id,
            with_connection_frames=with_connection_frames,
            after_id=after_id,
            after_seq=after_seq,
            limit=limit,
        )
        yield from map(frame_of_row, cur)

    def wire_frames(
        self,
        connection_id: int,
        *,
        session_id: str | None = None,
        with_connection_frames: bool = False,
        after_seq: int = 0,
    ) -> Iterator[Frame]:
        """What crossed the wire on one connection, in order: the input of the ACP models
        and the checker (no index columns, so a long connection streams faster; ``id`` and
        ``ts`` are 0)."""
        cur = self._ordered(
            'seq, direction, raw, mono_ns, "binary"',
            connection_id=connection_id,
            session_id=session_id,
            with_connection_frames=with_connection_frames,
            after_seq=after_seq,
        )
        for seq, direction, raw, mono_ns, binary in cur:
            yield Frame(0, connection_id, seq, 0.0, mono_ns, direction, raw, len(raw), binary != 0)

    def indexed_frames(self, connection_id: int | None = None) -> Iterator[Frame]:
        """Index columns of every frame in order; raw bytes only for :data:`NEEDS_PAYLOAD_SQL`
        (``b""`` for the others), no ``id``, ``ts`` or entity columns."""
        cur = self._ordered(
            "connection_id, seq, mono_ns, direction, "
            f"CASE WHEN {NEEDS_PAYLOAD_SQL} THEN raw END, size, kind, rpc_id, method, "
            "session_id, update_kind",
            connection_id=connection_id,
        )
        for cid, seq, ns, direction, raw, size, kind, rpc_id, method, sid, uk in cur:
            # BLOBs (bytea) come back as bytes already
            yield Frame(
                0,
                cid,
                seq,
                0.0,
                ns,
                direction,
                raw or b"",
                size,
                False,
                kind,
                rpc_id,
                method,
                sid,
                uk,
            )

    def max_seq(self, connection_id: int) -> int:
        """The connection's last sequence number (0 when it has no frame)."""
        row = self._one(
            "SELECT coalesce(max(seq), 0) FROM frames WHERE connection_id = ?", (connection_id,)
        )
        return int(row[0])

    def last_frame_at(self, connection_id: int) -> float | None:
        """Wall clock of the connection's last frame."""
        row = self.db.execute(
            "SELECT ts FROM frames WHERE connection_id = ? ORDER BY seq DESC LIMIT 1",
            (connection_id,),
        ).fetchone()
        return None if row is None else row[0]

    def frame_ids(self, connection_id: int, seqs: Iterable[int]) -> dict[int, int]:
        """Frame id of each of the connection's sequence numbers (missing ones left out)."""
        out: dict[int, int] = {}
        ordered = sorted(set(seqs))
        for start in range(0, len(ordered), 500):
            chunk = ordered[start : start + 500]
            marks = ",".join("?" for _ in chunk)
            for seq, fid in self.db.execute(
                f"SELECT seq, id FROM frames WHERE connection_id = ? AND seq IN ({marks})",
                (connection_id, *chunk),
            ):
                out[int(seq)] = int(fid)
        return out

    def frame_count(self, connection_id: int | None = None) -> int:
        if connection_id is None:
            return int(self._one("SELECT count(*) FROM frames")[0])
        return int(
            self._one("SELECT count(*) FROM frames WHERE connection_id = ?", (connection_id,))[0]
        )

    # -- frames by id (the inspector) ----------------------------------------------------

    def max_frame_id(self) -> int:
        return int(self._one("SELECT coalesce(max(id), 0) FROM frames")[0])

    def change_mark(self, *, now: float | None = None) -> tuple[int, int, float, int]:
        """A cheap fingerprint of what changed: (max frame id, connections, sum of facts,
        running connections). The last one changes without a write when a recorder dies
        (its heartbeat goes stale), so a page watching it learns the connection ended."""
        count, facts = self._one(
            "SELECT count(*), coalesce(sum(ended_at), 0) + coalesce(sum(coalesce("
            "protocol_version, 0)), 0) + coalesce(sum(length(agent_info)), 0) FROM connections"
        )
        return self.max_frame_id(), int(count), float(facts), self.running_count(now=now)

    def running_count(self, *, now: float | None = None) -> int:
        """How many connections are being recorded right now (fresh heartbeat, no end)."""
        select = self._connection_select()  # tolerates old schemas
        when = time.time() if now is None else now
        running = 0
        for r in self.db.execute(f"SELECT {select} FROM connections WHERE ended_at IS NULL"):
            st = connection_state(
                ended_at=None,
                last_seen_at=_number(r[16]),
                exit_status=None,
                end_reason=None,
                now=when,
            )
            running += st.state == "running"
        return running

    def frame_page(
        self,
        flt: FrameFilter,
        *,
        after_id: int,
        before_id: int | None,
        limit: int,
        preview: int,
        by_time: bool = False,
    ) -> tuple[list[Frame], bool]:
        """Up to ``limit`` frames in id order after ``after_id`` (or before ``before_id``).

        With ``by_time`` the order is ``(ts, id)`` (frames of several connections in the
        order they were recorded) and the cursor frame's place in that order is the key.
        Returns the frames and whether more exist in the direction read (keyset pages).
        """
        clauses, args = _filter_where(flt)
        key = "id"
        if by_time:
            key = "ts, id"
            cursor = before_id if before_id is not None else after_id
            compare = "<" if before_id is not None else ">"
            at = self.db.execute("SELECT ts FROM frames WHERE id = ?", (cursor,)).fetchone()
            if at is not None:  # no such frame: the first (or last) page
                clauses.append(f"(ts, id) {compare} (?, ?)")
                args.extend([at[0], cursor])
            order = "DESC" if before_id is not None else "ASC"
        elif before_id is not None:
            clauses.append("id < ?")
            args.append(before_id)
            order = "DESC"
        else:
            clauses.append("id > ?")
            args.append(after_id)
            order = "ASC"
        order_by = ", ".join(f"{c.strip()} {order}" for c in key.split(","))
        rows = self.db.execute(
            f"SELECT {_SUMMARY_COLUMNS} FROM frames WHERE {' AND '.join(clauses) or '1 = 1'} "
            f"ORDER BY {order_by} LIMIT ?",
            [preview, *args, limit + 1],
        ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        if before_id is not None:
            rows.reverse()
        return [self._summary(r) for r in rows], more

    def frame_writers(self) -> frozenset[str]:
        """The transactions writing frames right now (:func:`frame_writers`)."""
        return frame_writers(self.db)

    def live_frames(
        self, flt: FrameFilter, tail: LiveTail, *, limit: int, preview: int
    ) -> tuple[list[Frame], bool]:
        """Up to ``limit`` frames above ``tail``'s horizon not delivered yet, in id order,
        and whether more exist."""
        clauses, args = _filter_where(flt)
        clauses.append("id > ?")
        args.append(tail.horizon)
        prefix = ""
        seen = tail.seen_above()
        if seen:
            prefix = f"WITH seen (cid, last_seq) AS (VALUES {', '.join(['(?, ?)'] * len(seen))}) "
            clauses.append(
                "NOT EXISTS (SELECT 1 FROM seen WHERE cid = connection_id AND seq <= last_seq)"
            )
        pairs = [v for item in seen.items() for v in item]
        rows = self.db.execute(
            f"{prefix}SELECT {_SUMMARY_COLUMNS} FROM frames WHERE {' AND '.join(clauses)} "
            "ORDER BY id LIMIT ?",
            [*pairs, preview, *args, limit + 1],
        ).fetchall()
        return [self._summary(r) for r in rows[:limit]], len(rows) > limit

    def frame_exists(
        self,
        flt: FrameFilter,
        *,
        after_id: int | None = None,
        before_id: int | None = None,
        by_time: bool = False,
    ) -> bool:
        """Whether a frame matching ``flt`` exists after ``after_id`` / before ``before_id``
        (in ``(ts, id)`` order with ``by_time``, as :meth:`frame_page`)."""
        clauses, args = _filter_where(flt)
        for cursor, compare in ((after_id, ">"), (before_id, "<")):
            if cursor is None:
                continue
            if by_time:
                clauses.append(f"(ts, id) {compare} (SELECT ts, id FROM frames WHERE id = ?)")
            else:
                clauses.append(f"id {compare} ?")
            args.append(cursor)
        where = " AND ".join(clauses) or "1 = 1"
        return (
            self.db.execute(f"SELECT 1 FROM frames WHERE {where} LIMIT 1", args).fetchone()
            is not None
        )

    @staticmethod
    def _summary(r: tuple[Any, ...]) -> Frame:
        """A frame of a list: ``raw`` is only its first ``preview`` bytes (all of it when
        ``len(raw) == size``)."""
        return Frame(r[0], r[1], r[2], r[3], r[4], r[5], r[15], r[6], r[7] != 0, *r[8:15])

    def frame_summary(self, frame_id: int, *, head: int) -> Frame | None:
        """One frame with its first ``head`` bytes."""
        row = self.db.execute(
            f"SELECT {_SUMMARY_COLUMNS} FROM frames WHERE id = ?", (head, frame_id)
        ).fetchone()
        return None if row is None else self._summary(row)

    def frame_raw(self, frame_id: int) -> bytes | None:
        """The exact bytes of one frame."""
        row = self.db.execute("SELECT raw FROM frames WHERE id = ?", (frame_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def pair_of(
        self, connection_id: int, seq: int, direction: str, kind: str, rpc_id: str
    ) -> FramePair | None:
        """The other half of a request/response pair, paired per direction.

        A request travelling ``c2a`` is answered by the first later ``a2c`` response with
        the same exact id text on the same connection (and the other way round).
        """
        other = "a2c" if direction == "c2a" else "c2a"
        if kind == "request":
            query = (
                "SELECT id, seq, mono_ns FROM frames WHERE connection_id = ? AND rpc_id = ? "
                "AND direction = ? AND kind = 'response' AND seq > ? ORDER BY seq LIMIT 1"
            )
        else:
            query = (
                "SELECT id, seq, mono_ns FROM frames WHERE connection_id = ? AND rpc_id = ? "
                "AND direction = ? AND kind = 'request' AND seq < ? ORDER BY seq DESC LIMIT 1"
            )
        row = self.db.execute(query, (connection_id, rpc_id, other, seq)).fetchone()
        return None if row is None else FramePair(row[0], row[1], row[2])

    def kind_counts(
        self, connection_ids: Iterable[int]
    ) -> list[tuple[int, str | None, str | None, int]]:
        """Those connections' frames counted by (connection, method, update variant), in
        one pass."""
        where, args = self._in(connection_ids)
        rows = self.db.execute(
            "SELECT connection_id, method, update_kind, count(*) FROM frames "
            f"WHERE {where} GROUP BY connection_id, method, update_kind",
            args,
        ).fetchall()
        return [(int(c), m, u, int(n)) for c, m, u, n in rows]

    # -- aggregates (stats, demo) --------------------------------------------------------

    def _in(self, connection_ids: Iterable[int] | None) -> tuple[str, list[Any]]:
        if connection_ids is None:
            return "1 = 1", []
        ids = list(connection_ids)
        return f"connection_id IN ({','.join('?' for _ in ids) or 'NULL'})", ids

    def totals(self, connection_ids: Iterable[int] | None = None) -> tuple[int, int, int]:
        """(frames, bytes, connections with frames) of all or some connections."""
        where, args = self._in(connection_ids)
        row = self._one(
            f"SELECT count(*), coalesce(sum(size), 0), count(DISTINCT connection_id) "
            f"FROM frames WHERE {where}",
            args,
        )
        return int(row[0]), int(row[1]), int(row[2])  # (numeric sums on PostgreSQL)

    def method_counts(self, connection_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """Per (method, direction of the request): requests, notifications, responses, bytes.

        A response counts under the direction of the request it answers; a frame without a
        method under ``(kind)``. Most frames first.
        """
        where, args = self._in(connection_ids)
        rows = [
            {
                "method": r[0],
                "direction": r[1],
                "requests": _int(r[2]),
                "notifications": _int(r[3]),
                "responses": _int(r[4]),
                "frames": int(r[5]),
                "bytes": _int(r[6]),
            }
            for r in self.db.execute(
                f"""SELECT coalesce(method, '(' || kind || ')'),
                           CASE WHEN kind = 'response'
                                THEN CASE direction WHEN 'c2a' THEN 'a2c' ELSE 'c2a' END
                                ELSE direction END AS dir,
                           {_count_kind("request")}, {_count_kind("notification")},
                           {_count_kind("response")}, count(*), sum(size)
                    FROM frames WHERE {where} GROUP BY 1, 2""",
                args,
            )
        ]
        # Most frames first, then by method (and, for equal methods, SQLite's order of groups).
        rows.sort(key=lambda m: (-m["frames"], _text_key(m["method"]), _text_key(m["direction"])))
        return rows

    def update_counts(self, connection_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """``session/update`` variants with counts and bytes, most frequent first."""
        where, args = self._in(connection_ids)
        rows = [
            {"variant": r[0], "count": int(r[1]), "bytes": _int(r[2])}
            for r in self.db.execute(
                f"SELECT update_kind, count(*), sum(size) FROM frames WHERE {where} "
                "AND update_kind IS NOT NULL GROUP BY update_kind",
                args,
            )
        ]
        rows.sort(key=lambda u: (-u["count"], _text_key(u["variant"])))
        return rows

    def direction_counts(self, connection_id: int) -> dict[str, int]:
        """Frames per direction of one connection."""
        return {
            str(d): int(n)
            for d, n in self.db.execute(
                "SELECT direction, count(*) FROM frames WHERE connection_id = ? GROUP BY direction",
                (connection_id,),
            )
        }

    def stderr_lines(self, connection_id: int | None = None) -> Iterator[StderrLine]:
        """The agents' stderr lines in order (connection, then sequence number)."""
        where, args = (
            ("", []) if connection_id is None else ("WHERE connection_id = ?", [connection_id])
        )
        for r in stream(
            self.db,
            f"SELECT connection_id, seq, ts, mono_ns, raw FROM stderr_lines {where} "
            "ORDER BY connection_id, seq",
            args,
        ):
            yield StderrLine(r[0], r[1], r[2], r[3], bytes(r[4]))

    def stderr_count(self, connection_ids: Iterable[int] | None = None) -> int:
        where, args = self._in(connection_ids)
        return int(self._one(f"SELECT count(*) FROM stderr_lines WHERE {where}", args)[0])

    def connection_records(self, connection_id: int | None = None) -> list[dict[str, Any]]:
        """Connection rows exactly as stored, every column by name (JSON text undecoded).

        For ``export``, which writes every column this schema has, known or not.
        """
        columns = table_columns(self.db, "connections")
        if "id" not in columns:
            raise RecordingError("the database has no connections table")
        where, args = ("", []) if connection_id is None else (" WHERE id = ?", [connection_id])
        rows = self.db.execute(
            f"SELECT {', '.join(columns)} FROM connections{where} ORDER BY id", args
        ).fetchall()
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def events(self, connection_id: int | None) -> Iterator[EventRow]:
        """The recorder's events of one connection (``None``: those of no connection)."""
        where, args = (
            ("connection_id IS NULL", [])
            if connection_id is None
            else ("connection_id = ?", [connection_id])
        )
        for r in stream(
            self.db,
            f"SELECT connection_id, ts, kind, detail FROM events WHERE {where} ORDER BY id",
            args,
        ):
            yield EventRow(r[0], r[1], r[2], json_column(r[3]))

    def frame_times(self, connection_id: int) -> Iterator[tuple[int, float]]:
        """``(seq, ts)`` of the connection's frames in order: where its events fall."""
        for seq, ts in self._ordered("seq, ts", connection_id=connection_id):
            yield int(seq), float(ts)

    def check_intact(self) -> None:
        """Touch the ends of the tables so a truncated or damaged file fails now.

        Raises ``sqlite3.DatabaseError`` (psycopg's errors on PostgreSQL). Cheap (index ends
        and the connection table), not a full integrity check: meant for ``web``, which would
        otherwise start on a broken file.
        """
        self.connections(sizes=False)
        self.db.execute("SELECT max(id), min(id) FROM frames").fetchone()
        self.db.execute("SELECT raw FROM frames ORDER BY id DESC LIMIT 1").fetchone()
        self.db.execute("SELECT count(*) FROM frames").fetchone()


"""Short name of :class:`RecordingReader`."""


# -- the original function API (aliases) ------------------------------------------------


# --- replay: lazy reading ---
# The queries ``acp-proxy replay`` serves a recording with (the FrameStore protocol of
# acp_proxy.replay.script): every one is an index lookup or a cursor over one connection's
# frames through the (connection_id, seq) UNIQUE index, so serving a million-frame
# recording starts at once and reads only what the client asks for.

_SQLITE_MAGIC = b"SQLite format 3\x00"
_REPLAY_COLUMNS = "connection_id, seq, mono_ns, direction, raw, session_id"


def _replay_frame(r: tuple[Any, ...]) -> Frame:
    """A :class:`Frame` from a row of ``_REPLAY_COLUMNS`` (replay needs no other column)."""
    raw = bytes(r[4])
    return Frame(0, r[0], r[1], 0.0, r[2], r[3], raw, len(raw), False, None, None, None, r[5])


class ReplayFrames:
    """A recording as replay reads it (see the block comment above); a damaged file raises
    :class:`RecordingError` with one line, whenever the damage is met."""

    def __init__(self, db: Database, source: str = "") -> None:
        self.db = db
        self.source = location_name(source)
        self._engine = engine_of(db)
        self._errors = database_errors()

    def close(self) -> None:
        self.db.close()

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        if not all(_storable(a, nul=self._engine.text_holds_nul) for a in args):
            return  # a lone surrogate (valid JSON) equals no stored UTF-8 text
        try:
            yield from stream(self.db, sql, args)
        except self._errors as exc:
            what = self._engine.failure
            raise RecordingError(
                f"{self.source or 'the recording'}: {what}: {' '.join(str(exc).split())}"
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
    ) -> Iterator[Frame]:
        sql = f"SELECT {_REPLAY_COLUMNS}, method FROM frames WHERE connection_id = ? AND seq > ?"
        if client_method is not None and not _storable(
            client_method, nul=self._engine.text_holds_nul
        ):
            client_method = None  # no stored method equals it: compared by the caller
        if client_method is not None or client_only:
            sql += " AND direction = 'c2a'"
        # The method is compared here, not in SQL: a condition on it makes SQLite read
        # the whole connection before the first row.
        for r in self._query(sql + " ORDER BY seq", (connection_id, after_seq)):
            method = r[6]
            if client_method is not None and method is not None and method != client_method:
                continue  # method is NULL for batches and frames the recorder did not index
            yield _replay_frame(r)

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

    def session_frames(self, session_id: str) -> Iterator[Frame]:
        for r in self._query(
            f"SELECT {_REPLAY_COLUMNS} FROM frames WHERE session_id = ? "
            "ORDER BY connection_id, seq",
            (session_id,),
        ):
            yield _replay_frame(r)

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
        ids = sorted(
            str(s)
            for (s,) in self._query(
                "SELECT DISTINCT session_id FROM frames WHERE session_id IS NOT NULL"
            )
        )
        return len(ids), ids[:limit]


def _count_kind(kind: str) -> str:
    """``sum(kind = 'KIND')`` of SQLite (NULL kinds count as NULL) in SQL both engines speak."""
    return f"sum(CASE WHEN kind = '{kind}' THEN 1 WHEN kind IS NULL THEN NULL ELSE 0 END)"


def _storable(value: Any, *, nul: bool = True) -> bool:
    """Whether ``value`` can be bound as a parameter (text must be valid UTF-8; without
    ``nul`` (PostgreSQL's text) no stored text equals one with a NUL)."""
    if not isinstance(value, str):
        return True
    if not nul and "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
