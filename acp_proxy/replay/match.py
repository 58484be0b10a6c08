"""Matching a live message against recorded ones: ignore paths, sessionId mapping, diffs.

Pure functions and one small stateful class (:class:`SessionMap`); no I/O. A live request
matches a recorded one when the methods are equal and the params are equal after removing
the *ignore paths* (``params.cwd`` by default) and ``params.sessionId``; the sessionIds
must instead be *consistent* with the mapping between recorded and live sessionIds that the
replay has learnt so far (an unmapped pair is accepted and then bound). ``initialize`` is
matched on ``protocolVersion`` alone: client info and capabilities legitimately vary.

Ignore paths are dotted paths from the message root (``params.cwd``,
``params.prompt.*.text``); ``*`` matches any key or array index, and a path that does not
start with ``params``/``result``/``error`` is taken relative to ``params`` (``cwd`` means
``params.cwd``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp_proxy.replay.splice import json_bytes

DEFAULT_IGNORES: tuple[str, ...] = ("params.cwd",)
SESSION_PATH: tuple[str, ...] = ("params", "sessionId")
ROOTS = ("params", "result", "error", "method", "id", "jsonrpc")


def parse_path(text: str) -> tuple[str, ...]:
    """``"cwd"`` -> ``("params", "cwd")``; ``"params.prompt.*.text"`` -> its parts."""
    parts = tuple(p for p in text.strip().split(".") if p)
    if not parts:
        raise ValueError(f"empty ignore path: {text!r}")
    if parts[0] not in ROOTS:
        parts = ("params", *parts)
    return parts


def remove_paths(value: Any, paths: list[tuple[str, ...]]) -> Any:
    """A copy of ``value`` (a message dict) without the members at ``paths``."""
    out = value
    for path in paths:
        out = _remove(out, path)
    return out


def _remove(value: Any, path: tuple[str, ...]) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else ([head] if head in value else [])
        if not keys:
            return value
        copy = dict(value)
        for key in keys:
            if rest:
                copy[key] = _remove(copy[key], rest)
            else:
                del copy[key]
        return copy
    if isinstance(value, list):
        if head == "*":
            indexes = range(len(value))
        elif head.isdigit() and int(head) < len(value):
            indexes = range(int(head), int(head) + 1)
        else:
            return value
        copy_list = list(value)
        for i in reversed(indexes):
            if rest:
                copy_list[i] = _remove(copy_list[i], rest)
            else:
                copy_list[i] = _REMOVED
        return [v for v in copy_list if v is not _REMOVED]
    return value


_REMOVED = object()


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where a live message differs from a recorded one."""

    path: str
    recorded: Any
    live: Any
    missing: str | None = None  # "live" or "recorded" when a member exists on one side only

    def describe(self) -> str:
        if self.missing == "live":
            return f"{self.path}: recorded {short(self.recorded)}, missing in this request"
        if self.missing == "recorded":
            return f"{self.path}: {short(self.live)} was not in the recording"
        return f"{self.path}: recorded {short(self.recorded)}, got {short(self.live)}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.missing != "recorded":
            out["recorded"] = self.recorded
        if self.missing != "live":
            out["got"] = self.live
        return out


def short(value: Any, limit: int = 80) -> str:
    """Compact JSON of ``value``, cut to ``limit`` characters."""
    text = json_bytes(value).decode("utf-8", "surrogateescape")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _same_scalar(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def diff_values(recorded: Any, live: Any, path: str = "") -> list[Difference]:
    """Every leaf-level difference between two JSON values (type-sensitive: 1 != 1.0)."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        out: list[Difference] = []
        for key in recorded:
            sub = f"{path}.{key}" if path else key
            if key not in live:
                out.append(Difference(sub, recorded[key], None, "live"))
            else:
                out.extend(diff_values(recorded[key], live[key], sub))
        for key in live:
            if key not in recorded:
                sub = f"{path}.{key}" if path else key
                out.append(Difference(sub, None, live[key], "recorded"))
        return out
    if isinstance(recorded, list) and isinstance(live, list):
        out = []
        for i, (a, b) in enumerate(zip(recorded, live, strict=False)):
            out.extend(diff_values(a, b, f"{path}[{i}]"))
        for i in range(len(live), len(recorded)):
            out.append(Difference(f"{path}[{i}]", recorded[i], None, "live"))
        for i in range(len(recorded), len(live)):
            out.append(Difference(f"{path}[{i}]", None, live[i], "recorded"))
        return out
    if isinstance(recorded, (dict, list)) or isinstance(live, (dict, list)):
        return [Difference(path or "(value)", recorded, live)]
    if not _same_scalar(recorded, live):
        return [Difference(path or "(value)", recorded, live)]
    return []


@dataclass(slots=True)
class SessionMap:
    """The bijection between recorded sessionIds and live ones, learnt as the replay runs."""

    rec_to_live: dict[str, str] = field(default_factory=dict)
    live_to_rec: dict[str, str] = field(default_factory=dict)

    def consistent(self, recorded: str, live: str) -> bool:
        known = self.rec_to_live.get(recorded)
        if known is not None:
            return known == live
        back = self.live_to_rec.get(live)
        return back is None or back == recorded

    def bind(self, recorded: str, live: str) -> None:
        if recorded not in self.rec_to_live and live not in self.live_to_rec:
            self.rec_to_live[recorded] = live
            self.live_to_rec[live] = recorded

    def to_live(self, recorded: str) -> str:
        return self.rec_to_live.get(recorded, recorded)

    def to_recorded(self, live: str) -> str:
        return self.live_to_rec.get(live, live)


def session_of(message: Any) -> str | None:
    """``params.sessionId`` of a message dict, if it is a string."""
    if isinstance(message, dict):
        params = message.get("params")
        if isinstance(params, dict):
            sid = params.get("sessionId")
            if isinstance(sid, str):
                return sid
    return None


def _version_only(params: Any) -> Any:
    if isinstance(params, dict):
        return {k: v for k, v in params.items() if k == "protocolVersion"}
    return params


def compare_call(
    recorded: Any,
    live: Any,
    ignores: list[tuple[str, ...]],
    sessions: SessionMap,
) -> list[Difference]:
    """Differences between a recorded and a live request/notification (``[]``: they match).

    JSON-RPC ids are never compared; ``params.sessionId`` is checked against ``sessions``.
    """
    if not isinstance(recorded, dict) or not isinstance(live, dict):
        return [Difference("(message)", recorded, live)]
    diffs: list[Difference] = []
    if recorded.get("method") != live.get("method"):
        diffs.append(Difference("method", recorded.get("method"), live.get("method")))
        return diffs
    rec_sid, live_sid = session_of(recorded), session_of(live)
    if rec_sid is not None and live_sid is not None:
        if not sessions.consistent(rec_sid, live_sid):
            expected = sessions.rec_to_live.get(rec_sid)
            note = f" (live session {expected})" if expected else ""
            diffs.append(Difference("params.sessionId", rec_sid + note, live_sid))
    elif rec_sid != live_sid:
        diffs.append(
            Difference(
                "params.sessionId",
                rec_sid,
                live_sid,
                "live" if live_sid is None else "recorded",
            )
        )
    paths = [*ignores, SESSION_PATH]
    rec_params = remove_paths({"params": recorded.get("params")}, paths).get("params")
    live_params = remove_paths({"params": live.get("params")}, paths).get("params")
    if recorded.get("method") == "initialize":
        rec_params, live_params = _version_only(rec_params), _version_only(live_params)
    diffs.extend(diff_values(rec_params, live_params, "params"))
    return diffs
