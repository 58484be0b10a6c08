"""Async pipes to one agent process, shared by the WebSocket and the Streamable HTTP agent modes.

:func:`agent_pipes` wraps the agent's stdio in asyncio streams, :class:`StdinBatcher` writes
the lines of one event-loop turn to its stdin in one system call, and
:func:`copy_agent_stderr` passes its stderr through to ours while recording each line.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from acp_proxy.recorder.handle import ConnectionRecorder
from acp_proxy.transport.chunks import CHUNK
from acp_proxy.transport.process.agent import Agent
from acp_proxy.wire.framing import LineFramer


async def agent_pipes(
    agent: Agent,
) -> tuple[asyncio.StreamWriter, asyncio.StreamReader, asyncio.StreamReader]:
    """The agent's stdin, stdout and stderr as asyncio streams (reads of at most CHUNK)."""
    proc = agent.popen
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    loop = asyncio.get_running_loop()
    out = asyncio.StreamReader(limit=CHUNK, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(out, loop=loop), proc.stdout)
    err = asyncio.StreamReader(limit=CHUNK, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(err, loop=loop), proc.stderr)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), proc.stdin
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return writer, out, err


async def copy_agent_stderr(stderr: asyncio.StreamReader, rec: ConnectionRecorder) -> None:
    """Copy the agent's stderr to ours as it comes, and record each of its lines."""
    framer = LineFramer()
    while True:
        data = await stderr.read(CHUNK)
        if not data:
            break
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.buffer.write(data)
            sys.stderr.buffer.flush()
        for line in framer.feed(data):
            rec.stderr(line)
    last = framer.close()
    if last is not None:
        rec.stderr(last)


class StdinBatcher:
    """Writes the lines of one event-loop turn to a pipe in one system call.

    Messages that arrived together leave the WebSocket reader without yielding; joining their
    lines saves one ``write(2)`` (and one GIL hand-over) per message. Order is kept, and
    back-pressure too: a full pipe is awaited (``drain``) before more is taken.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.parts: list[bytes] = []
        self.size = 0
        self.scheduled = False

    async def write(self, data: bytes, *, more: bool = True) -> None:
        """Queue ``data`` (whole lines) to be written at the end of this loop turn, with
        whatever else comes in it. ``more=False``: nothing is known to follow (a round trip
        waits for this line), so it is written at once, with the lines queued before it."""
        if self.writer.transport.is_closing():
            raise ConnectionResetError("the agent closed its stdin")
        self.parts.append(data)
        self.size += len(data)
        if self.size >= CHUNK or not more:
            self.flush()
            await self.writer.drain()
        elif not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        elif self.writer.transport.get_write_buffer_size() > CHUNK:
            await self.writer.drain()

    def flush(self) -> None:
        self.scheduled = False
        if not self.parts:
            return
        data = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self.parts.clear()
        self.size = 0
        if self.writer.transport.is_closing():
            return  # the agent is gone; write() reports it to the reader loop
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            self.writer.write(data)
