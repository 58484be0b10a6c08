"""JSON-RPC 2.0 classification of one raw frame (sans-I/O, no ACP knowledge).

:func:`classify` never raises: anything that is not a well-formed JSON-RPC message comes
back as kind ``invalid`` with a reason, and with its ``id`` when that is readable (a string
or a number), so an error answer can carry it: JSON-RPC asks for ``"id": null`` only when
the id cannot be read. Ids are kept as their *exact JSON text* (``1``, ``1.0`` and ``"1"``
are different ids), recovered from the raw bytes when a round trip through the parser could
change their spelling.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

Kind = Literal["request", "response", "notification", "batch", "invalid"]


@dataclass(slots=True)
class Message:
    """A classified frame (or one member of a batch).

    ``payload`` is the parsed JSON value (``None`` when the frame is not JSON); ``problems``
    lists JSON-RPC rule breaks noticed while classifying (missing ``jsonrpc``, a response
    with both ``result`` and ``error``...). ``items`` holds the members of a batch.
    """

    kind: Kind
    id: str | None = None
    method: str | None = None
    payload: Any = None
    reason: str | None = None
    problems: list[str] = field(default_factory=list)
    items: list[Message] = field(default_factory=list)

    @property
    def params(self) -> Any:
        return self.payload.get("params") if isinstance(self.payload, dict) else None

    @property
    def result(self) -> Any:
        return self.payload.get("result") if isinstance(self.payload, dict) else None

    @property
    def error(self) -> Any:
        return self.payload.get("error") if isinstance(self.payload, dict) else None

    @property
    def is_error_response(self) -> bool:
        return (
            self.kind == "response" and isinstance(self.payload, dict) and ("error" in self.payload)
        )


_BLANK = re.compile(rb"\s*\Z")
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.S)


def elide_long_strings(raw: bytes, limit: int = 4096) -> bytes:
    """``raw`` with every JSON string longer than ``limit`` bytes replaced by ``""``.

    For indexing a huge frame (a base64 image, a whole file): the envelope members an index
    needs (method, id, sessionId, update variant, entity ids) are short strings, while
    parsing the frame whole would materialise its long strings (orjson takes twice the
    frame). One linear scan, no copy of the long strings; ``raw`` itself when none is long.
    """
    out: list[bytes | memoryview] = []
    last = 0
    view = memoryview(raw)
    for match in _STRING.finditer(raw):
        start, end = match.span()
        if end - start > limit:
            out += (view[last:start], b'""')
            last = end
    if not out:
        return raw
    out.append(view[last:])
    return b"".join(out)


def parse_json(raw: bytes) -> tuple[Any, str | None]:
    """Parse ``raw``; return ``(value, None)`` or ``(None, reason)``. Never raises."""
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "not valid UTF-8"
        # orjson refuses integers beyond 64 bits, which JSON allows: try the stdlib.
        try:
            return json.loads(raw), None
        except (ValueError, RecursionError):
            return None, f"not JSON: {exc}"
    except RecursionError:
        return None, "not JSON: nesting too deep"


def classify(raw: bytes) -> Message:
    """Classify one frame. ``raw`` may include its line terminator."""
    if _BLANK.match(raw):  # (a regex: raw.strip() would copy a huge frame)
        return Message("invalid", reason="blank line")
    value, reason = parse_json(raw)
    if reason is not None:
        return Message("invalid", reason=reason)
    return classify_value(value, raw)


def classify_value(value: Any, raw: bytes) -> Message:
    """:func:`classify` of a frame already parsed: ``value`` is ``raw``'s JSON value (a
    caller that parsed the frame for a look of its own need not parse it again)."""
    if isinstance(value, list):
        if not value:
            return Message("invalid", payload=value, reason="empty batch")
        items = [_classify_value(item, None) for item in value]
        return Message("batch", payload=value, items=items)
    return _classify_value(value, raw)


def _classify_value(value: Any, raw: bytes | None) -> Message:
    if not isinstance(value, dict):
        return Message("invalid", payload=value, reason="not a JSON object")
    problems: list[str] = []
    if value.get("jsonrpc") != "2.0":
        problems.append('missing or wrong "jsonrpc": "2.0"')
    method = value.get("method")
    has_id = "id" in value
    id_text = id_json_text(value["id"], raw) if has_id else None
    if method is not None:
        if not isinstance(method, str):
            return Message(
                "invalid",
                id=_readable(value, id_text),
                payload=value,
                reason="method is not a string",
            )
        if "result" in value or "error" in value:
            problems.append("a call carries result/error")
        kind: Kind = "request" if has_id else "notification"
        return Message(kind, id=id_text, method=method, payload=value, problems=problems)
    if "result" in value or "error" in value:
        if not has_id:
            return Message("invalid", payload=value, reason="response without id")
        if "result" in value and "error" in value:
            problems.append("response has both result and error")
        return Message("response", id=id_text, payload=value, problems=problems)
    return Message(
        "invalid",
        id=_readable(value, id_text),
        payload=value,
        reason="neither a call nor a response",
    )


def _readable(value: dict[str, Any], id_text: str | None) -> str | None:
    """``id_text`` when the message's id is a string or a number (a usable id), else None."""
    rpc_id = value.get("id")
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, (str, int, float)):
        return None
    return id_text


_SIMPLE_STR = re.compile(r'[^"\\\x00-\x1f]*\Z')


def id_json_text(value: Any, raw: bytes | None) -> str:
    """The exact JSON text of an ``id`` member.

    Integers and plain strings re-serialize exactly. Anything else (floats, escaped
    strings, ``-0``) is looked up in ``raw`` when it is available.
    """
    if isinstance(value, bool) or value is None:
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, int):
        if value == 0 and raw is not None and _raw_id(raw) == "-0":
            return "-0"
        return str(value)
    if isinstance(value, str) and _SIMPLE_STR.match(value):
        text = _dumps(value)
        if raw is None or text.encode() in raw:
            return text
    if raw is not None:
        exact = _raw_id(raw)
        if exact is not None:
            return exact
    return _dumps(value) if not isinstance(value, float) else json.dumps(value)


def _dumps(value: Any) -> str:
    """JSON text of a parsed value; a string with a lone surrogate gets its ``\\u`` escape."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson refuses lone surrogates; the stdlib escapes them
        return json.dumps(value)


_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\r\n]*")


def _raw_id(raw: bytes) -> str | None:
    """Scan the top-level object in ``raw`` and return the source text of its ``id``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    idx = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if idx >= len(text) or text[idx] != "{":
        return None
    idx += 1
    found: str | None = None
    try:
        while True:
            idx = _WS.match(text, idx).end()  # type: ignore[union-attr]
            if text[idx] == "}":
                return found
            if text[idx] != '"':
                return found
            key, idx = json.decoder.scanstring(text, idx + 1)  # type: ignore[attr-defined]
            idx = _WS.match(text, idx).end()  # type: ignore[union-attr]
            if text[idx] != ":":
                return found
            idx = _WS.match(text, idx + 1).end()  # type: ignore[union-attr]
            _, end = _DECODER.raw_decode(text, idx)
            if key == "id":
                found = text[idx:end]  # the last duplicate wins, as in parsers
            idx = _WS.match(text, end).end()  # type: ignore[union-attr]
            if text[idx] == ",":
                idx += 1
    except (IndexError, ValueError):
        return found
