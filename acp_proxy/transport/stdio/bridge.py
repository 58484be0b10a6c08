"""What both ``acp-proxy connect`` stdio bridges (WebSocket and Streamable HTTP) share.

:func:`start_stdin_reader` reads stdin on a thread (blocking reads into a bounded queue:
back-pressure); :func:`exit_on_signals` runs the bridge and turns SIGTERM/SIGHUP N into the
exit code 128+N, after the bridge's own clean-up has run.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable

from acp_proxy.transport.chunks import ChunkReader

STDIN_QUEUE_CHUNKS = 8
"""How many stdin chunks may wait for the loop before the reader thread blocks."""


def _stdin_reader(fd: int, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
    """Thread body: blocking reads of ``fd`` into ``queue`` (bounded: back-pressure)."""
    reader = ChunkReader(fd)
    while True:
        try:
            data = reader.read()
        except OSError:
            data = b""
        try:
            asyncio.run_coroutine_threadsafe(queue.put(data), loop).result()
        except (RuntimeError, asyncio.CancelledError):
            return
        if not data:
            return


def start_stdin_reader(fd: int) -> asyncio.Queue[bytes]:
    """Start the thread that reads ``fd``; its chunks arrive on the queue, ``b""`` at the end."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue(STDIN_QUEUE_CHUNKS)
    reader = threading.Thread(
        target=_stdin_reader, args=(fd, loop, queue), name="stdin", daemon=True
    )
    reader.start()
    return queue


async def exit_on_signals(run: Callable[[], Awaitable[int]]) -> int:
    """``await run()``; a SIGTERM or SIGHUP N cancels it, and then the result is 128+N."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopped: list[int] = []

    def stop(signum: int) -> None:
        if not stopped:
            stopped.append(signum)
            task.cancel()

    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop, int(sig))
            installed.append(sig)
    try:
        return await run()
    except asyncio.CancelledError:
        if stopped:
            return 128 + stopped[0]
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
