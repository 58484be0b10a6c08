"""The pure alignment behind ``acp-proxy diff``: LCS, fallback, normalising, timing."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.acp.diff import (
    ConnectionSketch,
    Signatures,
    SlowerLimit,
    align,
    align_connections,
    changed_members,
    content_key,
    greedy_pairs,
    lcs_pairs,
    normalise,
    timing_regressions,
)
from acp_proxy.wire.frame import Frame


def lcs_length(a: list[int], b: list[int]) -> int:
    """The textbook dynamic programme, the oracle for the bit-parallel one."""
    rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            rows[i + 1][j + 1] = rows[i][j] + 1 if x == y else max(rows[i][j + 1], rows[i + 1][j])
    return rows[-1][-1]


def covered(opcodes: Sequence[tuple[str, int, int, int, int]], n: int, m: int) -> None:
    """Opcodes cover both sequences exactly once, in order."""
    i = j = 0
    for _tag, i1, i2, j1, j2 in opcodes:
        assert (i1, j1) == (i, j)
        i, j = i2, j2
    assert (i, j) == (n, m)


seqs = st.lists(st.integers(0, 4), max_size=30)


@settings(max_examples=300, deadline=None)
@given(seqs, seqs)
def test_lcs_is_longest_and_a_common_subsequence(a: list[int], b: list[int]) -> None:
    pairs = lcs_pairs(a, b)
    assert len(pairs) == lcs_length(a, b)
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(p[0] < q[0] and p[1] < q[1] for p, q in itertools.pairwise(pairs))
    alignment = align(a, b)
    assert alignment.exact and alignment.note is None
    covered(alignment.opcodes, len(a), len(b))
    assert sum(i2 - i1 for tag, i1, i2, _, _ in alignment.opcodes if tag == "equal") == len(pairs)


@settings(max_examples=200, deadline=None)
@given(seqs, seqs)
def test_greedy_fallback_is_a_common_subsequence(a: list[int], b: list[int]) -> None:
    pairs = greedy_pairs(a, b)
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(p[0] < q[0] and p[1] < q[1] for p, q in itertools.pairwise(pairs))
    covered(align(a, b, max_cells=0).opcodes, len(a), len(b))


def test_past_the_limit_the_alignment_is_greedy_and_says_so() -> None:
    a = [1, 2, 3, 4, 5, 6]
    b = [1, 9, 3, 4, 8, 6]
    exact = align(a, b)
    assert exact.exact
    greedy = align(a, b, max_cells=3)  # middle is 4 x 4 after trimming the ends
    assert not greedy.exact
    assert greedy.note is not None and "4 x 4" in greedy.note and "greedily" in greedy.note
    # the common ends are trimmed first: they stay equal whatever the middle does
    assert greedy.opcodes[0] == ("equal", 0, 1, 0, 1)
    assert greedy.opcodes[-1] == ("equal", 5, 6, 5, 6)


def test_an_insertion_in_a_long_equal_run_is_one_added_frame() -> None:
    a = list(range(10)) * 100
    b = [*a[:500], 99, *a[500:]]
    ops = align(a, b).opcodes
    assert [op for op in ops if op[0] != "equal"] == [("insert", 500, 500, 500, 501)]


def test_ids_session_ids_and_timestamps_are_not_differences() -> None:
    a = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/update",
        "params": {
            "sessionId": "s1",
            "update": {"messageId": "m1", "timestamp": "2026-01-01", "text": "hi"},
        },
    }
    b = {
        "jsonrpc": "2.0",
        "id": 30,
        "method": "session/update",
        "params": {
            "sessionId": "s9",
            "update": {"messageId": "m7", "timestamp": "2026-06-01", "text": "hi"},
        },
    }
    assert normalise(a) == normalise(b)
    assert changed_members(orjson.dumps(a), orjson.dumps(b)) == []
    b["params"]["update"]["text"] = "hello"  # type: ignore[index]
    (d,) = changed_members(orjson.dumps(a), orjson.dumps(b))
    assert (d.path, d.recorded, d.live) == ("params.update.text", "hi", "hello")
    # --ignore paths, as in replay (relative to params)
    from acp_proxy.acp.jsonpaths import parse_path

    assert changed_members(orjson.dumps(a), orjson.dumps(b), [parse_path("update.text")]) == []


def test_members_added_and_removed_are_named() -> None:
    a = b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","x":1}}'
    b = b'{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn","y":2}}'
    found = {(d.path, d.missing) for d in changed_members(a, b)}
    assert found == {("result.x", "live"), ("result.y", "recorded")}
    (raw,) = changed_members(b"not json\n", b"not json either\n")
    assert raw.path == "(bytes)"


def sketch(table: Signatures, frames: list[tuple[Any, ...]]) -> ConnectionSketch:
    s = ConnectionSketch(table)
    for seq, frame in enumerate(frames, 1):
        direction, kind, method, rpc_id, ns = frame[:5]
        update_kind, raw = (frame[5], frame[6]) if len(frame) > 5 else (None, None)
        f = Frame(seq, 1, seq, 0.0, ns, direction, raw or b"", 0, False, kind, rpc_id, method, "s1")
        s.add(f._replace(update_kind=update_kind), content=raw is not None)
    s.finish()
    return s


def test_a_turn_that_got_slower_is_a_timing_regression() -> None:
    table = Signatures()
    ms = 1_000_000
    a = sketch(
        table,
        [
            ("c2a", "request", "session/prompt", "2", 0),
            ("a2c", "response", "session/prompt", "2", 100 * ms),
        ],
    )
    b = sketch(
        table,
        [
            ("c2a", "request", "session/prompt", "7", 0),
            ("a2c", "response", "session/prompt", "7", 2_500 * ms),
        ],
    )
    alignment = align_connections(a, b)
    (slow,) = timing_regressions(alignment, a, b, 1_000 * ms)
    assert slow.what == "turn" and slow.method == "session/prompt"
    assert (slow.a_ns, slow.b_ns) == (100 * ms, 2_500 * ms)
    assert timing_regressions(alignment, a, b, 3_000 * ms) == []
    assert timing_regressions(alignment, b, a, 1_000 * ms) == []  # faster is no regression


def test_an_early_response_is_paired_with_its_request() -> None:
    table = Signatures()
    s = sketch(
        table,
        [
            ("a2c", "response", "session/prompt", "2", 50),
            ("c2a", "request", "session/prompt", "2", 40),
        ],
    )
    assert s.latency_ns == {1: 10}


def test_equal_frames_anchor_the_alignment_within_a_run_of_one_signature() -> None:
    # four message chunks (one signature) and a response; B has one chunk more, "x"
    sigs_a, content_a = [1, 1, 1, 2], [10, 11, 12, 20]
    sigs_b, content_b = [1, 1, 1, 1, 2], [10, 99, 11, 12, 20]
    by_signature = align(sigs_a, sigs_b).opcodes
    # by signature alone the LCS pairs the new chunk with an old one (a false "changed")
    assert ("equal", 0, 3, 1, 4) in by_signature or ("equal", 0, 3, 0, 3) in by_signature
    anchored = align(sigs_a, sigs_b, a_content=content_a, b_content=content_b).opcodes
    assert anchored == [
        ("equal", 0, 1, 0, 1),
        ("insert", 1, 1, 1, 2),
        ("equal", 1, 4, 2, 5),
    ]
    # a chunk whose text changed is still paired with its counterpart (a "changed" frame)
    anchored = align(sigs_a, sigs_a, a_content=content_a, b_content=[10, 98, 12, 20]).opcodes
    assert anchored == [("equal", 0, 4, 0, 4)]


IDLE = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": {"sessionUpdate": "state_update", "state": "idle"}},
    }
)
RUNNING = IDLE.replace(b'"idle"', b'"running"')


def v2_turn(idle_ms: int) -> list[tuple[Any, ...]]:
    ms = 1_000_000
    update = ("a2c", "notification", "session/update", None)
    return [
        ("c2a", "request", "session/prompt", "2", 0),
        ("a2c", "response", "session/prompt", "2", 5 * ms),  # v2: only an acknowledgement
        (*update, 6 * ms, "state_update", RUNNING),
        (*update, idle_ms * ms, "state_update", IDLE),
    ]


def test_a_v2_turn_ends_at_the_idle_state_update() -> None:
    table = Signatures()
    a = sketch(table, v2_turn(100))
    b = sketch(table, v2_turn(4_000))
    assert a.turn_ns == {0: 100_000_000} and a.latency_ns == {0: 5_000_000}
    (slow,) = timing_regressions(align_connections(a, b), a, b, 1_000_000_000)
    assert (slow.what, slow.a, slow.a_ns, slow.b_ns) == ("turn", 0, 100_000_000, 4_000_000_000)
    # a v2 turn that never reached idle has no duration (its quick response is not one)
    cut = sketch(table, v2_turn(100)[:3])
    assert cut.turn_ns == {}


def frame(obj: dict[str, object]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **obj})


def update(text: str, variant: str = "agent_message_chunk") -> tuple[Any, ...]:
    raw = frame(
        {
            "method": "session/update",
            "params": {"sessionId": "s", "update": {"sessionUpdate": variant, "text": text}},
        }
    )
    return ("a2c", "notification", "session/update", None, 0, variant, raw)


def prompt(rpc_id: str, text: str) -> tuple[Any, ...]:
    raw = frame({"id": int(rpc_id), "method": "session/prompt", "params": {"prompt": text}})
    return ("c2a", "request", "session/prompt", rpc_id, 0, None, raw)


def end_turn(rpc_id: str) -> tuple[Any, ...]:
    raw = frame({"id": int(rpc_id), "result": {"stopReason": "end_turn"}})
    return ("a2c", "response", "session/prompt", rpc_id, 0, None, raw)


def test_how_the_two_directions_interleaved_is_not_a_difference() -> None:
    # the agent's notification crossed the client's prompt in B, not in A
    table = Signatures()
    a = sketch(table, [update("cmds", "available_commands_update"), prompt("2", "hi")])
    b = sketch(table, [prompt("5", "hi"), update("cmds", "available_commands_update")])
    alignment = align_connections(a, b)
    assert alignment.removed == [] and alignment.added == []
    assert alignment.rows == [(0, 1), (1, 0)]


def test_a_response_pairs_with_the_response_to_its_own_request() -> None:
    # A: two turns; B: only the second. B's end_turn is turn 2's, and turn 1 is removed whole.
    table = Signatures()
    turn1 = [prompt("1", "first"), update("one"), end_turn("1")]
    turn2 = [prompt("2", "second"), update("two"), end_turn("2")]
    a = sketch(table, [*turn1, *turn2])
    b = sketch(table, turn2)
    alignment = align_connections(a, b)
    assert alignment.removed == [0, 1, 2]
    assert alignment.pairs == [(3, 0), (4, 1), (5, 2)]


def test_rows_place_frames_only_b_has_after_their_predecessor() -> None:
    table = Signatures()
    a = sketch(table, [prompt("1", "x"), end_turn("1")])
    b = sketch(table, [prompt("1", "x"), update("new"), end_turn("1")])
    assert align_connections(a, b).rows == [(0, 0), (None, 1), (1, 2)]


def test_slower_fails_only_past_the_limit_and_never_for_initialize() -> None:
    assert SlowerLimit.parse("50%") == SlowerLimit(percent=50.0)
    assert SlowerLimit.parse("500") == SlowerLimit.parse("500ms") == SlowerLimit(ms=500.0)
    for bad in ("fast", "-5", "%"):
        try:
            SlowerLimit.parse(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
    second = 1_000_000_000
    half = SlowerLimit(percent=50)
    assert half.fails("session/prompt", second, 2 * second)
    assert not half.fails("session/prompt", second, second + second // 4)
    assert not half.fails("initialize", second, 10 * second)
    assert SlowerLimit(ms=100).fails("session/new", 0, second // 5)


def test_lone_surrogates_and_deep_nesting_are_compared_not_raised() -> None:
    lone = b'{"jsonrpc":"2.0","method":"x","params":{"t":"\\ud800"}}'
    other = lone.replace(b"ud800", b"udc00")
    assert content_key(1, lone) == content_key(1, lone) != content_key(1, other)
    (d,) = changed_members(lone, other)
    assert d.path == "params.t"
    deep = b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":' + b"[" * 900
    deep_a = deep + b"1" + b"]" * 900 + b"}}"
    deep_b = deep + b"2" + b"]" * 900 + b"}}"
    assert content_key(1, deep_a) != content_key(1, deep_b)
    assert changed_members(deep_a, deep_b) != []
    assert changed_members(deep_a, deep_a.replace(b'"id":1', b'"id":7')) == []
