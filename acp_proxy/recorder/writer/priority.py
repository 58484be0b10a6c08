"""How the recorder's threads and writer process give way to forwarding (one home).

The measurements behind these settings: docs/performance.md, "The recorder's constants".
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

RECORDER_NICE = 10
"""Niceness of the writer's threads (or process) where SCHED_IDLE is not available."""

SWITCH_INTERVAL = 0.0002
"""GIL switch interval (seconds) a recording process runs with (Python's default: 5 ms).

Set in the proxy by the :class:`~acp_proxy.recorder.handle.Recorder` and in the writer
process by :mod:`~acp_proxy.recorder.writer.main` (which takes a longer one for PostgreSQL). A
forwarding thread whose read just returned waits at most this long for the GIL while the
shipper (or, with threads, the rows thread) runs Python; in the writer, the sink thread gets
the GIL back this soon after each SQLite statement, instead of waiting up to 5 ms each time
while the rows thread runs Python.
"""


def lower_priority(*, whole_process: bool = False) -> None:
    """Let the recorder yield the CPU to forwarding.

    ``whole_process`` (the writer process): SCHED_IDLE where there is one (Linux), else
    nice :data:`RECORDER_NICE`. A normal task that wakes up preempts a SCHED_IDLE one at
    once; a nice 10 task merely has a smaller share, and the kernel lets it finish its
    slice first (milliseconds added to a round trip through the proxy). It is not
    starved on a busy machine: Linux still gives a SCHED_IDLE task a small weight.
    Otherwise (threads inside the proxy): nice for the calling thread only (Linux: nice is
    per thread), so the forwarding threads keep their priority.
    """
    if whole_process:  # (twice is once: the writer process is started so, then says so)
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]
        except (OSError, AttributeError):
            with contextlib.suppress(OSError):
                if os.nice(0) < RECORDER_NICE:
                    os.nice(RECORDER_NICE - os.nice(0))
        return
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), RECORDER_NICE)
