"""The shapes the store's readers return, and the columns they are read from.

:class:`~acp_proxy.store.reader.RecordingReader` builds these from rows (a connection with
its derived state, a session's span, a stderr line, a recorder event...); :data:`FRAME_COLUMNS`
and :func:`frame_of_row` turn a frame row into the package's one
:class:`~acp_proxy.wire.frame.Frame`. :class:`ReaderBase` is the open database the reader's
query groups (:mod:`acp_proxy.store.frame_pages`, :mod:`acp_proxy.store.aggregates`) share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from acp_proxy.acp.preview import display_name as display_name  # re-exported: readers name rows
from acp_proxy.store.columns import CONNECTION_COLUMN_NAMES
from acp_proxy.store.engine import Database
from acp_proxy.store.liveness import State
from acp_proxy.wire.frame import Frame
from acp_proxy.wire.jsonrpc import parse_json


def as_int(value: Any) -> Any:
    """An SQL sum as an int (PostgreSQL sums bigints as numeric); None stays None."""
    return None if value is None else int(value)


def text_key(value: Any) -> tuple[bool, str]:
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
CONNECTION_COLUMNS = tuple(
    c for c in CONNECTION_COLUMN_NAMES if c not in ("proxy_pid", "meta", "digest")
)
"""The connection columns a :class:`ConnectionRow` is read from, in its order."""
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


def frame_of_row(r: tuple[Any, ...]) -> Frame:
    """A :class:`Frame` from a row of :data:`FRAME_COLUMNS`."""
    # A tuple subclass built in one step: this runs once per frame of every analysis.
    return Frame(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8] != 0, *r[9:])


def as_number(value: Any) -> float | None:
    """A stored REAL as a float, or None when it is not a finite-enough number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return None
    return None


class ReaderBase:
    """The open database every group of the reader's queries reads through."""

    db: Database

    def _one(self, sql: str, args: Iterable[Any] = ()) -> Any:
        """The first row of an aggregate query (one always exists)."""
        return self.db.execute(sql, list(args)).fetchone()

    def _in(self, connection_ids: Iterable[int] | None) -> tuple[str, list[Any]]:
        if connection_ids is None:
            return "1 = 1", []
        ids = list(connection_ids)
        return f"connection_id IN ({','.join('?' for _ in ids) or 'NULL'})", ids
