"""Recording into a real PostgreSQL server: byte-exact rows, outages, wrong credentials.

Every test runs the installed ``acp-proxy`` executable against a real server: the shared
one (``pg_url``), or one of its own (``own_server``) that the test stops and starts.
The password of every test URL (``s3cret-pw``) must never reach stderr or a stored row.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    ECHO_AGENT,
    echo_proxy,
    echo_through,
    incident_lines,
    proxy_exe,
    run_proxy,
)
from tests.pg_server import PASSWORD, PgServer, find_bindir

TIMEOUT = 120.0

pytestmark = pytest.mark.skipif(find_bindir() is None, reason="PostgreSQL is not installed")


def _query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def _frames(url: str) -> list[tuple[int, int, str, bytes]]:
    rows = _query(url, "SELECT connection_id, seq, direction, raw FROM frames ORDER BY id")
    return [(c, s, d, bytes(r)) for c, s, d, r in rows]


def _frame_count(url: str) -> int:
    try:
        return int(_query(url, "SELECT count(*) FROM frames")[0][0])
    except Exception:  # not reachable or not created yet
        return 0


def _dropped(url: str) -> int:
    try:
        return int(_query(url, "SELECT coalesce(sum(frames_dropped), 0) FROM connections")[0][0])
    except Exception:  # not reachable or not created yet
        return 0


def _wait_for_frames(url: str, count: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while _frame_count(url) < count:
        assert time.monotonic() < deadline, f"only {_frame_count(url)} of {count} frames recorded"
        time.sleep(0.2)


def assert_no_password(url: str | None, *outputs: bytes) -> None:
    """The password is in no output and (if ``url``) in no text column of the recording."""
    for out in outputs:
        assert PASSWORD.encode() not in out, out
    if url is None:
        return
    for table in ("connections", "events"):
        for (text,) in _query(url, f"SELECT t::text FROM {table} t"):
            assert PASSWORD not in text, text


def _lines(n: int, tag: str) -> list[bytes]:
    return [
        b'{"jsonrpc":"2.0","method":"note","params":{"n":%d,"t":"%s"}}\n' % (i, tag.encode())
        for i in range(n)
    ]


def _through(proc: subprocess.Popen[bytes], lines: list[bytes]) -> None:
    """Send ``lines`` through a proxy in front of the echo agent, one at a time, read back."""
    for line in lines:
        echo_through(proc, line)


class _Stderr:
    """A proxy's stderr, read as it comes (so a test can wait for a line)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self.data = bytearray()
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        for chunk in iter(lambda: os.read(stream.fileno(), 1 << 16), b""):
            with self.cond:
                self.data += chunk
                self.cond.notify_all()

    def wait_for(self, marker: bytes) -> None:
        deadline = time.monotonic() + TIMEOUT
        with self.cond:
            while marker not in self.data:
                assert time.monotonic() < deadline, bytes(self.data)
                self.cond.wait(0.5)


_WATCHED: dict[int, _Stderr] = {}


def _await_line(proc: subprocess.Popen[bytes], marker: bytes) -> None:
    """Wait until the proxy (or its writer) printed ``marker`` on stderr."""
    watcher = _WATCHED.get(proc.pid)
    if watcher is None:
        watcher = _WATCHED[proc.pid] = _Stderr(proc)
    watcher.wait_for(marker)


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, bytes]:
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    code = proc.wait(TIMEOUT)
    watcher = _WATCHED.pop(proc.pid, None)
    if watcher is None:
        return code, proc.stderr.read()
    watcher.thread.join(TIMEOUT)
    return code, bytes(watcher.data)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[PgServer]:
    """A PostgreSQL server of this test alone (initialised, not started)."""
    server = PgServer(tmp_path / "pg")
    server.init()
    try:
        yield server
    finally:
        if server.running():
            server.stop("immediate")


