"""transport.process.watchdog: who is left in a process group, read from /proc.

(Ending an agent's group for real is tested with real processes in test_process_tree.py.)
"""

from __future__ import annotations

import os
from pathlib import Path

from acp_proxy.transport.process.watchdog import end_group, others_in_group


def _no_such_group() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_this_process_is_in_its_group_unless_it_is_the_one_asking() -> None:
    me, group = os.getpid(), os.getpgrp()
    others = others_in_group(group, me=-1)
    assert others is not None and me in others
    assert me not in (others_in_group(group, me) or [])


def test_a_group_nobody_is_in_is_empty_and_ending_it_signals_nothing() -> None:
    gone = _no_such_group()
    assert others_in_group(gone, os.getpid()) == []
    end_group(gone, grace=60.0)  # returns at once: nobody to wait for, nothing to kill
