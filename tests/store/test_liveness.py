"""store.liveness: a connection row read as running, ended (how) or ended with no end seen."""

from __future__ import annotations

from acp_proxy.store.liveness import STALE_SECONDS, UNKNOWN_END, connection_state

NOW = 1_000_000.0


def _state(**row: object) -> tuple[object, ...]:
    fields = {"ended_at": None, "last_seen_at": None, "exit_status": None, "end_reason": None}
    return tuple(connection_state(**{**fields, **row}, now=NOW))  # type: ignore[arg-type]


def test_a_closed_row_says_how_it_ended() -> None:
    assert _state(ended_at=5.0, exit_status=0) == ("ended", 5.0, "exit 0")
    assert _state(ended_at=5.0, exit_status=-9) == ("ended", 5.0, "signal 9")
    assert _state(ended_at=5.0, end_reason="closed") == ("ended", 5.0, "closed")
    assert _state(ended_at=5.0) == ("ended", 5.0, "ended")


def test_a_row_closed_by_whoever_outlived_the_proxy_is_an_unknown_end() -> None:
    for reason in ("proxy-lost", "recorder-lost"):
        assert _state(ended_at=5.0, exit_status=0, end_reason=reason) == (
            "unknown-end",
            5.0,
            UNKNOWN_END,
        )


def test_an_open_row_runs_while_its_heartbeat_is_fresh() -> None:
    fresh = NOW - STALE_SECONDS + 1
    stale = NOW - STALE_SECONDS
    assert _state(last_seen_at=fresh) == ("running", None, "running")
    assert _state(last_seen_at=stale) == ("unknown-end", stale, UNKNOWN_END)
    assert _state() == ("unknown-end", None, UNKNOWN_END)
