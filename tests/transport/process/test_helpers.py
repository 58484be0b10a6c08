"""The proxy's helper processes (the agent's watchdog, the recorder's writer) cannot start.

Both are started with ``sys.executable``. A user who may not execute that path (a venv whose
``python`` links into another user's home) still gets the agent run and every byte forwarded,
with one line per helper saying so. The real ``python -m acp_proxy`` is started with an
``argv[0]`` that names a copy of the interpreter without execute bits: Python takes
``sys.executable`` from it, and nobody (root included) may execute that file.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.transport.process.test_lifecycle import wait_dead


def _unexecutable_python(tmp_path: Path) -> str:
    locked = tmp_path / "locked"
    locked.mkdir()
    copy = locked / "python"
    shutil.copyfile(os.path.realpath(sys.executable), copy)
    copy.chmod(0o644)
    return str(copy)


def _proxy_as(
    argv0: str, args: list[str], stdin: bytes, **popen: object
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [argv0, "-m", "acp_proxy", *args],
        executable=sys.executable,
        input=stdin,
        capture_output=True,
        timeout=120,
        **popen,  # type: ignore[call-overload]
    )


AGENT = "sleep 300 & echo $! > {pidfile}; exec cat"
"""An agent that leaves a grandchild behind: the proxy must end it without the watchdog."""


def test_no_watchdog_and_no_writer_process_still_forwards_records_and_ends_the_tree(
    tmp_path: Path,
) -> None:
    python = _unexecutable_python(tmp_path)
    assert not os.access(python, os.X_OK)
    db = tmp_path / "a.db"
    pidfile = tmp_path / "grandchild.pid"
    lines = b"".join(b'{"jsonrpc":"2.0","method":"n","params":%d}\n' % i for i in range(1000))
    done = _proxy_as(
        python,
        ["--record", str(db), "--", "sh", "-c", AGENT.format(pidfile=pidfile)],
        lines,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert done.stdout == lines  # every byte forwarded
    assert "Traceback" not in stderr
    said = stderr.splitlines()
    assert sum("no watchdog for the agent (Permission denied" in s for s in said) == 1
    assert sum("recording: no writer process (Permission denied" in s for s in said) == 1
    assert all(len(line.replace(python, "")) <= 100 for line in said)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM frames WHERE direction = 'c2a'").fetchone() == (
            1000,
        )
    grandchild = int(pidfile.read_text())
    assert wait_dead(grandchild), "the agent's grandchild outlived the proxy"


def test_no_watchdog_as_an_unprivileged_user_with_an_unwritable_recording(tmp_path: Path) -> None:
    """The issue's case: ``setpriv`` to uid 65534, a read-only folder for the recording."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the proxy as uid 65534")
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import acp_proxy"],
            user=65534,
            group=65534,
            extra_groups=[],
            capture_output=True,
            cwd="/",
        ).returncode
    except OSError:
        probe = -1
    if probe != 0:
        pytest.skip("uid 65534 cannot run this interpreter or import acp_proxy (private prefix)")
    tmp_path.chmod(0o755)
    python = _unexecutable_python(tmp_path)
    readonly = tmp_path / "ro"
    readonly.mkdir(mode=0o555)
    lines = b"".join(b"%d\n" % i for i in range(1, 1001))
    done = _proxy_as(
        python,
        ["--record", str(readonly / "a.db"), "--", "cat"],
        lines,
        user=65534,
        group=65534,
        extra_groups=[],
        cwd="/",
    )
    stderr = done.stderr.decode()
    assert done.stdout == lines, stderr
    assert "Traceback" not in stderr
    assert "recording disabled" in stderr
    assert "no watchdog for the agent" in stderr
