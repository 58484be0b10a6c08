"""Blocking byte I/O on file descriptors: chunked reads into one buffer, and whole writes.

The one home of :class:`ChunkReader` and :func:`write_all`, used by the stdio proxy, the
stdio bridge of ``acp-proxy connect``, replay over stdio and ``replay --client``.
"""

from __future__ import annotations

import os

CHUNK = 256 * 1024
"""Most bytes one read returns."""


class ChunkReader:
    """Reads up to :data:`CHUNK` bytes at a time, returning each chunk at its own size.

    ``os.read(fd, CHUNK)`` allocates CHUNK bytes for every read and shrinks them to what
    arrived. With small frames that churns the C heap until it hands pages back to the
    kernel, and unmapping memory stalls every thread of the process (the pauses measured:
    docs/performance.md, "The store's and readers' choices"). Reading into one buffer and
    copying out what arrived avoids it.
    """

    __slots__ = ("_buf", "_fd", "_view")

    def __init__(self, fd: int, size: int = CHUNK) -> None:
        self._fd = fd
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)

    def read(self) -> bytes:
        """The next chunk (``b""`` at end of file); ``OSError`` as ``os.read`` raises it."""
        n = os.readv(self._fd, (self._buf,))
        return bytes(self._view[:n]) if n else b""


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``fd`` (blocking), raising ``OSError`` on failure."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
