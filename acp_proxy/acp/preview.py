"""A one-line human preview of a frame, for frame lists (sans-I/O).

:func:`frame_preview` turns a frame's first bytes and its index columns into what a person
reads first: ``session/update · agent_message_chunk "Echo: …"``, ``session/prompt "Can
you…"``, ``error -32603 Internal error``, ``result stopReason=end_turn``. It works on a cut
frame too (lists only read a frame's head): a JSON string cut short is read up to the cut.
Chunks (``*_message_chunk``, ``agent_thought_chunk``) also give their text and message id,
so a list can fold a run of chunks of one message into one row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["CHUNK_UPDATES", "Preview", "display_name", "frame_preview"]

CHUNK_UPDATES = frozenset({"agent_message_chunk", "user_message_chunk", "agent_thought_chunk"})
"""Update variants that stream one message in pieces."""

TEXT_MAX = 120
"""Characters of quoted text a preview carries."""


@dataclass(frozen=True, slots=True)
class Preview:
    """What a list row shows of a frame."""

    label: str
    """The whole one-line preview (method or outcome, then quoted text when there is any)."""
    summary: str = ""
    """The label without its leading method and update variant (what a list's method column
    already shows): ``"Echo: …"``, ``agent demo 1.0 · protocol 2``, ``result stopReason=…``."""
    text: str | None = None
    """The frame's main text (prompt, chunk, message), unquoted; ``None`` when it has none."""
    message_id: str | None = None
    """For chunks: the message they belong to (``messageId``), when the frame names one."""
    error: bool = False
    """Whether the frame is an error response."""

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "summary": self.summary,
            "text": self.text,
            "messageId": self.message_id,
            "error": self.error,
        }


def _quote(text: str) -> str:
    one_line = " ".join(text.split())
    if len(one_line) > TEXT_MAX:
        one_line = one_line[: TEXT_MAX - 1] + "\u2026"
    return f'"{one_line}"'


def display_name(info: Any) -> str | None:
    """``title`` (else ``name``) and ``version`` of a ``clientInfo``/``agentInfo`` value."""
    if isinstance(info, dict):
        name = info.get("title") or info.get("name")
        if isinstance(name, str) and name:
            version = info.get("version")
            return f"{name} {version}" if isinstance(version, str) and version else name
    return None


def _hello(who: str, info: Any, version: Any) -> str | None:
    """``agent NAME VERSION · protocol N`` of an ``initialize`` request or result."""
    parts = [f"{who} {name}" for name in [display_name(info)] if name]
    if isinstance(version, int) and not isinstance(version, bool):
        parts.append(f"protocol {version}")
    return " \u00b7 ".join(parts) or None


def _options(params: dict[str, Any]) -> str | None:
    """The options of a permission request, by name: ``Allow once / Reject``."""
    options = params.get("options")
    if not isinstance(options, list):
        return None
    names = [
        str(o.get("name") or o.get("optionId"))
        for o in options
        if isinstance(o, dict) and (o.get("name") or o.get("optionId"))
    ]
    return " / ".join(names) or None


_STRING_RE_CACHE: dict[str, re.Pattern[bytes]] = {}


