"""The inspector's aiohttp server: static page, read-only JSON API and live WebSocket push.

Endpoints (all GET): ``/`` the page, ``/static/*`` its assets (shipped in the package, no
CDN), ``/api/info``, ``/api/connections``, ``/api/values``, ``/api/frames`` (keyset pages),
``/api/frames/{id}`` (one frame, exact bytes), ``/api/frames/{id}/raw`` (download),
``/api/connections/{id}/findings``, ``/api/connections/{id}/sessions/{sid}`` (the
reconstructed conversation), ``/api/connections/{id}/timeline`` (waterfall, turns and
per-method latency figures), ``/api/export.jsonl`` (the filtered frames as JSON lines),
``/api/diff?a=&b=[&as=&bs=]`` (two connections, or two turns, aligned), ``/api/search?q=``
(the search index) and ``/api/live`` (WebSocket: the server polls the database every
``poll_interval`` seconds and pushes the frames committed since, also those several writers
commit out of id order: :mod:`acp_proxy.store.live_tail`).

Security: loopback by default; a token (header ``Authorization: Bearer``, ``?token=`` or the
cookie it sets) is checked in constant time on every request when one is configured, and is
required to listen on anything but loopback. Without a token the ``Host`` header must name
a loopback address (against DNS rebinding). WebSocket upgrades must come from the page's own
origin. Every response carries a strict Content-Security-Policy (no inline script).

:func:`start_in_thread` runs the server on its own asyncio loop in a daemon thread, for the
proxy commands' ``--ui`` option.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ssl
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import orjson
from aiohttp import WSMsgType, web

from acp_proxy.console import warn
from acp_proxy.store.live_tail import LiveTail
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError
from acp_proxy.store.search import query_phrases
from acp_proxy.transport.address import check_listen, is_loopback
from acp_proxy.transport.server_limits import MAX_LINE_BYTES, app_runner
from acp_proxy.transport.tls import scheme_for
from acp_proxy.web import store, views

T = TypeVar("T")

__all__ = [
    "InspectorHandle",
    "make_app",
    "serve_forever",
    "start_in_thread",
]

TOKEN_COOKIE = "acp_proxy_token"
POLL_INTERVAL = 0.2
LIVE_BATCH = 500

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

DB_KEY: web.AppKey[store.Location] = web.AppKey("db_path")
TOKEN_KEY = web.AppKey("token", str)
POLL_KEY = web.AppKey("poll_interval", float)
SOCKETS_KEY: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("sockets")
"""Open live WebSockets, closed on shutdown so stopping never waits for a browser."""


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


async def _blocking(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


def _supplied_token(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[len("Bearer ") :].strip()
    if "token" in request.query:
        return request.query["token"]
    return request.cookies.get(TOKEN_COOKIE)


def _host_is_loopback(request: web.Request) -> bool:
    host = request.host
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return is_loopback(host)


READ_LINE_BYTES = 1 << 20
"""The longest request line the inspector reads: one over ``MAX_LINE_BYTES`` is refused by
:func:`_guard` with the API's JSON error (aiohttp's own refusal is plain text)."""


@web.middleware
async def _guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    token = request.app[TOKEN_KEY]
    response: web.StreamResponse
    if len(request.raw_path) > MAX_LINE_BYTES:  # read whole (READ_LINE_BYTES): JSON, not text
        why = f"the request target is over {MAX_LINE_BYTES} bytes"
        warn(f"bad HTTP request from {request.remote}: {why}")
        response = _error(400, why)
        response.force_close()
    elif request.method not in ("GET", "HEAD"):
        response = _error(405, "the inspector is read-only")
    elif token:
        supplied = _supplied_token(request)
        if supplied is None or not hmac.compare_digest(
            supplied.encode("utf-8", "surrogateescape"), token.encode("utf-8")
        ):
            response = _error(401, "a valid token is required (?token=... or Authorization)")
        else:
            response = await _handle(request, handler)
            if request.query.get("token") and not isinstance(response, web.WebSocketResponse):
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/")
    elif not _host_is_loopback(request):
        response = _error(403, "Host header is not a loopback address")
    else:
        response = await _handle(request, handler)
    if not isinstance(response, web.WebSocketResponse) and not response.prepared:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
    return response


async def _handle(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400:
            return _error(exc.status, exc.reason)
        raise
    except RecordingError as exc:
        return _error(503, str(exc))
    except ValueError as exc:
        return _error(400, str(exc))


# -- static assets ---------------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def _asset(name: str) -> bytes | None:
    base = resources.files("acp_proxy.web").joinpath("static")
    item = base.joinpath(name)
    try:
        return item.read_bytes() if item.is_file() else None
    except OSError:  # a name too long for the file system, say: no such asset
        return None


async def index(request: web.Request) -> web.StreamResponse:
    body = _asset("index.html")
    assert body is not None, "acp_proxy/web/static/index.html is missing from the package"
    return web.Response(body=body, content_type="text/html", charset="utf-8")


async def static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    suffix = Path(name).suffix
    if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        raise web.HTTPNotFound(reason="no such asset")
    body = _asset(name)
    if body is None:
        raise web.HTTPNotFound(reason="no such asset")
    return web.Response(body=body, headers={"Content-Type": STATIC_TYPES[suffix]})


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


# -- assembly --------------------------------------------------------------------------


async def _close_sockets(app: web.Application) -> None:
    sockets: set[web.WebSocketResponse] = app[SOCKETS_KEY]
    for ws in tuple(sockets):
        await ws.close(code=1001, message=b"inspector shutting down")


def make_app(
    db_path: str | Path, *, token: str | None = None, poll_interval: float = POLL_INTERVAL
) -> web.Application:
    """The inspector application for the recording at ``db_path``."""
    app = web.Application(middlewares=[_guard])
    app[DB_KEY] = store.location(db_path)
    app[TOKEN_KEY] = token or ""
    app[POLL_KEY] = poll_interval
    app[SOCKETS_KEY] = set()
    app.on_shutdown.append(_close_sockets)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/info", api_info)
    app.router.add_get("/api/connections", api_connections)
    app.router.add_get("/api/values", api_values)
    app.router.add_get("/api/frames", api_frames)
    app.router.add_get("/api/frames/{frame_id}", api_frame)
    app.router.add_get("/api/frames/{frame_id}/raw", api_frame_raw)
    app.router.add_get("/api/connections/{connection_id}/findings", api_findings)
    app.router.add_get("/api/connections/{connection_id}/sessions/{session_id}", api_session)
    app.router.add_get("/api/connections/{connection_id}/timeline", api_timeline)
    app.router.add_get("/api/connections/{connection_id}/events", api_events)
    app.router.add_get("/api/export.jsonl", api_export)
    app.router.add_get("/api/diff", api_diff)
    app.router.add_get("/api/search", api_search)
    app.router.add_get("/api/live", api_live)
    return app


def page_url(host: str, port: int, token: str | None, scheme: str = "http") -> str:
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1"
    url = f"{scheme}://{shown}:{port}/"
    return url + (f"?token={token}" if token else "")


@dataclass
class InspectorHandle:
    """A running inspector (see :func:`start_in_thread`): its address and a way to stop it."""

    host: str
    port: int
    url: str
    _loop: asyncio.AbstractEventLoop
    _thread: threading.Thread
    _stop: asyncio.Event

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and join the thread."""
        if self._loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)


