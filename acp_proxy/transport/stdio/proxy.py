"""The stdio proxy: client stdio <-> agent subprocess stdio, byte for byte.

Three pump threads move bytes with blocking ``os.read``/``os.write`` (the GIL is released
while they wait): client stdin -> agent stdin, agent stdout -> client stdout, agent stderr
-> proxy stderr. Each chunk read is appended to the recorder's queue (a lock and a deque
append, never a wait) and written on at once; lines are cut, parsed and stored on the
recorder's threads, so forwarding never waits for a newline, parsing or SQLite.
Back-pressure is the OS pipe's: a client that stops reading slows the agent, never grows
the proxy's memory.

Lifecycle (:mod:`acp_proxy.transport.process.agent`): the client closing stdin closes the
agent's stdin, then the agent gets a grace period, SIGTERM, another grace period, SIGKILL
(the signals to its whole process group). The agent exiting first ends the proxy once the
agent's pipes are drained: its output gets one shared ``grace`` deadline, then whatever the
agent left in its group (a grandchild holding the pipes) gets SIGTERM, ``grace``, SIGKILL.
SIGINT/SIGTERM/SIGHUP to the proxy are passed on to the group; an agent still running
``grace`` seconds after a SIGTERM/SIGHUP is killed. The proxy's exit code is the agent's
(128+N for a signal N).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING

from acp_proxy.counters import COUNTERS
from acp_proxy.transport.chunks import ChunkReader, write_all
from acp_proxy.transport.process.agent import (
    DEFAULT_GRACE_SECONDS,
    Agent,
    AgentStartError,
    exit_code_of,
    spawn_agent,
)
from acp_proxy.wire.frame import A2C, C2A

if TYPE_CHECKING:
    # imported by run() once the agent is started: the agent's start-up overlaps theirs
    from acp_proxy.recorder.handle import ConnectionRecorder, Recorder

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def pump(
    src: int,
    dst: int,
    on_data: Callable[[bytes], None] | None,
    on_dst_error: Callable[[OSError], None] | None = None,
) -> None:
    """Copy ``src`` to ``dst`` until EOF, handing each chunk to ``on_data`` as it is forwarded.

    A failed write (the reader went away) stops forwarding but keeps draining ``src`` so
    the writer on the other side is never blocked, and what it sends is still recorded.
    """
    dst_ok = True
    reader = ChunkReader(src)
    while True:
        try:
            data = reader.read()
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        except OSError:
            break
        if not data:
            break
        if on_data is not None:
            # Queued (never waited for) before it is written: a reply can only be read
            # after its request was written, so the recording keeps causal order.
            on_data(data)
        if dst_ok:
            try:
                write_all(dst, data)
            except OSError as exc:
                dst_ok = False
                if on_dst_error is not None:
                    on_dst_error(exc)


class StdioProxy:
    """Runs one agent behind the proxy's own stdin/stdout/stderr and records the traffic.

    ``recorder`` may be a function that makes one: it is then called once the agent has
    been started (not when it cannot be), so the agent's start-up overlaps the recorder's
    (the writer process) and an editor gets the first answer sooner.
    """

    def __init__(
        self,
        argv: Sequence[str],
        recorder: Recorder | Callable[[], Recorder],
        *,
        grace: float = DEFAULT_GRACE_SECONDS,
        label: str | None = None,
        stdin_fd: int = 0,
        stdout_fd: int = 1,
        stderr_fd: int = 2,
    ) -> None:
        self.argv = list(argv)
        self._recorder_given = recorder
        self.recorder: Recorder  # set by run(), once the agent has been started
        self.grace = grace
        self.label = label
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd
        self.agent: Agent | None = None
        self.conn: ConnectionRecorder | None = None
        self._closing = False
        self._lock = threading.Lock()
        self._pending_signals: list[int] = []

    def run(self) -> int:
        """Proxy until the agent exits; return the exit code the proxy should exit with."""
        # Handlers first: a signal arriving while the agent starts is kept and passed on.
        previous = self._install_signal_handlers()
        try:
            return self._run()
        finally:
            self._restore_signal_handlers(previous)

    def _run(self) -> int:
        try:
            agent = spawn_agent(self.argv, grace=self.grace)
        except AgentStartError as exc:
            sys.stderr.write(f"acp-proxy: {exc}\n")
            sys.stderr.flush()
            return exc.exit_code
        proc = agent.popen
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        # The recorder's modules only now, while the agent's interpreter starts (an editor
        # waits for its first answer; tests/recorder/test_import_budget.py).
        from acp_proxy.recorder.handle import STDERR, Recorder

        given = self._recorder_given
        if isinstance(given, Recorder):
            self.recorder = given
        else:
            try:
                self.recorder = given()
            except BaseException:
                agent.stop()
                raise
        conn = self.conn = self.recorder.connection(
            "stdio", agent_command=self.argv, cwd=os.getcwd(), pid=proc.pid, label=self.label
        )
        with self._lock:
            self.agent = agent
            pending, self._pending_signals = self._pending_signals, []
        for signum in pending:
            self._forward_signal(signum, None)
        record = self.recorder.enabled
        threads = [
            threading.Thread(target=self._client_to_agent, name="c2a", daemon=True),
            threading.Thread(
                target=self._forward,
                args=(proc.stdout.fileno(), self.stdout_fd, A2C, self._client_gone),
                name="a2c",
                daemon=True,
            ),
            threading.Thread(
                target=self._forward,
                args=(proc.stderr.fileno(), self.stderr_fd, STDERR, None),
                name="stderr",
                daemon=True,
            ),
        ]
        for t in threads:
            t.start()
        returncode = proc.wait()
        # The agent is gone: forward what it left in its pipes, within one deadline for
        # both (a grandchild holding them open must not keep the proxy alive forever).
        pumps = threads[1:]
        _join_all(pumps, max(self.grace, 1.0))
        # Then whatever the agent left in its process group goes with it: SIGTERM,
        # grace, SIGKILL, waited for. Their pipes close, so the pumps finish.
        agent.end_tree()
        _join_all(pumps, 1.0)
        if record:
            conn.close(exit_status=returncode)
        return exit_code_of(returncode)

    def _forward(
        self,
        src: int,
        dst: int,
        stream: str,
        on_error: Callable[[OSError], None] | None = None,
    ) -> None:
        """Pump ``src`` to ``dst``; when recording, each chunk is queued as ``stream``."""
        conn = self.conn
        assert conn is not None
        counted = COUNTERS.forwarded[stream].lines if COUNTERS.enabled else None
        if not self.recorder.enabled:
            pump(src, dst, counted, on_error)
            return
        if counted is None:
            pump(src, dst, lambda data: conn.stream(stream, data), on_error)
        else:

            def record_and_count(data: bytes) -> None:
                conn.stream(stream, data)
                counted(data)

            pump(src, dst, record_and_count, on_error)
        conn.stream_end(stream)

    def _client_to_agent(self) -> None:
        agent = self.agent
        assert agent is not None and agent.popen.stdin is not None and self.conn is not None
        self._forward(self.stdin_fd, agent.popen.stdin.fileno(), C2A)
        if self.recorder.enabled:
            self.conn.event("client_eof")
        # The client closed our stdin: close the agent's (this thread owns that fd, so
        # nothing else can be writing to it), let it finish, then insist.
        self._shutdown(close_stdin=True)

    def _client_gone(self, exc: OSError) -> None:
        if self.conn is not None and self.recorder.enabled:
            self.conn.event("client_gone", {"error": str(exc)})
        # The client stopped reading our stdout: nobody can hear the agent any more.
        # Agent stdin stays with the c2a thread (closing it here could race with a write).
        threading.Thread(target=self._shutdown, kwargs={"close_stdin": False}, daemon=True).start()

    def _shutdown(self, *, close_stdin: bool) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
            agent = self.agent
        assert agent is not None
        agent.terminate(close_stdin=close_stdin)

    def _install_signal_handlers(self) -> dict[int, object]:
        previous: dict[int, object] = {}
        if threading.current_thread() is not threading.main_thread():
            return previous
        for sig in FORWARDED_SIGNALS:
            previous[sig] = signal.signal(sig, self._forward_signal)
        return previous

    def _restore_signal_handlers(self, previous: dict[int, object]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _forward_signal(self, signum: int, frame: FrameType | None) -> None:
        agent = self.agent
        if agent is None:
            # Not started yet (or failed to): remember it for when it exists.
            self._pending_signals.append(signum)
            return
        if self.conn is not None and self.recorder.enabled:
            self.conn.event("signal", {"signal": signal.Signals(signum).name})
        if agent.returncode is None:
            agent.signal(signum)
            if signum != signal.SIGINT:
                # SIGTERM/SIGHUP mean "go away": an agent ignoring it gets --grace seconds,
                # then SIGKILL (else a later SIGKILL of the proxy would orphan it).
                threading.Thread(target=agent.kill_after, args=(self.grace,), daemon=True).start()


def _join_all(threads: Sequence[threading.Thread], timeout: float) -> None:
    """Join ``threads`` within one deadline of ``timeout`` seconds for all of them."""
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
