"""A recorder that cannot write (read-only place, read-only file, a lock held too long, a
full disk) never disturbs forwarding: the loss is counted and reported once per incident."""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    ECHO_AGENT,
    echo_proxy,
    echo_through,
    frames_of,
    incident_lines,
    run_proxy,
)

LINES = b"".join(b'{"jsonrpc":"2.0","method":"_t","params":{"n":%d}}\n' % i for i in range(3000))


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    return done.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nobody can write in (a read-only tmpfs as root, else chmod 0500).

    A recording made beforehand sits inside as ``old.db``.
    """
    place = tmp_path / "ro"
    if os.geteuid() == 0:
        if not _mount_tmpfs(place, "4m"):
            pytest.skip("cannot mount a tmpfs to make a read-only place")
        run_proxy(["--record", str(place / "old.db"), "--", *ECHO_AGENT], stdin=b"{}\n")
        subprocess.run(["mount", "-o", "remount,ro", str(place)], check=True)
        yield place
        _umount(place)
    else:
        place.mkdir()
        run_proxy(["--record", str(place / "old.db"), "--", *ECHO_AGENT], stdin=b"{}\n")
        for f in place.iterdir():
            f.chmod(0o400)
        place.chmod(0o500)
        yield place
        place.chmod(0o700)


def _incident_lines(stderr: bytes) -> list[str]:
    """The recorder's incident lines (not the exit's loss count, nor a slow drain's progress,
    which depends on the machine's load)."""
    return [
        line.decode()
        for line in incident_lines(stderr)
        if line.startswith(b"acp-proxy: recording") and b"were not recorded" not in line
    ]


def test_unwritable_directory(readonly_dir: Path) -> None:
    done = run_proxy(["--record", str(readonly_dir / "new.db"), "--", *ECHO_AGENT], stdin=LINES)
    assert done.returncode == 0
    assert done.stdout == LINES
    incidents = _incident_lines(done.stderr)
    assert len(incidents) == 1, done.stderr
    assert "recording disabled" in incidents[0] and "forwarding continues" in incidents[0]
    assert b"Traceback" not in done.stderr
    assert b"echo agent ready\n" in done.stderr  # the agent's stderr still passes through


def _frames_readonly(db: Path) -> list[tuple[str, bytes]]:
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        return [(d, bytes(r)) for d, r in con.execute("SELECT direction, raw FROM frames")]
    finally:
        con.close()


def test_read_only_recording_file(readonly_dir: Path) -> None:
    before = _frames_readonly(readonly_dir / "old.db")
    assert before == [("c2a", b"{}\n"), ("a2c", b"{}\n")]
    done = run_proxy(["--record", str(readonly_dir / "old.db"), "--", *ECHO_AGENT], stdin=LINES)
    assert done.returncode == 0
    assert done.stdout == LINES
    assert len(_incident_lines(done.stderr)) == 1, done.stderr
    assert b"Traceback" not in done.stderr
    assert _frames_readonly(readonly_dir / "old.db") == before


def _read_stderr_until(proc: subprocess.Popen[bytes], needle: bytes, timeout: float) -> bytes:
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError(seen)
        data = os.read(fd, 65536)
        if not data:
            raise EOFError(seen)
        seen += data
    return seen


def _second_proxy_under_lock(
    db: Path, *flags: str, retry: float
) -> tuple[sqlite3.Connection, subprocess.Popen[bytes]]:
    """Record connection 1, take the write lock, then start a proxy recording connection 2
    into ``db`` that retries a locked batch for ``retry`` seconds. Commit or roll back the
    returned holder to release the lock."""
    run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=b"{}\n")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    proc = echo_proxy(db, *flags, env={"ACP_PROXY_LOCK_RETRY_SECONDS": str(retry)})
    return holder, proc


LATER = b'{"jsonrpc":"2.0","id":2,"method":"after-unlock"}\n' * 70
"""What the proxy forwards after the lock is released."""


