"""acp.stats: latency per method, sessions followed by lineage across connections, percentiles.

(That stats, the model and the checker agree on turns is tested in test_exchanges.py.)
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.acp.stats import StatsAccumulator, percentile
from acp_proxy.wire.frame import Direction, Frame

MS = 1_000_000


def _msg(**msg: Any) -> tuple[bytes, Any]:
    value = {"jsonrpc": "2.0", **msg}
    return orjson.dumps(value) + b"\n", value


def _feed(
    stats: StatsAccumulator, conn: int, lines: list[tuple[Direction, dict[str, Any], int]]
) -> None:
    ix = ConnectionIndexer()
    for seq, (direction, msg, ms) in enumerate(lines, 1):
        raw, payload = _msg(**msg)
        cols = ix.index(direction, raw)
        frame = Frame(0, conn, seq, 0.0, ms * MS, direction, raw, len(raw), False, *cols.values())
        stats.feed(frame, payload)


def _new(rid: int, sid: str, at: int) -> list[tuple[Direction, dict[str, Any], int]]:
    return [
        ("c2a", {"id": rid, "method": "session/new", "params": {"cwd": "/"}}, at),
        ("a2c", {"id": rid, "result": {"sessionId": sid}}, at + 5),
    ]


def _prompt(rid: int, sid: str, at: int, took: int) -> list[tuple[Direction, dict[str, Any], int]]:
    return [
        (
            "c2a",
            {"id": rid, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}},
            at,
        ),
        ("a2c", {"id": rid, "result": {"stopReason": "end_turn"}}, at + took),
    ]


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([10, 20, 30, 40], 0.5) == 20
    assert percentile([10, 20, 30, 40], 0.99) == 40
    assert percentile([1, 2, 3, 4, 5], 0.5) == 3
    assert percentile([7], 0.0) == 7


def test_latency_errors_and_unanswered_requests_per_method() -> None:
    stats = StatsAccumulator()
    _feed(
        stats,
        1,
        [
            *_new(1, "s1", 0),
            *_prompt(2, "s1", 10, 30),
            ("c2a", {"id": 3, "method": "session/prompt", "params": {"sessionId": "s1"}}, 50),
            ("a2c", {"id": 3, "error": {"code": -32603, "message": "boom"}}, 60),
            ("c2a", {"id": 4, "method": "session/set_mode", "params": {"sessionId": "s1"}}, 70),
        ],
    )
    stats.finish()
    latency = {(m["method"], m["direction"]): m for m in stats.to_json()["latency"]}
    prompt = latency[("session/prompt", "c2a")]
    assert (prompt["answered"], prompt["errors"], prompt["p50Ms"], prompt["maxMs"]) == (
        2,
        1,
        10.0,
        30.0,
    )
    assert latency[("session/new", "c2a")]["p50Ms"] == 5.0
    assert latency[("session/set_mode", "c2a")]["unanswered"] == 1
    (session,) = stats.to_json()["sessions"]
    assert session["turns"] == 2 and session["stopReasons"] == {
        "end_turn": 1,
        "(error response)": 1,
    }


def test_a_session_continued_on_a_new_connection_is_one_and_a_new_one_is_another() -> None:
    stats = StatsAccumulator()
    _feed(stats, 1, [*_new(1, "s1", 0), *_prompt(2, "s1", 10, 1)])
    _feed(stats, 2, _prompt(1, "s1", 0, 1))  # uses the id: continues the lineage
    _feed(stats, 3, [*_new(1, "s1", 0), *_prompt(2, "s1", 10, 1)])  # created again: a new one
    stats.finish()
    sessions = [(s["sessionId"], s["connections"], s["turns"]) for s in stats.to_json()["sessions"]]
    assert sessions == [("s1", [1, 2], 2), ("s1", [3], 1)]
