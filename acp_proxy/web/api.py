"""The inspector's read-only JSON API and its live WebSocket push: one handler a route.

Every handler reads the recording through :mod:`acp_proxy.web.store` and
:mod:`acp_proxy.web.views` off the event loop (:func:`_blocking`); :func:`api_live` polls
the database every ``poll_interval`` seconds and pushes the frames committed since
(:mod:`acp_proxy.store.live_tail`). :mod:`acp_proxy.web.server` routes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from aiohttp import WSMsgType, web

from acp_proxy.store.live_tail import LiveTail
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError
from acp_proxy.store.search_text import query_phrases
from acp_proxy.web import store, views
from acp_proxy.web.guard import SECURITY_HEADERS, _error, _json

T = TypeVar("T")

POLL_INTERVAL = 0.2
LIVE_BATCH = 500

DB_KEY: web.AppKey[store.Location] = web.AppKey("db_path")
POLL_KEY = web.AppKey("poll_interval", float)
SOCKETS_KEY: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("sockets")
"""Open live WebSockets, closed on shutdown so stopping never waits for a browser."""


async def _blocking(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


# -- JSON API --------------------------------------------------------------------------


MAX_INTEGER = 2**63 - 1
"""Integer parameters beyond SQLite's 64-bit range are refused (400), not an OverflowError."""


def _integer(name: str, value: object) -> int:
    """``value`` (query text or JSON) as an integer SQLite can take; ValueError (400) if not."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if not -MAX_INTEGER <= number <= MAX_INTEGER:
        raise ValueError(f"{name} is out of range (at most {MAX_INTEGER})")
    return number


def _int_arg(request: web.Request, name: str, default: int | None = None) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return default
    return _integer(name, value)


def _filter_from(query: Any) -> store.FrameFilter:
    def text(name: str) -> str | None:
        value = query.get(name)
        return value if isinstance(value, str) and value != "" else None

    connection = text("connection")
    direction = text("direction")
    if direction is not None and direction not in store.DIRECTIONS:
        raise ValueError("direction must be c2a or a2c")
    connection_id = None if connection is None else _integer("connection", connection)
    return store.FrameFilter(
        connection_id=connection_id,
        session_id=text("session"),
        direction=direction,
        method=text("method"),
        update_kind=text("update"),
        kind=text("kind"),
        text=text("q"),
    )


async def api_info(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]

    def work() -> dict[str, Any]:
        with store.read_connection(path) as reader:
            max_id, count, _, _ = store.db_state(reader)
            by_time = reader.pages_by_time
        return {
            "path": str(path),
            "name": store.location_label(path),
            "max_id": max_id,
            "connections": count,
            "pages_by_time": by_time,  # "All frames" in (ts, id) order, else in id order
        }

    return _json(await _blocking(work))


async def api_connections(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]

    def work() -> dict[str, Any]:
        with store.read_connection(path) as reader:
            connections = views.connections(path, reader)
            for c in connections:
                c["findings"] = views.findings_summary(path, reader, c)
            return {"connections": connections}

    return _json(await _blocking(work))


async def api_values(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]

    def work() -> dict[str, Any]:
        with store.read_connection(path) as reader:
            return views.values(path, reader)

    return _json(await _blocking(work))


async def api_frames(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]
    flt = _filter_from(request.query)
    after_id = _int_arg(request, "after_id")
    before_id = _int_arg(request, "before_id")
    limit = _int_arg(request, "limit", store.DEFAULT_LIMIT)
    assert limit is not None
    if limit < 1:
        raise ValueError("limit must be at least 1")

    def work() -> dict[str, Any]:
        with store.read_connection(path) as reader:
            if flt.connection_id is not None:
                _require_connection(reader, flt.connection_id)
            return store.list_frames(
                reader, flt, after_id=after_id, before_id=before_id, limit=limit
            )

    return _json(await _blocking(work))


def _path_int(request: web.Request, key: str) -> int:
    """The integer path part ``key`` (``frame_id``, ``connection_id``); 404 if it is not one."""
    try:
        return _integer(key, request.match_info[key])
    except ValueError:
        raise web.HTTPNotFound(reason=f"no such {key.removesuffix('_id')}") from None


def _require_connection(reader: RecordingReader, connection_id: int) -> None:
    if not reader.has_connection(connection_id):
        raise web.HTTPNotFound(reason=f"no connection {connection_id}")


async def api_frame(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]
    frame_id = _path_int(request, "frame_id")

    def work() -> dict[str, Any] | None:
        with store.read_connection(path) as reader:
            return store.frame_detail(reader, frame_id)

    detail = await _blocking(work)
    if detail is None:
        raise web.HTTPNotFound(reason=f"no frame {frame_id}")
    return _json(detail)


async def api_frame_raw(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]
    frame_id = _path_int(request, "frame_id")

    def work() -> bytes | None:
        with store.read_connection(path) as reader:
            return store.frame_raw(reader, frame_id)

    raw = await _blocking(work)
    if raw is None:
        raise web.HTTPNotFound(reason=f"no frame {frame_id}")
    return web.Response(
        body=raw,
        headers={
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f'attachment; filename="frame-{frame_id}.bin"',
        },
    )


async def _connection_view(
    request: web.Request, build: Callable[[store.Location, RecordingReader, int], Any]
) -> web.StreamResponse:
    """One connection's view (404 for an unknown connection), built off the event loop."""
    path = request.app[DB_KEY]
    connection_id = _path_int(request, "connection_id")

    def work() -> Any:
        with store.read_connection(path) as reader:
            _require_connection(reader, connection_id)
            return build(path, reader, connection_id)

    return _json(await _blocking(work))


