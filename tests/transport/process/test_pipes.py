"""transport.process.pipes: StdinBatcher joins the lines of one event-loop turn, in order.

A real pipe (``os.pipe``) in process: what the agent would read is read from its other end.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Coroutine
from typing import Any

import pytest

from acp_proxy.transport.chunks import CHUNK
from acp_proxy.transport.process.pipes import StdinBatcher


async def _pipe_writer() -> tuple[asyncio.StreamWriter, int]:
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 4 * CHUNK)  # a whole chunk fits: no reader needed
    os.set_blocking(read_fd, False)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(write_fd, "wb", buffering=0)
    )
    return asyncio.StreamWriter(transport, protocol, None, loop), read_fd


def _run(main: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(main, 30))  # a stuck pipe fails the test, never hangs it


def _available(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""


def test_lines_of_one_turn_are_written_together_after_it() -> None:
    async def main() -> None:
        writer, read_fd = await _pipe_writer()
        batcher = StdinBatcher(writer)
        for n in range(3):
            await batcher.write(b"line %d\n" % n)
        assert _available(read_fd) == b""  # held until the turn ends
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert _available(read_fd) == b"line 0\nline 1\nline 2\n"
        assert (batcher.parts, batcher.size, batcher.scheduled) == ([], 0, False)
        writer.close()
        os.close(read_fd)

    _run(main())


def test_a_chunk_worth_is_written_at_once() -> None:
    async def main() -> None:
        writer, read_fd = await _pipe_writer()
        batcher = StdinBatcher(writer)
        await batcher.write(b"a\n")
        await batcher.write(b"b" * CHUNK)
        got = _available(read_fd)
        assert got == b"a\n" + b"b" * CHUNK and batcher.parts == []
        writer.close()
        os.close(read_fd)

    _run(main())


def test_writing_to_a_closed_stdin_says_the_agent_closed_it() -> None:
    async def main() -> None:
        writer, read_fd = await _pipe_writer()
        writer.close()
        with pytest.raises(ConnectionResetError, match="the agent closed its stdin"):
            await StdinBatcher(writer).write(b"x\n")
        os.close(read_fd)

    _run(main())


def test_a_line_with_nothing_known_behind_it_leaves_at_once() -> None:
    """``more=False`` (a WebSocket round trip): written before the loop turns, with the lines
    queued before it; ``more=True`` (a burst's line): held to the end of the turn."""

    async def main() -> None:
        writer, read_fd = await _pipe_writer()
        batcher = StdinBatcher(writer)
        await batcher.write(b"alone\n", more=False)
        assert _available(read_fd) == b"alone\n"  # before the loop turned
        await batcher.write(b"first\n", more=True)
        assert _available(read_fd) == b""  # waits for the messages behind it...
        await batcher.write(b"last\n", more=False)
        assert _available(read_fd) == b"first\nlast\n"  # ...and leaves with them, in one write
        await batcher.write(b"then\n", more=True)
        await asyncio.sleep(0)
        assert _available(read_fd) == b"then\n"  # at the latest at the end of the turn
        writer.close()
        os.close(read_fd)

    _run(main())
