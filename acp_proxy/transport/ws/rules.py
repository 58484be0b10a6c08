"""The rules of the WebSocket transport, as pure functions (sans-I/O).

Everything the WebSocket server, the upstream proxy and the stdio bridge *decide* lives here:
how a WebSocket message becomes one stdio line and back, which handshakes are accepted
(token, Origin, bind address), which headers are passed on or kept in the recording, and how
close codes are passed through. The adapters in :mod:`acp_proxy.transport.ws` only move
bytes according to these answers.

``raw`` for a WebSocket frame is the message payload exactly as it crossed (text frames: the
UTF-8 bytes; binary frames: the bytes); the stdio side of a bridge sees ``raw + b"\\n"``.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from acp_proxy.transport.address import is_loopback
from acp_proxy.wire.jsonrpc import Message, classify

ACP_PATH = "/acp"
CONNECTION_ID_HEADER = "Acp-Connection-Id"
DEFAULT_MAX_MESSAGE = 256 * 1024 * 1024
DEFAULT_HEARTBEAT = 20.0

# RFC 6455 close codes used by the bridge.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_INVALID_DATA = 1007
CLOSE_TOO_BIG = 1009
CLOSE_INTERNAL_ERROR = 1011
CLOSE_BAD_GATEWAY = 1014
NOT_SENDABLE = frozenset({1004, 1005, 1006, 1015})
"""Codes reserved for reporting: they never appear in a close frame on the wire."""

NEWLINE_REASON = "text frame contains a newline; it cannot become one stdio line"
MAX_REASON_BYTES = 123


@dataclass(frozen=True, slots=True)
class ToLine:
    """A WebSocket message turned into one stdio line (``line`` ends with ``\\n``)."""

    line: bytes


@dataclass(frozen=True, slots=True)
class Refuse:
    """The message cannot cross: close the WebSocket with ``code`` and ``reason``."""

    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Ignore:
    """The message is recorded but not written to stdio (binary frames; SDKs ignore them)."""

    why: str


def message_to_line(payload: bytes, *, binary: bool) -> ToLine | Refuse | Ignore:
    """What happens to one WebSocket message on its way to a stdio peer.

    A text message becomes ``payload + b"\\n"``, unchanged. One that contains a newline
    would arrive as two lines, so it is refused (close 1007) rather than altered. Binary
    messages have no stdio form: they are ignored (as ACP SDKs do) but still recorded.
    """
    if binary:
        return Ignore("binary WebSocket message: stdio has no binary frames (recorded only)")
    if b"\n" in payload:
        return Refuse(CLOSE_INVALID_DATA, NEWLINE_REASON)
    return ToLine(payload + b"\n")


def line_to_message(line: bytes) -> tuple[bytes, bool]:
    """One stdio line (terminator included) as a WebSocket message: ``(payload, binary)``.

    Only the ``\\n`` terminator is removed (a ``\\r`` before it stays: it is JSON
    whitespace). A line that is not valid UTF-8 cannot be a text frame; it is sent as a
    binary frame with the same bytes, never re-encoded.
    """
    payload = line[:-1] if line.endswith(b"\n") else line
    if payload.isascii():  # the usual case: no decoding (and no str copy) per message
        return payload, False
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return payload, True
    return payload, False


def clip_reason(reason: str) -> str:
    """A close reason fits in 123 bytes of UTF-8; cut (on a character boundary) if longer."""
    data = reason.encode("utf-8")
    if len(data) <= MAX_REASON_BYTES:
        return reason
    return data[: MAX_REASON_BYTES - 3].decode("utf-8", "ignore") + "..."


def too_big_reason(limit: int) -> str:
    return clip_reason(f"message too big: over the {limit}-byte limit (--max-message-size)")


def relay_close(code: int | None, reason: str, *, peer: str) -> tuple[int, str]:
    """The close frame to send to one side when the other side closed with ``code``.

    Sendable codes and reasons pass through unchanged. ``None``/1005 (a close frame without
    a code) becomes a plain 1000. A connection that dropped without a close frame (1006, or
    no code at all with a reason-less error) becomes 1014 (bad gateway) towards the client
    when the upstream vanished, 1001 (going away) towards the upstream when the client did.
    """
    if code is None or code == 0 or code == 1005:
        return CLOSE_NORMAL, ""
    if code in NOT_SENDABLE or code < 1000 or code >= 5000:
        if peer == "upstream":
            return CLOSE_BAD_GATEWAY, "upstream connection lost"
        return CLOSE_GOING_AWAY, "client went away"
    return code, clip_reason(reason)


def agent_exit_close(returncode: int | None) -> tuple[int, str]:
    """The close frame sent when the agent process ends first."""
    if returncode == 0:
        return CLOSE_NORMAL, "agent exited"
    if returncode is None:
        return CLOSE_INTERNAL_ERROR, "agent closed its stdout"
    if returncode < 0:
        return CLOSE_INTERNAL_ERROR, f"agent killed by signal {-returncode}"
    return CLOSE_INTERNAL_ERROR, f"agent exited with status {returncode}"


# -- listening address and handshake checks -------------------------------------------------


def token_from(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The token a client presented: ``Authorization: Bearer T`` or ``?token=T``."""
    auth = headers.get("Authorization")
    if auth is not None:
        scheme, _, value = auth.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return query.get("token")


