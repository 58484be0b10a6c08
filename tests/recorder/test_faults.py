"""Recorder faults through the real executable: hostile text, a database locked for the
whole run, a disk that fills, idle connections' heartbeat, and huge frames."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_proxy.store import schema
from tests.conftest import ECHO_AGENT, echo_proxy, echo_through, frames_of, proxy_exe, run_proxy

TIMEOUT = 120.0
SURROGATE = b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}\n'


def _row(db: Path, columns: str) -> tuple[object, ...]:
    con = sqlite3.connect(db)
    try:
        return tuple(con.execute(f"SELECT {columns} FROM connections").fetchone())
    finally:
        con.close()


def _seen_at(db: Path) -> object:
    """The connection row's heartbeat, or None while the recorder has not made it yet."""
    if not db.exists():
        return None
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT last_seen_at FROM connections").fetchone()
    except sqlite3.OperationalError:  # the writer has not created the schema yet
        return None
    finally:
        con.close()
    return None if row is None else row[0]


def test_a_lone_surrogate_is_recorded_raw_and_indexed_as_far_as_possible(tmp_path: Path) -> None:
    """JSON text may hold half a surrogate pair: the frame is recorded byte for byte, its
    method stored as escaped text, and the frames after it are recorded too."""
    db = tmp_path / "p.db"
    after = b'{"jsonrpc":"2.0","method":"next"}\n'
    done = run_proxy(["--record", str(db), "--", "cat"], stdin=SURROGATE + after)
    assert done.returncode == 0
    assert done.stdout == SURROGATE + after
    err = done.stderr.decode()
    assert "Traceback" not in err and "recording" not in err, err
    assert [raw for _, raw in frames_of(db)] == [SURROGATE, after, SURROGATE, after]
    con = sqlite3.connect(db)
    try:
        methods = [m for (m,) in con.execute("SELECT method FROM frames ORDER BY id")]
    finally:
        con.close()
    assert methods == ["\\ud800", "next", "\\ud800", "next"]
    assert _row(db, "ended_at IS NOT NULL, end_reason, frames_dropped") == (1, "exited", 0)


def test_a_lone_surrogate_in_a_flood_does_not_hold_the_exit(tmp_path: Path) -> None:
    """More than a MiB after such a frame: everything is recorded and the exit is prompt."""
    db = tmp_path / "p.db"
    flood = b"".join(
        b'{"jsonrpc":"2.0","method":"m","params":{"n":%d}}\n' % i for i in range(40000)
    )
    data = SURROGATE + flood
    started = time.monotonic()
    done = run_proxy(["--record", str(db), "--", "cat"], stdin=data)
    took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == data
    assert took < 40, took  # it waited 60 s for a dead writer before
    assert len(frames_of(db)) == 2 * 40001


@pytest.fixture
def locked_db(tmp_path: Path) -> Iterator[Path]:
    """A recording another process holds a write transaction on for the whole test."""
    db = tmp_path / "p.db"
    schema.connect(db, create=True).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield db
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_database_locked_for_the_whole_run_says_so_and_does_not_hold_the_exit(
    locked_db: Path,
) -> None:
    lines = b"".join(b'{"jsonrpc":"2.0","method":"m","params":{"n":%d}}\n' % i for i in range(50))
    started = time.monotonic()
    done = run_proxy(["--record", str(locked_db), "--", "cat"], stdin=lines)
    took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout == lines
    err = done.stderr.decode()
    assert "Traceback" not in err
    # it waited up to ~63 s (30 s per batch) holding the client's EOF before
    assert took < 25, (took, err)
    # the incident's line, and what could not be written (the row, so said here)
    assert "recording disabled while" in err and "(database is locked)" in err, err
    assert "could not write the end and the loss counts" in err, err
    assert err.count("100 frame(s) were not recorded") == 1, err


def test_an_idle_connections_heartbeat_advances(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    proc = echo_proxy(db)
    try:
        echo_through(proc, b'{"jsonrpc":"2.0","method":"hi"}\n')
        deadline = time.monotonic() + TIMEOUT
        first = None
        while first is None and time.monotonic() < deadline:
            time.sleep(0.2)
            first = _seen_at(db)
        assert isinstance(first, float)
        assert _row(db, "host")[0] == os.uname().nodename
        later = first
        while later == first and time.monotonic() < deadline:
            time.sleep(0.5)  # nothing is sent meanwhile
            later = _row(db, "last_seen_at")[0]
        assert isinstance(later, float) and later > first
        assert _row(db, "ended_at")[0] is None
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(TIMEOUT) == 0
    assert _row(db, "ended_at IS NOT NULL, end_reason") == (1, "exited")


def test_a_32_mib_frame_round_trips_byte_exact(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    text = (b"0123456789abcdef" * (2 * 1024 * 1024))[: 32 * 1024 * 1024 + 77]
    frame = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
        b'"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
        + text
        + b'"}}}}\n'
    )
    small = b'{"jsonrpc":"2.0","id":1,"method":"after"}\n'
    proc = subprocess.Popen(
        [*proxy_exe(), "--record", str(db), "--", *ECHO_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    got: list[bytes] = []
    assert proc.stdout is not None and proc.stdin is not None
    out = proc.stdout
    reader = threading.Thread(target=lambda: got.append(out.read()))
    reader.start()
    proc.stdin.write(frame + small)
    proc.stdin.close()
    assert proc.wait(TIMEOUT) == 0
    reader.join(TIMEOUT)
    assert got == [frame + small]
    assert proc.stderr is not None and b"not recorded" not in proc.stderr.read()
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT direction, raw, size, method, update_kind FROM frames ORDER BY id"
        ).fetchall()
    finally:
        con.close()
    assert [(d, r == frame, s, m, u) for d, r, s, m, u in rows[:1]] == [
        ("c2a", True, len(frame), "session/update", "agent_message_chunk")
    ]
    assert [r for _, r, *_ in rows] == [frame, small, frame, small]


def _mount_tmpfs(size: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix="acp-full-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
    )
    if done.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    return where


def test_a_filling_disk_counts_every_lost_frame_where_it_survives() -> None:
    """The count on the row matches the count on stderr (or stderr says it has none)."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("needs root and mount(8) for a small tmpfs")
    where = _mount_tmpfs("2m")
    try:
        db = where / "f.db"
        flood = b"".join(
            b'{"jsonrpc":"2.0","method":"m","params":{"n":%d,"pad":"%s"}}\n' % (i, b"x" * 200)
            for i in range(40000)
        )
        done = run_proxy(["--record", str(db), "--", "cat"], stdin=flood, timeout=TIMEOUT)
        assert done.returncode == 0 and done.stdout == flood
        err = done.stderr.decode()
        assert "Traceback" not in err
        assert "not recorded" in err, err
        said = int(err.split(" frame(s) were not recorded")[0].rsplit(" ", 1)[1])
        con = sqlite3.connect(db)
        try:
            recorded = con.execute("SELECT count(*) FROM frames").fetchone()[0]
            row = con.execute("SELECT frames_dropped, ended_at FROM connections").fetchone()
        finally:
            con.close()
        assert recorded + said == 2 * 40000, (recorded, said, err)
        if "could not write" in err:
            return  # said so on stderr: the count could not be written
        assert row is not None and row[0] == said, (row, err)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        with_retry = where
        if with_retry.exists():
            with_retry.rmdir()