async def api_findings(request: web.Request) -> web.StreamResponse:
    return await _connection_view(request, views.findings)


async def api_timeline(request: web.Request) -> web.StreamResponse:
    return await _connection_view(request, views.timeline)


async def api_events(request: web.Request) -> web.StreamResponse:
    return await _connection_view(
        request, lambda _path, reader, cid: views.transport_events(reader, cid)
    )


async def api_export(request: web.Request) -> web.StreamResponse:
    """The frames the filter selects, one JSON object a line (``acp-proxy export``'s frame
    records, with the frame id), streamed a page at a time."""
    path = request.app[DB_KEY]
    flt = _filter_from(request.query)

    def page(after: int) -> tuple[bytes, int | None]:
        with store.read_connection(path) as reader:
            if flt.connection_id is not None:
                _require_connection(reader, flt.connection_id)
            return store.export_page(reader, flt, after_id=after)

    body, after = await _blocking(functools.partial(page, 0))
    response = web.StreamResponse(
        headers={
            "Content-Type": "application/x-ndjson",
            "Content-Disposition": 'attachment; filename="frames.jsonl"',
            **SECURITY_HEADERS,
        }
    )
    await response.prepare(request)
    await response.write(body)
    while after is not None:
        body, after = await _blocking(functools.partial(page, after))
        await response.write(body)
    await response.write_eof()
    return response


async def api_diff(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]
    a = _int_arg(request, "a")
    b = _int_arg(request, "b")
    if a is None or b is None:
        raise ValueError("a and b (the two connection ids) are required")

    def work() -> dict[str, Any]:
        with store.read_connection(path) as reader:
            _require_connection(reader, a)
            _require_connection(reader, b)
            return views.diff(path, reader, a, b, **views.turn_spans(request.query))

    return _json(await _blocking(work))


async def api_search(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]
    text = request.query.get("q", "").strip()
    if not text:
        raise ValueError("q (the words to find) is required")
    query_phrases(text)  # a ValueError (400) for no words in it, or beyond the limits
    connection_id = _int_arg(request, "connection")
    session_id = request.query.get("session") or None
    limit = _int_arg(request, "limit", 200) or 200
    if not 1 <= limit <= store.MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {store.MAX_LIMIT}")

    def work() -> dict[str, Any]:
        with store.read_connection(path) as reader:
            if connection_id is not None:
                _require_connection(reader, connection_id)
            return views.search(
                path, reader, text, connection_id=connection_id, session_id=session_id, limit=limit
            )

    return _json(await _blocking(work))