def _lock_then_release(db: Path, locked_says: bytes) -> bytes:
    """A second proxy forwards 50 lines while ``db`` is locked (until its stderr says
    ``locked_says``), then :data:`LATER` once it is released, and exits 0; its stderr."""
    holder, proc = _second_proxy_under_lock(db, retry=0.3)
    try:
        first = b'{"jsonrpc":"2.0","id":1,"method":"while-locked"}\n' * 50
        echo_through(proc, first)  # forwarding works while the recorder is stuck
        seen = _read_stderr_until(proc, locked_says, 60)
    finally:
        holder.execute("COMMIT")
        holder.close()
    echo_through(proc, LATER)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    assert proc.wait(60) == 0
    return seen + proc.stderr.read()


def test_a_lock_held_longer_than_the_retry_window(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    stderr = _lock_then_release(db, b"database is locked")
    assert len(_incident_lines(stderr)) == 1, stderr
    con = sqlite3.connect(db)
    try:
        dropped, status = con.execute(
            "SELECT frames_dropped, exit_status FROM connections WHERE id = 2"
        ).fetchone()
    finally:
        con.close()
    frames = [raw for _, raw in frames_of(db, 2)]
    assert status == 0
    assert dropped >= 1
    assert len(frames) + dropped == 2 * (50 + 70)
    # what came after the lock was released is all there, in both directions
    assert frames.count(LATER[: len(LATER) // 70]) == 140


def _not_recorded(stderr: bytes) -> int:
    """N of the exit's line "N frame(s) were not recorded" (0 without it)."""
    for line in stderr.decode().splitlines():
        if "frame(s) were not recorded" in line:
            return int(line.split("recording: ", 1)[1].split()[0].replace(",", ""))
    return 0


def test_a_database_locked_for_the_whole_run_says_recording_disabled_once(
    tmp_path: Path,
) -> None:
    db = tmp_path / "locked.db"
    holder, proc = _second_proxy_under_lock(db, retry=0.3)
    data = b'{"jsonrpc":"2.0","id":1,"method":"while-locked"}\n' * 50
    try:
        echo_through(proc, data)
        seen = _read_stderr_until(proc, b"locked", 60)
        echo_through(proc, data)
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        assert proc.wait(60) == 0
        stderr = seen + proc.stderr.read()
    finally:
        holder.execute("COMMIT")
        holder.close()
    lines = stderr.decode().splitlines()
    disabled = [line for line in lines if "recording disabled" in line]
    assert len(disabled) == 1, lines
    assert "is locked by another process (database is locked)" in disabled[0]
    assert not any("dropping frames" in line for line in lines), lines
    assert _not_recorded(stderr) == 2 * 100


def test_after_a_lock_ends_the_row_counts_what_stderr_says_was_not_recorded(
    tmp_path: Path,
) -> None:
    db = tmp_path / "locked.db"
    stderr = _lock_then_release(db, b"locked")
    con = sqlite3.connect(db)
    try:
        (dropped,) = con.execute("SELECT frames_dropped FROM connections WHERE id = 2").fetchone()
    finally:
        con.close()
    assert dropped == _not_recorded(stderr) >= 1, stderr
    assert len(frames_of(db, 2)) + dropped == 2 * (50 + 70)


def test_a_lock_held_at_start_does_not_delay_forwarding(tmp_path: Path) -> None:
    """A lock that even blocks readers (exclusive locking mode) when the proxy starts is
    waited for on the writer thread: the echo comes back while the lock is still held,
    and once it is released every frame is recorded."""
    db = tmp_path / "locked.db"
    run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=b"{}\n")  # connection 1
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("SELECT count(*) FROM frames").fetchall()
    proc = echo_proxy(db, env={"ACP_PROXY_LOCK_RETRY_SECONDS": "120"})
    data = b'{"jsonrpc":"2.0","id":1,"method":"while-locked"}\n' * 50
    try:
        echo_through(proc, data)  # would wait for the lock if opening the DB blocked forwarding
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    assert proc.wait(60) == 0
    assert incident_lines(proc.stderr.read()) == []
    assert len(frames_of(db, 2)) == 2 * 50


def test_a_full_disk(tmp_path: Path) -> None:
    place = tmp_path / "tiny"
    if not _mount_tmpfs(place, "256k"):
        pytest.skip("cannot mount a tiny tmpfs (needs root)")
    try:
        data = LINES * 10  # ~1.4 MB each way, far more than fits
        done = run_proxy(["--record", str(place / "full.db"), "--", *ECHO_AGENT], stdin=data)
        assert done.returncode == 0
        assert done.stdout == data
        incidents = _incident_lines(done.stderr)
        assert len(incidents) == 1, done.stderr
        assert "full" in incidents[0]
        assert b"Traceback" not in done.stderr
    finally:
        _umount(place)


FLOOD = [
    b'{"jsonrpc":"2.0","method":"_t","params":{"n":%d,"pad":"%s"}}\n' % (i, b"x" * 250)
    for i in range(20_000)
]


def _flood_while_locked(db: Path, *flags: str) -> tuple[int, bytes, list[tuple[str, bytes]], int]:
    """Echo :data:`FLOOD` (6 MB) through a recording proxy while another process holds the
    write lock. Returns (exit code, stderr, recorded (direction, raw) of connection 2,
    frames_dropped)."""
    holder, proc = _second_proxy_under_lock(db, "--queue-mb", "1", *flags, retry=300)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    data = b"".join(FLOOD)

    def send() -> None:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()

    sender = threading.Thread(target=send)
    try:
        sender.start()
        got = b""
        while len(got) < len(data):  # the whole echo comes back while the lock is held
            chunk = os.read(proc.stdout.fileno(), 1 << 20)
            assert chunk, "the proxy stopped forwarding"
            got += chunk
        assert got == data
    finally:
        holder.execute("COMMIT")
        holder.close()
        sender.join()
    code = proc.wait(120)
    stderr = proc.stderr.read()
    frames = frames_of(db, 2)
    con = sqlite3.connect(db)
    try:
        (dropped,) = con.execute("SELECT frames_dropped FROM connections WHERE id = 2").fetchone()
    finally:
        con.close()
    return code, stderr, frames, dropped


def test_a_flood_while_the_database_is_locked_is_spooled_and_recorded_whole(
    tmp_path: Path,
) -> None:
    """6 MB each way with a 1 MiB memory budget: the overflow goes to the spool file
    beside the recording, and once the lock is gone every frame is recorded, in order."""
    db = tmp_path / "spool.db"
    code, stderr, frames, dropped = _flood_while_locked(db)
    assert code == 0
    assert b"dropping" not in stderr and b"Traceback" not in stderr, stderr
    assert dropped == 0
    assert [raw for d, raw in frames if d == "c2a"] == FLOOD
    assert [raw for d, raw in frames if d == "a2c"] == FLOOD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spool.db"]  # no spool file left


def test_with_the_spool_off_a_flood_while_locked_is_dropped_and_counted(tmp_path: Path) -> None:
    code, stderr, frames, dropped = _flood_while_locked(tmp_path / "nospool.db", "--spool-mb", "0")
    assert code == 0
    assert len(_incident_lines(stderr)) == 1, stderr
    assert dropped > 0 and len(frames) + dropped == 40_000


def test_exit_waits_for_the_backlog_says_so_and_ctrl_c_stops_the_wait(tmp_path: Path) -> None:
    """The agent is done but the writer is stuck behind a lock: the proxy says what it is
    waiting for, and SIGINT ends the wait with a line saying how many frames were not
    recorded (here all of them: the writer never got the lock)."""
    db = tmp_path / "drain.db"
    holder, proc = _second_proxy_under_lock(db, retry=300)
    try:
        echo_through(proc, b"".join(FLOOD[:100]))  # small: see echo_through
        assert proc.stdin is not None
        proc.stdin.close()
        seen = _read_stderr_until(proc, b"Ctrl-C stops", 60)
        assert b"recording: writing the last" in seen
        proc.send_signal(signal.SIGINT)
        seen += _read_stderr_until(proc, b"were not recorded", 60)
        assert proc.wait(60) == 0  # the agent's exit code, as always
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert b"recording: interrupted; 200 frame(s) (" in seen, seen  # 100 lines, both ways
    assert b"Traceback" not in seen
