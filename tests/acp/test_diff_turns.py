"""Aligning turns first (:func:`acp_proxy.acp.diff.turn_pairs`) gives the exact alignment.

Generated v2 recordings (:mod:`tests.acp.generate`) with a few turns changed in B (a chunk
dropped, a chunk's text changed, a turn inserted, a turn removed, a tool call's status,
the first and the last turn touched so the common ends do not trim it all) are aligned
twice: by the LCS over every frame (the limit high enough) and with the limit so low that
only the turn-first path stays exact. Both give the same rows, and neither is greedy.

(Where they differ: a turn added and another removed a few turns apart. The LCS over
frames then pairs each turn in between with its neighbour, two frames fewer per turn but
one turn more, and reports those turns changed; turns first reports one turn added and
one removed. So the removal here is far from the insertion.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acp_proxy.acp.diff import ConnectionSketch, Signatures, align_connections
from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.wire.frame import Direction, Frame
from tests.acp.generate import frames, frames_per_turn

CHUNKS = 20


def _turns(turns: int) -> list[list[tuple[str, bytes]]]:
    """The generated recording cut into its set-up and then one list per turn."""
    every = list(frames(turns, CHUNKS))
    size = frames_per_turn(CHUNKS)
    return [every[:4]] + [every[4 + t * size : 4 + (t + 1) * size] for t in range(turns)]


def _changed(turns: int, removed: int | None) -> list[tuple[str, bytes]]:
    parts = _turns(turns)
    parts[1] = [(d, raw.replace(b"question 0", b"question zero")) for d, raw in parts[1]]
    del parts[3][10]  # a chunk dropped
    parts[6][12] = (parts[6][12][0], parts[6][12][1].replace(b"word", b"WORD"))
    parts.insert(9, [(d, raw.replace(b"question 4", b"question 4b")) for d, raw in parts[5]])
    if removed is not None:
        del parts[removed]  # a turn removed
    parts[18] = [(d, raw.replace(b'"completed"', b'"failed"')) for d, raw in parts[18]]
    parts[-1] = [(d, raw.replace(b"end_turn", b"cancelled")) for d, raw in parts[-1]]
    return [f for part in parts for f in part]


def _sketch(table: Signatures, pairs: list[tuple[str, bytes]]) -> ConnectionSketch:
    indexer = ConnectionIndexer()
    s = ConnectionSketch(table)

    def rows() -> Iterator[Frame]:
        for seq, (direction, raw) in enumerate(pairs, 1):
            d: Direction = "c2a" if direction == "c2a" else "a2c"
            cols = indexer.index(d, raw)
            yield Frame(
                seq,
                1,
                seq,
                0.0,
                seq * 1000,
                d,
                raw,
                len(raw),
                False,
                cols.kind,
                cols.rpc_id,
                cols.method,
                cols.session_id,
                cols.update_kind,
            )

    for f in rows():
        s.add(f)
    s.finish()
    return s


@pytest.mark.parametrize(("turns", "removed"), [(24, None), (40, 30)])
def test_turn_first_alignment_is_the_exact_one(turns: int, removed: int | None) -> None:
    table = Signatures()
    a = _sketch(table, [f for part in _turns(turns) for f in part])
    b = _sketch(table, _changed(turns, removed))
    exact = align_connections(a, b, max_cells=10**8)
    by_turns = align_connections(a, b, max_cells=200 * 200)  # a turn or two at a time
    assert exact.exact and exact.note is None
    assert by_turns.exact and by_turns.note is None
    assert by_turns.rows == exact.rows
    assert exact.removed and exact.added  # (there are differences to find)


def test_turns_too_unlike_to_match_fall_back_to_greedy_and_say_so() -> None:
    table = Signatures()
    a = _sketch(table, [f for part in _turns(30) for f in part])
    b = _sketch(table, [(d, raw.replace(b"word", b"other")) for d, raw in frames(30, CHUNKS)])
    greedy = align_connections(a, b, max_cells=200 * 200)
    assert not greedy.exact and greedy.note is not None and "greedily" in greedy.note
