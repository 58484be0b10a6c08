"""Starting and stopping agents and their whole process trees, for sync and async callers.

Every agent runs in a process group of its own, together with everything it starts (an npm
agent's Node wrapper and the native binary behind it, a shell script's children). The
group's leader is a tiny watchdog (:mod:`acp_proxy.transport.process.watchdog`) that holds a pipe
from the proxy: when the proxy closes it, or dies (``kill -9`` included), the watchdog
ends the group — SIGTERM, ``grace`` seconds, SIGKILL. So no process of the tree outlives
the proxy. The recorder's writer process is not in that group and finishes the recording.

:class:`Agent` is one started agent. Its close sequence (:data:`CLOSE_STEPS`: stdin closed,
``grace`` seconds, SIGTERM to the group, ``grace`` seconds, SIGKILL to the group) is written
once and driven by :meth:`Agent.terminate` (threads) and :meth:`Agent.terminate_async` (the
event loop); :meth:`Agent.end_tree` then ends whatever the agent left behind. On Linux the
agent is also tied to the proxy with ``PR_SET_PDEATHSIG`` (SIGTERM), for the instant
before its watchdog exists. Because the group is not the terminal's foreground group, a
Ctrl-C in a terminal reaches the agent once, through the proxy, not twice.

Spawning reports a missing or non-executable command as :class:`AgentStartError` with the
shell's exit codes (127, 126).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from acp_proxy.console import warn
from acp_proxy.transport.process import watchdog

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

# asyncio, ctypes and concurrent.futures are imported where they are used: the stdio proxy
# starts its agent before anything it does not need for that is imported (an editor waits
# for the agent's first answer; tests/recorder/test_import_budget.py).

DEFAULT_GRACE_SECONDS = 5.0
WATCHDOG_SLACK_SECONDS = 2.0
"""How much longer than its grace the watchdog may take before the proxy kills the group."""


class AgentStartError(Exception):
    """The agent command could not be started; ``exit_code`` is what the proxy exits with."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _tie_to_parent() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

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


async def wait_exit(proc: subprocess.Popen[bytes], timeout: float | None) -> int | None:
    """Wait for ``proc`` without a thread (a pidfd, else polling); ``None`` on timeout."""
    import asyncio

    if proc.poll() is not None:
        return proc.returncode
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = -1
    if fd < 0:
        deadline = None if timeout is None else loop.time() + timeout
        while proc.poll() is None:
            if deadline is not None and loop.time() >= deadline:
                return None
            await asyncio.sleep(0.05)
        return proc.returncode
    exited: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await asyncio.wait_for(exited, timeout)
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return proc.wait()


