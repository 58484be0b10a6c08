"""The process module in-process: process trees, the watchdog, sync and async close."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from acp_proxy.transport.process import watchdog
from acp_proxy.transport.process.agent import ProcessTree, spawn_agent
from tests.transport.process.test_lifecycle import wait_dead

STUBBORN = (
    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    " os.write(1, b'ready\\n'); time.sleep(600)"
)


def _ready(proc: subprocess.Popen[bytes]) -> None:
    """Wait until the child ignores SIGTERM (it says so on stdout)."""
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"


def _start_in(tree: ProcessTree) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, **tree.popen_options()
    )
    _ready(proc)
    return proc


def test_a_tree_ends_a_process_that_ignores_sigterm() -> None:
    tree = ProcessTree(grace=0.2)
    proc = _start_in(tree)
    assert os.getpgid(proc.pid) == tree.pgid != os.getpgrp()
    tree.end()
    assert proc.wait(30) == -signal.SIGKILL
    assert tree.watchdog.returncode is not None


def test_a_tree_ends_its_processes_when_its_pipe_closes_as_at_the_proxys_death() -> None:
    tree = ProcessTree(grace=0.2)
    proc = _start_in(tree)
    tree.release()  # what the kernel does for a proxy killed with SIGKILL
    assert proc.wait(30) == -signal.SIGKILL
    assert tree.watchdog.wait(30) is not None


def test_signals_for_the_group_do_not_stop_the_watchdog() -> None:
    tree = ProcessTree(grace=0.2)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], **tree.popen_options()
    )
    tree.signal(signal.SIGTERM)
    assert proc.wait(30) == -signal.SIGTERM
    assert tree.watchdog.poll() is None  # still guarding the group
    tree.end()
    assert tree.watchdog.returncode == 0  # nothing was left to kill


def test_the_watchdog_never_ends_a_group_it_does_not_lead(tmp_path: Path) -> None:
    # Started without its own group it would be in pytest's group: it must refuse.
    done = subprocess.run(
        [sys.executable, "-I", "-S", watchdog.__file__, "0.1"], stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2


def test_sync_and_async_close_follow_the_same_steps() -> None:
    agent = spawn_agent([sys.executable, "-c", STUBBORN], grace=0.2)
    _ready(agent.popen)
    assert agent.stop() == -signal.SIGKILL
    assert wait_dead(agent.pid)

    async def run() -> int:
        agent = spawn_agent([sys.executable, "-c", STUBBORN], grace=0.2)
        _ready(agent.popen)
        return await agent.stop_async(None)

    assert asyncio.run(run()) == -signal.SIGKILL
