"""Starting and stopping the agent subprocess.

Spawning reports a missing or non-executable command as :class:`AgentStartError` with the
shell's exit codes (127, 126). On Linux the agent is tied to the proxy with
``PR_SET_PDEATHSIG`` (SIGTERM) so that even a ``kill -9`` of the proxy leaves no orphan
(the agent also sees EOF on its stdin then). The agent runs in its own process group, so
a Ctrl-C in a terminal reaches it once, through the proxy, not twice.
:func:`terminate` is the close sequence: stdin closed, a grace period, SIGTERM, SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence

DEFAULT_GRACE_SECONDS = 5.0


class AgentStartError(Exception):
    """The agent command could not be started; ``exit_code`` is what the proxy exits with."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _tie_to_parent() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:  # runs in the child between fork and exec
        pr_set_pdeathsig = 1
        prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the proxy died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def spawn_agent(
    argv: Sequence[str],
    *,
    stderr: int | None = subprocess.PIPE,
    env: dict[str, str] | None = None,
    new_process_group: bool = True,
) -> subprocess.Popen[bytes]:
    """Start the agent with piped stdin/stdout (and stderr unless told otherwise).

    Call it from a thread that lives as long as the agent should: Linux delivers the
    parent-death signal when the *thread* that forked exits.
    """
    if not argv:
        raise AgentStartError("no agent command given (put it after --)", 2)
    program = argv[0]
    path = (env or os.environ).get("PATH")
    if os.sep not in program and shutil.which(program, path=path) is None:
        raise AgentStartError(f"agent command not found: {program}", 127)
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
            env=env,
            preexec_fn=_tie_to_parent(),
            process_group=0 if new_process_group else None,
        )
    except FileNotFoundError:
        raise AgentStartError(f"agent command not found: {program}", 127) from None
    except PermissionError:
        raise AgentStartError(f"agent command is not executable: {program}", 126) from None
    except OSError as exc:
        if exc.errno in (errno.ENOEXEC, errno.EACCES, errno.EISDIR):
            raise AgentStartError(
                f"cannot execute agent command {program}: {exc.strerror}", 126
            ) from None
        raise AgentStartError(f"cannot start agent command {program}: {exc}", 126) from None


def exit_code_of(returncode: int) -> int:
    """The proxy's exit code for the agent's: a signal N becomes 128+N, like a shell."""
    return 128 - returncode if returncode < 0 else returncode


def terminate(
    proc: subprocess.Popen[bytes], grace: float = DEFAULT_GRACE_SECONDS, *, close_stdin: bool = True
) -> int:
    """Close the agent's stdin, wait ``grace`` seconds, SIGTERM, wait, SIGKILL. Returns its code.

    ``close_stdin=False`` leaves stdin to the thread that writes it (closing a descriptor
    another thread may be writing to could redirect that write to a reused descriptor).
    """
    if close_stdin and proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        try:
            return proc.wait(timeout=grace if sig != signal.SIGKILL else None)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()
