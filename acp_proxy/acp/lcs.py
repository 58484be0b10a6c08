"""Common subsequences of two integer sequences, the alignment under ``acp-proxy diff`` (pure).

:func:`align_pairs` trims the common ends and aligns what is left by an exact longest
common subsequence (:func:`lcs_pairs`, bit-parallel) up to :data:`LCS_CELLS`; past it, turn
by turn (:func:`turn_pairs`) when the caller says where turns start, and only then by a
linear greedy walk (:func:`greedy_pairs`). :mod:`acp_proxy.acp.diff` builds on it.
"""

from __future__ import annotations

from collections.abc import Sequence

LCS_CELLS = 20_000 * 20_000
"""Largest (frames of A) x (frames of B), after trimming the common ends, aligned by LCS."""

GREEDY_WINDOW = 200
"""How far the greedy fallback looks ahead for a frame's counterpart."""


def lcs_pairs(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """A longest common subsequence of ``a`` and ``b`` as index pairs, in order.

    Bit-parallel (one Python integer of ``len(a)`` bits per element of ``b``), so the time is
    about ``len(a) * len(b) / 64`` word operations and the memory ``len(a) * len(b)`` bits.
    """
    n, m = len(a), len(b)
    if not n or not m:
        return []
    masks: dict[int, int] = {}
    for i, symbol in enumerate(a):
        masks[symbol] = masks.get(symbol, 0) | (1 << i)
    full = (1 << n) - 1
    v = full
    rows = [v]
    for symbol in b:
        u = v & masks.get(symbol, 0)
        v = ((v + u) | (v - u)) & full
        rows.append(v)

    def length(j: int, i: int) -> int:  # LCS of a[:i] and b[:j]
        return i - (rows[j] & ((1 << i) - 1)).bit_count()

    out: list[tuple[int, int]] = []
    i, j = n, m
    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1]:
            i -= 1
            j -= 1
            out.append((i, j))
        elif length(j - 1, i) >= length(j, i - 1):
            j -= 1
        else:
            i -= 1
    out.reverse()
    return out


def greedy_pairs(
    a: Sequence[int], b: Sequence[int], window: int = GREEDY_WINDOW
) -> list[tuple[int, int]]:
    """A linear-time common subsequence: walk both, re-synchronising within ``window``."""
    out: list[tuple[int, int]] = []
    i, j, n, m = 0, 0, len(a), len(b)
    while i < n and j < m:
        if a[i] == b[j]:
            out.append((i, j))
            i += 1
            j += 1
            continue
        in_b = next((k for k in range(j + 1, min(m, j + window)) if b[k] == a[i]), None)
        in_a = next((k for k in range(i + 1, min(n, i + window)) if a[k] == b[j]), None)
        if in_b is None and in_a is None:
            i += 1
            j += 1
        elif in_a is None or (in_b is not None and in_b - j <= in_a - i):
            assert in_b is not None
            j = in_b
        else:
            i = in_a
    return out


def align_pairs(
    a: Sequence[int],
    b: Sequence[int],
    max_cells: int = LCS_CELLS,
    *,
    a_starts: Sequence[bool] | None = None,
    b_starts: Sequence[bool] | None = None,
) -> tuple[list[tuple[int, int]], str | None]:
    """Matched index pairs of two sequences: common ends, then LCS (greedy past ``max_cells``).

    With ``a_starts``/``b_starts`` (whether each item starts a turn), a middle past
    ``max_cells`` is aligned turn by turn first (:func:`turn_pairs`) before falling back to
    greedy. The second item is ``None``, or a note saying the alignment was greedy.
    """
    n, m = len(a), len(b)
    head = 0
    while head < n and head < m and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and a[n - 1 - tail] == b[m - 1 - tail]:
        tail += 1
    mid_a, mid_b = a[head : n - tail], b[head : m - tail]
    note = None
    turns = None
    if len(mid_a) * len(mid_b) <= max_cells:
        middle = lcs_pairs(mid_a, mid_b)
    else:
        if a_starts is not None and b_starts is not None:
            turns = turn_pairs(
                mid_a, mid_b, a_starts[head : n - tail], b_starts[head : m - tail], max_cells
            )
        if turns is not None:
            middle, note = turns
        else:
            note = (
                f"the differing middle is {len(mid_a)} x {len(mid_b)} frames, past the LCS "
                f"limit of {max_cells:,} cells: aligned greedily (linear; may report more "
                "changes than an exact alignment)"
            )
            middle = greedy_pairs(mid_a, mid_b)
    pairs = [(k, k) for k in range(head)]
    pairs += [(i + head, j + head) for i, j in middle]
    pairs += [(n - tail + k, m - tail + k) for k in range(tail)]
    return pairs, note