def test_stdio_proxy_records_every_byte_and_stderr_line_into_postgresql(pg_url: str) -> None:
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
        b'{"jsonrpc":"2.0","method":"x\\u0000y","params":{"t":"tab\\there"}}\n',
        b"not json \xff\xfe\n",
        b"\n",
        b'{"jsonrpc":"2.0","method":"last without newline"}',
    ]
    data = b"".join(lines)
    done = run_proxy(["--record", pg_url, "--", *ECHO_AGENT], stdin=data, env={"ECHO_EXIT": "3"})
    assert done.returncode == 3, done.stderr
    assert done.stdout == data
    frames = _frames(pg_url)
    assert [raw for _, _, d, raw in frames if d == "c2a"] == lines
    assert [raw for _, _, d, raw in frames if d == "a2c"] == lines
    (cid,) = {c for c, _, _, _ in frames}
    assert sorted(s for _, s, _, _ in frames) == list(range(1, 2 * len(lines) + 1))
    stderr = _query(pg_url, "SELECT seq, raw FROM stderr_lines WHERE connection_id = %s", (cid,))
    assert [(s, bytes(r)) for s, r in stderr] == [(1, b"echo agent ready\n")]
    row = _query(
        pg_url,
        "SELECT transport, host, exit_status, end_reason, ended_at IS NOT NULL, "
        "last_seen_at IS NOT NULL, frames_dropped, protocol_version FROM connections",
    )
    assert row == [("stdio", socket.gethostname(), 3, "exited", True, True, 0, 1)]
    methods = _query(pg_url, "SELECT method FROM frames WHERE direction = 'c2a' ORDER BY seq")
    assert methods[1] == ("x\\u0000y",)  # PostgreSQL text holds no NUL: escaped as in JSON
    assert incident_lines(done.stderr) == [], done.stderr
    assert_no_password(pg_url, done.stderr)


def test_the_recording_url_can_come_from_acp_proxy_record(pg_url: str) -> None:
    line = b'{"jsonrpc":"2.0","method":"hi"}\n'
    done = run_proxy(["--", *ECHO_AGENT], stdin=line, env={"ACP_PROXY_RECORD": pg_url})
    assert done.returncode == 0 and done.stdout == line, done.stderr
    assert [(d, raw) for _, _, d, raw in _frames(pg_url)] == [("c2a", line), ("a2c", line)]
    assert_no_password(pg_url, done.stderr)


def test_ws_records_a_websocket_client_into_postgresql(pg_url: str) -> None:
    import aiohttp

    from tests.transport.ws.helpers import ws_server

    sent = [b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % i for i in range(20)]

    async def talk(url: str) -> list[bytes]:
        got: list[bytes] = []
        async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
            for frame in sent:
                await ws.send_str(frame.decode())
                msg = await ws.receive(timeout=30)
                got.append(msg.data.encode())
        return got

    with ws_server(["--record", pg_url, "--", *ECHO_AGENT]) as server:
        received = asyncio.run(talk(server.url))
        server.stop()
    assert server.returncode == 0, server.stderr_text
    assert received == sent
    frames = _frames(pg_url)
    assert [raw for _, _, d, raw in frames if d == "c2a"] == sent
    assert [raw for _, _, d, raw in frames if d == "a2c"] == sent
    row = _query(pg_url, "SELECT transport, host, end_reason FROM connections")
    assert row == [("websocket", socket.gethostname(), "exited")]
    assert_no_password(pg_url, server.stderr_text.encode())


def test_a_server_unreachable_at_start_gets_everything_once_it_is_up(own_server: PgServer) -> None:
    url = own_server.url()
    proc = echo_proxy(url)
    early = _lines(30, "early")
    _through(proc, early)  # forwarding does not wait for the database
    _await_line(proc, b"database unreachable")  # the writer has tried and failed
    own_server.start()
    late = _lines(30, "late")
    _through(proc, late)
    _wait_for_frames(url, 2 * (len(early) + len(late)))
    code, err = _finish(proc)
    assert code == 0, err
    frames = _frames(url)
    assert [raw for _, _, d, raw in frames if d == "c2a"] == early + late
    assert sorted(s for _, s, _, _ in frames) == list(range(1, 121))
    assert _query(url, "SELECT count(*), max(end_reason) FROM connections") == [(1, "exited")]
    own = incident_lines(err)
    assert len(own) == 2, err
    assert b"database unreachable" in own[0] and b"frames wait in the spool" in own[0]
    assert b"back after" in own[1]
    assert_no_password(url, err)


