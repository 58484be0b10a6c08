"""report.text: how times and a frame's one-line description read in text output."""

from __future__ import annotations

import time

from acp_proxy.report.text import fmt_frame_what, fmt_time
from acp_proxy.wire.frame import C2A, Frame


def test_fmt_time_shows_local_time_and_a_dash_for_none() -> None:
    ts = 1_700_000_000.5
    assert fmt_time(ts) == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    assert fmt_time(0) == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(0))
    assert fmt_time(None) == "-"


def test_fmt_time_marks_values_no_clock_can_show_and_never_raises() -> None:
    assert fmt_time(-1e308) == "?-1e+308"
    assert fmt_time(float("nan")) == "?nan"
    assert fmt_time("yesterday") == "?'yesterday'"
    assert fmt_time(True) == "?True"
    assert len(fmt_time("x" * 100)) == 40


def test_fmt_frame_what_names_kind_method_id_and_update_kind() -> None:
    f = Frame.wire(C2A, b"{}")._replace(
        kind="notification", method="session/update", update_kind="agent_message_chunk"
    )
    assert fmt_frame_what(f) == "notification session/update [agent_message_chunk]"
    req = Frame.wire(C2A, b"{}")._replace(kind="request", method="session/prompt", rpc_id="3")
    assert fmt_frame_what(req) == "request session/prompt #3"
    assert fmt_frame_what(req, id_mark="id=") == "request session/prompt id=3"
    assert fmt_frame_what(Frame.wire(C2A, b"x")) == "?"