async def api_session(request: web.Request) -> web.StreamResponse:
    path = request.app[DB_KEY]
    connection_id = _path_int(request, "connection_id")
    session_id = request.match_info["session_id"]
    offset = _int_arg(request, "offset", 0) or 0
    limit = _int_arg(request, "limit", views.SESSION_ITEMS) or views.SESSION_ITEMS

    def work() -> dict[str, Any]:
        with store.read_connection(path) as reader:
            _require_connection(reader, connection_id)
            if connection_id not in reader.session_connections(session_id):
                raise web.HTTPNotFound(
                    reason=f"no session {session_id!r} on connection {connection_id}"
                )
            return views.session_view(
                path, reader, connection_id, session_id, offset=offset, limit=limit
            )

    return _json(await _blocking(work))


# -- live push -------------------------------------------------------------------------


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # not a browser (browsers always send Origin on WebSocket upgrades)
    return origin in (f"http://{request.host}", f"https://{request.host}")


async def _send(ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
    await ws.send_str(orjson.dumps(data).decode())


async def api_live(request: web.Request) -> web.StreamResponse:
    if not _same_origin(request):
        return _error(403, "cross-origin WebSocket refused")
    path = request.app[DB_KEY]
    interval = request.app[POLL_KEY]
    ws = web.WebSocketResponse(heartbeat=30.0)
    await ws.prepare(request)
    sockets: set[web.WebSocketResponse] = request.app[SOCKETS_KEY]
    sockets.add(ws)
    sub: dict[str, Any] = {"tail": None, "filter": store.FrameFilter(), "follow": False}
    changed = asyncio.Event()

    async def reader() -> None:
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            try:
                data = orjson.loads(msg.data)
                if not isinstance(data, dict):
                    continue
                flt = _filter_from(data.get("filter") or {})
                after = data.get("after_id")
                sub["filter"] = flt
                sub["tail"] = None if after is None else LiveTail(_integer("after_id", after))
                sub["follow"] = bool(data.get("follow"))
                changed.set()
            except (orjson.JSONDecodeError, ValueError, TypeError):
                await _send(ws, {"type": "error", "message": "bad subscription"})

    def poll(state: tuple[int, int, float, int] | None) -> dict[str, Any]:
        with store.read_connection(path) as reader:
            now = store.db_state(reader)
            out: dict[str, Any] = {"state": now, "frames": None, "more": False}
            tail = sub["tail"]
            if sub["follow"] and tail is not None and now[0] > tail.horizon:
                page = store.follow_frames(reader, sub["filter"], tail, now[0], limit=LIVE_BATCH)
                out["frames"] = page["frames"]
                out["more"] = page["has_more_after"]
            return out

    read_task = asyncio.create_task(reader())
    last: tuple[int, int, float, int] | None = None
    last_error: str | None = None
    try:
        while not ws.closed and not read_task.done():
            changed.clear()
            try:
                result = await _blocking(functools.partial(poll, last))
                last_error = None
            except RecordingError as exc:
                if str(exc) != last_error:
                    last_error = str(exc)
                    await _send(ws, {"type": "error", "message": last_error})
                result = None
                last = None  # once readable again, the next state is sent
            if result is not None:
                state: tuple[int, int, float, int] = tuple(result["state"])
                frames = result["frames"]
                if frames:
                    await _send(ws, {"type": "frames", "frames": frames, "max_id": state[0]})
                if state != last:
                    await _send(
                        ws,
                        {
                            "type": "state",
                            "max_id": state[0],
                            "connections": state[1],
                            "changed": last is not None and state[1:] != last[1:],
                        },
                    )
                    last = state
                if result["more"]:
                    continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=interval)
    except (ConnectionResetError, RuntimeError):
        pass
    finally:
        sockets.discard(ws)
        read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await read_task
    return ws