def _ignore_group_signals() -> None:
    """In the watchdog before exec: ignored signals stay ignored through ``exec``.

    So a SIGTERM to the group in the first milliseconds (before the watchdog's Python has
    started) cannot take the group's guard down.
    """
    for sig in watchdog.GROUP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class ProcessTree:
    """A new process group led by a watchdog; whatever is started in it ends with the proxy.

    Start processes in it with :meth:`popen_options` (``subprocess.Popen`` and
    ``asyncio.create_subprocess_exec`` accept them), then tell it the first one's pid
    (:meth:`joined`). :meth:`end` (or :meth:`end_async`) asks the watchdog to end the group
    and waits for it; the proxy dying does the same.

    The watchdog is a helper: if it cannot start (the interpreter in ``sys.executable`` may
    not be executed by this user, say), one line says so and the first process started
    leads the group itself. The proxy then ends the group at its exit, and the agent still
    gets SIGTERM if the proxy dies, but a grandchild may outlive a ``kill -9`` of the proxy.
    """

    def __init__(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        self.grace = grace
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.pgid = 0  # 0 until the group exists (the watchdog, or the first process started)
        self._pipe = -1
        self._lock = threading.Lock()
        self._released = False
        read_end, self._pipe = os.pipe()  # neither end is inherited by anything else
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", watchdog.__file__, repr(grace)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # never holds the client's stderr open
                process_group=0,
                preexec_fn=_ignore_group_signals,
            )
        except OSError as exc:
            os.close(self._pipe)
            self._pipe = -1
            _watchdog_failed(exc)
        except BaseException:
            os.close(self._pipe)
            raise
        finally:
            os.close(read_end)
        if self.watchdog is not None:
            self.pgid = self.watchdog.pid

    def popen_options(self) -> dict[str, Any]:
        """Keyword arguments that start a process in this group, tied to the proxy."""
        return {"process_group": self.pgid, "preexec_fn": _tie_to_parent()}

    def joined(self, pid: int) -> None:
        """A process started with :meth:`popen_options`: without a watchdog, it leads the group."""
        if self.pgid == 0:
            self.pgid = pid

    def running(self) -> bool:
        """Whether the group may still hold processes to end (its watchdog is alive)."""
        if self.watchdog is not None:
            return self.watchdog.poll() is None
        return self.pgid != 0 and not self._released

    def signal(self, sig: int) -> None:
        """Send ``sig`` to every process of the group (the watchdog ignores all but SIGKILL)."""
        if self.pgid == 0:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def release(self, *, kill_now: bool = False) -> None:
        """Tell the watchdog to end the group: SIGTERM, ``grace``, SIGKILL (or SIGKILL now)."""
        with self._lock:
            if self._released or self._pipe < 0:
                return
            self._released = True
            with contextlib.suppress(OSError):
                if kill_now:
                    os.write(self._pipe, watchdog.KILL_NOW)
            os.close(self._pipe)

    def _end_unguarded(self, kill_now: bool) -> None:
        """No watchdog: end the group from here, as it would (SIGTERM, ``grace``, SIGKILL)."""
        with self._lock:
            if self._released:
                return
            self._released = True
        if self.pgid != 0:
            watchdog.end_group(self.pgid, self.grace, term=not kill_now)

    def end(self, *, kill_now: bool = False) -> None:
        """End every process of the group and wait until they are gone (bounded)."""
        if self.watchdog is None:
            self._end_unguarded(kill_now)
            return
        self.release(kill_now=kill_now)
        try:
            self.watchdog.wait(self.grace + WATCHDOG_SLACK_SECONDS)
        except subprocess.TimeoutExpired:  # pragma: no cover - a stopped watchdog
            self.signal(signal.SIGKILL)
            self.watchdog.wait()

    async def end_async(self, *, kill_now: bool = False) -> None:
        """:meth:`end` for the event loop."""
        if self.watchdog is None:
            import asyncio

            await asyncio.to_thread(self._end_unguarded, kill_now)
            return
        self.release(kill_now=kill_now)
        if await wait_exit(self.watchdog, self.grace + WATCHDOG_SLACK_SECONDS) is None:
            self.signal(signal.SIGKILL)  # pragma: no cover - a stopped watchdog
            await wait_exit(self.watchdog, None)


_watchdog_warned = False


def _watchdog_failed(exc: OSError) -> None:
    """Say once per process that agents run without their watchdog."""
    global _watchdog_warned
    if _watchdog_warned:
        return
    _watchdog_warned = True
    warn(
        f"no watchdog for the agent ({exc.strerror or exc}: {sys.executable}); it runs without one"
    )


CLOSE_STEPS = (None, signal.SIGTERM, signal.SIGKILL)
"""The close sequence after the agent's stdin is closed: each step, then ``grace`` seconds.

``None`` only waits; the signals go to the agent's whole process group; after SIGKILL the
wait is unbounded (it cannot take long).
"""


def _check_program(argv: Sequence[str], env: dict[str, str] | None) -> None:
    if not argv:
        raise AgentStartError("no agent command given (put it after --)", 2)
    program = argv[0]
    path = (env or os.environ).get("PATH")
    if os.sep not in program and shutil.which(program, path=path) is None:
        raise AgentStartError(f"agent command not found: {program}", 127)


def _start_error(program: str, exc: OSError) -> AgentStartError:
    if isinstance(exc, FileNotFoundError):
        return AgentStartError(f"agent command not found: {program}", 127)
    if isinstance(exc, PermissionError):
        return AgentStartError(f"agent command is not executable: {program}", 126)
    if exc.errno in (errno.ENOEXEC, errno.EACCES, errno.EISDIR):
        return AgentStartError(f"cannot execute agent command {program}: {exc.strerror}", 126)
    return AgentStartError(f"cannot start agent command {program}: {exc}", 126)


