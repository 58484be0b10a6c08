"""The turn machine: every row of the table, and the turns a reader sees through the model."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from acp_proxy.acp.model import ConnectionModel
from acp_proxy.acp.turns import TRANSITIONS, Event, Phase, Turn, TurnTracker
from acp_proxy.wire.frame import Frame

SID = "s1"


def _in_phase(phase: Phase, version: int | None = 2) -> TurnTracker:
    """A tracker whose session SID has a turn in ``phase`` (none: no turn open)."""
    tracker = TurnTracker(version=version)
    if phase in ("prompted", "running"):
        tracker.prompt(SID, "1", 1, 10)
    if phase in ("running", "agent"):
        tracker.state(SID, "running", {}, 2, 20)
    return tracker


def _fire(tracker: TurnTracker, event: Event) -> Turn | None:
    if event == "prompt":
        tracker.prompt(SID, "9", 5, 50)
        return None
    if event in ("running", "idle"):
        return tracker.state(SID, event, {"stopReason": "end_turn"}, 5, 50)
    response: dict[str, Any] = (
        {"result": {"stopReason": "end_turn"}} if event == "answered" else {"error": {"code": 1}}
    )
    return tracker.prompt_result("1", response, 5, 50)


@pytest.mark.parametrize(("phase", "event"), list(TRANSITIONS), ids=lambda x: str(x))
def test_each_transition_leaves_the_phase_the_table_names(phase: Phase, event: Event) -> None:
    after, action = TRANSITIONS[(phase, event)]
    version = 1 if event == "answered" else 2
    tracker = _in_phase(phase, version)
    before = tracker.open.get(SID)
    ended = _fire(tracker, event)
    now = tracker.open.get(SID)
    assert ("none" if now is None else now.phase) == after
    assert (ended is not None) == (action == "end" and event != "prompt")
    if action == "start":
        assert now is not before and now is not None and now.start_seq == 5
    elif action in ("adopt", "mark-running", "keep"):
        assert now is before


def test_a_pair_not_in_the_table_changes_nothing() -> None:
    tracker = TurnTracker(version=2)
    assert tracker.state(SID, "idle", {}, 1, 10) is None
    assert tracker.state(SID, "requires_action", {}, 1, 10) is None
    assert tracker.prompt_result("7", {"result": {}}, 2, 20) is None
    assert tracker.open == {}


def _line(obj: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **obj}) + b"\n"


def _turns(frames: list[tuple[str, dict[str, Any]]], version: int = 2) -> list[dict[str, Any]]:
    init = {"protocolVersion": version}
    model = ConnectionModel(1)
    script = [
        ("c2a", {"id": 0, "method": "initialize", "params": init}),
        ("a2c", {"id": 0, "result": init}),
        ("c2a", {"id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}),
        ("a2c", {"id": 1, "result": {"sessionId": SID}}),
        *frames,
    ]
    for seq, (direction, obj) in enumerate(script, 1):
        model.feed(Frame.wire(direction, _line(obj), seq, seq * 1_000_000))  # type: ignore[arg-type]
    out = model.to_json()["turns"]
    assert isinstance(out, list)
    return out


def _up(update: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return ("a2c", {"method": "session/update", "params": {"sessionId": SID, "update": update}})


def _prompt(rid: int) -> tuple[str, dict[str, Any]]:
    params = {"sessionId": SID, "prompt": [{"type": "text", "text": "hi"}]}
    return ("c2a", {"id": rid, "method": "session/prompt", "params": params})


RUNNING = _up({"sessionUpdate": "state_update", "state": "running"})
IDLE = _up({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})


def test_a_running_before_the_prompt_is_adopted_by_it() -> None:
    turns = _turns([RUNNING, _prompt(2), ("a2c", {"id": 2, "result": {"messageId": "m"}}), IDLE])
    assert [(t["origin"], t["startSeq"], t["endSeq"]) for t in turns] == [("prompt", 5, 8)]


def test_an_error_to_a_running_v2_prompt_keeps_the_turn_until_idle() -> None:
    turns = _turns([_prompt(2), RUNNING, ("a2c", {"id": 2, "error": {"code": -1}}), IDLE])
    assert [(t["startSeq"], t["endSeq"], t["error"]) for t in turns] == [(5, 8, None)]


def test_an_error_before_running_ends_the_v2_turn_there() -> None:
    turns = _turns([_prompt(2), ("a2c", {"id": 2, "error": {"code": -1, "message": "no"}})])
    assert [(t["startSeq"], t["endSeq"]) for t in turns] == [(5, 6)]


def test_a_v1_prompt_response_ends_its_turn() -> None:
    turns = _turns([_prompt(2), ("a2c", {"id": 2, "result": {"stopReason": "end_turn"}})], 1)
    assert [(t["startSeq"], t["endSeq"], t["stopReason"]) for t in turns] == [(5, 6, "end_turn")]
