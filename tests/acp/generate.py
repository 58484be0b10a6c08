"""Generate big v2 recordings quickly (straight into SQLite, index columns included).

Used by the memory test and ``bench/bench_inspect.py``: ``turns`` prompt turns of
``chunks`` streamed agent message chunks each, plus a tool call and state updates.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from acp_proxy.acp.index import ConnectionIndexer, IndexColumns
from acp_proxy.record.schema import connect

SID = "sess_big"


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _update(upd: dict[str, Any]) -> bytes:
    return _line(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": upd}}
    )


def frames(turns: int, chunks: int) -> Iterator[tuple[str, bytes]]:
    yield (
        "c2a",
        _line(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2}}
        ),
    )
    yield "a2c", _line({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2}})
    yield "c2a", _line({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}})
    yield "a2c", _line({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}})
    for t in range(turns):
        rid = t + 2
        prompt = [{"type": "text", "text": f"question {t}"}]
        yield (
            "c2a",
            _line(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "session/prompt",
                    "params": {"sessionId": SID, "prompt": prompt},
                }
            ),
        )
        yield "a2c", _update({"sessionUpdate": "state_update", "state": "running"})
        yield "a2c", _line({"jsonrpc": "2.0", "id": rid, "result": {"messageId": f"u{t}"}})
        yield (
            "a2c",
            _update({"sessionUpdate": "user_message", "messageId": f"u{t}", "content": prompt}),
        )
        for c in range(chunks):
            yield (
                "a2c",
                _update(
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "messageId": f"m{t}",
                        "content": {
                            "type": "text",
                            "text": f"word{c} of a fairly ordinary answer ",
                        },
                    }
                ),
            )
        yield (
            "a2c",
            _update(
                {"sessionUpdate": "tool_call_update", "toolCallId": f"c{t}", "status": "pending"}
            ),
        )
        yield (
            "a2c",
            _update(
                {"sessionUpdate": "tool_call_update", "toolCallId": f"c{t}", "status": "completed"}
            ),
        )
        yield (
            "a2c",
            _update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
        )


def frames_per_turn(chunks: int) -> int:
    return chunks + 7


def generate(path: Path, turns: int, chunks: int = 93) -> int:
    """Write a one-connection recording; return its frame count."""
    db = connect(path, create=True)
    try:
        db.execute("BEGIN")
        now = time.time()
        cid = db.execute(
            "INSERT INTO connections (started_at, ended_at, transport) VALUES (?, ?, 'stdio')",
            [now, now + 1],
        ).lastrowid
        indexer = ConnectionIndexer()
        rows: list[tuple[Any, ...]] = []
        count = 0
        cols: IndexColumns | None = None
        for seq, (direction, raw) in enumerate(frames(turns, chunks), 1):
            # chunks after the first of each turn have the columns of the first: skip parsing
            repeat = (
                b'"agent_message_chunk"' in raw and rows and rows[-1][11] == "agent_message_chunk"
            )
            if not repeat or cols is None:
                cols = indexer.index(direction, raw)  # type: ignore[arg-type]
            rows.append(
                (
                    cid,
                    seq,
                    now,
                    seq * 1000,
                    direction,
                    raw,
                    len(raw),
                    *cols.values(),
                )
            )
            count += 1
            if len(rows) >= 10000:
                _insert(db, rows)
                rows = []
        _insert(db, rows)
        db.execute("UPDATE connections SET protocol_version = 2 WHERE id = ?", [cid])
        db.execute("COMMIT")
        return count
    finally:
        db.close()


def _insert(db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    db.executemany(
        "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, raw, size, kind, rpc_id, "
        "method, session_id, update_kind, entity_type, entity_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