def test_a_server_restarted_mid_session_loses_and_repeats_nothing(own_server: PgServer) -> None:
    own_server.start()
    url = own_server.url()
    proc = echo_proxy(url)
    first = _lines(50, "first")
    _through(proc, first)
    _wait_for_frames(url, 2 * len(first))
    during = _lines(400, "during")
    own_server.stop()
    _through(proc, during[:200])  # the server is down: the frames wait
    _await_line(proc, b"database unreachable")
    own_server.start()
    _through(proc, during[200:])
    _wait_for_frames(url, 2 * (len(first) + len(during)))
    code, err = _finish(proc)
    assert code == 0, err
    frames = _frames(url)
    assert [raw for _, _, d, raw in frames if d == "c2a"] == first + during
    assert [raw for _, _, d, raw in frames if d == "a2c"] == first + during
    assert sorted(s for _, s, _, _ in frames) == list(range(1, 2 * (len(first) + len(during)) + 1))
    rows = _query(url, "SELECT count(*), max(end_reason), max(frames_dropped) FROM connections")
    assert rows == [(1, "exited", 0)]
    own = incident_lines(err)
    assert len(own) == 2 and b"database unreachable" in own[0] and b"back after" in own[1], err
    assert_no_password(url, err)


def test_a_server_that_never_comes_back_costs_a_bounded_exit_and_one_line(
    own_server: PgServer,
) -> None:
    own_server.start()
    url = own_server.url()
    proc = echo_proxy(url, env={"ECHO_EXIT": "5"})
    first = _lines(20, "kept")
    _through(proc, first)
    _wait_for_frames(url, 2 * len(first))
    own_server.stop()
    lost = _lines(25, "lost")
    _through(proc, lost)
    code, err = _finish(proc)  # bounded: TIMEOUT is far above the drain's few seconds
    assert code == 5, err
    own = incident_lines(err)
    assert len(own) == 2, err
    assert b"database unreachable" in own[0]
    assert own[1] == b"acp-proxy: recording: %d frame(s) were not recorded" % (2 * len(lost))
    own_server.start()
    assert [raw for _, _, d, raw in _frames(url) if d == "c2a"] == first
    assert_no_password(url, err)


def _big_lines(n: int, tag: str) -> list[bytes]:
    pad = "p" * 1500
    return [
        b'{"jsonrpc":"2.0","method":"note","params":{"n":%d,"t":"%s","pad":"%s"}}\n'
        % (i, tag.encode(), pad.encode())
        for i in range(n)
    ]


@pytest.mark.parametrize("spool_mb", [64, 1], ids=["in-budget", "past-budget"])
def test_an_outage_backlog_waits_in_the_spool_and_past_its_budget_is_counted(
    own_server: PgServer, spool_mb: int
) -> None:
    url = own_server.url()
    proc = echo_proxy(
        url, "--queue-mb", "1", "--spool-mb", str(spool_mb), env={"ACP_PROXY_STATS": "1"}
    )
    _await_line(proc, b"database unreachable")
    lines = _big_lines(5000, "spooled")  # 7.7 MB each way: far past what memory holds
    _through(proc, lines)
    own_server.start()
    expected = 2 * len(lines)
    deadline = time.monotonic() + TIMEOUT
    while True:  # everything is either recorded or counted as dropped on the row
        if _frame_count(url) + _dropped(url) >= expected:
            break
        assert time.monotonic() < deadline, "the backlog was never written"
        time.sleep(0.3)
    code, err = _finish(proc)
    assert code == 0, err
    frames = _frames(url)
    ((dropped,),) = _query(url, "SELECT frames_dropped FROM connections")
    assert len(frames) + dropped == expected
    peak = float(err.split(b"spool peak ")[1].split(b" MB")[0])
    assert peak >= min(spool_mb, 2) * 0.9, err
    own = incident_lines(err)
    if spool_mb == 64:
        assert dropped == 0
        assert [raw for _, _, d, raw in frames if d == "c2a"] == lines
    else:
        assert dropped > 0
        assert any(b"dropping frames" in line for line in own), err
        # what was kept is in order and numbered without gaps or repeats
        assert sorted(s for _, s, _, _ in frames) == list(range(1, len(frames) + 1))
    assert sum(b"database unreachable" in line for line in own) == 1, err
    assert_no_password(url, err)