def _cut_string(head: bytes, key: str) -> str | None:
    """The value of the first string member ``key`` in ``head``, read up to a cut."""
    pattern = _STRING_RE_CACHE.get(key)
    if pattern is None:
        pattern = re.compile(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*"')
        _STRING_RE_CACHE[key] = pattern
    m = pattern.search(head)
    if m is None:
        return None
    out = bytearray()
    i = m.end()
    while i < len(head):
        c = head[i]
        if c == 0x22:  # closing quote
            break
        if c == 0x5C:  # backslash: keep escapes whole, drop one cut in the middle
            end = i + (6 if head[i + 1 : i + 2] == b"u" else 2)
            if end > len(head):
                break
            out += head[i:end]
            i = end
            continue
        out.append(c)
        i += 1
    try:
        value = orjson.loads(b'"' + bytes(out) + b'"')
    except orjson.JSONDecodeError:
        return bytes(out).decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _content_text(value: Any) -> str | None:
    """Text of a content block or a list of them (the first text found)."""
    if isinstance(value, list):
        texts = [t for t in (_content_text(v) for v in value) if t]
        return " ".join(texts) if texts else None
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        for key in ("content", "resource"):
            if key in value:
                return _content_text(value[key])
    return None


def _params_text(method: str | None, params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    if method == "session/prompt":
        return _content_text(params.get("prompt"))
    if method == "session/request_permission":
        call = params.get("toolCall")
        if isinstance(call, dict) and isinstance(call.get("title"), str):
            return str(call["title"])
    for key in ("path", "command", "cwd", "title", "message"):
        if isinstance(params.get(key), str):
            return str(params[key])
    return None


def _update_label(update: dict[str, Any], variant: str) -> tuple[str, str | None]:
    """(extra words after the variant, main text) of one session update."""
    if variant in CHUNK_UPDATES or variant.endswith("_chunk"):
        return "", _content_text(update.get("content"))
    words: list[str] = []
    text: str | None = None
    if variant == "session_info_update" and isinstance(update.get("title"), str):
        return f"title: {_quote(str(update['title']))}", None
    commands = update.get("availableCommands")
    if isinstance(commands, list):
        names = [str(c["name"]) for c in commands if isinstance(c, dict) and c.get("name")]
        shown = ", ".join(f"/{n}" for n in names[:6]) + (", \u2026" if len(names) > 6 else "")
        count = f"{len(commands)} command{'' if len(commands) == 1 else 's'}"
        return count + (f": {shown}" if shown else ""), None
    if isinstance(update.get("title"), str):
        text = str(update["title"])
    if isinstance(update.get("status"), str):
        words.append(str(update["status"]))
    if isinstance(update.get("state"), str):
        words.append(str(update["state"]))
    if isinstance(update.get("stopReason"), str):
        words.append(str(update["stopReason"]))
    plan = update.get("plan") if isinstance(update.get("plan"), dict) else update
    entries = plan.get("entries") if isinstance(plan, dict) else None
    if isinstance(entries, list):
        words.append(f"{len(entries)} entries")
    if "used" in update and "size" in update:
        words.append(f"{update.get('used')}/{update.get('size')} tokens")
    if text is None and isinstance(update.get("message"), str):
        text = str(update["message"])
    if text is None and update.get("content") is not None:
        text = _content_text(update.get("content"))
    if not words and text is None:  # an unknown variant: its first members
        rest = {k: v for k, v in update.items() if k not in ("sessionUpdate", "_meta")}
        return _members(rest, 3), None
    return " ".join(words), text


def _result_label(result: Any, method: str | None) -> str:
    if method == "initialize" and isinstance(result, dict):
        info = result.get("agentInfo", result.get("info"))  # v1 name, v2 name
        hello = _hello("agent", info, result.get("protocolVersion"))
        if hello is not None:
            return f"result {hello}"
    if not isinstance(result, dict):
        return "result" if result is None else f"result {orjson.dumps(result).decode()[:60]}"
    if not result:
        return "result {}"
    return "result " + _members(result, 4)


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _members(obj: dict[str, Any], most: int) -> str:
    """``key=value`` for scalar members, ``key={...}`` one level down, ``key`` otherwise."""
    parts: list[str] = []
    for key, value in obj.items():
        shown = _scalar(value)
        if shown is not None:
            parts.append(f"{key}={shown}")
        elif isinstance(value, dict) and value and most > 1:
            parts.append(f"{key}={{{_members(value, 2)}}}")
        elif isinstance(value, list):
            parts.append(f"{key}[{len(value)}]")
        else:
            parts.append(key)
        if len(parts) == most:
            break
    return " ".join(parts)


def _join(label: str, text: str | None) -> str:
    return f"{label} {_quote(text)}" if text else label


def _preview(what: str, summary: str, **rest: Any) -> Preview:
    """A preview whose label is ``what`` (method, variant) then ``summary``."""
    label = f"{what} {summary}" if what and summary else what or summary
    return Preview(label, summary=summary, **rest)


def frame_preview(
    head: bytes,
    size: int,
    *,
    kind: str | None,
    method: str | None,
    update_kind: str | None,
) -> Preview:
    """The preview of a frame from its first bytes (``head``; all of it when ``size`` fits)."""
    if kind == "invalid" or kind is None:
        text = head.decode("utf-8", "replace").strip()
        return _preview("invalid", _quote(text) if text else "(empty)")
    if kind == "batch":
        return _preview("batch", f"({size} bytes)")
    message: Any = None
    if len(head) >= size:
        try:
            message = orjson.loads(head)
        except orjson.JSONDecodeError:
            message = None
    if not isinstance(message, dict):
        return _cut_preview(head, kind=kind, method=method, update_kind=update_kind)
    if kind == "response":
        error = message.get("error")
        if isinstance(error, dict) or "result" not in message:
            code = error.get("code") if isinstance(error, dict) else None
            msg = error.get("message") if isinstance(error, dict) else None
            label = " ".join(str(p) for p in ("error", code, msg) if p is not None)
            return _preview("", label, text=msg if isinstance(msg, str) else None, error=True)
        return _preview("", _result_label(message.get("result"), method))
    params = message.get("params")
    if method == "session/update" and isinstance(params, dict):
        update = params.get("update")
        if isinstance(update, dict):
            variant = update_kind or str(update.get("sessionUpdate") or "?")
            words, chunk = _update_label(update, variant)
            mid = update.get("messageId")
            return _preview(
                f"{method} \u00b7 {variant}",
                _join(words, chunk).strip(),
                text=chunk,
                message_id=mid if isinstance(mid, str) else None,
            )
    return _request_preview(method or kind, method, params)


def _request_preview(what: str, method: str | None, params: Any) -> Preview:
    """A request or notification other than ``session/update``."""
    said = _params_text(method, params)
    if not isinstance(params, dict):
        return _preview(what, _join("", said).strip(), text=said)
    if method == "initialize":
        info = params.get("clientInfo", params.get("info"))
        hello = _hello("client", info, params.get("protocolVersion"))
        return _preview(what, hello or "", text=said)
    if method == "session/request_permission":
        options = _options(params)
        summary = _join("", said).strip() + (f" \u00b7 {options}" if options else "")
        return _preview(what, summary.strip(" \u00b7"), text=said)
    if said is None and params:
        return _preview(what, _members(params, 3))
    if said is not None and params.get("cwd") == said:  # session/new, load, resume
        sid = params.get("sessionId")
        named = f"sessionId={sid} " if isinstance(sid, str) else ""
        return _preview(what, f"{named}cwd {_quote(said)}", text=said)
    return _preview(what, _join("", said).strip(), text=said)


def _cut_preview(head: bytes, *, kind: str, method: str | None, update_kind: str | None) -> Preview:
    """A preview of a frame read only in part (or not JSON): index columns and cut strings."""
    if kind == "response":
        if b'"error"' in head and b'"result"' not in head:
            msg = _cut_string(head, "message")
            return _preview("", _join("error", msg), text=msg, error=True)
        return _preview("", "result \u2026")
    label = method or kind
    if update_kind:
        label = f"{label} \u00b7 {update_kind}"
    text = _cut_string(head, "text")
    mid = _cut_string(head, "messageId") if update_kind else None
    return _preview(label, _join("", text).strip(), text=text, message_id=mid)
