"""No orphan behind a wrapped agent: the agent's whole process tree ends with the proxy.

The agent is ``wrapper_agent.sh``, a shell script that starts the real agent as a child and
waits for it (as npm's launchers do). That child ignores SIGTERM, keeps running after its
stdin closes and starts a child of its own; every process of the tree writes its pid to a
file. Through the real executables: ``acp-proxy``, ``acp-proxy replay --client``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import proxy_exe
from tests.peers import PEERS
from tests.transport.process.test_lifecycle import dead, wait_dead

HERE = Path(__file__).parent
TIMEOUT = 60.0


def wrapper_agent(pidfile: Path) -> list[str]:
    return ["sh", str(PEERS / "wrapper_agent.sh"), str(pidfile), sys.executable]


def tree_pids(pidfile: Path, proc: subprocess.Popen[bytes]) -> list[int]:
    """The wrapper, the real agent and its helper, once all three have started."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if pidfile.exists():
            pids = [int(x) for x in pidfile.read_text().split()]
            if len(pids) >= 3:
                return pids
        assert proc.poll() is None, "the proxy exited before the agent's tree started"
        time.sleep(0.02)
    raise AssertionError("the wrapped agent did not start")


def assert_all_gone(pids: list[int]) -> None:
    left = [pid for pid in pids if not wait_dead(pid)]
    assert not left, f"orphans left behind: {left}"


def start_proxy(tmp_path: Path, *opts: str) -> tuple[subprocess.Popen[bytes], list[int]]:
    pidfile = tmp_path / "pids"
    proc = subprocess.Popen(
        [*proxy_exe(), *opts, "--", *wrapper_agent(pidfile)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return proc, tree_pids(pidfile, proc)


def kill_tree(pids: list[int]) -> None:
    for pid in pids:  # leave nothing behind if the test fails
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_of_the_proxy_leaves_no_process_of_the_agents_tree(tmp_path: Path) -> None:
    proc, pids = start_proxy(tmp_path, "--grace", "0.5", "--record", str(tmp_path / "r.db"))
    try:
        assert not any(dead(pid) for pid in pids)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(TIMEOUT) == -signal.SIGKILL
        assert_all_gone(pids)
    finally:
        kill_tree(pids)


def test_sigterm_to_the_proxy_ends_the_whole_tree_within_the_grace(tmp_path: Path) -> None:
    grace = 1.0
    proc, pids = start_proxy(tmp_path, "--grace", str(grace))
    try:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(TIMEOUT)
        took = time.monotonic() - started
        # The wrapper dies of the SIGTERM; the child ignoring it is killed after the grace.
        assert code == 128 + signal.SIGTERM
        assert_all_gone(pids)
        # Bounded by the grace (SIGTERM, grace, SIGKILL), not by the agent: generous.
        assert took < 10 * grace, took
        assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
    finally:
        kill_tree(pids)


def test_client_eof_ends_the_whole_tree(tmp_path: Path) -> None:
    proc, pids = start_proxy(tmp_path, "--grace", "0.3")
    try:
        assert proc.stdin is not None
        proc.stdin.close()  # the editor went away; the real agent ignores it and SIGTERM
        proc.wait(TIMEOUT)
        assert_all_gone(pids)
    finally:
        kill_tree(pids)


def _recording(tmp_path: Path) -> Path:
    db = tmp_path / "c.db"
    request = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    done = subprocess.run(
        [*proxy_exe(), "--record", str(db), "--", "cat"], input=request, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    return db


def _replay_client(
    tmp_path: Path, step_timeout: str, output: int
) -> tuple[subprocess.Popen[bytes], list[int]]:
    """``acp-proxy replay --client`` of a one-request recording against the wrapper agent,
    started; the process and the pids of the agent's tree."""
    db = _recording(tmp_path)
    pidfile = tmp_path / "pids"
    proc = subprocess.Popen(
        [
            *proxy_exe(),
            "replay",
            "--client",
            str(db),
            "--step-timeout",
            step_timeout,
            "--",
            *wrapper_agent(pidfile),
        ],
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output,
    )
    return proc, tree_pids(pidfile, proc)


def test_replay_client_leaves_no_process_of_the_agents_tree(tmp_path: Path) -> None:
    proc, pids = _replay_client(tmp_path, "0.5", subprocess.PIPE)
    try:
        proc.wait(TIMEOUT)  # the agent never answers: the replay ends after its timeouts
        assert_all_gone(pids)
    finally:
        kill_tree(pids)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_signal_to_replay_client_leaves_no_process_of_the_agents_tree(
    tmp_path: Path, sig: signal.Signals
) -> None:
    proc, pids = _replay_client(tmp_path, "30", subprocess.DEVNULL)
    try:
        proc.send_signal(sig)
        proc.wait(TIMEOUT)
        assert_all_gone(pids)
    finally:
        kill_tree(pids)
