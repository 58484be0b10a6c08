"""formats.source: opening a recording to replay, SQLite file or JSONL export, and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_proxy.formats.source import open_replay_frames, open_replay_source
from acp_proxy.store.engine import Database
from acp_proxy.store.schema import RecordingError
from tests.replay.recordings import write_db, write_export

FRAMES = [("c2a", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')]


def _frames(db: Database) -> list[bytes]:
    return [bytes(r[0]) for r in db.execute("SELECT raw FROM frames ORDER BY seq")]


def test_a_sqlite_recording_and_an_export_hold_the_same_frames(tmp_path: Path) -> None:
    sqlite = open_replay_source(write_db(tmp_path / "r.sqlite", FRAMES))
    export = open_replay_source(write_export(tmp_path / "r.jsonl", [(1, FRAMES)]))
    assert _frames(sqlite) == _frames(export) == [FRAMES[0][1]]
    assert open_replay_frames(tmp_path / "r.jsonl").protocol_versions() == {1: 1}


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing", None, "no such recording: {p}"),
        ("dir", "", "{p} is a directory, not a recording"),
        ("junk.txt", "hello\n", "{p}: not an acp-proxy export: line 1 is not a header"),
    ],
)
def test_what_is_not_a_recording_is_one_line(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    path = tmp_path / name
    if name == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    with pytest.raises(RecordingError) as raised:
        open_replay_source(path)
    assert str(raised.value).startswith(message.format(p=path))
    assert "\n" not in str(raised.value)
