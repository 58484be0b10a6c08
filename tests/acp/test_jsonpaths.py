"""A Difference as JSON: the replay's keys (recorded/got) and the diff's (old/new), one code."""

from __future__ import annotations

from acp_proxy.acp.jsonpaths import Difference
from acp_proxy.analysis.compare import member_json


def test_difference_json_leaves_out_the_missing_side() -> None:
    changed = Difference("a.b", 1, 2)
    only_recorded = Difference("a.c", 3, None, missing="live")
    only_live = Difference("a.d", None, 4, missing="recorded")
    assert changed.to_json() == {"path": "a.b", "recorded": 1, "got": 2}
    assert only_recorded.to_json() == {"path": "a.c", "recorded": 3}
    assert only_live.to_json() == {"path": "a.d", "got": 4}
    assert member_json(changed) == {"path": "a.b", "old": 1, "new": 2}
    assert member_json(only_recorded) == {"path": "a.c", "old": 3}
    assert member_json(only_live) == {"path": "a.d", "new": 4}
