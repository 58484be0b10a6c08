"""Reading recordings back: the facade every reader of a recording asks.

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

The reader's queries are grouped by job: connections and frames in recording order here,
frames by id a page at a time (:mod:`acp_proxy.store.frame_pages`), counts and side tables
(:mod:`acp_proxy.store.aggregates`); the row shapes they return are in
:mod:`acp_proxy.store.rows`, and replay's lazy reads in :mod:`acp_proxy.store.replay_frames`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from acp_proxy.store.aggregates import Aggregates
from acp_proxy.store.engine import (
    Database,
    engine_of,
    frame_writers,
    location_name,
    open_database,
    stream,
    table_columns,
)
from acp_proxy.store.frame_pages import FramePages
from acp_proxy.store.live_tail import SETTLE_SECONDS
from acp_proxy.store.liveness import ConnectionState, connection_state
from acp_proxy.store.rows import (
    CONNECTION_COLUMNS,
    FRAME_COLUMNS,
    NEEDS_PAYLOAD_SQL,
    ConnectionRow,
    SessionSpan,
    as_int,
    as_number,
    frame_of_row,
    json_column,
)
from acp_proxy.store.schema import RecordingError
from acp_proxy.wire.frame import WIRE_KEY_SQL, Frame


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


class RecordingReader(FramePages, Aggregates):
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

        Time order needs every page to sort the whole table, since no index has ``ts``, and
        an index on ``ts`` would cost every recorded frame (the figures:
        docs/performance.md, "The store's and readers' choices"). On a team's database pages
        are keyset queries on the primary key instead: the order the database stored the
        frames in, which is their time order for one host, and across hosts off by at most
        the batches being written at once (a batch that waited out an outage comes where it
        was stored).
        """
        return engine_of(self.db).ids_in_commit_order

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections -------------------------------------------------------------------

    def _connection_select(self) -> str:
        if self._columns is None:
            self._columns = set(table_columns(self.db, "connections"))
        # Older schemas (read, never migrated, by a read-only reader) lack newer columns.
        return ", ".join(c if c in self._columns else "NULL" for c in CONNECTION_COLUMNS)

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
            started = as_number(r[1])
            if started is None:  # text or NULL in an imported row: unknowable, not 1970
                started = math.nan
            ended = as_number(r[2])
            last_seen = as_number(r[16])
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
                    as_int(r[20]),
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
        where = ["id > ?"] if after_id else []  # (ids start at 1: no test on a full scan)
        args: list[Any] = [after_id] if after_id else []
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
        where_sql = f"WHERE {' AND '.join(where)} " if where else ""
        query = f"SELECT {columns} FROM frames {where_sql}ORDER BY connection_id, seq"
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

    def wire_rows(self, connection_id: int, *, after_seq: int = 0) -> Iterator[tuple[Any, ...]]:
        """:meth:`wire_frames` as rows ``(key, raw)``, the cursor itself: what
        :meth:`ConnectionChecker.feed_rows
        <acp_proxy.acp.conformance.ConnectionChecker.feed_rows>` takes, with no object built
        per frame. ``key`` is :func:`~acp_proxy.wire.frame.wire_key` (sequence number,
        direction and binary flag in one column: a column costs more to read than the
        arithmetic); the few times the checker names come from :meth:`mono_times`."""
        return self._ordered(
            f"{WIRE_KEY_SQL}, raw", connection_id=connection_id, after_seq=after_seq
        )

    def mono_times(self, connection_id: int, seqs: list[int]) -> dict[int, int]:
        """The monotonic ns of the frames ``seqs`` of one connection, by seq (one query)."""
        if not seqs:
            return {}
        marks = ", ".join("?" * len(seqs))
        rows = self.db.execute(
            f"SELECT seq, mono_ns FROM frames WHERE connection_id = ? AND seq IN ({marks})",
            [connection_id, *seqs],
        ).fetchall()
        return {int(seq): int(ns) for seq, ns in rows}

    def message_frames(self, connection_id: int, *, after_seq: int = 0) -> Iterator[Frame]:
        """One connection's frames in order with the columns that say what each message is
        (``kind``, ``rpc_id``, ``method``, ``session_id``, ``update_kind``) and its bytes, for
        ``acp-proxy diff``: no ``ts``, ``binary`` or entity columns, so it streams faster."""
        cur = self._ordered(
            "id, seq, mono_ns, direction, raw, kind, rpc_id, method, session_id, update_kind",
            connection_id=connection_id,
            after_seq=after_seq,
        )
        for fid, seq, ns, direction, raw, kind, rpc_id, method, sid, uk in cur:
            yield Frame(
                fid,
                connection_id,
                seq,
                0.0,
                ns,
                direction,
                raw,
                len(raw),
                False,
                kind,
                rpc_id,
                method,
                sid,
                uk,
            )

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
                last_seen_at=as_number(r[16]),
                exit_status=None,
                end_reason=None,
                now=when,
            )
            running += st.state == "running"
        return running

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
