"""Frames by id, a page at a time: the inspector's frame list, live tail and frame detail.

A mixin of :class:`~acp_proxy.store.reader.RecordingReader`: keyset pages over a
:class:`~acp_proxy.store.rows.FrameFilter` (in id order, or ``(ts, id)`` order for frames of
several connections), the frames a :class:`~acp_proxy.store.live_tail.LiveTail` has not
delivered yet, one frame's head or bytes, and the other half of a request/response pair.
"""

from __future__ import annotations

from typing import Any

from acp_proxy.store.engine import frame_writers
from acp_proxy.store.live_tail import LiveTail
from acp_proxy.store.rows import FrameFilter, ReaderBase
from acp_proxy.wire.frame import Direction, Frame

_SUMMARY_COLUMNS = (
    'id, connection_id, seq, ts, mono_ns, direction, size, "binary", kind, rpc_id, method, '
    "session_id, update_kind, entity_type, entity_id, substr(raw, 1, ?)"
)


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


class FramePages(ReaderBase):
    """The reader's queries of frames by id (see the module docstring)."""

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
    ) -> Frame | None:
        """The other half of a request/response pair, paired per direction: its ``id``,
        ``seq`` and ``mono_ns`` (no bytes, ``ts`` 0).

        A request travelling ``c2a`` is answered by the first later ``a2c`` response with
        the same exact id text on the same connection (and the other way round).
        """
        other: Direction = "a2c" if direction == "c2a" else "c2a"
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
        return (
            None if row is None else Frame(row[0], connection_id, row[1], 0.0, row[2], other, b"")
        )
