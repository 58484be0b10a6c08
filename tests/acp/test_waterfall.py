"""Waterfall, turns and performance figures of one connection (acp/waterfall.py)."""

from __future__ import annotations

import json

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.acp.waterfall import WaterfallBuilder, needs_payload
from acp_proxy.wire.frame import Frame
from acp_proxy.wire.jsonrpc import parse_json
from tests.web.helpers import rich_frames


def feed_all(frames: list[tuple[int, str, bytes]]) -> dict:  # type: ignore[type-arg]
    """Index ``(ms, direction, raw)`` frames as the recorder does and build the waterfall."""
    builder = WaterfallBuilder()
    indexer = ConnectionIndexer()
    for seq, (ms, direction, raw) in enumerate(frames, start=1):
        cols = indexer.index(direction, raw)  # type: ignore[arg-type]
        wanted = needs_payload(cols.kind, cols.method, cols.update_kind)
        frame = Frame(
            0,
            1,
            seq,
            0.0,
            ms * 1_000_000,
            direction,  # type: ignore[arg-type]
            raw,
            len(raw),
            False,
            cols.kind,
            cols.rpc_id,
            cols.method,
            cols.session_id,
            cols.update_kind,
        )
        builder.feed(frame, parse_json(raw)[0] if wanted else None)
    return builder.to_json()


def build() -> dict:  # type: ignore[type-arg]
    return feed_all(rich_frames())


def test_turns_end_at_idle_in_v2_and_nest_the_agent_requests() -> None:
    data = build()
    turns = data["turns"]
    assert [(t["startMs"], t["endMs"], t["stopReason"]) for t in turns] == [
        (10.0, 100.0, "end_turn"),
        (200.0, 300.0, "end_turn"),
        (400.0, 410.0, None),
    ]
    assert turns[2]["error"] == {"code": -32603, "message": "Internal error"}
    assert [t["firstChunkMs"] for t in turns] == [20.0, 20.0, None]
    nested = [data["bars"][i] for i in turns[0]["bars"] if data["bars"][i]["nested"]]
    assert [(b["method"], b["direction"], b["latencyMs"]) for b in nested] == [
        ("session/request_permission", "a2c", 30.0)
    ]


def test_performance_per_method_and_slowest() -> None:
    perf = build()["performance"]
    prompt = next(m for m in perf["methods"] if m["method"] == "session/prompt")
    assert (prompt["count"], prompt["errors"], prompt["p50Ms"], prompt["maxMs"]) == (
        3,
        1,
        2.0,
        10.0,
    )
    assert prompt["p95Ms"] == 10.0 and prompt["p99Ms"] == 10.0
    assert perf["turns"]["count"] == 3 and perf["turns"]["p50Ms"] == 90.0
    assert perf["slowest"][0]["method"] == "session/request_permission"


def test_v1_turns_end_at_the_prompt_response() -> None:
    def msg(obj: dict) -> bytes:  # type: ignore[type-arg]
        return json.dumps({"jsonrpc": "2.0", **obj}).encode() + b"\n"

    chunk = msg(
        {
            "method": "session/update",
            "params": {
                "sessionId": "s1",
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "hi"},
                },
            },
        }
    )
    frames = [
        (0, "c2a", msg({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})),
        (2, "a2c", msg({"id": 1, "result": {"protocolVersion": 1}})),
        (
            10,
            "c2a",
            msg({"id": 2, "method": "session/prompt", "params": {"sessionId": "s1", "prompt": []}}),
        ),
        (25, "a2c", chunk),
        (26, "a2c", chunk),
        (60, "a2c", msg({"id": 2, "result": {"stopReason": "end_turn"}})),
    ]
    (turn,) = feed_all(frames)["turns"]
    assert (turn["startMs"], turn["endMs"], turn["durationMs"]) == (10.0, 60.0, 50.0)
    assert (turn["stopReason"], turn["firstChunkMs"], turn["firstChunkSeq"]) == (
        "end_turn",
        15.0,
        4,
    )
