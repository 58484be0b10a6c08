"""The live tail's horizon with several writers (pure: marks and fetched frames in)."""

from __future__ import annotations

from acp_proxy.store.live_tail import SETTLE_SECONDS, LiveTail


def test_the_horizon_waits_for_the_writers_in_progress_when_it_was_marked() -> None:
    tail = LiveTail(horizon=10)
    # Writer A holds id 11 (not visible); writer B committed 12.
    tail.noted(0.0, 12, {"3/7", "4/9"})
    tail.fetched([(12, 2, 1)], complete=True)
    assert tail.horizon == 10  # A may still commit 11
    assert tail.seen_above() == {2: 1}
    # B started a new batch; A is still in progress.
    tail.noted(0.2, 12, {"3/7", "4/10"})
    tail.fetched([], complete=True)
    assert tail.horizon == 10
    # A committed 11; B's new batch (4/10) is in progress, which holds only ids above 12.
    tail.noted(0.4, 12, {"4/10"})
    tail.fetched([(11, 1, 1)], complete=True)
    assert tail.horizon == 12  # poll 1 settled (A and its B batch ended): up to its mark 12
    assert tail.seen_above() == {}
    tail.noted(0.6, 15, set())
    tail.fetched([(13, 2, 2), (14, 2, 3), (15, 1, 2)], complete=True)
    assert tail.horizon == 15


def test_one_writer_at_a_time_moves_the_horizon_at_once() -> None:
    tail = LiveTail(horizon=0)
    tail.noted(0.0, 3, set())
    tail.fetched([(1, 1, 1), (2, 1, 2), (3, 1, 3)], complete=True)
    assert tail.horizon == 3


def test_a_cut_short_page_moves_the_horizon_no_further_than_its_last_frame() -> None:
    tail = LiveTail(horizon=0)
    tail.noted(0.0, 100, set())
    tail.fetched([(1, 1, 1), (2, 1, 2)], complete=False)
    assert tail.horizon == 2


def test_a_writer_stuck_in_progress_holds_the_horizon_for_a_bounded_time() -> None:
    tail = LiveTail(horizon=5)
    tail.noted(0.0, 9, {"7/1"})
    tail.fetched([(9, 1, 1)], complete=True)
    tail.noted(SETTLE_SECONDS / 2, 9, {"7/1"})
    tail.fetched([], complete=True)
    assert tail.horizon == 5
    tail.noted(SETTLE_SECONDS + 1, 9, {"7/1"})
    tail.fetched([], complete=True)
    assert tail.horizon == 9


def test_delivered_frames_are_left_out_by_connection_and_sequence() -> None:
    tail = LiveTail(horizon=0)
    tail.noted(0.0, 4, {"1/1"})
    tail.fetched([(2, 1, 1), (4, 1, 2), (3, 2, 7)], complete=True)
    assert tail.seen_above() == {1: 2, 2: 7}
