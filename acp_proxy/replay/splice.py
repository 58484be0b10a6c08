"""Byte-level surgery on one JSON frame: find member values by path and replace only them.

The replay server must send recorded frames *exactly as recorded* except for the members it
has to rewrite (a JSON-RPC ``id``, a ``sessionId``). Re-serializing a parsed frame would
change spacing, key order, number spelling and escapes, so instead :func:`find_spans` scans
the raw bytes with a small regex tokenizer and returns the byte range of the values at the
requested paths, and :func:`splice` replaces those ranges. Everything else stays
byte-identical. Strings are single tokens, so a frame with a 20 MiB base64 string costs one
regex match, not a Python loop over its bytes.

Paths are tuples of object keys; ``"*"`` matches any key or array index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from acp_proxy.wire.surrogates import json_bytes

Path = tuple[str, ...]

_TOKEN = re.compile(
    rb'\s*(?:("[^"\\]*(?:\\.[^"\\]*)*")|([{}\[\],:])|([^\s{}\[\],:"]+))',
    re.DOTALL,
)


def json_value(text: bytes) -> Any:
    """Parse JSON text; what orjson refuses but JSON allows (a lone surrogate escape such as
    ``"\\ud800"``, integers past 64 bits) goes through the stdlib. Raises ``ValueError``."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)
        except RecursionError:
            raise ValueError("nesting too deep") from None


@dataclass(frozen=True, slots=True)
class Span:
    """The bytes ``raw[start:end]`` are the JSON text of the value at ``path``."""

    path: Path
    start: int
    end: int

    def text(self, raw: bytes) -> bytes:
        return raw[self.start : self.end]

    def value(self, raw: bytes) -> Any:
        """The parsed value (``None`` if it cannot be parsed)."""
        try:
            return json_value(raw[self.start : self.end])
        except ValueError:
            return None


class _Scanner:
    __slots__ = ("pos", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.pos = 0

    def next(self) -> tuple[int, int, bytes]:
        """(start, end, token); token is b'' at the end of input. Raises ValueError if stuck."""
        m = _TOKEN.match(self.raw, self.pos)
        if m is None:
            rest = self.raw[self.pos :]
            if not rest.strip():
                self.pos = len(self.raw)
                return (len(self.raw), len(self.raw), b"")
            raise ValueError("unexpected byte in JSON")
        self.pos = m.end()
        start = m.start(m.lastindex or 0)
        return (start, m.end(), m.group(m.lastindex or 0))


def _matches(prefix: Path, paths: Sequence[Path]) -> tuple[bool, bool]:
    """(some path equals prefix, some path extends prefix)."""
    exact = deeper = False
    for p in paths:
        if len(p) < len(prefix):
            continue
        if all(a == "*" or a == b for a, b in zip(p, prefix, strict=False)):
            if len(p) == len(prefix):
                exact = True
            else:
                deeper = True
    return exact, deeper


def find_spans(raw: bytes, paths: Iterable[Path]) -> list[Span]:
    """The spans of the values at ``paths`` in the JSON text ``raw`` (in document order).

    Returns ``[]`` for text that is not a well-formed JSON value; never raises.
    """
    wanted = [tuple(p) for p in paths]
    if not wanted:
        return []
    out: list[Span] = []
    scanner = _Scanner(raw)
    try:
        start, end, tok = scanner.next()
        _value(scanner, start, end, tok, (), wanted, out)
    except (ValueError, IndexError, RecursionError):
        return []
    return out


def _value(
    sc: _Scanner, start: int, end: int, tok: bytes, path: Path, wanted: list[Path], out: list[Span]
) -> int:
    """Consume the value starting with ``tok``; record spans; return the value's end offset."""
    exact, deeper = _matches(path, wanted) if wanted else (False, False)
    if tok == b"{" or tok == b"[":
        close = b"}" if tok == b"{" else b"]"
        value_end = _container(sc, tok, close, path, wanted, out) if deeper else _skip(sc, tok)
        if exact:
            out.append(Span(path, start, value_end))
        return value_end
    if not tok or tok in b"}],:":
        raise ValueError("expected a value")
    if exact:
        out.append(Span(path, start, end))
    return end


def _container(
    sc: _Scanner, open_tok: bytes, close: bytes, path: Path, wanted: list[Path], out: list[Span]
) -> int:
    index = 0
    start, end, tok = sc.next()
    if tok == close:
        return end
    while True:
        if open_tok == b"{":
            if not tok.startswith(b'"'):
                raise ValueError("expected a key")
            key = json_value(tok)
            _, _, colon = sc.next()
            if colon != b":":
                raise ValueError("expected ':'")
            start, end, tok = sc.next()
            _value(sc, start, end, tok, (*path, str(key)), wanted, out)
        else:
            _value(sc, start, end, tok, (*path, str(index)), wanted, out)
            index += 1
        _, end, sep = sc.next()
        if sep == close:
            return end
        if sep != b",":
            raise ValueError("expected ',' or a closing bracket")
        start, end, tok = sc.next()


def _skip(sc: _Scanner, open_tok: bytes) -> int:
    depth = 1
    while True:
        _, end, tok = sc.next()
        if not tok:
            raise ValueError("unterminated")
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return end


def splice(raw: bytes, replacements: Iterable[tuple[Span, bytes]]) -> bytes:
    """``raw`` with each span's bytes replaced; spans must not overlap."""
    parts: list[bytes] = []
    pos = 0
    for span, new in sorted(replacements, key=lambda r: r[0].start):
        if span.start < pos:
            continue  # overlapping (a parent already replaced): keep the first
        parts.append(raw[pos : span.start])
        parts.append(new)
        pos = span.end
    if not parts:
        return raw
    parts.append(raw[pos:])
    return b"".join(parts)


def insert_member(raw: bytes, object_span: Span, key: str, value_json: bytes) -> bytes:
    """Insert ``"key": value`` as the first member of the object at ``object_span``."""
    brace = raw.index(b"{", object_span.start)
    body = raw[brace + 1 : object_span.end - 1]
    member = json_bytes(key) + b":" + value_json
    if body.strip():
        member += b","
    return raw[: brace + 1] + member + raw[brace + 1 :]
