"""The recorder's writer process: the batch protocol in-process, and the real child
process of the real executable (priority, a killed writer, a killed proxy)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_proxy.recorder.handle import Recorder
from acp_proxy.recorder.ipc import LOCATION_ENV, Control, Drops, encode_batch
from acp_proxy.recorder.journal import ProxyJournal, WriterJournal
from acp_proxy.recorder.shipper import writer_pids
from acp_proxy.recorder.writer.main import PG_SWITCH_SECONDS, serve
from acp_proxy.recorder.writer.pipeline import Pipeline
from acp_proxy.recorder.writer.priority import SWITCH_INTERVAL
from acp_proxy.recorder.writer.sink import SqliteSink
from acp_proxy.store import schema
from tests.conftest import echo_proxy, echo_through, frame_count, frames_of
from tests.transport.process.test_lifecycle import dead, wait_dead

TIMEOUT = 60.0
SCHED_IDLE = 5


def _rows(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT connection_id, seq, direction, raw, size, kind, rpc_id, method, session_id, "
            "update_kind, entity_type, entity_id, ts, mono_ns FROM frames ORDER BY id"
        ).fetchall()
    finally:
        con.close()


def _connection(db: Path) -> tuple[Any, ...]:
    con = sqlite3.connect(db)
    try:
        return tuple(
            con.execute(
                "SELECT transport, agent_command, pid, exit_status, protocol_version, "
                "client_info, frames_dropped, bytes_dropped, ended_at IS NOT NULL FROM connections"
            ).fetchone()
        )
    finally:
        con.close()


def _traffic(recorder: Recorder) -> None:
    """The same calls a transport makes: streams split mid-line, stderr, an event."""
    conn = recorder.connection("stdio", agent_command=["agent", "--x"], label="t")
    conn.update(pid=4242)
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
    init += b'"clientInfo":{"name":"c"}}}\n'
    conn.stream("c2a", init[:20])
    conn.stream("c2a", init[20:])
    conn.stream("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}\n{"x":')
    conn.stream("a2c", b"1}\nnot json\r\n")
    conn.stream("a2c", b"tail without newline")
    conn.stderr(b"agent says hi\n")
    conn.event("signal", {"signum": 15})
    conn.stream_end("c2a")
    conn.stream_end("a2c")
    conn.close(exit_status=3)


def test_batches_sent_to_a_writer_record_what_threads_record(tmp_path: Path) -> None:
    # Reference: the thread backend records the traffic directly.
    direct = Recorder(tmp_path / "direct.db")
    _traffic(direct)
    direct.close()
    # The same traffic through the protocol: what the proxy's queue holds, encoded in
    # two batches (plus losses the proxy counted), served to a writer from a pipe.
    capture = Recorder(None)
    capture.path = tmp_path / "unused.db"  # queue items, with no writer behind them
    _traffic(capture)
    capture.journal.stop()
    items = capture.journal.take()
    assert items is not None and capture.journal.take() is None
    conn = items[0].conn
    keys: dict[Any, int] = {}
    buffers = encode_batch(items[:5], keys) + encode_batch([*items[5:], Drops(conn, 2, 10)], keys)
    read_fd, write_fd = os.pipe()
    journal = WriterJournal(queue_bytes=1 << 20, batch_bytes=1 << 20, linger=0.01, warn=print)
    writer = Pipeline(journal, SqliteSink(tmp_path / "served.db"), lock_retry=5, warn=print)
    with open(os.devnull, "w") as report:
        server = threading.Thread(target=serve, args=(writer, read_fd, report))
        server.start()
        os.write(write_fd, b"".join(buffers))
        os.close(write_fd)
        server.join(TIMEOUT)
    os.close(read_fd)
    assert not server.is_alive()
    served, reference = _rows(tmp_path / "served.db"), _rows(tmp_path / "direct.db")
    assert [r[:12] for r in served] == [r[:12] for r in reference]
    assert len(served) == 5 and served[-1][3] == b"tail without newline"
    assert _connection(tmp_path / "served.db") == (
        "stdio",
        '["agent","--x"]',
        4242,
        3,
        1,
        '{"name":"c"}',
        2,
        10,
        1,
    )
    con = sqlite3.connect(tmp_path / "served.db")
    assert con.execute("SELECT raw FROM stderr_lines").fetchall() == [(b"agent says hi\n",)]
    assert con.execute("SELECT kind, detail FROM events").fetchall() == [
        ("signal", '{"signum":15}')
    ]
    con.close()


def writer_pid(proxy_pid: int) -> int:
    """The pid of the proxy's writer process, once it has started."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = writer_pids(proxy_pid)
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError("the proxy started no writer process")