async def _serve(
    app: web.Application,
    host: str,
    port: int,
    stop: asyncio.Event,
    tls: ssl.SSLContext | None = None,
) -> tuple[web.AppRunner, int]:
    # the shared limits, header timeout and one-line errors; longer request lines are read
    runner = app_runner(app, max_line_size=READ_LINE_BYTES)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=tls)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    addresses = runner.addresses
    bound = int(addresses[0][1]) if addresses else port
    return runner, bound


def start_in_thread(
    db_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    token: str | None = None,
    poll_interval: float = POLL_INTERVAL,
) -> InspectorHandle:
    """Serve the inspector for ``db_path`` from a daemon thread with its own event loop.

    Returns once the socket is bound (``port=0`` picks a free port; see ``handle.port``).
    Raises ``OSError`` when the address cannot be bound and ``ValueError`` for a non-loopback
    host without a token. The database may not exist yet: the page says so and recovers once
    the recorder has created it.
    """
    check_listen(host, token)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    ready: dict[str, Any] = {}
    started = threading.Event()

    async def main() -> None:
        try:
            runner, bound = await _serve(
                make_app(db_path, token=token, poll_interval=poll_interval), host, port, stop
            )
        except BaseException as exc:
            ready["error"] = exc
            started.set()
            return
        ready["port"] = bound
        started.set()
        try:
            await stop.wait()
        finally:
            await runner.shutdown()
            await runner.cleanup()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="acp-proxy-inspector", daemon=True)
    thread.start()
    started.wait()
    if "error" in ready:
        thread.join()
        error = ready["error"]
        if isinstance(error, Exception):
            raise error
        raise RuntimeError(str(error))
    bound = int(ready["port"])
    return InspectorHandle(host, bound, page_url(host, bound, token), loop, thread, stop)


def serve_forever(
    db_path: str | Path,
    host: str,
    port: int,
    *,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Serve until interrupted (Ctrl-C / SIGTERM); used by ``acp-proxy web``; https with ``tls``."""
    check_listen(host, token)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        runner, bound = await _serve(make_app(db_path, token=token), host, port, stop, tls)
        if on_ready is not None:
            on_ready(page_url(host, bound, token, scheme_for("http", tls)))
        try:
            await stop.wait()
        finally:
            await runner.shutdown()
            await runner.cleanup()

    asyncio.run(main())
