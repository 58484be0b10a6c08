"""The stdio adapter of the replay engine: the client's stdin/stdout, one line per frame.

A thin loop: read stdin in chunks, cut lines (:class:`~acp_proxy.wire.framing.LineFramer`,
no length limit), hand each to :meth:`ReplayEngine.receive` and carry out the outputs
(sleep for paced sends, write to stdout, notes to stderr). While the engine waits for an
answer, ``answer_timeout`` seconds without input make it move on.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable

from acp_proxy.console import warn
from acp_proxy.replay.engine import Note, Output, ReplayEngine, Send, Wait
from acp_proxy.transport.chunks import ChunkReader, write_all
from acp_proxy.wire.framing import LineFramer


def serve_stdio(
    engine: ReplayEngine,
    *,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    answer_timeout: float = 60.0,
    note: Callable[[str], None] = warn,
) -> int:
    """Serve one client until its stdin closes; returns the exit code (0, or 1 on a broken pipe)."""
    framer = LineFramer()
    reader = ChunkReader(stdin_fd)

    def carry_out(outputs: list[Output]) -> bool:
        for out in outputs:
            if isinstance(out, Send):
                if out.delay > 0:
                    time.sleep(out.delay)
                try:
                    write_all(stdout_fd, out.data)
                except OSError:
                    return False
            elif isinstance(out, Note):
                note(out.text)
            elif isinstance(out, Wait):
                pass
        return True

    if not carry_out(engine.start()):
        return 1
    while True:
        timeout = answer_timeout if engine.waiting_for is not None else None
        try:
            ready, _, _ = select.select([stdin_fd], [], [], timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if not ready:
            if not carry_out(engine.answer_timed_out()):
                return 1
            continue
        try:
            data = reader.read()
        except OSError:
            data = b""
        if not data:
            last = framer.close()
            if last is not None and last.strip():
                carry_out(engine.receive(last))
            carry_out(engine.finish())
            return 0
        for line in framer.feed(data):
            if not carry_out(engine.receive(line)):
                return 1
