"""Counts and side tables of a recording: what ``stats``, ``demo`` and ``export`` total up.

A mixin of :class:`~acp_proxy.store.reader.RecordingReader`: frames, bytes and methods
counted per connection, ``session/update`` variants, stderr lines, recorder events and the
connection rows exactly as stored, in SQL both engines speak.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from acp_proxy.store.engine import stream, table_columns
from acp_proxy.store.rows import EventRow, ReaderBase, StderrLine, as_int, json_column, text_key
from acp_proxy.store.schema import RecordingError


def _count_kind(kind: str) -> str:
    """``sum(kind = 'KIND')`` of SQLite (NULL kinds count as NULL) in SQL both engines speak."""
    return f"sum(CASE WHEN kind = '{kind}' THEN 1 WHEN kind IS NULL THEN NULL ELSE 0 END)"


def method_count_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """The order of :meth:`Aggregates.method_counts`: most frames first, then by method and
    direction."""
    return (-row["frames"], text_key(row["method"]), text_key(row["direction"]))


def update_count_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """The order of :meth:`Aggregates.update_counts`: most frequent first."""
    return (-row["count"], text_key(row["variant"]))


class Aggregates(ReaderBase):
    """The reader's counts and side-table reads (see the module docstring)."""

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
                "requests": as_int(r[2]),
                "notifications": as_int(r[3]),
                "responses": as_int(r[4]),
                "frames": int(r[5]),
                "bytes": as_int(r[6]),
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
        rows.sort(key=method_count_order)
        return rows

    def update_counts(self, connection_ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """``session/update`` variants with counts and bytes, most frequent first."""
        where, args = self._in(connection_ids)
        rows = [
            {"variant": r[0], "count": int(r[1]), "bytes": as_int(r[2])}
            for r in self.db.execute(
                f"SELECT update_kind, count(*), sum(size) FROM frames WHERE {where} "
                "AND update_kind IS NOT NULL GROUP BY update_kind",
                args,
            )
        ]
        rows.sort(key=update_count_order)
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
