"""The Streamable HTTP half of ``/acp`` as pure rules: what a POST is, where a message goes.

No I/O here. :func:`classify_post` reads one POST body (what the proxy must know to answer it:
batch, initialize, method, id, session); :class:`StreamRouter` keeps, per ACP connection, the
routing state the RFD and the SDKs use to put each agent message on the connection-scoped SSE
stream or on a session's stream; :func:`sse_events` and :func:`post_line` are the byte forms.

Routing (as the Python SDK's ``acp.http.server`` does it, so SDK clients find every message):

* a response goes where its request came from: responses to session-scoped POSTs
  (``session/prompt``, ``session/cancel``, ``session/set_mode``, ``session/set_config_option``,
  ``session/close``) to that session's stream; everything else, including ``session/new``,
  ``session/load`` and ``session/resume``, to the connection stream. A result that names a new
  ``sessionId`` makes that session known (its stream may then be opened);
* a request or notification from the agent goes to the stream of its ``params.sessionId``
  when that session is known, else to the connection stream; while a ``session/load`` or
  ``session/resume`` for a session is pending, its replay stays on the connection stream (the
  client has not opened the session stream yet), in order, before the response.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

ACP_PATH = "/acp"
CONNECTION_ID_HEADER = "Acp-Connection-Id"
SESSION_ID_HEADER = "Acp-Session-Id"
CONTENT_TYPE_JSON = "application/json"
CONTENT_TYPE_SSE = "text/event-stream"
KEEPALIVE = b": keepalive\n\n"
KEEPALIVE_SECONDS = 15.0

SESSION_SCOPED_METHODS = frozenset(
    {
        "session/prompt",
        "session/cancel",
        "session/set_mode",
        "session/set_config_option",
        "session/close",
    }
)
"""POSTs that must carry ``Acp-Session-Id``; their responses go on the session's stream."""

ATTACH_METHODS = frozenset({"session/load", "session/resume"})
"""Requests that attach an existing ``sessionId``; their replay and response stay on the
connection stream."""


def id_key(value: Any) -> str | None:
    """A JSON-RPC id as a routing key: ``1`` and ``"1"`` route alike (as in the SDKs)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if type(value) is int:  # json.dumps's text, without its cost on every POST
        return str(value)
    return json.dumps(value)


@dataclass(frozen=True)
class Post:
    """What one POST body is, as far as answering it goes."""

    kind: str
    """``request``, ``notification``, ``response``, ``batch`` or ``invalid``."""
    method: str | None = None
    id: str | None = None
    session_id: str | None = None
    why: str = ""

    @property
    def is_initialize(self) -> bool:
        return self.kind == "request" and self.method == "initialize"

    @property
    def session_scoped(self) -> bool:
        return self.method in SESSION_SCOPED_METHODS


_NOT_READ = object()


def _fast_loads(raw: bytes) -> Any:
    """``raw`` read by orjson, or :data:`_NOT_READ` where :func:`json.loads` must decide
    (orjson refuses what json reads, e.g. NaN, and reads integers over 64 bits as floats:
    ids must stay exact). The same answers as json, at a fraction of the time."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _NOT_READ
    if isinstance(message, dict) and isinstance(message.get("id"), float):
        return _NOT_READ
    return message


def classify_post(body: bytes) -> Post:
    """Read one POST body: a JSON-RPC object (or a batch, or something else)."""
    message = _fast_loads(body)
    try:
        if message is _NOT_READ:
            message = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return Post("invalid", why=f"the body is not JSON ({type(exc).__name__})")
    except RecursionError:
        return Post("invalid", why="the body is nested too deep to read")
    if isinstance(message, list):
        return Post("batch", why="batch requests are not supported (RFD: 501)")
    if not isinstance(message, dict):
        return Post("invalid", why="the body is not a JSON-RPC object")
    method = message.get("method")
    session = _session_of(message.get("params"))
    if isinstance(method, str):
        kind = "request" if "id" in message else "notification"
        return Post(kind, method, id_key(message.get("id")), session)
    if "id" in message and ("result" in message or "error" in message):
        return Post("response", None, id_key(message.get("id")), session)
    return Post("invalid", why="the body is neither a request, a notification nor a response")


def _session_of(params: Any) -> str | None:
    if isinstance(params, dict):
        value = params.get("sessionId")
        if isinstance(value, str):
            return value
    return None