@pytest.mark.parametrize(
    "break_url",
    [
        lambda url: url.replace(PASSWORD, "wrong-" + PASSWORD),
        lambda url: url.rsplit("/", 1)[0] + "/no_such_database",
        lambda url: url.replace("127.0.0.1:", "127.0.0.1:x") + "?password=" + PASSWORD,
    ],
    ids=["bad-password", "no-database", "bad-port"],
)
def test_a_refused_login_is_one_line_and_forwarding_goes_on(
    pg_server: PgServer, break_url: Any
) -> None:
    url = break_url(pg_server.url())
    line = b'{"jsonrpc":"2.0","method":"hi"}\n'
    done = run_proxy(["--record", url, "--", *ECHO_AGENT], stdin=line, env={"ECHO_EXIT": "7"})
    assert done.returncode == 7
    assert done.stdout == line
    own = incident_lines(done.stderr)
    assert len(own) == 2, done.stderr
    assert own[0].startswith(b"acp-proxy: recording disabled: ")
    assert own[0].endswith(b"; forwarding continues")
    assert b"Traceback" not in done.stderr
    assert_no_password(None, done.stderr)


def test_the_password_is_not_on_the_writer_process_command_line(pg_url: str) -> None:
    from acp_proxy.recorder.shipper import writer_pids

    proc = echo_proxy(pg_url)
    try:
        _through(proc, _lines(1, "x"))
        pids = writer_pids(proc.pid)
        assert pids
        for pid in pids:
            assert PASSWORD.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    finally:
        code, err = _finish(proc)
    assert code == 0, err


def test_the_writer_as_threads_records_into_postgresql(pg_url: str) -> None:
    from acp_proxy.recorder.handle import Recorder

    warnings: list[str] = []
    rec = Recorder(pg_url, backend="thread", warn=warnings.append)
    conn = rec.connection("stdio", agent_command=["agent", "--flag"])
    conn.stream("c2a", b'{"a":1}\n{"b"')
    conn.stream("c2a", b":2}\n")
    conn.event("signal", {"name": "SIGTERM"})
    conn.close(exit_status=0)
    rec.close()
    assert warnings == []
    assert [raw for _, _, _, raw in _frames(pg_url)] == [b'{"a":1}\n', b'{"b":2}\n']
    events = _query(pg_url, "SELECT kind, detail FROM events")
    assert events == [("signal", '{"name":"SIGTERM"}')]
    assert _query(pg_url, "SELECT agent_command FROM connections") == [('["agent","--flag"]',)]


def test_proxy_help_names_the_url_form() -> None:
    done = subprocess.run([*proxy_exe(), "proxy", "--help"], capture_output=True, timeout=60)
    assert b"postgresql://" in done.stdout


def test_connect_and_ws_record_one_session_into_one_database(pg_url: str) -> None:
    """SDK stdio client -> connect --record URL -> ws --record URL -> SDK agent: two writers,
    one database, the same payloads on both connection rows."""
    import json

    from tests.transport.ws.helpers import SDK_AGENT, SDK_CLIENT, ws_server

    with ws_server(["--record", pg_url, "--", *SDK_AGENT]) as srv:
        done = subprocess.run(
            [*SDK_CLIENT, "--", *proxy_exe(), "connect", srv.url, "--record", pg_url],
            capture_output=True,
            timeout=TIMEOUT,
        )
        assert done.returncode == 0, done.stderr.decode()
        srv.stop()
    assert json.loads(done.stdout)["stop"] == "end_turn"
    ids = dict(_query(pg_url, "SELECT transport, id FROM connections"))
    assert set(ids) == {"connect", "websocket"}
    per = {t: [(d, raw) for c, _, d, raw in _frames(pg_url) if c == cid] for t, cid in ids.items()}
    assert per["connect"] == per["websocket"] and len(per["connect"]) == 8
    assert_no_password(pg_url, done.stderr, srv.stderr_text.encode())


