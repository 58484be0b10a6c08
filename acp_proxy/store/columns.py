"""The columns of the stored rows, listed once, and a connection row's values and writes.

The frame row's columns in insert order, the connection row's columns, how the fields of a
connection row become column values (structures as JSON text), and the statements that put
on a connection row what a dead writer never wrote (:func:`recorded_totals`,
:func:`note_losses`), for the writer's sinks, the JSONL import and the proxy's shipper.
"""

from __future__ import annotations

import json
import time
from functools import cache
from typing import Any

import orjson


@cache
def host() -> str:
    """This machine's name, on every connection row it records (``host``); asked once, by
    what records (``check`` and the readers import this module but need no socket)."""
    import socket

    return socket.gethostname()


FRAME_COLUMNS = (
    'connection_id, seq, ts, mono_ns, direction, raw, size, "binary", '
    "kind, rpc_id, method, session_id, update_kind, entity_type, entity_id"
)
"""The columns of a frame row, in order (index columns last: 0 stands for NULL)."""

FRAME_COLUMN_NAMES = tuple(name.strip().strip('"') for name in FRAME_COLUMNS.split(","))
""":data:`FRAME_COLUMNS` as names (unquoted), for code that builds its own statements."""

CONNECTION_COLUMN_NAMES = (
    "id",
    "started_at",
    "ended_at",
    "transport",
    "agent_command",
    "cwd",
    "pid",
    "proxy_pid",
    "exit_status",
    "protocol_version",
    "client_info",
    "agent_info",
    "label",
    "peer",
    "headers",
    "frames_dropped",
    "bytes_dropped",
    "meta",
    "last_seen_at",
    "end_reason",
    "host",
    "digest",
)
"""Every column of a connection row the current schema has, listed once."""

JSON_CONNECTION_COLUMNS = frozenset(
    {"agent_command", "client_info", "agent_info", "headers", "meta"}
)
"""The connection columns that hold JSON text."""


def json_text(value: Any) -> str | None:
    """``value`` as JSON text for a column (None stays NULL); never fails on odd strings."""
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except (TypeError, ValueError):  # a lone surrogate, an integer past 64 bits...
        return json.dumps(value, ensure_ascii=True, default=str, separators=(",", ":"))


def column_value(value: Any) -> Any:
    """A connection-row field as a column value (structures as JSON text)."""
    if isinstance(value, (dict, list, tuple)):
        return json_text(value)
    return value


def open_row_fields(fields: dict[str, Any], now: float) -> dict[str, Any]:
    """A new connection row's columns: ``fields`` as values, ``host``, ``last_seen_at``."""
    values = {k: column_value(v) for k, v in fields.items()}
    values.setdefault("host", host())
    values["last_seen_at"] = now
    return values


def connection_insert(values: dict[str, Any]) -> tuple[str, list[Any]]:
    """The INSERT of a connection row holding ``values``: (SQL, parameters)."""
    cols = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    return f"INSERT INTO connections ({cols}) VALUES ({marks})", list(values.values())


def recorded_totals(db: Any, proxy_pid: Any, started_at: Any) -> tuple[int | None, int, int]:
    """The row id of the connection a proxy process started at ``started_at`` (None: no row)
    and the frames and bytes the database holds for it."""
    found = db.execute(
        "SELECT id FROM connections WHERE proxy_pid = ? AND started_at = ?",
        (proxy_pid, started_at),
    ).fetchone()
    if not found:
        return None, 0, 0
    row = db.execute(
        "SELECT count(*), coalesce(sum(size), 0) FROM frames WHERE connection_id = ?",
        (found[0],),
    ).fetchone()
    return found[0], int(row[0]), int(row[1])


def note_losses(
    db: Any,
    row_id: int | None,
    opened: dict[str, Any],
    end: dict[str, Any],
    frames: int,
    nbytes: int,
) -> None:
    """Put losses (``frames``/``nbytes`` dropped) and the ``end`` fields on a connection row;
    with no ``row_id`` (the writer never created it), create it from ``opened``."""
    if row_id is None:
        fields = open_row_fields({**opened, **end}, time.time())
        fields["frames_dropped"] = frames
        fields["bytes_dropped"] = nbytes
        db.execute(*connection_insert(fields))
        return
    values = {k: column_value(v) for k, v in end.items()}
    sets = "".join(f", {k} = coalesce({k}, ?)" for k in values)
    db.execute(
        f"UPDATE connections SET frames_dropped = ?, bytes_dropped = ?{sets} WHERE id = ?",
        (frames, nbytes, *values.values(), row_id),
    )
