"""Redaction of secrets in the *exported copy* of a recording (sans-I/O).

Nothing here touches forwarded bytes or the recording itself: the exporter passes each
frame's raw bytes through :func:`redact_frame` and writes whatever comes back. A frame
without secrets comes back as the very same bytes; a JSON frame with secrets is parsed,
cleaned and re-serialized (compact, key order kept, original line terminator kept); any
other frame (not JSON, invalid UTF-8, WebSocket binary) gets pattern-based redaction of its
bytes. Every secret is replaced by :data:`REDACTED`.

What counts as a secret (the export format documentation lists the same rules):

- values of keys that name a secret anywhere (``token``, ``password``, ``apiKey``,
  ``authorization``, ``cookie``, ``secret``, ``credential``...), and inside ``_meta``
  also any key mentioning ``auth``;
- ``env`` values (``[{"name", "value"}]`` lists and plain objects), e.g. of ``mcpServers``
  and ``terminal/create``;
- ``headers`` values of MCP servers and of LLM endpoint configuration (``llmEndpoints``,
  ``setLlmEndpoints`` - the JetBrains-proposed way for an IDE to route an agent's model
  traffic through its own proxy with its credentials); elsewhere headers whose name is a
  credential (``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``X-Api-Key``...);
- credentials in URLs (``http://user:password@proxy:3128``) - IDE proxy settings;
- api-key shapes in any string: ``sk-...``, ``ghp_...``/``github_pat_...``, ``AKIA...``,
  ``xox?-...``, ``AIza...``, ``glpat-...``, ``sk_live_...``, ``hf_...``, ``npm_...``,
  JWTs, ``Bearer``/``Basic`` credentials, PEM private keys, ``password=...`` pairs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import orjson

from acp_proxy.wire.jsonrpc import parse_json

REDACTED = "[REDACTED]"
"""The marker that replaces a secret."""

_TOKEN_CHARS = r"A-Za-z0-9._~+/=-"

# (lower-case substrings that must be present, pattern). Patterns are tried one after the
# other, each only on text containing one of its substrings (one big alternation is two
# orders of magnitude slower in Python's re). A prefix to keep is captured as group "k".
_PATTERN_SPECS: list[tuple[tuple[str, ...], str]] = [
    (
        ("-----begin",),
        r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----[\s\S]*?-----END[A-Z ]{0,40}PRIVATE KEY-----",
    ),
    (
        ("authorization",),  # also Proxy-Authorization
        r"(?P<k>(?i:authorization)[\"']?\s*[=:]\s*[\"']?)(?!\[REDACTED\])[^\"'\r\n]{4,}",
    ),
    (
        ("bearer",),
        r"(?P<k>\b(?i:bearer)\s+)(?=[A-Za-z]*[0-9._~+/=-])[" + _TOKEN_CHARS + r"]{8,}",
    ),
    (("basic",), r"(?P<k>\bBasic\s+)(?=[A-Za-z]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"),
    (("sk-",), r"sk-(?<![A-Za-z0-9_-]sk-)(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}"),
    (
        ("_live_", "_test_"),
        r"(?<![A-Za-z0-9_])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{20,}"),
    (("github_pat_",), r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{20,}"),
    (
        ("akia", "asia", "agpa", "aida", "aroa"),
        r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?![A-Z0-9])",
    ),
    (("xox",), r"xox(?<![A-Za-z0-9]xox)[abposr]-[A-Za-z0-9-]{10,}"),
    (("aiza",), r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35}"),
    (("glpat-",), r"glpat-(?<![A-Za-z0-9_-]glpat-)[A-Za-z0-9_-]{20,}"),
    (("hf_",), r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}"),
    (("npm_",), r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}"),
    (
        ("eyj",),
        r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
    (("://",), r"(?P<k>://)[^/\s:@\"'\\]+:[^/\s@\"'\\]+(?=@)"),  # user:password@host
    (
        ("passw", "passphrase", "secret", "key", "token"),
        r"(?P<k>(?i:password|passwd|passphrase|secret|api[_-]?key|access[_-]?key|"
        r"access[_-]?token|auth[_-]?token|refresh[_-]?token|token|client[_-]?secret)"
        r"[\"']?\s*[=:]\s*[\"']?)(?!\[REDACTED\])[^\s\"',;&}\\]{4,}",
    ),
]
_STR_PATTERNS = [(needles, re.compile(src)) for needles, src in _PATTERN_SPECS]
_BYTES_PATTERNS = [
    (tuple(n.encode() for n in needles), re.compile(src.encode()))
    for needles, src in _PATTERN_SPECS
]

# Keys whose (string) values are secrets wherever they appear.
_SECRET_KEY = re.compile(
    r"(?i)(authorization|auth[_-]?header|api[_-]?key|access[_-]?key|secret|passw|passphrase|"
    r"token|cookie|credential|private[_-]?key|session[_-]?key|signature)"
)
# Inside _meta anything about auth is treated as a secret too.
_META_SECRET_KEY = re.compile(r"(?i)(auth|secret|token|key|passw|cookie|credential|bearer)")
# Header names whose values are credentials.
_SECRET_HEADER = re.compile(
    r"(?i)^(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key|"
    r".*(token|secret|key|auth|passw|credential|session).*)$"
)
_ENDPOINT_KEYS = frozenset({"llmEndpoints", "endpoints", "llm_endpoints"})


# Cheap test on raw bytes: a frame containing none of these has nothing to redact. The
# pattern needles, the key words of the structural rules, and JSON escapes (a key or a
# secret could be spelt with \u escapes or escaped slashes).
def _minimal(needles: set[bytes]) -> tuple[bytes, ...]:
    """Drop needles that contain another needle: they can never be the only match."""
    return tuple(sorted(n for n in needles if not any(m != n and m in n for m in needles)))


_FRAME_NEEDLES: tuple[bytes, ...] = _minimal(
    {n for needles, _ in _BYTES_PATTERNS for n in needles}
    | {b"auth", b"key", b"secret", b"passw", b"token", b"cookie", b"credential", b"private"}
    | {b"signature", b"env", b"headers", b"endpoints", b"_meta", b"\\u", b"\\/"}
)

_JSON_WS = b" \t\r\n"


def _replace_str(match: re.Match[str]) -> str:
    keep = match.groupdict().get("k")
    return REDACTED if keep is None else keep + REDACTED


def _replace_bytes(match: re.Match[bytes]) -> bytes:
    keep = match.groupdict().get("k")
    return REDACTED.encode() if keep is None else keep + REDACTED.encode()


def redact_text(text: str) -> str:
    """Replace secret-shaped substrings of ``text``."""
    low = text.lower()
    for needles, pattern in _STR_PATTERNS:
        if any(n in low for n in needles):
            text = pattern.sub(_replace_str, text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """Pattern-based redaction of arbitrary bytes (not JSON, invalid UTF-8, binary)."""
    low = data.lower()
    for needles, pattern in _BYTES_PATTERNS:
        if any(n in low for n in needles):
            data = pattern.sub(_replace_bytes, data)
    return data


def might_have_secrets(raw: bytes) -> bool:
    """False when ``raw`` certainly holds nothing :func:`redact_frame` would replace."""
    low = raw.lower()
    return any(n in low for n in _FRAME_NEEDLES)


@dataclass(slots=True)
class _Walk:
    changed: bool = False

    def all_strings(self, value: Any) -> Any:
        """Every string leaf becomes the marker (structure and non-strings kept)."""
        if isinstance(value, str):
            if value and value != REDACTED:
                self.changed = True
                return REDACTED
            return value
        if isinstance(value, list):
            return [self.all_strings(v) for v in value]
        if isinstance(value, dict):
            return {k: self.all_strings(v) for k, v in value.items()}
        return value

    def env(self, value: Any) -> Any:
        """``env``: ``[{"name", "value"}]`` or ``{NAME: value}``; values become the marker."""
        if isinstance(value, list):
            out: list[Any] = []
            for item in value:
                if isinstance(item, dict) and "value" in item:
                    item = {**item, "value": self.all_strings(item["value"])}
                    out.append(self.walk(item, skip_key="value"))
                else:
                    out.append(self.walk(item))
            return out
        if isinstance(value, dict):
            return {k: self.all_strings(v) for k, v in value.items()}
        return self.walk(value)

    def headers(self, value: Any, *, everything: bool) -> Any:
        """HTTP headers as ``[{"name", "value"}]`` or ``{Name: value}``."""
        if isinstance(value, list):
            out: list[Any] = []
            for item in value:
                if isinstance(item, dict) and "value" in item:
                    name = item.get("name")
                    if everything or (isinstance(name, str) and _SECRET_HEADER.match(name)):
                        item = {**item, "value": self.all_strings(item["value"])}
                    out.append(self.walk(item, skip_key="value"))
                else:
                    out.append(self.walk(item))
            return out
        if isinstance(value, dict):
            return {
                k: self.all_strings(v) if everything or _SECRET_HEADER.match(k) else self.walk(v)
                for k, v in value.items()
            }
        return self.walk(value)

    def mcp_servers(self, value: Any) -> Any:
        if isinstance(value, dict):  # {name: config}, as in IDE configuration files
            return {k: self._server(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._server(s) for s in value]
        return self.walk(value)

    def _server(self, server: Any) -> Any:
        if not isinstance(server, dict):
            return self.walk(server)
        out: dict[str, Any] = {}
        for k, v in server.items():
            if k == "env":
                out[k] = self.env(v)
            elif k == "headers":
                out[k] = self.headers(v, everything=True)
            else:
                out[k] = self.walk(v, key=k)
        return out

    def endpoints(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return self.walk(value)
        out: dict[str, Any] = {}
        for name, config in value.items():
            if isinstance(config, dict):
                out[name] = {
                    k: self.headers(v, everything=True) if k == "headers" else self.walk(v, key=k)
                    for k, v in config.items()
                }
            else:
                out[name] = self.walk(config)
        return out

    def meta(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return self.walk(value)
        return {
            k: self.all_strings(v) if _META_SECRET_KEY.search(k) else self.meta_inner(k, v)
            for k, v in value.items()
        }

    def meta_inner(self, key: str, value: Any) -> Any:
        if isinstance(value, dict):
            return self.meta(value)
        return self.walk(value, key=key)

    def walk(self, value: Any, *, key: str | None = None, skip_key: str | None = None) -> Any:
        """Redact ``value`` (found under ``key``) recursively."""
        if isinstance(value, str):
            if key is not None and _SECRET_KEY.search(key):
                return self.all_strings(value)
            new = redact_text(value)
            if new != value:
                self.changed = True
            return new
        if isinstance(value, list):
            if key is not None and _SECRET_KEY.search(key):
                return self.all_strings(value)
            return [self.walk(v) for v in value]
        if isinstance(value, dict):
            if key is not None and _SECRET_KEY.search(key):
                return self.all_strings(value)
            out: dict[str, Any] = {}
            for k, v in value.items():
                if k == skip_key:
                    out[k] = v
                elif k == "_meta":
                    out[k] = self.meta(v)
                elif k == "env":
                    out[k] = self.env(v)
                elif k == "headers":
                    out[k] = self.headers(v, everything=False)
                elif k == "mcpServers" or k == "mcp_servers":
                    out[k] = self.mcp_servers(v)
                elif k in _ENDPOINT_KEYS:
                    out[k] = self.endpoints(v)
                else:
                    out[k] = self.walk(v, key=k)
            return out
        return value


def redact_value(value: Any, *, key: str | None = None) -> tuple[Any, bool]:
    """Redact a parsed JSON value; returns ``(new value, whether anything changed)``."""
    walker = _Walk()
    new = walker.walk(value, key=key)
    return new, walker.changed


def redact_argv(argv: list[Any]) -> tuple[list[Any], bool]:
    """An agent command line: ``--token X`` / ``--api-key=X`` and secret shapes."""
    out: list[Any] = []
    changed = False
    hide_next = False
    for arg in argv:
        if not isinstance(arg, str):
            out.append(arg)
            continue
        if hide_next:
            hide_next = False
            out.append(REDACTED)
            changed = True
            continue
        flag = re.fullmatch(r"(--?[A-Za-z0-9_-]+)(=.*)?", arg)
        if flag and _SECRET_KEY.search(flag.group(1)):
            if flag.group(2) is None:
                hide_next = True
                out.append(arg)
            else:
                out.append(f"{flag.group(1)}={REDACTED}")
                changed = True
            continue
        new = redact_text(arg)
        changed = changed or new != arg
        out.append(new)
    return out, changed


def dumps_compact(value: Any) -> bytes:
    """Compact JSON keeping key order (the stdlib handles integers beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def redact_frame(raw: bytes, *, binary: bool = False) -> bytes:
    """The exported copy of one frame: ``raw`` itself when nothing needs redacting."""
    if not might_have_secrets(raw):
        return raw
    if not binary:
        value, problem = parse_json(raw)
        if problem is None:
            new, changed = redact_value(value)
            if not changed:
                return raw
            start = len(raw) - len(raw.lstrip(_JSON_WS))
            end = len(raw.rstrip(_JSON_WS))
            return raw[:start] + dumps_compact(new) + raw[end:]
    return redact_bytes(raw)
