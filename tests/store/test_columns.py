"""store.columns: the column lists, connection-row values, and the losses a dead writer left."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from acp_proxy.store.columns import (
    CONNECTION_COLUMN_NAMES,
    FRAME_COLUMN_NAMES,
    column_value,
    connection_insert,
    host,
    json_text,
    note_losses,
    open_row_fields,
    recorded_totals,
)
from acp_proxy.store.schema import connect


def _db(tmp_path: Path) -> sqlite3.Connection:
    return connect(tmp_path / "rec.sqlite", create=True)


def test_column_lists_are_the_tables_of_the_current_schema(tmp_path: Path) -> None:
    db = _db(tmp_path)
    frames = [r[1] for r in db.execute("PRAGMA table_info(frames)")]
    connections = [r[1] for r in db.execute("PRAGMA table_info(connections)")]
    assert set(frames) == {"id", *FRAME_COLUMN_NAMES}
    assert set(CONNECTION_COLUMN_NAMES) == set(connections)
    assert '"binary"' not in FRAME_COLUMN_NAMES and "binary" in FRAME_COLUMN_NAMES


def test_json_text_keeps_none_and_survives_what_orjson_refuses() -> None:
    assert json_text(None) is None
    assert json_text({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    assert json.loads(json_text(["\ud800"]) or "") == ["\ud800"]
    assert json.loads(json_text([2**70]) or "") == [2**70]


def test_column_value_turns_structures_into_json_and_leaves_scalars() -> None:
    assert column_value({"k": 1}) == '{"k":1}'
    assert column_value(("a", "b")) == '["a","b"]'
    assert column_value(5) == 5
    assert column_value("text") == "text"


def test_open_row_fields_sets_host_and_last_seen_but_keeps_a_given_host() -> None:
    assert open_row_fields({"cwd": "/x", "meta": {"a": 1}}, 12.5) == {
        "cwd": "/x",
        "meta": '{"a":1}',
        "host": host(),
        "last_seen_at": 12.5,
    }
    assert open_row_fields({"host": "elsewhere"}, 1.0)["host"] == "elsewhere"


def test_connection_insert_puts_one_mark_per_value() -> None:
    assert connection_insert({"pid": 3, "cwd": "/"}) == (
        "INSERT INTO connections (pid, cwd) VALUES (?, ?)",
        [3, "/"],
    )


def test_losses_without_a_row_create_it_from_what_was_opened(tmp_path: Path) -> None:
    db = _db(tmp_path)
    opened = {"proxy_pid": 41, "started_at": 100.0, "transport": "stdio"}
    assert recorded_totals(db, 41, 100.0) == (None, 0, 0)
    note_losses(db, None, opened, {"end_reason": "writer died"}, 3, 300)
    row = db.execute(
        "SELECT transport, end_reason, frames_dropped, bytes_dropped FROM connections"
    ).fetchone()
    assert row == ("stdio", "writer died", 3, 300)
    row_id, frames, nbytes = recorded_totals(db, 41, 100.0)
    assert row_id is not None and (frames, nbytes) == (0, 0)


def test_losses_on_a_written_row_keep_the_end_fields_it_has(tmp_path: Path) -> None:
    db = _db(tmp_path)
    opened = {"proxy_pid": 7, "started_at": 5.0, "transport": "ws", "end_reason": "agent exited"}
    db.execute(*connection_insert(open_row_fields(opened, 5.0)))
    row_id = db.execute("SELECT id FROM connections").fetchone()[0]
    db.execute(
        "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, raw, size)"
        " VALUES (?, 0, 5.0, 0, 'c2a', x'7b7d', 2), (?, 1, 5.0, 0, 'a2c', x'7b7d0a', 3)",
        (row_id, row_id),
    )
    assert recorded_totals(db, 7, 5.0) == (row_id, 2, 5)
    note_losses(db, row_id, opened, {"end_reason": "lost", "exit_status": 1}, 4, 40)
    row = db.execute(
        "SELECT end_reason, exit_status, frames_dropped, bytes_dropped FROM connections"
    ).fetchone()
    assert row == ("agent exited", 1, 4, 40)
