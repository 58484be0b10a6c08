"""Whether a recorded connection is still live, and how it ended (pure, no I/O).

A connection row is closed (``ended_at``, ``end_reason``) by the recorder when the connection
ends. A proxy killed with SIGKILL, a machine that lost power or an imported recording never
closes its row, so "``ended_at`` is NULL" alone cannot mean *running*: while a connection is
open its recorder refreshes ``last_seen_at`` every :data:`HEARTBEAT_SECONDS`, and a row whose
heartbeat is older than :data:`STALE_SECONDS` (or missing) reads as ended, end unknown.
Every view (``ls``, ``show``, the inspector, export) asks :func:`connection_state`.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

HEARTBEAT_SECONDS = 2.0
"""How often the recorder refreshes ``last_seen_at`` of each open connection."""

STALE_SECONDS = 15.0
"""A heartbeat older than this means the recorder is gone."""

END_REASONS = {
    "exited": "the agent exited",
    "signal": "the agent was killed by a signal",
    "closed": "the client or the peer closed the connection",
    "proxy-lost": "the proxy died before closing the connection (the recorder closed it)",
    "recorder-lost": "the recorder stopped before the connection ended",
}
"""Values of ``connections.end_reason`` the recorder writes, with what each means."""

State = Literal["running", "ended", "unknown-end"]

UNKNOWN_END = "ended (unknown end)"
"""How every view names a connection whose end nobody saw: the proxy was killed (its
recorder closed the row: ``end_reason`` ``proxy-lost``), the recorder stopped
(``recorder-lost``) or no row was closed at all (no heartbeat for :data:`STALE_SECONDS`)."""


class ConnectionState(NamedTuple):
    """A connection's state as every view shows it."""

    state: State
    ended_at: float | None
    """When it ended: ``ended_at``, or for ``unknown-end`` the last heartbeat (may be None)."""
    reason: str
    """A short human phrase: ``running``, ``exit 0``, ``signal 9``, ``ended (unknown end)``…"""


def connection_state(
    *,
    ended_at: float | None,
    last_seen_at: float | None,
    exit_status: int | None,
    end_reason: str | None,
    now: float,
) -> ConnectionState:
    """Classify one connection row at wall-clock time ``now``."""
    if ended_at is not None:
        if end_reason in ("proxy-lost", "recorder-lost"):  # one name for every unknown end
            return ConnectionState("unknown-end", ended_at, UNKNOWN_END)
        if exit_status is None:
            return ConnectionState("ended", ended_at, end_reason or "ended")
        if exit_status < 0:
            return ConnectionState("ended", ended_at, f"signal {-exit_status}")
        return ConnectionState("ended", ended_at, f"exit {exit_status}")
    if last_seen_at is not None and now - last_seen_at < STALE_SECONDS:
        return ConnectionState("running", None, "running")
    return ConnectionState("unknown-end", last_seen_at, UNKNOWN_END)
