"""Process lifecycle through the real executable: signals, EOF, grace, exit codes, orphans."""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import frames_of, proxy_exe
from tests.peers import PEERS

AGENTS = [sys.executable, str(PEERS / "lifecycle_agents.py")]
TIMEOUT = 60.0


class Proxy:
    """``acp-proxy [OPTS] -- lifecycle_agents.py MODE``: line-reading helpers that never hang."""

    def __init__(self, mode: str, *opts: str) -> None:
        self.proc = subprocess.Popen(
            [*proxy_exe(), *opts, "--", *AGENTS, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.buf = b""
        first = self.readline()
        assert first.startswith(b"pid "), first
        self.agent_pid = int(first.split()[1])

    def read_some(self, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError("no output from the proxy")
        return os.read(fd, 1 << 20)

    def readline(self) -> bytes:
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in self.buf:
            data = self.read_some(deadline)
            if not data:
                raise EOFError(self.buf)
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def read_to_eof(self) -> bytes:
        deadline = time.monotonic() + TIMEOUT
        out = self.buf
        self.buf = b""
        while data := self.read_some(deadline):
            out += data
        return out

    def wait(self) -> int:
        return self.proc.wait(TIMEOUT)

    def stderr(self) -> bytes:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def dead(pid: int) -> bool:
    """True when ``pid`` no longer runs (gone, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_dead(pid: int) -> bool:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if dead(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signals_are_forwarded_and_the_agents_code_returned(sig: signal.Signals) -> None:
    p = Proxy("signals")
    assert p.readline() == b"ready"
    p.proc.send_signal(sig)
    assert p.readline() == f"got {sig.name}".encode()
    assert p.wait() == 3
    assert wait_dead(p.agent_pid)
    assert b"Traceback" not in p.stderr()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_agent_killed_by_a_signal_gives_128_plus_n(sig: signal.Signals, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    p = Proxy("default", "--record", str(db))
    assert p.readline() == b"ready"
    p.proc.send_signal(sig)
    assert p.wait() == 128 + sig
    assert wait_dead(p.agent_pid)
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT exit_status FROM connections").fetchone() == (-sig,)
        (detail,) = con.execute("SELECT detail FROM events WHERE kind = 'signal'").fetchone()
        assert sig.name in detail
    finally:
        con.close()


def test_client_eof_closes_agent_stdin_then_sigterm_after_grace(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    p = Proxy("linger", "--grace", "0.2", "--record", str(db))
    assert p.readline() == b"ready"
    assert p.proc.stdin is not None
    p.proc.stdin.close()
    assert p.readline() == b"eof"  # the agent saw EOF on its stdin
    assert p.wait() == 0  # it then left on SIGTERM with code 0
    assert wait_dead(p.agent_pid)
    con = sqlite3.connect(db)
    try:
        kinds = [k for (k,) in con.execute("SELECT kind FROM events ORDER BY id")]
        assert "client_eof" in kinds
    finally:
        con.close()


def test_an_agent_ignoring_sigterm_is_killed() -> None:
    p = Proxy("stubborn", "--grace", "0.2")
    assert p.readline() == b"ready"
    assert p.proc.stdin is not None
    p.proc.stdin.close()
    assert p.readline() == b"eof"
    assert p.wait() == 128 + signal.SIGKILL
    assert wait_dead(p.agent_pid)


def test_an_agent_ignoring_a_forwarded_sigterm_is_killed_after_the_grace() -> None:
    p = Proxy("stubborn", "--grace", "0.2")
    assert p.readline() == b"ready"
    p.proc.send_signal(signal.SIGTERM)
    assert p.wait() == 128 + signal.SIGKILL
    assert wait_dead(p.agent_pid)


def test_agent_exiting_first_has_its_output_forwarded_and_its_code(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    p = Proxy("burst-exit", "--record", str(db))
    out = p.read_to_eof()  # our stdin is still open: the agent ends the session
    expected = (b"0123456789" * 100 + b"\n") * 2000 + b"last line without newline: \ntail"
    assert out == expected
    assert p.wait() == 5
    assert b"bye\n" in p.stderr()
    recorded = b"".join(raw for d, raw in frames_of(db) if d == "a2c")
    assert recorded.startswith(b"pid ") and recorded.endswith(expected)
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT exit_status, frames_dropped FROM connections").fetchone() == (
            5,
            0,
        )
        assert [bytes(r) for (r,) in con.execute("SELECT raw FROM stderr_lines")] == [b"bye\n"]
    finally:
        con.close()


def test_writing_to_an_agent_that_already_exited() -> None:
    p = Proxy("burst-exit")
    p.read_to_eof()
    assert p.wait() == 5
    assert p.proc.stdin is not None
    try:
        p.proc.stdin.write(b'{"jsonrpc":"2.0","method":"late"}\n' * 1000)
        p.proc.stdin.close()
    except BrokenPipeError:
        pass  # the proxy is gone already: that is fine too
    assert b"Traceback" not in p.stderr()


def test_client_that_stops_reading_ends_the_session() -> None:
    p = Proxy("flood", "--grace", "0.2")
    assert p.readline() == b"ready"
    assert p.proc.stdout is not None
    p.proc.stdout.close()  # the editor went away
    assert p.wait() == 128 + signal.SIGTERM
    assert wait_dead(p.agent_pid)


def test_a_grandchild_holding_the_pipes_does_not_keep_the_proxy_alive() -> None:
    p = Proxy("grandchild", "--grace", "0.2")
    line = p.readline()
    assert line.startswith(b"child ")
    child = int(line.split()[1])
    assert p.wait() == 0
    assert wait_dead(p.agent_pid)
    assert wait_dead(child)


def test_a_grandchild_holding_the_pipes_gets_one_grace_not_one_per_pipe() -> None:
    grace = 3.0
    p = Proxy("grandchild", "--grace", str(grace))
    child = int(p.readline().split()[1])
    started = time.monotonic()
    assert p.wait() == 0
    took = time.monotonic() - started
    assert wait_dead(child)
    # stdout and stderr share one deadline (then the grandchild, which leaves on SIGTERM,
    # goes at once): about one grace, where each pipe waiting its own took two.
    assert took < 2 * grace, took