class StreamRouter:
    """Per ACP connection: which SSE stream each agent message goes to (see the module)."""

    def __init__(self) -> None:
        self.sessions: set[str] = set()
        self._routes: dict[str, str] = {}  # request id -> session stream for its response
        self._attaching: dict[str, str] = {}  # load/resume request id -> session id
        self._attaching_unknown: set[str] = set()  # ...of a session not known before it

    def client_sent(self, post: Post) -> None:
        """A client request went to the agent: remember where its response belongs."""
        if post.kind != "request" or post.id is None or post.session_id is None:
            return
        if post.method in ATTACH_METHODS:
            self._attaching[post.id] = post.session_id
            if post.session_id not in self.sessions:
                self._attaching_unknown.add(post.id)
            self.sessions.add(post.session_id)  # a GET may be opened once the replay starts
        elif post.session_scoped:
            self._routes[post.id] = post.session_id

    def refused_attach(self, message: Any) -> str | None:
        """The session of a ``session/load`` / ``session/resume`` this message refuses (an
        error response), when that session was not known before: it is unknown again."""
        if not (isinstance(message, dict) and "error" in message and "method" not in message):
            return None
        key = id_key(message.get("id"))
        if key is None or key not in self._attaching_unknown:
            return None
        session = self._attaching[key]
        self.sessions.discard(session)
        return session

    def route(self, message: Any) -> str | None:
        """The session whose stream gets this agent message (see :func:`parse`);
        ``None``: the connection stream."""
        if not isinstance(message, dict):
            return None
        if "method" not in message and "id" in message:
            key = id_key(message.get("id"))
            if key is not None and key in self._attaching:
                self._attaching.pop(key)
                self._attaching_unknown.discard(key)
                return None
            result = message.get("result")
            session = self._routes.pop(key, None) if key is not None else None
            created = _session_of(result) if isinstance(result, dict) else None
            if created is not None and session is None:
                self.sessions.add(created)  # session/new: the client learns it here
                return None
            return session if session in self.sessions else None
        session = _session_of(message.get("params"))
        if session is None or session in self._attaching.values():
            return None
        return session if session in self.sessions else None


def sse_events(items: list[tuple[int, bytes]]) -> bytes:
    """SSE bytes for ``(event id, data)`` pairs: ``id: N`` then ``data: ...`` per event.

    ``data`` holds no ``\\n`` (it is one stdio line without its terminator) and no ``\\r``
    (see :func:`sse_data`).
    """
    return b"".join(b"id: %d\ndata: %s\n\n" % (event_id, data) for event_id, data in items)


class SseParser:
    """Cuts an SSE byte stream into events (sans-I/O): each event's data and ``id``.

    A line ends at ``\\n`` (its ``\\r``s dropped); an empty line ends an event, which counts
    only if it had ``data:`` lines (joined with ``join``: ``\\n`` as the SSE spec, or a space
    where the event must stay one line); its ``id:`` is returned with it (an ``id:`` of an
    event without data carries over). Other fields and comments are skipped. A line that
    comes in many chunks costs linear time.
    """

    def __init__(self, join: bytes = b"\n") -> None:
        self._join = join
        self._pending: list[bytes] = []  # the start of a line not yet ended
        self._data: list[bytes] = []
        self._id: bytes | None = None

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes | None]]:
        """The events ``chunk`` completed, in order: ``(data, id or None)``."""
        if b"\n" not in chunk:
            if chunk:
                self._pending.append(chunk)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending = []
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if tail:
            self._pending.append(tail)
        events: list[tuple[bytes, bytes | None]] = []
        data = self._data
        for line in lines:
            if line[-1:] == b"\r":
                line = line.rstrip(b"\r")
            if not line:
                if data:
                    events.append((self._join.join(data), self._id))
                    data = self._data = []
                    self._id = None
            elif line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line[:3] == b"id:":
                self._id = line[3:].strip()
        return events


def sse_data(line: bytes) -> bytes:
    """An agent's stdout line as SSE ``data``: terminator off, and any ``\\r`` too.

    A ``\\r`` would end the SSE line early; outside JSON strings it is only whitespace (inside
    them JSON forbids it), so dropping it keeps the message. The recorded frame is this data.
    """
    data = line[:-1] if line.endswith(b"\n") else line
    return data.replace(b"\r", b"") if b"\r" in data else data


def post_line(body: bytes) -> bytes:
    """A POST body as one stdio line: ``\\r``/``\\n`` (JSON whitespace) become spaces."""
    if b"\n" in body or b"\r" in body:
        body = body.replace(b"\r", b" ").replace(b"\n", b" ")
    return body + b"\n"


def parse(line: bytes) -> Any:
    """An agent line as JSON (``None`` if it is not JSON: it then goes to the connection
    stream)."""
    message = _fast_loads(line)
    if message is not _NOT_READ:
        return message
    try:
        return json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested too deep: not routed
        return None


def is_response_to(message: Any, key: str | None) -> bool:
    """True if this agent message (see :func:`parse`) answers the request with id ``key``."""
    return (
        isinstance(message, dict)
        and "method" not in message
        and "id" in message
        and id_key(message["id"]) == key
    )


def accepts_sse(accept: str | None) -> bool:
    """The GET's ``Accept`` allows ``text/event-stream`` (``*/*`` too, as the SDK server)."""
    if not accept:
        return False
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return CONTENT_TYPE_SSE in types or "*/*" in types or "text/*" in types


def is_json_type(content_type: str | None) -> bool:
    """``Content-Type: application/json`` (parameters such as ``charset`` allowed)."""
    if not content_type:
        return False
    return content_type.split(";")[0].strip().lower() == CONTENT_TYPE_JSON
