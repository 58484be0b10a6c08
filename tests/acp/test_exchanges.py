"""One exchange model: index, model, stats and checker agree on the same frames.

The same frames go through :class:`ConnectionIndexer` (the recorder's columns, which also
feed :class:`StatsAccumulator`, as ``acp-proxy stats`` does), :class:`ConnectionModel`
(``show``) and :class:`ConnectionChecker` (``check``): protocol version, turns and
latencies must be the same everywhere.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
import pytest

from acp_proxy.acp.conformance import ConnectionChecker
from acp_proxy.acp.exchanges import EARLY_WINDOW, Exchanges, InitializeFacts
from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.acp.model import ConnectionModel
from acp_proxy.acp.stats import StatsAccumulator
from acp_proxy.store.rows import NEEDS_PAYLOAD_SQL
from acp_proxy.wire.frame import Direction, Frame
from acp_proxy.wire.jsonrpc import parse_json

SID = "s1"
Line = tuple[Direction, bytes, int]  # direction, raw, mono_ns


def _line(obj: Any) -> bytes:
    return orjson.dumps(obj) + b"\n"


def rq(rid: Any, method: str, **params: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def ok(rid: Any, **result: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": rid, "result": result})


def up(variant: str, **fields: Any) -> bytes:
    update = {"sessionUpdate": variant, **fields}
    params = {"sessionId": SID, "update": update}
    return _line({"jsonrpc": "2.0", "method": "session/update", "params": params})


TEXT = {"type": "text", "text": "hi"}


def prelude(asked: int, answered: int) -> list[tuple[Direction, bytes]]:
    return [
        ("c2a", rq(0, "initialize", protocolVersion=asked, clientCapabilities={})),
        ("a2c", ok(0, protocolVersion=answered, agentCapabilities={})),
        ("c2a", rq(1, "session/new", cwd="/w", mcpServers=[])),
        ("a2c", ok(1, sessionId=SID)),
    ]


def v1_turn(rid: int) -> list[tuple[Direction, bytes]]:
    return [
        ("c2a", rq(rid, "session/prompt", sessionId=SID, prompt=[TEXT])),
        ("a2c", up("agent_message_chunk", content=TEXT)),
        ("a2c", ok(rid, stopReason="end_turn")),  # a v1 turn ends here
    ]


def v2_turn(rid: int) -> list[tuple[Direction, bytes]]:
    return [
        ("c2a", rq(rid, "session/prompt", sessionId=SID, prompt=[TEXT])),
        ("a2c", up("state_update", state="running")),
        ("a2c", up("user_message", messageId=f"u{rid}", content=[TEXT])),
        ("a2c", ok(rid, messageId=f"u{rid}")),
        ("a2c", up("agent_message_chunk", messageId=f"m{rid}", content=TEXT)),
        ("a2c", up("state_update", state="idle", stopReason="end_turn")),  # a v2 turn ends here
    ]


def timed(frames: list[tuple[Direction, bytes]]) -> list[Line]:
    """Give frame i the monotonic time i² ms, so every latency and duration differs."""
    return [(d, raw, i * i * 1_000_000) for i, (d, raw) in enumerate(frames, 1)]


_SQL = sqlite3.connect(":memory:")


def _needs_payload(kind: str | None, method: str | None, update_kind: str | None) -> bool:
    """Whether ``acp-proxy stats`` reads this frame's raw bytes (its own SQL condition)."""
    row = _SQL.execute(
        f"SELECT coalesce({NEEDS_PAYLOAD_SQL}, 0) FROM "
        "(SELECT ? AS kind, ? AS method, ? AS update_kind)",
        (kind, method, update_kind),
    ).fetchone()
    return bool(row[0])


def run_all(frames: list[Line]) -> dict[str, Any]:
    indexer = ConnectionIndexer()
    model = ConnectionModel(1)
    stats = StatsAccumulator()
    checker = ConnectionChecker(1)
    for seq, (direction, raw, ns) in enumerate(frames, 1):
        cols = indexer.index(direction, raw)
        payload = (
            parse_json(raw)[0] if _needs_payload(cols.kind, cols.method, cols.update_kind) else None
        )
        frame = Frame(
            0,
            1,
            seq,
            0.0,
            ns,
            direction,
            raw,
            len(raw),
            False,
            cols.kind,
            cols.rpc_id,
            cols.method,
            cols.session_id,
            cols.update_kind,
        )
        stats.feed(frame, payload)
        model.feed(frame)
        checker.feed(frame)
    model.finish()
    stats.finish()
    checker.finish()
    exchanges = [
        item for tl in model.timelines() for item in tl.items if getattr(item, "item", "") == "rpc"
    ]
    model_latency = {
        (ex.method, ex.direction, ex.latency_ns)
        for ex in exchanges
        if ex.latency_ns is not None and not ex.extra.get("reordered")
    }
    stats_latency = {(m, d, ns) for (m, d), s in stats.methods.items() for ns in s.latencies}
    (session,) = stats.sessions.values()
    return {
        "versions": (
            indexer.facts.protocol_version,
            model.protocol_version,
            stats.protocol_versions[1],
            checker.negotiated_version,
        ),
        "model_turns": sorted(
            (t.duration_ns, t.stop_reason) for t in [*model.turns, *model.tracker.unfinished()]
        ),
        "stats_turns": (session.turns, session.unfinished, sorted(session.durations)),
        "model_latency": model_latency,
        "stats_latency": stats_latency,
        "model": model,
    }


