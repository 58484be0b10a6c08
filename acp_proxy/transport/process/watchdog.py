"""The watchdog of one agent's process group: it ends the group when the proxy goes away.

Started by :class:`acp_proxy.transport.process.agent.ProcessTree` as the *leader* of a new process
group that the agent then joins (and with it everything the agent starts: a Node or shell
wrapper's real binary, its helpers). Its stdin is a pipe whose only writer is the proxy, so
it reads end of file when the proxy closes it *or dies*, ``kill -9`` included. Then it ends
the group: SIGTERM, up to ``grace`` seconds for the others to leave, SIGKILL to the group
(itself last). Being the leader, it also keeps the group's id from being reused while it
waits.

Run as ``python -I -S watchdog.py GRACE``: the standard library only, no package imports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

KILL_NOW = b"k"
"""Written by the proxy: SIGKILL the group without the SIGTERM step (then read EOF)."""

POLL_SECONDS = 0.02
GROUP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP)
"""Signals sent to the agent's group that are not for the watchdog (ignored from the start)."""


def others_in_group(pgid: int, me: int) -> list[int] | None:
    """Live processes of group ``pgid`` other than ``me``; ``None`` where /proc is missing."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found: list[int] = []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(b")", 1)[-1].split()
        # fields: state ppid pgrp ...; a zombie has left already (it only waits to be reaped)
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def end_group(pgid: int, grace: float, *, term: bool = True) -> None:
    """SIGTERM the group, wait until only this process is left (at most ``grace``), SIGKILL."""
    me = os.getpid()
    left = others_in_group(pgid, me)
    if left == []:
        return
    if term:
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            left = others_in_group(pgid, me)
            if left == []:
                return
            time.sleep(POLL_SECONDS)
    _signal_group(pgid, signal.SIGKILL)  # this process included, when it is in the group


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def main(argv: list[str]) -> int:
    grace = float(argv[1]) if len(argv) > 1 else 5.0
    for sig in GROUP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # signals for the agent's group are not for us
    kill_now = False
    while True:
        try:
            data = os.read(0, 64)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        except OSError:
            data = b""
        if not data:
            break
        kill_now = kill_now or KILL_NOW in data
    if os.getpgrp() != os.getpid():
        return 2  # not started as a group leader: the group is not ours to end
    end_group(os.getpid(), grace, term=not kill_now)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
