"""JSON messages by path: dotted ignore paths and leaf-level differences (pure).

Ignore paths are dotted paths from the message root (``params.cwd``,
``params.prompt.*.text``); ``*`` matches any key or array index, and a path that does not
start with ``params``/``result``/``error`` is taken relative to ``params`` (``cwd`` means
``params.cwd``). :func:`diff_values` lists every leaf where two JSON values differ. Replay's
matcher and ``acp-proxy diff`` both use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

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
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
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
