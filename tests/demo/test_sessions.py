"""demo.sessions: the demo agent's id counters and sessions, shared through a state file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from acp_proxy.demo.sessions import STATE_FORMAT, SessionStore, StateError


def test_ids_count_per_prefix_and_survive_in_the_state_file(tmp_path: Path) -> None:
    path = str(tmp_path / "state.json")
    first = SessionStore(path)
    assert [first.next_id("sess"), first.next_id("sess"), first.next_id("tool")] == [
        "sess_1",
        "sess_2",
        "tool_1",
    ]
    first.sessions["sess_1"] = {"history": [{"sessionUpdate": "plan"}]}
    first.save()
    second = SessionStore(path)  # another agent process
    assert second.next_id("sess") == "sess_3"
    assert second.sessions["sess_1"]["history"] == [{"sessionUpdate": "plan"}]


def test_reload_keeps_the_higher_counter_and_the_sessions_it_has(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    store = SessionStore(str(path))
    for _ in range(5):
        store.next_id("sess")
    store.sessions["mine"] = {"history": []}
    path.write_text(
        json.dumps(
            {
                "format": STATE_FORMAT,
                "counters": {"sess": 2, "x": 9},
                "sessions": {"mine": {"history": [1]}, "theirs": {"history": []}, "bad": {}},
            }
        )
    )
    store.reload()
    assert store.counters == {"sess": 5, "x": 9}
    assert store.sessions == {"mine": {"history": []}, "theirs": {"history": []}}


def test_nothing_is_written_unless_something_changed_or_without_a_path(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    SessionStore(str(path)).save()
    assert not path.exists()
    memory = SessionStore()
    memory.next_id("sess")
    memory.save()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content", ["{not json", '{"format": "other"}', f'{{"format": "{STATE_FORMAT}"}}']
)
def test_a_file_that_is_not_a_state_file_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(StateError, match=re.escape(str(path))):
        SessionStore(str(path))
