"""The stdio proxy: client stdio <-> agent subprocess stdio, byte for byte.

Three pump threads move bytes with blocking ``os.read``/``os.write`` (the GIL is released
while they wait): client stdin -> agent stdin, agent stdout -> client stdout, agent stderr
-> proxy stderr. Each chunk is written on *before* a copy is cut into lines for the
recorder, so forwarding never waits for a newline, parsing or SQLite. Back-pressure is
the OS pipe's: a client that stops reading slows the agent, never the proxy's memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType

from acp_proxy.record.writer import ConnectionRecorder, Recorder
from acp_proxy.transport.process import (
    DEFAULT_GRACE_SECONDS,
    AgentStartError,
    exit_code_of,
    spawn_agent,
    terminate,
)
from acp_proxy.wire.frame import A2C, C2A, Direction
from acp_proxy.wire.framing import LineFramer

CHUNK = 256 * 1024
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``fd`` (blocking), raising ``OSError`` on failure."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pump(
    src: int,
    dst: int,
    on_lines: Callable[[list[bytes]], None] | None,
    on_dst_error: Callable[[OSError], None] | None = None,
) -> None:
    """Copy ``src`` to ``dst`` until EOF, handing complete lines to ``on_lines``.

    A failed write (the reader went away) stops forwarding but keeps draining ``src`` so
    the writer on the other side is never blocked, and lines are still recorded.
    """
    framer = LineFramer() if on_lines is not None else None
    dst_ok = True
    while True:
        try:
            data = os.read(src, CHUNK)
        except OSError:
            break
        if not data:
            break
        if dst_ok:
            try:
                write_all(dst, data)
            except OSError as exc:
                dst_ok = False
                if on_dst_error is not None:
                    on_dst_error(exc)
        if framer is not None and on_lines is not None:
            lines = framer.feed(data)
            if lines:
                on_lines(lines)
    if framer is not None and on_lines is not None:
        last = framer.close()
        if last is not None:
            on_lines([last])


class StdioProxy:
    """Runs one agent behind the proxy's own stdin/stdout/stderr and records the traffic."""

    def __init__(
        self,
        argv: Sequence[str],
        recorder: Recorder,
        *,
        grace: float = DEFAULT_GRACE_SECONDS,
        label: str | None = None,
        stdin_fd: int = 0,
        stdout_fd: int = 1,
        stderr_fd: int = 2,
    ) -> None:
        self.argv = list(argv)
        self.recorder = recorder
        self.grace = grace
        self.label = label
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: ConnectionRecorder | None = None
        self._closing = threading.Event()

    def run(self) -> int:
        """Proxy until the agent exits; return the exit code the proxy should exit with."""
        try:
            proc = spawn_agent(self.argv)
        except AgentStartError as exc:
            sys.stderr.write(f"acp-proxy: {exc}\n")
            return exc.exit_code
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        conn = self.conn = self.recorder.connection(
            "stdio", agent_command=self.argv, cwd=os.getcwd(), pid=proc.pid, label=self.label
        )
        previous = self._install_signal_handlers()
        threads = [
            threading.Thread(target=self._client_to_agent, name="c2a", daemon=True),
            threading.Thread(
                target=pump,
                args=(proc.stdout.fileno(), self.stdout_fd, self._recorder_for(A2C),
                      self._client_gone),
                name="a2c",
                daemon=True,
            ),
            threading.Thread(
                target=pump,
                args=(proc.stderr.fileno(), self.stderr_fd, self._stderr_lines),
                name="stderr",
                daemon=True,
            ),
        ]
        for t in threads:
            t.start()
        try:
            returncode = proc.wait()
            # The agent is gone: forward what it left in its pipes (a grandchild holding
            # them open must not keep the proxy alive forever).
            for t in threads[1:]:
                t.join(timeout=self.grace)
        finally:
            self._restore_signal_handlers(previous)
        conn.close(exit_status=returncode)
        return exit_code_of(returncode)

    def _recorder_for(self, direction: Direction) -> Callable[[list[bytes]], None] | None:
        if not self.recorder.enabled:
            return None
        conn = self.conn
        assert conn is not None
        return lambda lines: conn.frames(direction, lines)

    def _stderr_lines(self, lines: list[bytes]) -> None:
        assert self.conn is not None
        for line in lines:
            self.conn.stderr(line)

    def _client_to_agent(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        pump(self.stdin_fd, proc.stdin.fileno(), self._recorder_for(C2A))
        # The client closed our stdin: close the agent's and let it finish, then insist.
        if self.conn is not None:
            self.conn.event("client_eof")
        self._shutdown("client closed stdin")

    def _client_gone(self, exc: OSError) -> None:
        if self.conn is not None:
            self.conn.event("client_gone", {"error": str(exc)})
        threading.Thread(
            target=self._shutdown, args=("client stopped reading",), daemon=True
        ).start()

    def _shutdown(self, why: str) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        proc = self.proc
        assert proc is not None
        terminate(proc, self.grace)

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
        if self.conn is not None:
            self.conn.event("signal", {"signal": signal.Signals(signum).name})
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signum)
            except ProcessLookupError:
                pass
