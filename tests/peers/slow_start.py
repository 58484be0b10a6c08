"""An agent command whose ``exec`` stalls until the test lets it go (a file lease).

:func:`stalled_agent` yields the path of an agent command (a symlink to a script, ``cat``
by default) and a :class:`StalledStart`. While a helper process holds a write lease on the script,
the kernel makes every ``exec`` of it wait (up to ``/proc/sys/fs/lease-break-time``, 45 s
by default), so the proxy's ``fork``/``exec`` of that connection's agent blocks the thread
that does it. :meth:`StalledStart.wait_blocked` returns once an ``exec`` is waiting;
:meth:`StalledStart.unstall` points the command at an ordinary copy of the script for the
connections after it; :meth:`StalledStart.release` lets the waiting ``exec`` go on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HOLDER = r"""
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDWR)
signal.signal(signal.SIGIO, lambda *_: print("blocked", flush=True))
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print("held", flush=True)
sys.stdin.read()
os.close(fd)
"""
SCRIPT = "#!/bin/sh\nexec cat\n"


@dataclass
class StalledStart:
    """The lease holder of :func:`stalled_agent`."""

    holder: subprocess.Popen[str]
    command: Path
    ordinary: Path

    def wait_blocked(self) -> None:
        """Return once an ``exec`` of the command waits for the lease (blocking)."""
        assert self.holder.stdout is not None
        assert self.holder.stdout.readline() == "blocked\n"

    def unstall(self) -> None:
        """Later starts of the command ``exec`` the ordinary script (no lease on it)."""
        link = self.command.with_name("next")
        link.symlink_to(self.ordinary)
        os.replace(link, self.command)

    def release(self) -> None:
        """Drop the lease: the waiting ``exec`` goes on (or fails: the file was open)."""
        if self.holder.stdin is not None and not self.holder.stdin.closed:
            self.holder.stdin.close()
        self.holder.wait(30)


@contextmanager
def stalled_agent(tmp: Path, script: str = SCRIPT) -> Iterator[StalledStart]:
    """An agent command (``script``, default ``cat``) whose next ``exec`` stalls; see the
    module."""
    ordinary, stalled, command = tmp / "ordinary.sh", tmp / "stalled.sh", tmp / "agent"
    for path in (ordinary, stalled):
        path.write_text(script)
        path.chmod(0o755)
    command.symlink_to(stalled)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(stalled)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    start = StalledStart(holder, command, ordinary)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield start
    finally:
        start.release()
