"""Matching a live call against a recorded one (replay/match.py): ignores, sessionIds, ids."""

from __future__ import annotations

from typing import Any

from acp_proxy.acp.jsonpaths import parse_path
from acp_proxy.replay.match import DEFAULT_IGNORES, SessionMap, compare_call, session_of

IGNORES = [parse_path(path) for path in DEFAULT_IGNORES]


def prompt(session: str, text: str, *, cwd: str = "/a", rid: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "session/prompt",
        "params": {"sessionId": session, "cwd": cwd, "prompt": [{"type": "text", "text": text}]},
    }


def test_ids_cwd_and_a_new_session_id_do_not_count() -> None:
    sessions = SessionMap()
    recorded = prompt("rec-1", "hello", cwd="/home/a", rid=7)
    live = prompt("live-9", "hello", cwd="/tmp/b", rid=1)
    assert compare_call(recorded, live, IGNORES, sessions) == []


def test_a_changed_prompt_is_one_difference_at_its_path() -> None:
    diffs = compare_call(prompt("s", "hello"), prompt("s", "bye"), IGNORES, SessionMap())
    assert [d.path for d in diffs] == ["params.prompt[0].text"]
    assert (diffs[0].recorded, diffs[0].live) == ("hello", "bye")


def test_session_ids_must_stay_consistent_with_the_learnt_mapping() -> None:
    sessions = SessionMap()
    sessions.bind("rec-1", "live-1")
    assert compare_call(prompt("rec-1", "x"), prompt("live-1", "x"), IGNORES, sessions) == []
    diffs = compare_call(prompt("rec-1", "x"), prompt("live-2", "x"), IGNORES, sessions)
    assert [d.path for d in diffs] == ["params.sessionId"]
    assert "live-1" in str(diffs[0].recorded)
    # Another recorded session may not take a live id that is already bound.
    assert not sessions.consistent("rec-2", "live-1")
    assert sessions.consistent("rec-2", "live-2")


def test_the_binding_is_a_bijection() -> None:
    sessions = SessionMap()
    sessions.bind("r", "l")
    sessions.bind("r", "other")  # ignored: r is bound
    sessions.bind("r2", "l")  # ignored: l is bound
    assert (sessions.to_live("r"), sessions.to_recorded("l")) == ("l", "r")
    assert sessions.to_live("unknown") == "unknown"


def test_a_different_method_is_reported_alone() -> None:
    live = {**prompt("s", "x"), "method": "session/cancel"}
    diffs = compare_call(prompt("s", "x"), live, IGNORES, SessionMap())
    assert [d.path for d in diffs] == ["method"]


def test_initialize_matches_on_the_protocol_version_only() -> None:
    def init(version: int, name: str) -> dict[str, Any]:
        params = {"protocolVersion": version, "clientInfo": {"name": name}}
        return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}

    assert compare_call(init(1, "zed"), init(1, "acpx"), IGNORES, SessionMap()) == []
    diffs = compare_call(init(1, "zed"), init(2, "zed"), IGNORES, SessionMap())
    assert [d.path for d in diffs] == ["params.protocolVersion"]


def test_a_session_id_on_one_side_only_is_a_difference() -> None:
    live = prompt("s", "x")
    del live["params"]["sessionId"]
    diffs = compare_call(prompt("s", "x"), live, IGNORES, SessionMap())
    assert [d.path for d in diffs] == ["params.sessionId"]


def test_session_of_reads_only_string_ids() -> None:
    assert session_of(prompt("abc", "x")) == "abc"
    assert session_of({"params": {"sessionId": 3}}) is None
    assert session_of([]) is None
