"""replay.load: choosing all connections, one, or one session's, and the one-line refusals.

The recording is a real JSONL export opened as replay opens it (formats.source).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_proxy.formats.source import open_replay_frames
from acp_proxy.replay.load import ScriptError, select_script
from acp_proxy.replay.script import Script
from acp_proxy.store.replay_frames import ReplayFrames
from tests.replay.recordings import Frames, write_export


def _session(rpc: int, sid: str) -> Frames:
    return [
        ("c2a", b'{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{}}\n' % rpc),
        ("a2c", b'{"jsonrpc":"2.0","id":%d,"result":{"sessionId":"%s"}}\n' % (rpc, sid.encode())),
    ]


AGENT_ONLY: Frames = [("a2c", b'{"jsonrpc":"2.0","method":"x/hello","params":{}}\n')]


@pytest.fixture
def store(tmp_path: Path) -> ReplayFrames:
    path = write_export(
        tmp_path / "rec.jsonl",
        [(1, _session(1, "s-a")), (1, _session(1, "s-b") + _session(2, "s-a"))],
    )
    return open_replay_frames(path)


def _stepped(script: Script) -> list[int]:
    return script.step_connections


def test_all_connections_one_connection_or_one_sessions(store: ReplayFrames) -> None:
    assert _stepped(select_script(store)) == [1, 2]
    assert _stepped(select_script(store, connection_id=2)) == [2]
    assert _stepped(select_script(store, session_id="s-a")) == [1, 2]
    assert _stepped(select_script(store, session_id="s-b")) == [2]
    assert _stepped(select_script(store, connection_id=2, session_id="s-a")) == [2]
    assert [s.trigger.method for s in select_script(store, connection_id=1).steps()] == [
        "session/new"
    ]


@pytest.mark.parametrize(
    ("connection_id", "session_id", "message"),
    [
        (9, None, "no connection 9 in this recording (has: 1, 2)"),
        (None, "s-z", "unknown session s-z: it is not in this recording"),
        (1, "s-b", "session s-b does not appear in connection 1"),
    ],
)
def test_a_choice_the_recording_does_not_hold_is_one_line(
    store: ReplayFrames, connection_id: int | None, session_id: str | None, message: str
) -> None:
    with pytest.raises(ScriptError) as raised:
        select_script(store, connection_id=connection_id, session_id=session_id)
    assert str(raised.value) == message


def test_a_recording_without_client_requests_has_nothing_to_replay(tmp_path: Path) -> None:
    store = open_replay_frames(write_export(tmp_path / "a.jsonl", [(1, AGENT_ONLY)]))
    with pytest.raises(ScriptError, match=r"^rec: no client requests recorded, nothing to replay$"):
        select_script(store, source="rec")
    empty = open_replay_frames(write_export(tmp_path / "e.jsonl", []))
    with pytest.raises(ScriptError, match=r"^the recording: no connections recorded$"):
        select_script(empty)
