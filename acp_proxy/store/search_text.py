"""What a search looks for, and what it finds in a frame: the text side of the index.

:func:`query_phrases` turns a query into the phrases both engines match (no query syntax,
within documented limits); :func:`document_of` is the text a person would search one frame
for (message and prompt text, tool calls, error responses, other values by their strings);
:func:`snippet` cuts the few words around a hit, the same for both engines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from acp_proxy.wire.frame import Frame
from acp_proxy.wire.jsonrpc import parse_json

TEXT_CAP = 64 * 1024
"""Characters of text kept per document (the rest of a huge frame or message is not indexed)."""

MAX_QUERY_CHARS = 1000
"""The longest query text searched (characters); a longer one is refused (:class:`QueryError`)."""

MAX_QUERY_WORDS = 32
"""The most words a query may hold (repeats counted once), so one search's cost is bounded."""


class QueryError(ValueError):
    """A query that cannot be searched: no words in it, or beyond the documented limits."""


_WORD_BREAK = re.compile(r"[\W_]+")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_STORABLE = {0: " ", **{code: "\ufffd" for code in range(0xD800, 0xE000)}}


def storable(text: str) -> str:
    """``text`` as both engines can store it: a lone surrogate (from a ``\\ud800`` escape)
    becomes U+FFFD and NUL a space (PostgreSQL's text holds neither)."""
    return text.translate(_STORABLE) if _UNSTORABLE.search(text) else text


def query_phrases(text: str) -> list[str]:
    """The phrases a query means: each whitespace-separated piece of it, cut into words at
    every run of non-alphanumeric characters (as FTS5's ``unicode61`` does) and lower-cased,
    repeats dropped. Nothing in it is query syntax.

    Raises :class:`QueryError` for a query with no words, longer than
    :data:`MAX_QUERY_CHARS` or with more than :data:`MAX_QUERY_WORDS` words.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(text):,} characters long: at most {MAX_QUERY_CHARS:,} are searched"
        )
    phrases: list[str] = []
    for piece in text.split():
        phrase = _WORD_BREAK.sub(" ", piece).strip().lower()
        if phrase and phrase not in phrases:
            phrases.append(phrase)
    if not phrases:
        raise QueryError("the query has no words to search for (only spaces or punctuation)")
    words = sum(len(phrase.split()) for phrase in phrases)
    if words > MAX_QUERY_WORDS:
        raise QueryError(f"the query has {words} words: at most {MAX_QUERY_WORDS} are searched")
    return phrases


_SKIP_KEYS = frozenset(
    {
        "jsonrpc",
        "type",
        "sessionUpdate",
        "sessionId",
        "messageId",
        "toolCallId",
        "terminalId",
        "planId",
        "compactionId",
    }
)
_TOOL_VARIANTS = frozenset(
    {
        "tool_call",
        "tool_call_update",
        "tool_call_content_chunk",
        "terminal_update",
        "terminal_output_chunk",
    }
)
_JOINED_CHUNKS = frozenset({"agent_message_chunk", "user_message_chunk", "agent_thought_chunk"})


def _strings(value: Any, out: list[str], budget: list[int]) -> None:
    if budget[0] <= 0:
        return
    if isinstance(value, str):
        out.append(value)
        budget[0] -= len(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _SKIP_KEYS:
                _strings(item, out, budget)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out, budget)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(str(value))


def strings_of(value: Any) -> str:
    """Every string (and number) in a JSON value, ids and type tags left out, space-joined."""
    out: list[str] = []
    _strings(value, out, [TEXT_CAP])
    return " ".join(out)[:TEXT_CAP]


def document_of(frame: Frame) -> tuple[str, str]:
    """(field, text) of one frame: what a person would search it for (at most
    :data:`TEXT_CAP` characters, :func:`storable`)."""
    field, text = _document_of(frame)
    return field, storable(text[:TEXT_CAP])


def _document_of(frame: Frame) -> tuple[str, str]:
    if frame.binary:
        return "raw", frame.raw[:4096].decode("utf-8", "replace")
    value, problem = parse_json(frame.raw)
    if problem is not None or not isinstance(value, dict):
        return "raw", frame.raw[:4096].decode("utf-8", "replace")
    error = value.get("error")
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        return "error", f"error {code} {message if isinstance(message, str) else ''} " + (
            strings_of(error.get("data"))
        )
    params = value.get("params")
    if frame.method == "session/update" and isinstance(params, dict):
        update = params.get("update")
        variant = frame.update_kind or ""
        if variant in _JOINED_CHUNKS and isinstance(update, dict):
            content = update.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            return "message", text if isinstance(text, str) else strings_of(content)
        if variant in _TOOL_VARIANTS:
            return "tool", strings_of(update)
        return "update", strings_of(update)
    if frame.method == "session/prompt" and frame.kind == "request" and isinstance(params, dict):
        return "prompt", strings_of(params.get("prompt"))
    if "result" in value:
        return "result", strings_of(value.get("result"))
    return frame.kind or "frame", strings_of(params)


_SNIPPET_TOKENS = 16


def snippet(text: str, phrases: list[list[str]], size: int = _SNIPPET_TOKENS) -> str:
    """FTS5's ``snippet(..., '[', ']', '…', 16)`` for a hit of either engine: ``size`` tokens
    centred on the first match of any of the (lower-cased) ``phrases``, each match in
    brackets, cuts marked ``…``.

    Linear in the document's words (FTS5's own snippet is not: docs/performance.md, "The
    store's and readers' choices"): each phrase is looked for only where its first word is,
    up to its first match, then matches only inside the window shown.
    """
    spans = [m.span() for m in re.finditer(r"[^\W_]+", text)]
    if not spans:
        return text[:200]
    words = [text[a:b].lower() for a, b in spans]
    where: dict[str, list[int]] = {}
    for i, word in enumerate(words):
        where.setdefault(word, []).append(i)

    def starts(phrase: list[str]) -> Iterator[int]:
        n = len(phrase)
        return (i for i in where.get(phrase[0], ()) if words[i : i + n] == phrase)

    first = min((next(starts(p), len(words)) for p in phrases if p), default=0)
    if first == len(words):
        first = 0
    start = max(0, min(first - (size - 1) // 2, len(spans) - size))
    end = min(len(spans), start + size)
    ends: dict[int, int] = {}  # first token of a match in the window -> its last token
    for phrase in phrases:
        n = len(phrase)
        for i in range(start, end):
            if n and words[i : i + n] == phrase:
                ends[i] = max(ends.get(i, i), i + n - 1)
    out: list[str] = ["…" if start else ""]
    pos = spans[start][0] if start else 0
    close = -1
    for i in range(start, end):
        a, b = spans[i]
        out.append(text[pos:a])
        if i in ends and i > close:
            out.append("[")
            close = min(ends[i], end - 1)
        out.append(text[a:b])
        if i == close:
            out.append("]")
        pos = b
    out.append(text[pos:] if end == len(spans) else "…")
    return "".join(out)
