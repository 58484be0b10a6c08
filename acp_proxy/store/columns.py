"""The columns of the stored rows, listed once, and a connection row's values.

The frame row's columns in insert order, and how the fields of a connection row become column
values (structures as JSON text), for the writer's sinks, the JSONL import and the proxy's
settling of rows a dead writer never finished.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import orjson

HOST = socket.gethostname()
"""This machine's name, on every connection row it records (``host``)."""

FRAME_COLUMNS = (
    'connection_id, seq, ts, mono_ns, direction, raw, size, "binary", '
    "kind, rpc_id, method, session_id, update_kind, entity_type, entity_id"
)
"""The columns of a frame row, in order (index columns last: 0 stands for NULL)."""

FRAME_COLUMN_NAMES = tuple(name.strip().strip('"') for name in FRAME_COLUMNS.split(","))
""":data:`FRAME_COLUMNS` as names (unquoted), for code that builds its own statements."""


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
    values.setdefault("host", HOST)
    values["last_seen_at"] = now
    return values


def connection_insert(values: dict[str, Any]) -> tuple[str, list[Any]]:
    """The INSERT of a connection row holding ``values``: (SQL, parameters)."""
    cols = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    return f"INSERT INTO connections ({cols}) VALUES ({marks})", list(values.values())
