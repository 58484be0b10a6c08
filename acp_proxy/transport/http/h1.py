"""HTTP/1.1 responses read from bytes, with no I/O: what the upstream POST client parses.

:class:`ResponseReader` is fed the bytes of one connection as they arrive and returns the
response once it is whole: the status, the headers as they came (names and values, in order,
repeats kept), the body with its framing removed (``Content-Length``, ``chunked`` with its
extensions and trailers, or up to the end of the connection), and whether the connection
may carry another request. ``1xx`` interim responses are skipped; ``204`` and ``304`` have
no body. What breaks the rules raises :class:`H1Error`, which says what was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD = 256 * 1024
"""The longest status line and headers accepted (bytes)."""


class H1Error(Exception):
    """The upstream's bytes are not an HTTP/1.1 response (or it ended one half-way)."""


@dataclass
class Response:
    """One whole response."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    keep_alive: bool


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` (any case) in ``headers``, or None."""
    name = name.lower()
    return next((value for key, value in headers if key.lower() == name), None)


_HEX = b"0123456789abcdefABCDEF"
_FRAMING = frozenset({b"connection", b"transfer-encoding", b"content-length"})
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class ResponseReader:
    """Parses the one response to a request sent on a connection (see the module)."""

    def __init__(self) -> None:
        self._buf = b""  # what is kept between feeds: a head or chunk line not yet whole
        self._state = _HEAD
        self._status = 0
        self._headers: list[tuple[str, str]] = []
        self._keep_alive = True
        self._left = 0
        self._body: list[bytes] = []
        self.extra = False
        """Bytes came after the response: the connection cannot be reused."""

    def feed(self, data: bytes) -> Response | None:
        """Take the next bytes; the response once it is whole."""
        if self._state == _DONE:
            self.extra = self.extra or bool(data)
            return None
        buf = self._buf + data if self._buf else data
        size = len(buf)
        pos = 0
        while True:
            state = self._state
            if state in (_LENGTH, _CHUNK_DATA):
                take = min(self._left, size - pos)
                if take:
                    self._body.append(buf[pos : pos + take])
                    pos += take
                    self._left -= take
                if self._left:
                    break
                self._state = _DONE if state == _LENGTH else _CHUNK_END
            elif state == _HEAD:
                end = _ended(buf, pos, b"\r\n\r\n", "a response head")
                if end < 0:
                    break
                self._head(buf[pos:end])
                pos = end + 4
            elif state == _CHUNK_SIZE:
                end = _ended(buf, pos, b"\r\n", "a chunk size line")
                if end < 0:
                    break
                digits = buf[pos:end].split(b";", 1)[0].strip()
                if not digits or digits.lstrip(_HEX):
                    raise H1Error(f"a chunk size that is not hexadecimal: {digits[:40]!r}")
                self._left = int(digits, 16)
                pos = end + 2
                self._state = _CHUNK_DATA if self._left else _TRAILERS
            elif state == _CHUNK_END:
                if size - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise H1Error("a chunk not followed by CRLF")
                pos += 2
                self._state = _CHUNK_SIZE
            elif state == _TRAILERS:
                end = _ended(buf, pos, b"\r\n", "a trailer line")
                if end < 0:
                    break
                self._state = _DONE if end == pos else _TRAILERS
                pos = end + 2
            elif state == _UNTIL_CLOSE:
                if pos < size:
                    self._body.append(buf[pos:])
                    pos = size
                break
            else:  # _DONE
                break
        if self._state == _DONE:
            self.extra = pos < size
            self._buf = b""
            return self._response()
        self._buf = buf[pos:] if pos < size else b""
        return None

    def eof(self) -> Response:
        """The connection ended: the response if that is how its body ends, else H1Error."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
            return self._response()
        if self._state == _HEAD and not self._buf:
            raise H1Error("the connection was closed before a response")
        raise H1Error("the connection was closed in the middle of a response")

    def _response(self) -> Response:
        return Response(self._status, self._headers, b"".join(self._body), self._keep_alive)

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code = rest[:3]
        if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
            raise H1Error(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        status = int(code)
        headers: list[tuple[str, str]] = []
        framing: dict[bytes, list[bytes]] = {}  # the headers that decide where the body ends
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise H1Error(f"a malformed header line: {line[:80]!r}")
            value = value.strip(b" \t")
            headers.append((name.decode("latin-1"), value.decode("utf-8", "surrogateescape")))
            low = name.lower()
            if low in _FRAMING:
                framing.setdefault(low, []).append(value)
        if 100 <= status < 200 and status != 101:
            return  # interim (100 Continue, 103 Early Hints): the response follows
        self._status, self._headers = status, headers
        connection = b",".join(framing.get(b"connection", ())).lower()
        self._keep_alive = (
            b"close" not in connection if version == b"HTTP/1.1" else b"keep-alive" in connection
        )
        codings = framing.get(b"transfer-encoding")
        coding = b",".join(codings).decode("latin-1") if codings else None
        lengths = framing.get(b"content-length")
        length = b",".join(lengths).decode("latin-1") if lengths else None
        if status in (204, 304):
            self._state = _DONE
        elif coding is not None:
            if coding.lower().rsplit(",", 1)[-1].strip() == "chunked":
                self._state = _CHUNK_SIZE
            else:
                self._state, self._keep_alive = _UNTIL_CLOSE, False
            if length is not None:
                self._keep_alive = False  # both framings given: never reuse (RFC 9112 6.3)
        elif length is not None:
            values = {v.strip() for v in length.split(",")}
            size = values.pop()
            if values or not (size.isascii() and size.isdigit()):
                raise H1Error(f"a bad Content-Length: {length[:40]!r}")
            self._left = int(size)
            self._state = _LENGTH if self._left else _DONE
        else:
            self._state, self._keep_alive = _UNTIL_CLOSE, False


def _ended(buf: bytes, pos: int, end: bytes, what: str) -> int:
    """Where ``end`` is in ``buf`` from ``pos``; -1 while it has not come (past
    :data:`MAX_HEAD` bytes without it: H1Error)."""
    at = buf.find(end, pos)
    if at < 0 and len(buf) - pos > MAX_HEAD:
        raise H1Error(f"{what} over {MAX_HEAD} bytes")
    return at


def request_head(
    method: str, target: str, host: str, headers: list[tuple[str, str]], length: int
) -> bytes:
    """The bytes of a request's head with a ``Content-Length`` body."""
    lines = [f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"]
    lines.extend(f"{name}: {value}\r\n" for name, value in headers)
    lines.append(f"Content-Length: {length}\r\n\r\n")
    return "".join(lines).encode("utf-8", "surrogateescape")