def _policy_and_nice(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    # after the command: state is field 3, nice field 19, policy field 41 (1-based)
    return int(fields[38]), int(fields[16])


def _finish(proc: subprocess.Popen[bytes]) -> str:
    """Close the proxy's stdin (the client is done); it exits 0; return its stderr."""
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    assert proc.wait(TIMEOUT) == 0
    return proc.stderr.read().decode()


def _wait_count(db: Path, n: int) -> int:
    deadline = time.monotonic() + TIMEOUT
    count = 0
    while time.monotonic() < deadline:
        count = frame_count(db)
        if count >= n:
            break
        time.sleep(0.02)
    return count


def _lines(start: int, n: int) -> list[bytes]:
    return [b'{"jsonrpc":"2.0","method":"n","params":{"i":%d}}\n' % i for i in range(start, n)]


def _start(db: Path, lines: list[bytes]) -> tuple[subprocess.Popen[bytes], int]:
    """A recording proxy in front of the echo agent, its writer's pid, ``lines`` echoed."""
    proc = echo_proxy(db)
    writer = writer_pid(proc.pid)
    echo_through(proc, b"".join(lines))
    return proc, writer


def test_the_writer_is_a_lowest_priority_child_that_exits_with_the_proxy(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    lines = _lines(0, 50)
    proc, writer = _start(db, lines)
    # It lowers itself first thing: SCHED_IDLE on Linux, so any runnable forwarding
    # thread preempts it at once (nice where there is no SCHED_IDLE).
    deadline = time.monotonic() + TIMEOUT
    while (policy_nice := _policy_and_nice(writer)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert policy_nice[0] == SCHED_IDLE or policy_nice[1] > 0, policy_nice
    _finish(proc)
    assert dead(writer)  # the proxy waited for it: nothing left behind
    assert [raw for _, raw in frames_of(db)] == lines + lines  # c2a echoed as a2c


# The writer's entry point, with serve() replaced by a report of the GIL switch interval
# the pipeline would run with.
_SWITCH_PROBE = """
import sys
from acp_proxy.recorder.writer import main as child
child.serve = lambda pipeline, fd, out: out.write(repr(sys.getswitchinterval()))
sys.exit(child.main(sys.argv[1:]))
"""


def _writer_switch_interval(location: str, env: dict[str, str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _SWITCH_PROBE, location, "1.0", "1048576", "65536"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env={**os.environ, **env},
        timeout=TIMEOUT,
        check=True,
    )
    return float(done.stdout)


def test_the_writer_takes_the_gil_back_soon_after_each_statement(tmp_path: Path) -> None:
    # With Python's default switch interval (5 ms; a fresh interpreter's) the sink thread
    # waited up to that long for the GIL after each SQLite statement while the rows thread
    # ran Python.
    sqlite = _writer_switch_interval(str(tmp_path / "s.db"), {})
    assert sqlite == pytest.approx(SWITCH_INTERVAL)
    pg = _writer_switch_interval("-", {LOCATION_ENV: "postgresql://u@127.0.0.1:9/none"})
    assert pg == pytest.approx(PG_SWITCH_SECONDS)


def test_a_killed_writer_is_reported_once_and_forwarding_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    before = _lines(0, 100)
    proc, writer = _start(db, before)
    assert _wait_count(db, 200) == 200
    os.kill(writer, signal.SIGKILL)
    assert wait_dead(writer)
    # Forwarding goes on. The rest is sent in pieces cut inside lines, and the last line
    # has no newline: what is lost must still be counted frame by frame and byte by byte.
    after = b"".join(_lines(100, 300)) + b'{"jsonrpc":"2.0","method":"tail"}'
    for start in range(0, len(after), 1777):
        echo_through(proc, after[start : start + 1777])
    err = _finish(proc)
    assert err.count("the writer process exited") == 1, err
    assert "recording: 402 frame(s) were not recorded" in err  # 201 frames, both ways
    assert "dropping frames" not in err and "Traceback" not in err
    recorded = [raw for _, raw in frames_of(db)]
    assert sorted(recorded) == sorted(before + before)  # what was written before stays
    con = sqlite3.connect(db)
    row = con.execute(
        "SELECT frames_dropped, bytes_dropped, exit_status, ended_at IS NOT NULL FROM connections"
    ).fetchone()
    con.close()
    # the proxy put the losses, and the end the writer never saw, on the row itself
    assert row == (402, 2 * len(after), 0, 1)


@contextlib.contextmanager
def _blocked_writer(db: Path, lines: list[bytes]) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A recording proxy whose writer cannot write (a write lock is held until the block
    ends), with ``lines`` echoed and sent on to the writer: yields (proxy, writer pid)."""
    schema.connect(db, create=True).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the writer cannot even create the connection row
    try:
        proc = echo_proxy(db, env={"ACP_PROXY_LOCK_RETRY_SECONDS": "120"})
        writer = writer_pid(proc.pid)
        echo_through(proc, b"".join(lines))
        time.sleep(1.0)  # far longer than the proxy gathers a batch for: all sent
        yield proc, writer
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_writer_that_dies_with_everything_sent_is_still_reported(tmp_path: Path) -> None:
    """The writer is waiting for a lock with every frame sent to it when it is killed:
    no later send fails, yet the loss is reported and counted."""
    with _blocked_writer(tmp_path / "l.db", _lines(0, 100)) as (proc, writer):
        os.kill(writer, signal.SIGKILL)
        assert wait_dead(writer)
        err = _finish(proc)
    assert err.count("the writer process exited") == 1, err
    assert "recording: 200 frame(s) were not recorded" in err, err
    assert "Traceback" not in err


def test_the_projects_own_modules_do_not_shadow_the_writers(tmp_path: Path) -> None:
    """Editors start the proxy in the user's project: a module there named like one the
    writer imports must not be picked up."""
    (tmp_path / "orjson.py").write_text("raise ImportError('the project's orjson.py')\n")
    db = tmp_path / "s.db"
    proc = echo_proxy("s.db", cwd=tmp_path)
    lines = _lines(0, 20)
    echo_through(proc, b"".join(lines))
    assert "orjson" not in _finish(proc)
    assert [raw for _, raw in frames_of(db)] == lines + lines


def test_losses_follow_the_connections_open(tmp_path: Path) -> None:
    """Counts for a connection go out after the open that creates its row (sent before
    it, they would be thrown away), and once."""
    journal = ProxyJournal(queue_bytes=1 << 20, batch_bytes=1 << 20, linger=0, warn=print)
    journal.open("c", {"transport": "websocket"})
    journal.lose("c", 3, 30)
    journal.stop()
    assert journal.take() == [
        Control("c", "open", {"transport": "websocket"}),
        Drops("c", 3, 30),
    ]
    assert journal.take() is None  # sent once
    journal.lose("c", 1, 5)
    assert journal.take() == [Drops("c", 1, 5)]


def test_a_killed_proxy_leaves_the_writer_to_finish_and_exit(tmp_path: Path) -> None:
    """The writer cannot write (a lock is held) when the proxy is killed: it outlives the
    proxy, and once the lock is gone it writes everything it was sent, then exits."""
    db = tmp_path / "p.db"
    lines = _lines(0, 1000)
    with _blocked_writer(db, lines) as (proc, writer):
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(TIMEOUT) == -signal.SIGKILL
        assert frame_count(db) == 0 and not dead(writer)  # nothing written yet, and still there
    assert wait_dead(writer)  # it saw the end of its input, wrote, and exited
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        # closed for the dead proxy, with what it knew
        row = con.execute("SELECT ended_at IS NOT NULL, end_reason FROM connections").fetchone()
        assert row == (1, "proxy-lost")
    finally:
        con.close()
    assert [raw for _, raw in frames_of(db)] == lines + lines


def test_acp_proxy_recorder_thread_records_without_a_writer_process(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = echo_proxy(db, env={"ACP_PROXY_RECORDER": "thread"})
    lines = _lines(0, 100)
    echo_through(proc, b"".join(lines))
    assert writer_pids(proc.pid) == []
    _finish(proc)
    assert [raw for _, raw in frames_of(db)] == lines + lines
