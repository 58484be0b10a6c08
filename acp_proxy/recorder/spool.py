"""The recorder queue's overflow on disk: raw bytes appended once, read back once, in order.

When the recorder falls behind (a flood of frames, a slow disk, another process holding the
database lock), the bytes waiting for it would otherwise have to stay in memory or be
dropped. Past the in-memory budget they are appended to a spool file instead, and the queue
keeps only ``(offset, length)`` references to them; the indexer reads them back when it gets
there. The file is anonymous (``O_TMPFILE`` where the platform has it, otherwise unlinked at
once), lives beside the recording, so it uses the disk the user chose for recordings, and
is closed (its space given back) whenever nothing in it is still waiting. Nothing here
decides *what* to spool: that is the recorder's budget logic.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class SpoolRef:
    """Where one queued piece of bytes lives: which spool file, at what offset, how long."""

    __slots__ = ("length", "offset", "spool")

    def __init__(self, spool: Spool, offset: int, length: int) -> None:
        self.spool = spool
        self.offset = offset
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The bytes this refers to (raises ``OSError`` if the file cannot give them)."""
        return self.spool.read(self)


class Spool:
    """An append-only anonymous file the recorder's queue overflows into.

    Not thread-safe by itself: the recorder appends under its queue lock, reads only
    references it has taken off the queue, and closes a spool only once no reference to it
    is left, then starts a new one at the next overflow.
    """

    def __init__(self, directory: Path) -> None:
        # Held open for the spool's whole life (closing it frees the space): no `with`.
        self._file = tempfile.TemporaryFile(dir=directory, prefix=".acp-proxy-spool-")  # noqa: SIM115
        self._fd = self._file.fileno()
        self.size = 0
        """Bytes appended so far."""

    def append(self, data: bytes) -> SpoolRef:
        """Write ``data`` at the end; raises ``OSError`` (disk full...) with nothing counted."""
        offset = self.size
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], offset + written)
        self.size = offset + written
        return SpoolRef(self, offset, written)

    def read(self, ref: SpoolRef) -> bytes:
        """The bytes ``ref`` points at."""
        data = os.pread(self._fd, ref.length, ref.offset)
        if len(data) == ref.length:
            return data
        parts = [data]
        got = len(data)
        while got < ref.length:
            more = os.pread(self._fd, ref.length - got, ref.offset + got)
            if not more:
                raise OSError(f"spool file ended early ({got} of {ref.length} bytes)")
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def close(self) -> None:
        """Nothing in the file is waiting any more: give its space back."""
        self._file.close()