def test_a_frame_past_the_big_frame_size_is_stored_byte_exact(pg_url: str) -> None:
    from acp_proxy.recorder.writer.rows import BIG_FRAME_BYTES

    text = b"0123456789abcdef" * (BIG_FRAME_BYTES // 16 + 4096)
    big = b'{"jsonrpc":"2.0","method":"session/update","params":{"text":"' + text + b'"}}\n'
    small = b'{"jsonrpc":"2.0","method":"after"}\n'
    done = run_proxy(["--record", pg_url, "--", "cat"], stdin=big + small)
    assert done.returncode == 0 and done.stdout == big + small, done.stderr
    frames = _frames(pg_url)
    for direction in ("c2a", "a2c"):
        assert [raw for _, _, d, raw in frames if d == direction] == [big, small]
    sizes = _query(pg_url, "SELECT size FROM frames WHERE method = 'session/update'")
    assert sizes == [(len(big),), (len(big),)]


def test_a_killed_writer_leaves_its_losses_and_end_on_the_postgresql_row(pg_url: str) -> None:
    import signal

    from acp_proxy.recorder.shipper import writer_pids

    proc = echo_proxy(pg_url)
    before = _lines(100, "before")
    _through(proc, before)
    _wait_for_frames(pg_url, 200)
    (writer,) = writer_pids(proc.pid)
    os.kill(writer, signal.SIGKILL)
    after = _lines(50, "after")
    _through(proc, after)
    code, err = _finish(proc)
    assert code == 0, err
    assert err.count(b"the writer process exited") == 1, err
    assert b"recording: 100 frame(s) were not recorded" in err, err
    assert [raw for _, _, d, raw in _frames(pg_url) if d == "c2a"] == before
    rows = _query(
        pg_url,
        "SELECT count(*), max(frames_dropped), max(exit_status), bool_and(ended_at IS NOT NULL) "
        "FROM connections",
    )
    assert rows == [(1, 100, 0, True)]
    assert_no_password(pg_url, err)


def test_an_idle_connections_heartbeat_advances_in_postgresql(pg_url: str) -> None:
    proc = echo_proxy(pg_url)
    try:
        _through(proc, _lines(1, "hi"))
        _wait_for_frames(pg_url, 2)
        sql = "SELECT last_seen_at, ended_at FROM connections"
        ((first, ended),) = _query(pg_url, sql)
        assert isinstance(first, float) and ended is None
        deadline = time.monotonic() + TIMEOUT
        later = first
        while later == first:  # nothing is sent meanwhile
            assert time.monotonic() < deadline, "the heartbeat never came"
            time.sleep(0.5)
            ((later, ended),) = _query(pg_url, sql)
        assert later > first and ended is None
    finally:
        code, err = _finish(proc)
    assert code == 0, err
    assert _query(pg_url, "SELECT end_reason FROM connections") == [("exited",)]


def _server_processes(server: PgServer) -> list[int]:
    """The postmaster and every process it started (its backends, its helpers)."""
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    found = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                found.append(int(entry))
    return found


def test_a_server_that_hangs_at_exit_costs_a_bounded_exit_and_claims_no_stored_frame_lost(
    own_server: PgServer,
) -> None:
    """``kill -STOP`` of the whole server during a flood (issue 22: the exit took 65 s, said
    every frame was lost, and 8,642 of them were in the database once it went on)."""
    own_server.start()
    url = own_server.url()
    proc = echo_proxy(url)
    assert proc.stdin is not None and proc.stdout is not None
    sent = 0
    echoed = bytearray()
    stdout = proc.stdout

    def read_back() -> None:
        for chunk in iter(lambda: stdout.read1(1 << 16), b""):
            echoed.extend(chunk)

    reader = threading.Thread(target=read_back, daemon=True)
    reader.start()
    watcher = _WATCHED[proc.pid] = _Stderr(proc)
    stopped: list[int] = []
    try:
        for i in range(400):
            block = b"".join(_lines(100, f"b{i}"))
            proc.stdin.write(block)
            proc.stdin.flush()
            sent += 100
            if i == 20:
                _wait_for_frames(url, 200)  # some batches committed: now hang the server
                stopped = _server_processes(own_server)
                for pid in stopped:
                    with contextlib.suppress(ProcessLookupError):  # a backend that just ended
                        os.kill(pid, signal.SIGSTOP)
        proc.stdin.close()
        try:
            code = proc.wait(40)  # the drain is ~3 s, plus a second for a stuck call
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("the exit waited on the hung server") from None
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert code == 0
    reader.join(TIMEOUT)
    assert len(echoed) == sum(len(b) for i in range(400) for b in _lines(100, f"b{i}"))
    watcher.thread.join(TIMEOUT)
    err = bytes(watcher.data).decode()
    _WATCHED.pop(proc.pid, None)
    assert "Traceback" not in err
    lost = doubt = 0
    for line in err.splitlines():
        if "frame(s) were not recorded" in line:
            lost = int(line.split("recording: ", 1)[1].split()[0])
        if "more frame(s) may be recorded" in line:
            doubt = int(line.split("recording: ", 1)[1].split()[0])
    recorded = _frame_count(url)  # the server answers again
    assert recorded > 0
    assert recorded + lost <= 2 * sent, err  # nothing stored is said to be lost
    assert recorded + lost + doubt >= 2 * sent, err  # and nothing is lost without a word
    # once the server answers again, the row gets the true loss and its end
    deadline = time.monotonic() + TIMEOUT
    while _dropped(url) + _frame_count(url) != 2 * sent:
        assert time.monotonic() < deadline, (_dropped(url), _frame_count(url), 2 * sent)
        time.sleep(0.2)
    ((ended, reason),) = _query(url, "SELECT ended_at, end_reason FROM connections")
    assert ended is not None and reason == "exited"


@pytest.mark.parametrize("outcome", ["COMMIT", "ROLLBACK"])
def test_the_settler_counts_an_unanswered_commits_frames_only_if_it_did_not_commit(
    pg_url: str, outcome: str
) -> None:
    """What ``recorder/writer/settle_pg.py`` writes once the server answers: the row's losses, plus
    the doubtful batch's frames unless its transaction committed; an end only where none."""
    import psycopg

    from acp_proxy.recorder.writer.settle_pg import settle

    run_proxy(["--record", pg_url, "--", *ECHO_AGENT], stdin=b"{}\n")  # a connection row
    ((cid,),) = _query(pg_url, "SELECT max(id) FROM connections")
    with psycopg.connect(pg_url) as conn:
        conn.execute("BEGIN")
        xid = conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0]  # type: ignore[index]
        conn.execute(outcome)
        pid = conn.info.backend_pid
    plan = {
        "rows": [
            {
                "id": cid,
                "frames": 7,
                "bytes": 70,
                "doubt_frames": 5,
                "doubt_bytes": 50,
                "end": {"end_reason": "recorder-lost", "ended_at": 1.0},
            }
        ],
        "doubt": {"xid": xid, "pid": pid},
    }
    assert settle(pg_url, plan, give_up_after=30)
    ((dropped, nbytes, reason),) = _query(
        pg_url,
        "SELECT frames_dropped, bytes_dropped, end_reason FROM connections WHERE id = %s",
        (cid,),
    )
    assert (dropped, nbytes) == ((7, 70) if outcome == "COMMIT" else (12, 120))
    assert reason == "exited"  # the row's own end is kept