def _turns(seq: Sequence[int], starts: Sequence[bool]) -> list[tuple[int, int]]:
    """``seq`` cut into turns: (start, end) ranges, a new one at each start."""
    bounds = [0, *(i for i in range(1, len(seq)) if starts[i]), len(seq)]
    return [(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1) if bounds[k + 1] > 0]


def _local_pairs(
    a: Sequence[int], b: Sequence[int], max_cells: int
) -> tuple[list[tuple[int, int]], str | None]:
    """:func:`align_pairs` of a stretch inside a bigger alignment: the common tail and then
    LCS (the common head is left to the LCS, whose walk back from the end decides it)."""
    n, m = len(a), len(b)
    tail = 0
    while tail < n and tail < m and a[n - 1 - tail] == b[m - 1 - tail]:
        tail += 1
    mid_a, mid_b = a[: n - tail], b[: m - tail]
    if len(mid_a) * len(mid_b) <= max_cells:
        middle, note = lcs_pairs(mid_a, mid_b), None
    else:
        middle, note = align_pairs(mid_a, mid_b, max_cells)
    return middle + [(n - tail + k, m - tail + k) for k in range(tail)], note


def turn_pairs(
    a: Sequence[int],
    b: Sequence[int],
    a_starts: Sequence[bool],
    b_starts: Sequence[bool],
    max_cells: int = LCS_CELLS,
) -> tuple[list[tuple[int, int]], str | None] | None:
    """Align turns first, then frames within the turns that differ: equal turns (the same
    items throughout) are matched by an LCS over the turns, and each stretch between two
    matched turns is aligned item by item (:func:`align_pairs`, greedy only if that
    stretch alone is past ``max_cells``). None when the turns are too many for it.

    Two recordings of one conversation differ in a few turns: then this is the alignment
    the LCS over all items gives, at the cost of the differing turns only.
    """
    ta, tb = _turns(a, a_starts), _turns(b, b_starts)
    if len(ta) * len(tb) > max_cells or (len(ta) < 2 and len(tb) < 2):
        return None
    keys: dict[tuple[int, ...], int] = {}
    ka = [keys.setdefault(tuple(a[lo:hi]), len(keys)) for lo, hi in ta]
    kb = [keys.setdefault(tuple(b[lo:hi]), len(keys)) for lo, hi in tb]
    matched, _ = align_pairs(ka, kb, max_cells)
    pairs: list[tuple[int, int]] = []
    note: str | None = None
    i = j = 0  # the end of the last matched turn
    last: tuple[int, int, int] | None = None  # its start on both sides and its length
    for ti, tj in [*matched, (len(ta), len(tb))]:
        lo_a = ta[ti][0] if ti < len(ta) else len(a)
        lo_b = tb[tj][0] if tj < len(tb) else len(b)
        if lo_a > i or lo_b > j:
            # differing turns: align their frames, with the matched turn before them, the
            # way the LCS over every frame places what equal frames leave open (as early
            # as it can)
            start_a, start_b = i, j
            if last is not None:
                start_a, start_b, size = last
                del pairs[len(pairs) - size :]
            gap, gap_note = _local_pairs(a[start_a:lo_a], b[start_b:lo_b], max_cells)
            note = note or gap_note
            pairs += [(start_a + gi, start_b + gj) for gi, gj in gap]
            last = None
        if ti < len(ta):
            size = ta[ti][1] - lo_a
            pairs += [(lo_a + k, lo_b + k) for k in range(size)]
            i, j = lo_a + size, lo_b + size
            last = (lo_a, lo_b, size)
    return pairs, note
