"""Where a recorded transport event falls among a connection's frames, and its words."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.transport_events import describe, placed_events
from tests.helpers import Capture, insert_frames

MSG = b'{"jsonrpc":"2.0","method":"x"}'


def _recording(path: Path, frame_ts: list[float], events: list[tuple[float, str, object]]) -> None:
    insert_frames(path, [Capture("c2a", MSG, ts=ts, mono_ns=n) for n, ts in enumerate(frame_ts)])
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO events (connection_id, ts, kind, detail) VALUES (1, ?, ?, ?)",
            [(ts, kind, json.dumps(detail)) for ts, kind, detail in events],
        )


def test_each_event_follows_the_last_frame_recorded_at_or_before_it(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _recording(
        db,
        [10.0, 20.0, 30.0],
        [
            (5.0, "http", {"method": "POST"}),  # before the first frame
            (20.0, "http", {"method": "GET"}),  # at the same instant as frame 2: after it
            (25.0, "sse_open", {"stream": "connection"}),
            (24.0, "sse_close", {"stream": "connection"}),  # clock went back: stays in order
            (99.0, "http_delete", {"connection": "c1"}),
        ],
    )
    with RecordingReader.open(db) as reader:
        placed = placed_events(reader, 1)
        assert placed_events(reader, 2) == []  # no such connection: nothing, no frames read
    assert [(e.kind, e.after_seq) for e in placed] == [
        ("http", 0),
        ("http", 2),
        ("sse_open", 2),
        ("sse_close", 2),
        ("http_delete", 3),
    ]


def test_events_of_a_connection_without_frames_come_first(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _recording(db, [], [])
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO connections (started_at, transport) VALUES (0, 'http')")
        conn.execute(
            "INSERT INTO events (connection_id, ts, kind, detail) VALUES (2, 1, 'http', NULL)"
        )
    with RecordingReader.open(db) as reader:
        assert [(e.kind, e.after_seq, e.detail) for e in placed_events(reader, 2)] == [
            ("http", 0, None)
        ]


def test_descriptions_name_status_headers_streams_and_ids() -> None:
    post = {"method": "POST", "status": 202, "connection": "c1", "session": "s1", "rpc": "m"}
    assert describe("http", {**post, "id": "3"}) == (
        "HTTP POST 202 m #3 · Acp-Connection-Id c1 · Acp-Session-Id s1"
    )
    assert describe("sse_open", {"stream": "session", "session": "s1"}) == (
        "SSE session stream s1 opened"
    )
    close = {"stream": "connection", "session": None, "by": "client", "events": 1}
    assert describe("sse_close", {**close, "first_id": 4, "last_id": 4}) == (
        "SSE connection stream closed by client: 1 event, id 4"
    )
    assert describe("sse_close", {**close, "events": 0, "first_id": None}) == (
        "SSE connection stream closed by client: 0 events"
    )
    assert describe("http_delete", {"connection": "c1"}) == (
        "HTTP DELETE: the connection ends · Acp-Connection-Id c1"
    )
    assert describe("websocket_close", {"by": "client", "code": 1000, "reason": ""}) == (
        "WebSocket closed by client, code 1000"
    )
    assert describe("client_eof", None) == "client_eof"
    assert describe("signal", {"signal": "SIGTERM"}) == 'signal {"signal": "SIGTERM"}'
