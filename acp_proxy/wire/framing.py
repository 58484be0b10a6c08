"""Newline framing of a byte stream, on a copy of what is forwarded (sans-I/O).

The proxy forwards bytes as they arrive and feeds the same bytes here to cut them into
frames for the recorder. A frame is one line *including* its terminator (``\\n``; a
``\\r\\n`` ending is kept as is). Nothing is decoded, stripped or limited in length; the
final unterminated line is returned by :meth:`LineFramer.close`.
"""

from __future__ import annotations


class LineFramer:
    """Accumulates bytes and returns complete lines, terminator included.

    Memory held is the current partial line only. Only newly fed bytes are searched, so a
    huge line arriving in many chunks costs linear time.
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete line."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the lines it completed (possibly none)."""
        lines: list[bytes] = []
        if self._buf:
            pos = data.find(b"\n")
            if pos < 0:
                self._buf += data
                return lines
            self._buf += data[: pos + 1]
            lines.append(bytes(self._buf))
            self._buf.clear()
            data = data[pos + 1 :]
        last = data.rfind(b"\n")
        if last < 0:
            if data:
                self._buf += data
            return lines
        if last + 1 < len(data):
            self._buf += data[last + 1 :]
            data = data[: last + 1]
        if b"\r" not in data:
            # bytes.splitlines() only breaks on \n, \r and \r\n: safe without \r.
            lines.extend(data.splitlines(keepends=True))
        else:
            parts = data.split(b"\n")
            parts.pop()  # the empty remainder after the final newline
            lines.extend(p + b"\n" for p in parts)
        return lines

    def close(self) -> bytes | None:
        """End of stream: return the last line if it had no terminator."""
        if not self._buf:
            return None
        last = bytes(self._buf)
        self._buf.clear()
        return last
