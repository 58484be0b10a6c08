"""Reading recordings: read-only opening that creates nothing, and honest connection states.

Through the real executable: every read command on a recording nobody may write (a 0444
file in a 0555 directory; as root, whom permissions do not stop, also ``chattr +i``), on a
cleanly closed recording in a writable directory (no ``-wal``/``-shm`` left behind), and on
one a proxy is still recording (seen live). In-process: the reader's derived states.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from acp_proxy.store.edit import Capture
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import MIGRATIONS, connect
from acp_proxy.wire.frame import (
    A2C,
    C2A,
    KEY_BINARY,
    KEY_C2A,
    KEY_OTHER,
    KEY_SHIFT,
    wire_key,
)
from tests.conftest import run_proxy
from tests.helpers import insert_frames, unwritable
from tests.web.helpers import (
    LiveProxy,
    opening,
    prompt,
    record_session,
    wait_until,
    web_server,
)

READ_COMMANDS = [
    ["ls"],
    ["ls", "--json"],
    ["dump", "--stderr"],
    ["show"],
    ["show", "--json"],
    ["show", "--raw"],
    ["check"],
    ["stats"],
    ["stats", "--json"],
    ["export", "--no-redact"],
]


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _recording(tmp_path: Path) -> Path:
    directory = tmp_path / "rec"
    directory.mkdir()
    db = directory / "session.db"
    record_session(db, ["hello", "bad-utf8 please"])
    assert _files(directory) == ["session.db"]  # closed cleanly: the WAL is checkpointed
    return db


def _read_all(db: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for args in READ_COMMANDS:
        done = run_proxy([*args, str(db)])
        # check exits 1 on error findings (the bad UTF-8 frame): that is its verdict
        assert done.returncode in ((0, 1) if args == ["check"] else (0,)), (args, done.stderr)
        assert b"readonly" not in done.stderr and b"Traceback" not in done.stderr, done.stderr
        out[" ".join(args)] = done.stdout
    replay = run_proxy(["replay", str(db)], stdin=opening())
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.count(b'"result"') == 2, replay.stdout
    out["replay"] = replay.stdout
    return out


def test_every_read_command_works_on_an_unwritable_recording(tmp_path: Path) -> None:
    db = _recording(tmp_path)
    writable = _read_all(db)
    assert _files(db.parent) == ["session.db"]
    with unwritable(db.parent):
        assert _read_all(db) == writable
        assert _files(db.parent) == ["session.db"]
        with web_server(db) as url:
            base = url.split("?")[0]
            with urllib.request.urlopen(base + "api/connections", timeout=30) as res:
                listed = json.loads(res.read())["connections"]
            with urllib.request.urlopen(base + "api/frames", timeout=30) as res:
                frames = json.loads(res.read())["frames"]
        assert [c["id"] for c in listed] == [1] and len(frames) > 4
        assert _files(db.parent) == ["session.db"]


def test_reads_leave_no_files_beside_a_closed_recording(tmp_path: Path) -> None:
    db = _recording(tmp_path)
    for args in (["ls"], ["show"], ["check"], ["stats"], ["dump"], ["export"]):
        run_proxy([*args, str(db)])
        assert _files(db.parent) == ["session.db"], args


def _crashed_writer(db: Path) -> None:
    """A recording whose writer died: frames committed to the WAL, never checkpointed."""
    code = (
        "import os, sys\n"
        "from acp_proxy.store.schema import connect\n"
        "from tests.helpers import insert_frames\n"
        "db = connect(sys.argv[1], create=True)\n"
        "db.execute('PRAGMA wal_autocheckpoint = 0')\n"
        'insert_frames(db, [(\'c2a\', b\'{"jsonrpc":"2.0","method":"x"}\\n\')],'
        " connection={'started_at': 1.0})\n"
        "os._exit(0)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(db)],
        check=True,
        cwd=Path(__file__).parents[2],
    )


@pytest.mark.parametrize("keep_shm", [True, False], ids=["with-shm", "without-shm"])
def test_an_uncheckpointed_recording_in_an_unwritable_directory(
    tmp_path: Path, keep_shm: bool
) -> None:
    directory = tmp_path / "crashed"
    directory.mkdir()
    db = directory / "session.db"
    _crashed_writer(db)
    assert (directory / "session.db-wal").exists()
    if not keep_shm:
        (directory / "session.db-shm").unlink()
    before = _files(directory)
    with unwritable(directory):
        done = run_proxy(["ls", "--json", str(db)])
        assert done.returncode == 0, done.stderr
        assert _files(directory) == before
    if keep_shm:  # the WAL is readable: its frame is seen
        assert json.loads(done.stdout)["frame_count"] == 1


def test_a_recording_being_written_is_read_live(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    proxy = LiveProxy(db)
    try:
        proxy.send(opening())
        proxy.wait_output(lambda out: b'"id":2' in out)
        wait_until(
            lambda: db.exists() and run_proxy(["dump", str(db)]).stdout.count(b"response") >= 2,
            what="the live recording's responses seen by dump",
        )
        proxy.send(prompt(3, "hello"))
        proxy.wait_output(lambda out: b"end_turn" in out)
        wait_until(
            lambda: b"end_turn" in run_proxy(["dump", "--full", str(db)]).stdout,
            what="the new turn seen by a fresh reader",
        )
        assert run_proxy(["show", str(db)]).returncode == 0
    finally:
        assert proxy.close() == 0
    assert _files(tmp_path) == ["live.db"]


def test_an_old_schema_is_read_without_migrating(tmp_path: Path) -> None:
    db = tmp_path / "v2.db"
    raw = sqlite3.connect(db, isolation_level=None)
    for number in (0, 1):
        raw.executescript(MIGRATIONS[number])
    raw.execute("PRAGMA user_version = 2")
    raw.close()
    writer = sqlite3.connect(db, isolation_level=None)
    insert_frames(writer, [("c2a", b"{}\n")], connection={"started_at": 1.0, "ended_at": 2.0})
    writer.close()
    done = run_proxy(["ls", "--json", str(db)])
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert row["frame_count"] == 1 and row["state"] == "ended"
    version = sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0]
    assert version == 2  # read, not migrated


# -- derived states ----------------------------------------------------------------------


def _rows_with_heartbeats(path: Path, now: float) -> None:
    db = connect(path, create=True)
    try:
        for columns in (
            {"ended_at": None, "last_seen_at": None},  # never heartbeat: imported, or killed
            {"ended_at": None, "last_seen_at": now - 60},  # stale: the recorder is gone
            {"ended_at": None, "last_seen_at": now - 1},  # fresh: running
            {"ended_at": now - 5, "exit_status": 0, "end_reason": "exited"},
            {"ended_at": now - 5, "end_reason": "recorder-lost"},
        ):
            insert_frames(db, [("c2a", b"{}\n")], connection={"started_at": now - 100, **columns})
    finally:
        db.close()


def test_connection_rows_carry_their_derived_state(tmp_path: Path) -> None:
    db = tmp_path / "states.db"
    now = time.time()
    _rows_with_heartbeats(db, now)
    with RecordingReader.open(db) as reader:
        rows = reader.connections(now=now)
        assert [r.state for r in rows] == [
            "unknown-end",
            "unknown-end",
            "running",
            "ended",
            "unknown-end",
        ]
        assert rows[0].state_reason == "ended (unknown end)"
        assert rows[1].duration == pytest.approx(40)  # until the last heartbeat
        assert rows[2].duration is None and rows[2].running
        assert rows[3].state_reason == "exit 0"
        assert reader.connection_state(3, now=now).state == "running"
        assert reader.connection_state(3, now=now + 60).state == "unknown-end"
        assert reader.running_count(now=now) == 1


def test_show_says_how_a_connection_stands(tmp_path: Path) -> None:
    db = tmp_path / "states.db"
    _rows_with_heartbeats(db, time.time())
    done = run_proxy(["show", str(db)])
    assert done.returncode == 0, done.stderr
    headers = [line for line in done.stdout.decode().splitlines() if line.startswith("==")]
    assert [h.rsplit(" · ", 1)[-1] for h in headers] == [
        "ended (unknown end)",
        "ended (unknown end)",
        "running",
        "exit 0",
        "ended (unknown end)",  # end_reason recorder-lost: the one name
    ]
    shown = json.loads(run_proxy(["show", "--json", str(db)]).stdout)
    assert [c["state"] for c in shown["connections"]][:3] == [
        "unknown-end",
        "unknown-end",
        "running",
    ]


def test_reader_methods_for_the_other_commands(tmp_path: Path) -> None:
    """What ``ls``/``dump``/``demo``/``export`` read, through the reader, matches the file."""
    db = _recording(tmp_path)
    raw = sqlite3.connect(db)
    with RecordingReader.open(db) as reader:
        (record,) = reader.connection_records()
        assert record["id"] == 1 and record["transport"] == "stdio" and "last_seen_at" in record
        assert reader.connection_records(1) == [record] and reader.connection_records(2) == []
        lines = list(reader.stderr_lines())
        assert len(lines) == raw.execute("SELECT count(*) FROM stderr_lines").fetchone()[0]
        assert reader.stderr_count([1]) == len(lines)
        events = list(reader.events(1)) + list(reader.events(None))
        assert len(events) == raw.execute("SELECT count(*) FROM events").fetchone()[0]
        assert reader.direction_counts(1) == dict(
            raw.execute("SELECT direction, count(*) FROM frames GROUP BY direction").fetchall()
        )
        assert sum(m["frames"] for m in reader.method_counts([1])) == reader.frame_count(1)
        assert reader.session_connections("sess_web_1") == [1]
        frames = list(reader.frames(connection_id=1))
        wire = list(reader.wire_frames(1))
        assert [(f.seq, f.direction, f.raw) for f in frames] == [
            (w.seq, w.direction, w.raw) for w in wire
        ]
        assert [f.seq for f in reader.frames(connection_id=1, after_seq=3, limit=2)] == [4, 5]
    raw.close()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_mono_times_are_those_of_the_frames_asked_for(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """:meth:`RecordingReader.mono_times`: the times of the frames named, of that connection
    only, in one query (the checker asks for them while the rows' cursor is still open)."""
    db: Path | str = tmp_path / "times.db"
    if engine == "postgresql":
        db = request.getfixturevalue("pg_url")
    for base in (5_000, 9_000):
        insert_frames(
            db,
            [Capture("a2c", b"{}\n", mono_ns=base + 7 * seq) for seq in range(1, 6)],
            connection={"started_at": 1.0, "transport": "stdio"},
        )
    with RecordingReader.open(db) as reader:
        rows = reader.wire_rows(2)
        next(iter(rows))  # (a streaming cursor open, as during check)
        assert reader.mono_times(2, [4, 1, 9]) == {4: 9_028, 1: 9_007}
        assert reader.mono_times(1, [5]) == {5: 5_035}
        assert reader.mono_times(1, []) == {}
        assert len(list(rows)) == 4


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_wire_rows_key_is_wire_key(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The key of :meth:`RecordingReader.wire_rows` (:data:`WIRE_KEY_SQL`, in each store's SQL)
    is :func:`wire_key` of the frame's seq, direction and binary flag, and gives them back."""
    db: Path | str = tmp_path / "keys.db"
    if engine == "postgresql":
        db = request.getfixturevalue("pg_url")
    cases = [
        (direction, binary) for direction in ("a2c", "c2a", "a2c ", "") for binary in (False, True)
    ]
    first_seq = 1 << 40  # far from small ints: no flag may spill into the sequence number
    insert_frames(
        db,
        [Capture(d, b"{}\n", binary=b) for d, b in cases],  # type: ignore[arg-type]
        connection={"started_at": 1.0, "transport": "websocket"},
        first_seq=first_seq,
    )
    with RecordingReader.open(db) as reader:
        rows = list(reader.wire_rows(1))
    assert [key for key, _raw in rows] == [
        wire_key(first_seq + i, d, b) for i, (d, b) in enumerate(cases)
    ]
    for i, ((key, _raw), (d, b)) in enumerate(zip(rows, cases, strict=True)):
        if d == A2C and not b:  # the agent's text frames: the sequence number itself
            assert key == first_seq + i
            continue
        assert key < 0
        key = -key
        assert key >> KEY_SHIFT == first_seq + i
        assert bool(key & KEY_BINARY) == b
        assert bool(key & KEY_C2A) == (d == "c2a") and bool(key & KEY_OTHER) == (
            d not in (A2C, C2A)
        )
