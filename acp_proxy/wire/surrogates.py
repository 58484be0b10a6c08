"""Lone surrogates: valid JSON whose strings UTF-8 cannot hold, made into encodable text.

JSON text such as ``"\\ud800"`` is valid JSON (a JavaScript peer that cuts a string between
the halves of a surrogate pair and ``JSON.stringify``-s it sends exactly that), but the
Python string it decodes to holds a lone surrogate: it cannot be encoded as UTF-8, so
SQLite cannot bind it, orjson cannot dump it and a terminal cannot print it.

Everything derived from a frame for storage or display goes through here: a lone surrogate
becomes the six characters of its JSON escape (``\\ud800``), so the text is valid, readable
and still says what was sent. The raw bytes themselves are never changed.

NUL (``\\u0000``) is treated the same way: valid JSON and valid UTF-8, but PostgreSQL's
``text`` cannot hold it (a ``sessionId`` or method holding one failed every insert of the
frame's derived columns there), so derived text holds its escape too.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from acp_proxy.wire.jsonrpc import Message, classify, classify_value

_SURROGATE_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)")
_ESCAPE = re.compile(
    rb"\\(?:u([dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|u([dD][89a-fA-F][0-9a-fA-F]{2}|0000)|.)",
    re.DOTALL,
)
UNPARSED: Any = object()
"""The default of :func:`classify_encodable`'s ``value``: the frame is not parsed yet."""


def encodable(text: str) -> str:
    """``text`` when UTF-8 can hold it, else with each lone surrogate as its ``\\uXXXX`` escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def may_hold_lone_surrogates(raw: bytes) -> bool:
    """Cheap test: could parsing ``raw`` give a string with a lone surrogate (or NUL)?"""
    # (the search alone: its literal prefix is found faster than by `b"\\u" in raw` first,
    # a two-byte needle that Python 3.11 scans for byte by byte: 0.25 against 0.54 us a frame)
    return _SURROGATE_ESCAPE.search(raw) is not None


def escape_lone_surrogates(raw: bytes) -> bytes:
    """``raw`` with each lone ``\\uD8xx``..``\\uDFxx`` escape (and ``\\u0000``) turned into an
    escaped backslash.

    Surrogate *pairs* are kept; ``"\\ud800"`` becomes ``"\\\\ud800"``, which parses to the
    encodable text :func:`encodable` gives.
    """

    def fix(match: re.Match[bytes]) -> bytes:
        lone = match.group(2)
        return b"\\\\u" + lone if lone is not None else match.group(0)

    return _ESCAPE.sub(fix, raw)


def classify_encodable(raw: bytes, value: Any = UNPARSED) -> Message:
    """:func:`~acp_proxy.wire.jsonrpc.classify` whose strings are all encodable text.

    Ids keep their exact JSON text (an escape is plain ASCII); method, params, results and
    batch members hold :func:`encodable` text where the frame had a lone surrogate. ``value``:
    ``raw``'s JSON value when the caller has parsed it already (it is not parsed again).
    """
    msg = classify(raw) if value is UNPARSED else classify_value(value, raw)
    if not may_hold_lone_surrogates(raw):
        return msg
    fixed = escape_lone_surrogates(raw)
    if fixed == raw:
        return msg
    clean = classify(fixed)
    _keep_ids(clean, msg)
    return clean


def _keep_ids(clean: Message, original: Message) -> None:
    clean.id = None if original.id is None else encodable(original.id)
    if len(clean.items) == len(original.items):
        for item, orig in zip(clean.items, original.items, strict=True):
            _keep_ids(item, orig)


def json_bytes(value: Any, *, sort_keys: bool = False) -> bytes:
    """Compact JSON of ``value``; strings holding a lone surrogate (valid JSON, refused by
    orjson) are written with ``\\u`` escapes instead of failing."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, default=str).encode()