class Agent:
    """One agent process with piped stdin/stdout (and stderr), in its own :class:`ProcessTree`."""

    def __init__(self, popen: subprocess.Popen[bytes], tree: ProcessTree, grace: float) -> None:
        self.popen = popen
        self.tree = tree
        self.grace = grace
        self.told_to_leave_at: float | None = None
        """When the group was first sent SIGTERM or SIGHUP (monotonic), if it was."""

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the agent and everything it started (as a terminal would)."""
        if self.popen.poll() is None:
            if sig in (signal.SIGTERM, signal.SIGHUP) and self.told_to_leave_at is None:
                self.told_to_leave_at = time.monotonic()
            self.tree.signal(sig)

    def _had_its_grace(self) -> bool:
        """The group was told to leave at least ``grace`` seconds ago: no second SIGTERM."""
        told = self.told_to_leave_at
        return told is not None and time.monotonic() - told >= self.grace

    def kill_after(self, timeout: float) -> None:
        """Wait ``timeout`` seconds for the agent to exit, else SIGKILL its group (blocking)."""
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.tree.signal(signal.SIGKILL)

    def terminate(self, *, close_stdin: bool = True) -> int:
        """The close sequence (:data:`CLOSE_STEPS`) in this thread; the agent's exit status.

        ``close_stdin=False`` leaves stdin to the thread that writes it (closing a descriptor
        another thread may be writing to could redirect that write to a reused descriptor).
        """
        proc = self.popen
        if close_stdin and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        for sig in CLOSE_STEPS:
            if sig is not None:
                self.signal(sig)
            try:
                return proc.wait(timeout=self.grace if sig != signal.SIGKILL else None)
            except subprocess.TimeoutExpired:
                continue
        return proc.wait()  # pragma: no cover - SIGKILL's wait is unbounded

    async def terminate_async(self, stdin: asyncio.StreamWriter | None) -> int:
        """:meth:`terminate` for the event loop (``stdin``: the loop's writer of the pipe)."""
        if stdin is not None:
            with contextlib.suppress(Exception):
                stdin.close()
        for sig in CLOSE_STEPS:
            if sig is not None:
                self.signal(sig)
            code = await wait_exit(self.popen, None if sig == signal.SIGKILL else self.grace)
            if code is not None:
                return code
        return self.popen.wait()  # pragma: no cover - SIGKILL's wait is unbounded

    def end_tree(self, *, kill_now: bool = False) -> None:
        """End what the agent left behind (grandchildren): SIGTERM, ``grace``, SIGKILL.

        A group that was told to leave ``grace`` seconds ago or more gets SIGKILL at once.
        """
        self.tree.end(kill_now=kill_now or self._had_its_grace())

    async def end_tree_async(self, *, kill_now: bool = False) -> None:
        await self.tree.end_async(kill_now=kill_now or self._had_its_grace())

    def stop(self) -> int:
        """:meth:`terminate`, then :meth:`end_tree`; the agent's exit status."""
        try:
            return self.terminate()
        finally:
            self.end_tree()

    async def stop_async(self, stdin: asyncio.StreamWriter | None) -> int:
        try:
            return await self.terminate_async(stdin)
        finally:
            await self.end_tree_async()


def spawn_agent(
    argv: Sequence[str],
    *,
    stderr: int | None = subprocess.PIPE,
    env: dict[str, str] | None = None,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> Agent:
    """Start the agent with piped stdin/stdout (and stderr unless told otherwise).

    Call it from a thread that lives as long as the agent should: Linux delivers the
    parent-death signal when the *thread* that forked exits.
    """
    _check_program(argv, env)
    tree = ProcessTree(grace)
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
            env=env,
            **tree.popen_options(),
        )
        tree.joined(popen.pid)
    except OSError as exc:
        tree.end(kill_now=True)
        raise _start_error(argv[0], exc) from None
    except BaseException:
        tree.end(kill_now=True)
        raise
    return Agent(popen, tree, grace)


SPAWN_THREADS = 4
"""How many agents a server starts at once (threads of :func:`spawn_agent_async`)."""

_spawners: ThreadPoolExecutor | None = None
_spawners_lock = threading.Lock()


def _spawner_pool() -> ThreadPoolExecutor:
    global _spawners
    with _spawners_lock:
        if _spawners is None:  # its threads live as long as the proxy: see spawn_agent
            from concurrent.futures import ThreadPoolExecutor

            _spawners = ThreadPoolExecutor(SPAWN_THREADS, thread_name_prefix="acp-proxy-spawn")
        return _spawners


async def spawn_agent_async(argv: Sequence[str], *, grace: float = DEFAULT_GRACE_SECONDS) -> Agent:
    """:func:`spawn_agent` off the event loop, so one connection's handshake never waits for
    another's agent to start (``fork`` and ``exec`` block the calling thread until the agent's
    program is loaded). Cancelled meanwhile: the agent, if it starts, is ended at once.
    """
    import asyncio

    future = asyncio.get_running_loop().run_in_executor(
        _spawner_pool(), functools.partial(spawn_agent, argv, grace=grace)
    )
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(_end_unwanted)
        raise


def _end_unwanted(future: asyncio.Future[Agent]) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    agent = future.result()
    agent.tree.release(kill_now=True)
    for pipe in (agent.popen.stdin, agent.popen.stdout, agent.popen.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def exit_code_of(returncode: int) -> int:
    """The proxy's exit code for the agent's: a signal N becomes 128+N, like a shell."""
    return 128 - returncode if returncode < 0 else returncode