def token_ok(presented: str | None, expected: str) -> bool:
    """Constant-time comparison of the presented token with the configured one."""
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """The Origin check that keeps other web sites (and DNS rebinding) out.

    No ``Origin`` header: not a browser, allowed. Otherwise the origin must be listed in
    ``allowed`` (exact match, case-insensitive, or ``*``) or be a page served from this very
    host over loopback (``http://localhost:3000``, ``http://127.0.0.1``, ``http://[::1]``).
    A rebinding page has its own site name as origin, so it is refused.
    """
    if origin is None:
        return True
    normalized = origin.strip().rstrip("/").lower()
    for entry in allowed:
        entry = entry.strip().rstrip("/").lower()
        if entry == "*" or entry == normalized:
            return True
    if normalized == "null":
        return False
    parts = urlsplit(normalized)
    if parts.scheme not in ("http", "https") or parts.hostname is None:
        return False
    return is_loopback(parts.hostname)


# -- headers ---------------------------------------------------------------------------------

KEPT_REQUEST_HEADERS = (
    "Host",
    "Origin",
    "User-Agent",
    "Sec-WebSocket-Protocol",
    "Sec-WebSocket-Extensions",
    "X-Forwarded-For",
    "X-Forwarded-Proto",
)
"""Handshake headers stored on the connection row (never Authorization or Cookie values)."""


def headers_worth_keeping(
    request_headers: Iterable[tuple[str, str]], response_headers: Iterable[tuple[str, str]]
) -> dict[str, dict[str, str]]:
    """The handshake headers stored with a recorded connection.

    Kept: the request headers in :data:`KEPT_REQUEST_HEADERS`, every ``Acp-*`` header both
    ways, and the *names* of cookies (values are secrets and are replaced by ``"…"``).
    """
    kept_names = {h.lower() for h in KEPT_REQUEST_HEADERS}
    request: dict[str, str] = {}
    for name, value in request_headers:
        name, value = str(name), str(value)
        low = name.lower()
        if low in kept_names or low.startswith("acp-"):
            request[name] = value
        elif low == "cookie":
            names = [c.split("=", 1)[0].strip() for c in value.split(";") if c.strip()]
            request[name] = "; ".join(f"{n}=…" for n in names)
        elif low == "authorization":
            request[name] = value.split(" ", 1)[0] + " …"
    response: dict[str, str] = {}
    for name, value in response_headers:
        name, value = str(name), str(value)
        low = name.lower()
        if low.startswith("acp-") or low == "sec-websocket-protocol":
            response[name] = value
        elif low == "set-cookie":
            response[name] = value.split("=", 1)[0].strip() + "=…"
    return {"request": request, "response": response}


HOP_BY_HOP = frozenset(
    {
        "host",
        "connection",
        "upgrade",
        "content-length",
        "transfer-encoding",
        "keep-alive",
        "te",
        "trailer",
        "proxy-authorization",
        "proxy-connection",
    }
)


def upstream_request_headers(
    request_headers: Iterable[tuple[str, str]], *, strip_authorization: bool
) -> list[tuple[str, str]]:
    """Headers of the client's upgrade request to repeat on the upstream upgrade.

    End-to-end headers pass (``Cookie``, ``Acp-*``, ``User-Agent``, ``Origin``, custom
    headers...). Hop-by-hop and ``Sec-WebSocket-*`` headers are the proxy's own (the
    subprotocol list is passed separately). ``Authorization`` is dropped when it carried
    this proxy's ``--token``.
    """
    out: list[tuple[str, str]] = []
    for name, value in request_headers:
        low = name.lower()
        if low in HOP_BY_HOP or low.startswith("sec-websocket-"):
            continue
        if strip_authorization and low == "authorization":
            continue
        out.append((name, value))
    return out


def downstream_response_headers(
    upstream_headers: Iterable[tuple[str, str]],
) -> list[tuple[str, str]]:
    """Headers of the upstream's upgrade response to repeat to the client.

    ``Acp-*`` (``Acp-Connection-Id`` in particular) and ``Set-Cookie`` (session affinity)
    pass through; the rest of the handshake is this proxy's.
    """
    return [
        (name, value)
        for name, value in upstream_headers
        if name.lower().startswith("acp-") or name.lower() == "set-cookie"
    ]


def parse_subprotocols(value: str | None) -> list[str]:
    """The ``Sec-WebSocket-Protocol`` request header as a list."""
    if not value:
        return []
    return [p.strip() for p in value.split(",") if p.strip()]


class PendingRequests:
    """Requests sent towards the server that have no response yet (by exact id text).

    The stdio bridge uses it after stdin ends: a WebSocket has no half-close, so the bridge
    waits until every request it forwarded was answered (or a grace period ran out) before
    it closes, the way a stdio agent answers what it read before its stdin closed.
    """

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def sent(self, raw: bytes) -> None:
        for msg in _members(classify(raw)):
            if msg.kind == "request" and msg.id is not None:
                self.ids.add(msg.id)

    def received(self, raw: bytes) -> None:
        if not self.ids:
            return  # nothing to answer: no need to parse
        for msg in _members(classify(raw)):
            if msg.kind == "response" and msg.id is not None:
                self.ids.discard(msg.id)

    @property
    def empty(self) -> bool:
        return not self.ids


def _members(msg: Message) -> list[Message]:
    return msg.items if msg.kind == "batch" else [msg]


def ws_url_ok(url: str) -> str | None:
    """``None`` if ``url`` is a usable ws://, wss://, http:// or https:// URL, else a one-line
    complaint."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss", "http", "https"):
        return (
            f"not a WebSocket or HTTP URL: {url!r} (expected ws://HOST:PORT/acp, or wss://, "
            "http://, https://)"
        )
    if not parts.hostname:
        return f"no host in URL {url!r}"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return f"bad port in URL {url!r}"
    return None
