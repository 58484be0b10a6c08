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
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

PIECE_HEADER = struct.Struct("<dqqqB")
"""Before each piece of a run in the spool: its time, monotonic time, length, how many of
its bytes complete lines (what the queue item of that read would have held) and the length
of its stream's name, which follows (then the bytes)."""


class SpoolRef:
    """Where queued bytes live: which spool file, at what offset, how long.

    ``pieces`` 0: one piece of bytes (a whole frame). Otherwise a *run* of that many reads
    of one connection's streams, in the order they came, each stored after its
    :data:`PIECE_HEADER` and stream name, so one queue item stands for many small reads
    (the queue bounds its items, not only its bytes) and each read gets its own stream and
    timestamps back (:meth:`Spool.pieces`). ``length`` counts the streams' bytes,
    ``stored`` what the file holds (headers included).
    """

    __slots__ = ("length", "offset", "pieces", "spool", "stored")

    def __init__(
        self, spool: Spool, offset: int, length: int, pieces: int = 0, stored: int | None = None
    ) -> None:
        self.spool = spool
        self.offset = offset
        self.length = length
        self.pieces = pieces
        self.stored = length if stored is None else stored

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

    def append_piece(self, stream: str, ts: float, mono: int, data: bytes, done: int) -> SpoolRef:
        """Write one read of a stream as a run of one piece (see :class:`SpoolRef`)."""
        offset = self.size
        piece = _piece(stream, ts, mono, data, done)
        self._write(piece, offset)
        return SpoolRef(self, offset, len(data), 1, len(piece))

    def extend_run(
        self, ref: SpoolRef, stream: str, ts: float, mono: int, data: bytes, done: int
    ) -> bool:
        """Add one more read to the run ``ref`` if it ends the file (else False, nothing
        written); raises ``OSError`` (disk full...) with ``ref`` unchanged."""
        if ref.spool is not self or not ref.pieces or ref.offset + ref.stored != self.size:
            return False
        piece = _piece(stream, ts, mono, data, done)
        self._write(piece, self.size)
        ref.length += len(data)
        ref.pieces += 1
        ref.stored += len(piece)
        return True

    def _write(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(self._fd, view[written:], offset + written)
        finally:
            if written == len(view):
                self.size = offset + written

    def read(self, ref: SpoolRef) -> bytes:
        """The bytes ``ref`` points at (for a run: its pieces with their headers)."""
        size = ref.stored if ref.pieces else ref.length
        data = os.pread(self._fd, size, ref.offset)
        if len(data) == size:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(self._fd, size - got, ref.offset + got)
            if not more:
                raise OSError(f"spool file ended early ({got} of {size} bytes)")
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def pieces(self, ref: SpoolRef) -> Iterator[tuple[str, float, int, bytes, int]]:
        """The reads of the run ``ref``: ``(stream, ts, mono_ns, data, done)``, in order."""
        data = memoryview(self.read(ref))
        at = 0
        for _ in range(ref.pieces):
            ts, mono, length, done, name = PIECE_HEADER.unpack_from(data, at)
            at += PIECE_HEADER.size
            stream = bytes(data[at : at + name]).decode()
            at += name
            yield stream, ts, mono, bytes(data[at : at + length]), done
            at += length

    def close(self) -> None:
        """Nothing in the file is waiting any more: give its space back."""
        self._file.close()


def _piece(stream: str, ts: float, mono: int, data: bytes, done: int) -> bytes:
    name = stream.encode()
    return PIECE_HEADER.pack(ts, mono, len(data), done, len(name)) + name + data