def _assert_agree(got: dict[str, Any], version: int, turn_ends: list[tuple[int, int]]) -> None:
    assert got["versions"] == (version,) * 4
    durations = sorted(ns_end - ns_start for ns_start, ns_end in turn_ends)
    assert got["model_turns"] == [(d, "end_turn") for d in durations]
    assert got["stats_turns"] == (len(durations), 0, durations)
    assert got["model_latency"] == got["stats_latency"]
    assert len(got["model_latency"]) >= 3  # initialize, session/new and the prompts


def _ns(frames: list[Line], seq: int) -> int:
    return frames[seq - 1][2]


@pytest.mark.parametrize("asked", [1, 2])
def test_v1_agent_answer_wins_and_v1_turns_end_at_the_prompt_response(asked: int) -> None:
    # a client asking 2 of an agent answering 1 is a v1 connection to every reader
    frames = timed(prelude(asked, 1) + v1_turn(2) + v1_turn(3))
    got = run_all(frames)
    # turns: prompt #5 .. response #7, prompt #8 .. response #10
    _assert_agree(got, 1, [(_ns(frames, 5), _ns(frames, 7)), (_ns(frames, 8), _ns(frames, 10))])


def test_v2_turns_end_at_the_idle_state_update() -> None:
    frames = timed(prelude(2, 2) + v2_turn(2) + v2_turn(3))
    got = run_all(frames)
    # turns: prompt #5 .. idle #10, prompt #11 .. idle #16 (not at the prompt responses)
    _assert_agree(got, 2, [(_ns(frames, 5), _ns(frames, 10)), (_ns(frames, 11), _ns(frames, 16))])


def test_a_response_recorded_before_its_request_is_paired_by_every_reader() -> None:
    frames = prelude(1, 1) + v1_turn(2)
    frames[4], frames[5] = frames[5], frames[4]  # the chunk before the prompt: harmless
    frames.insert(4, ("a2c", ok(9, answer=1)))  # answer to the client's request 9 ...
    frames.insert(5, ("c2a", rq(9, "_x/ask")))  # ... recorded just before it
    got = run_all(timed(frames))
    assert got["versions"] == (1, 1, 1, 1)
    (ask,) = [ex for ex in got["model"].connection.items if getattr(ex, "method", "") == "_x/ask"]
    assert ask.answered and ask.extra.get("reordered")
    assert got["stats_turns"][:2] == (1, 0)
    assert got["model_latency"] == got["stats_latency"]  # the reordered pair has no latency


def test_facts_the_answered_version_wins_over_the_asked_one() -> None:
    facts = InitializeFacts()
    facts.observe_request({"protocolVersion": 2, "clientInfo": {"name": "c"}})
    assert facts.protocol_version == 2  # until the agent answers
    facts.observe_result({"protocolVersion": 1, "agentInfo": {"name": "a"}})
    assert (facts.protocol_version, facts.requested_version) == (1, 2)
    assert (facts.client_info, facts.agent_info) == ({"name": "c"}, {"name": "a"})
    v2 = InitializeFacts()
    v2.observe_request({"protocolVersion": 2, "info": {"name": "c"}, "capabilities": {"x": 1}})
    v2.observe_result({"protocolVersion": 2, "info": {"name": "a"}, "capabilities": {}})
    assert (v2.client_info, v2.agent_info) == ({"name": "c"}, {"name": "a"})
    assert (v2.client_capabilities, v2.agent_capabilities) == ({"x": 1}, {})


def test_pairing_is_per_direction_by_exact_id_text() -> None:
    ex: Exchanges[str, str] = Exchanges()
    assert ex.request("c2a", "1", "client's 1") is None
    assert ex.request("a2c", "1", "agent's 1") is None
    assert ex.answer("c2a", "1") == "agent's 1"  # a c2a response answers an a2c request
    assert ex.answer("a2c", "1.0") is None  # 1.0 is not 1
    assert ex.answer("a2c", '"1"') is None
    assert ex.answer("a2c", "1") == "client's 1"
    assert not ex.pending


def test_early_responses_wait_a_bounded_window() -> None:
    ex: Exchanges[str, str] = Exchanges()
    ex.hold_early("a2c", "7", "early 7")
    assert ex.request("c2a", "7", "request 7") == "early 7"  # paired, not left pending
    assert not ex.pending
    ex.hold_early("a2c", "8", "early 8")
    expired: list[Any] = []
    for _ in range(EARLY_WINDOW):
        expired += ex.tick()
    assert expired == [(("c2a", "8"), "early 8")]  # its request never came
    assert ex.request("c2a", "8", "late") is None and ex.pending  # too late: pending
    # never more than the window held at once, whatever the recording holds
    for n in range(10 * EARLY_WINDOW):
        ex.hold_early("a2c", f"x{n}", "orphan")
    dropped = ex.tick()
    assert len(dropped) == 9 * EARLY_WINDOW and dropped[0][0] == ("c2a", "x0")
    assert len(ex.expire_all()) == EARLY_WINDOW


def test_the_indexer_names_early_responses_its_requests_answered() -> None:
    indexer = ConnectionIndexer()
    early = indexer.index("a2c", ok(0, protocolVersion=1, agentInfo={"name": "a"}), ref=17)
    assert (early.kind, early.method) == ("response", None)  # not knowable yet
    request = indexer.index("c2a", rq(0, "initialize", protocolVersion=2), ref=18)
    assert request.method == "initialize"
    assert indexer.paired_early == [(17, "initialize", None)]
    assert (indexer.facts.protocol_version, indexer.facts.agent_info) == (1, {"name": "a"})
    # an unpaired response is forgotten once the window has passed
    indexer.index("a2c", ok(5), ref=19)
    for _ in range(EARLY_WINDOW):
        indexer.index("a2c", up("agent_message_chunk", content=TEXT))
    indexer.index("c2a", rq(5, "_late"))
    assert indexer.paired_early == [(17, "initialize", None)]
