"""A recording as ``acp-proxy replay`` reads it: lazily, by index lookups.

The queries replay serves a recording with (the FrameStore protocol of
:mod:`acp_proxy.replay.script`): every one is an index lookup or a cursor over one
connection's frames through the ``(connection_id, seq)`` UNIQUE index, so serving a
million-frame recording starts at once and reads only what the client asks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from acp_proxy.store.engine import Database, database_errors, engine_of, location_name, stream
from acp_proxy.store.schema import RecordingError
from acp_proxy.wire.frame import Frame

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
