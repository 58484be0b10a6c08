"""Generate big v2 recordings quickly (straight into SQLite, index columns included).

Used by the memory test and ``bench/bench_inspect.py``: ``turns`` prompt turns of
``chunks`` streamed agent message chunks each, plus a tool call and state updates.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from acp_proxy.acp.index import ConnectionIndexer, IndexColumns
from tests.helpers import Capture, insert_frames

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
    now = time.time()
    indexer = ConnectionIndexer()
    count = 0

    def rows() -> Iterator[Capture]:
        nonlocal count
        cols: IndexColumns | None = None
        last_update: str | None = None
        for direction, raw in frames(turns, chunks):
            # chunks after the first of each turn have the columns of the first: skip parsing
            repeat = b'"agent_message_chunk"' in raw and last_update == "agent_message_chunk"
            if not repeat or cols is None:
                cols = indexer.index(direction, raw)  # type: ignore[arg-type]
            last_update = cols.update_kind
            count += 1
            yield Capture(direction, raw, columns=cols)  # type: ignore[arg-type]

    insert_frames(
        path,
        rows(),
        connection={
            "started_at": now,
            "ended_at": now + 1,
            "transport": "stdio",
            "protocol_version": 2,
        },
        start_ts=now,
    )
    return count
