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

:class:`RedactRules` is a rule set: these built-in rules plus the user's own (more secret
keys, dotted paths whose values go, more secret value patterns). ``export`` applies one to
the exported copy; recording with ``--redact`` applies one to the *stored* copy, in the
writer (:mod:`acp_proxy.recorder.writer.rows`), while forwarding stays byte-exact.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from acp_proxy.acp.jsonpaths import parse_path
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
# secret could be spelt with \u escapes or escaped slashes). Not ``_meta``: what is secret
# inside it is a key holding one of these words, and frames with trace context in ``_meta``
# are common (each would be parsed for nothing).
def _minimal(needles: set[bytes]) -> tuple[bytes, ...]:
    """Drop needles that contain another needle: they can never be the only match."""
    return tuple(sorted(n for n in needles if not any(m != n and m in n for m in needles)))


_FRAME_NEEDLES: tuple[bytes, ...] = _minimal(
    {n for needles, _ in _BYTES_PATTERNS for n in needles}
    | {b"auth", b"key", b"secret", b"passw", b"token", b"cookie", b"credential", b"private"}
    | {b"signature", b"env", b"headers", b"endpoints", b"\\u", b"\\/"}
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


def _needle_finder(needles: tuple[bytes, ...]) -> Callable[[bytes], bool]:
    """Whether a (lower-cased) text holds any of ``needles``: one pass of an Aho-Corasick
    automaton (``ahocorasick_rs``, about 15 times faster than a search per needle on a
    300-byte frame; the recorder runs it on every frame with ``--redact``), else one regex
    with the needles' common prefixes factored out."""
    try:
        from ahocorasick_rs import BytesAhoCorasick
    except ImportError:  # pragma: no cover - a dependency; the fallback is 3 times slower
        pattern = re.compile(_trie(sorted(set(needles))))
        return lambda low: pattern.search(low) is not None
    automaton = BytesAhoCorasick(list(needles))
    return lambda low: bool(automaton.find_matches_as_indexes(low))


def _trie(needles: list[bytes]) -> bytes:
    groups: dict[bytes, list[bytes]] = {}
    for n in needles:
        groups.setdefault(n[:1], []).append(n[1:])
    parts = []
    for first, rests in groups.items():
        if b"" in rests:  # a needle ends here: the shorter one is enough
            parts.append(re.escape(first))
        else:
            parts.append(re.escape(first) + b"(?:" + _trie(rests) + b")")
    return b"|".join(parts)


_has_needle = _needle_finder(_FRAME_NEEDLES)


def might_have_secrets(raw: bytes) -> bool:
    """False when ``raw`` certainly holds nothing :func:`redact_frame` would replace."""
    return _has_needle(raw.lower())


@dataclass(slots=True)
class _Walk:
    changed: bool = False
    rules: RedactRules | None = None

    def secret_key(self, key: str) -> bool:
        """Whether the value under ``key`` is a secret (built-in or the user's key rules)."""
        if _SECRET_KEY.search(key):
            return True
        extra = self.rules._key if self.rules is not None else None
        return extra is not None and extra.search(key) is not None

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
            if key is not None and self.secret_key(key):
                return self.all_strings(value)
            new = redact_text(value)
            if self.rules is not None and self.rules._values:
                new = self.rules.text(new)
            if new != value:
                self.changed = True
            return new
        if isinstance(value, list):
            if key is not None and self.secret_key(key):
                return self.all_strings(value)
            return [self.walk(v) for v in value]
        if isinstance(value, dict):
            if key is not None and self.secret_key(key):
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


def redact_value(
    value: Any, *, key: str | None = None, rules: RedactRules | None = None
) -> tuple[Any, bool]:
    """Redact a parsed JSON value; returns ``(new value, whether anything changed)``."""
    walker = _Walk(rules=rules)
    new = walker.walk(value, key=key)
    if rules is not None and rules._paths:
        for path in rules._paths:
            new = _mask(new, path, walker)
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


def redact_frame(raw: bytes, *, binary: bool = False, rules: RedactRules | None = None) -> bytes:
    """The exported copy of one frame: ``raw`` itself when nothing needs redacting.

    ``rules``: a rule set with the user's rules too (None: the built-in rules only).
    """
    if not might_have_secrets(raw) and (rules is None or not rules.might_match(raw)):
        return raw
    if not binary:
        value, problem = parse_json(raw)
        if problem is None:
            new, changed = redact_value(value, rules=rules)
            if not changed:
                return raw
            start = len(raw) - len(raw.lstrip(_JSON_WS))
            end = len(raw.rstrip(_JSON_WS))
            return bytes(raw[:start]) + dumps_compact(new) + bytes(raw[end:])
    out = redact_bytes(raw)
    return rules.binary(out) if rules is not None else out


_KEPT_UNDER_PATH = frozenset({"type", "sessionUpdate"})
"""Members a path rule leaves alone: they say what a value is, and readers go by them."""


def _mask(value: Any, path: tuple[str, ...], walker: _Walk) -> Any:
    """``value`` with every string under ``path`` replaced by the marker (``*``: any member)."""
    if not path:
        return _mask_all(value, walker)
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else ([head] if head in value else [])
        if not keys:
            return value
        copy = dict(value)
        for key in keys:
            copy[key] = _mask(copy[key], rest, walker)
        return copy
    if isinstance(value, list):
        if head == "*":
            return [_mask(v, rest, walker) for v in value]
        if head.isdigit() and int(head) < len(value):
            i = int(head)
            return [*value[:i], _mask(value[i], rest, walker), *value[i + 1 :]]
    return value


def _mask_all(value: Any, walker: _Walk) -> Any:
    if isinstance(value, str):
        return walker.all_strings(value)
    if isinstance(value, list):
        return [_mask_all(v, walker) for v in value]
    if isinstance(value, dict):
        return {k: v if k in _KEPT_UNDER_PATH else _mask_all(v, walker) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class RedactRules:
    """A redaction rule set: the built-in rules plus the user's own.

    ``keys``: regular expressions (case-insensitive, searched) naming more keys whose values
    are secrets; ``paths``: dotted paths from the message root (as ``replay --ignore``:
    ``params.prompt``, ``update.content.text``; ``*`` any member) whose string values all go
    (``type`` and ``sessionUpdate`` members stay, so readers still know what each value is);
    ``values``: regular expressions of more secret strings, replaced wherever they occur.
    Raises ``ValueError`` (one line) for a rule that is not a valid expression or path.
    """

    keys: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    _key: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _paths: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    _values: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _bvalues: tuple[re.Pattern[bytes], ...] = field(init=False, repr=False, compare=False)
    _bkeys: re.Pattern[bytes] | None = field(init=False, repr=False, compare=False)
    _needles: tuple[bytes, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for kind, items in (("key", self.keys), ("value", self.values)):
            for item in items:
                if not item:
                    raise ValueError(f"empty {kind} rule")
                try:
                    re.compile(item)
                    re.compile(item.encode())  # also run on raw bytes, where some escapes are not
                except re.error as exc:
                    why = f"{kind} rule {item!r}: not a regular expression ({exc})"
                    raise ValueError(why) from None
        keys = "|".join(f"(?:{k})" for k in self.keys)
        paths = []
        for p in self.paths:
            try:
                paths.append(parse_path(p))
            except ValueError:
                raise ValueError(f"path rule {p!r}: not a dotted path (params.prompt)") from None
        setattr_ = object.__setattr__
        setattr_(self, "_key", re.compile(keys, re.IGNORECASE) if keys else None)
        setattr_(self, "_bkeys", re.compile(keys.encode(), re.IGNORECASE) if keys else None)
        setattr_(self, "_paths", tuple(paths))
        setattr_(self, "_values", tuple(re.compile(v) for v in self.values))
        setattr_(self, "_bvalues", tuple(re.compile(v.encode()) for v in self.values))
        needles = {_path_needle(p) for p in paths}
        setattr_(self, "_needles", tuple(sorted(needles)))

    @classmethod
    def of(
        cls, keys: Iterable[str] = (), paths: Iterable[str] = (), values: Iterable[str] = ()
    ) -> RedactRules:
        return cls(tuple(keys), tuple(paths), tuple(values))

    @property
    def name(self) -> str:
        """The rule set as stored on a redacted connection row: ``default`` and the user's
        key and path rules; value rules only as a digest (a value rule may spell a secret)."""
        parts = ["default"]
        parts += [f"key:{k}" for k in self.keys]
        parts += [f"path:{p}" for p in self.paths]
        if self.values:
            digest = hashlib.sha256("\0".join(self.values).encode()).hexdigest()[:12]
            parts.append(f"values:{len(self.values)}:sha256:{digest}")
        return " ".join(parts)

    def to_json(self) -> str:
        return json.dumps({"keys": self.keys, "paths": self.paths, "values": self.values})

    @classmethod
    def from_json(cls, text: str) -> RedactRules | None:
        """The rule set :meth:`to_json` wrote (empty text: None, no redaction)."""
        if not text:
            return None
        data = json.loads(text)
        return cls.of(data.get("keys", ()), data.get("paths", ()), data.get("values", ()))

    def might_match(self, raw: bytes) -> bool:
        """False when the user's rules certainly replace nothing in ``raw``."""
        if self._bkeys is not None and self._bkeys.search(raw):
            return True
        if any(p.search(raw) for p in self._bvalues):
            return True
        return any(n in raw for n in self._needles)

    def frame(self, raw: bytes, *, binary: bool = False) -> bytes:
        """The stored (or exported) copy of one frame under these rules."""
        return redact_frame(raw, binary=binary, rules=self)

    def text(self, text: str) -> str:
        """The user's value rules applied to ``text``."""
        for pattern in self._values:
            text = pattern.sub(REDACTED, text)
        return text

    def binary(self, data: bytes) -> bytes:
        """The user's value rules applied to bytes."""
        for pattern in self._bvalues:
            data = pattern.sub(REDACTED.encode(), data)
        return data

    def line(self, raw: bytes) -> bytes:
        """A stderr line (free text): the pattern rules, built-in and the user's."""
        low = raw.lower()
        if not any(n in low for needles, _ in _BYTES_PATTERNS for n in needles) and not any(
            p.search(raw) for p in self._bvalues
        ):
            return raw
        return self.binary(redact_bytes(bytes(raw)))

    def field_value(self, name: str, value: Any) -> tuple[Any, bool]:
        """A connection-row column or event detail: ``(redacted value, changed)``."""
        if value is None or isinstance(value, (int, float)):
            return value, False
        if name == "agent_command" and isinstance(value, list):
            argv, changed = redact_argv(value)
            if self._values:
                argv = [self.text(a) if isinstance(a, str) else a for a in argv]
                changed = changed or argv != value
            return argv, changed
        new, changed = redact_value({name: value}, rules=self)
        return new[name], changed

    def control(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        """A recorder control item's fields (``open``, ``update``, ``close``: connection
        columns; ``event``: its ``detail``) with the secrets replaced; an opened row's
        ``meta.redaction`` names the rule set."""
        if op == "event":
            return {**fields, "detail": self.field_value("detail", fields.get("detail"))[0]}
        out = {k: self.field_value(k, v)[0] for k, v in fields.items()}
        if op == "open":
            meta = out.get("meta")
            out["meta"] = {**(meta if isinstance(meta, dict) else {}), "redaction": self.name}
        return out


DEFAULT_RULES = RedactRules()
"""The built-in rules alone."""


def rules_for(redact: bool | RedactRules | None) -> RedactRules | None:
    """An exporter's ``redact`` argument as a rule set: True is the built-in rules."""
    if isinstance(redact, RedactRules):
        return redact
    return DEFAULT_RULES if redact else None


def _path_needle(path: tuple[str, ...]) -> bytes:
    """Bytes every frame holding ``path`` contains: its last named member, quoted."""
    named = [p for p in path if p != "*" and not p.isdigit()]
    return b'"' + named[-1].encode() + b'"'
