"""The inspector's aiohttp server: static page, read-only JSON API and live WebSocket push.

It serves the page and routes the API (:mod:`acp_proxy.web.api`) behind the guard
(:mod:`acp_proxy.web.guard`). Endpoints (all GET): ``/`` the page, ``/static/*`` its assets
(shipped in the package, no CDN), ``/api/info``, ``/api/connections``, ``/api/values``,
``/api/frames`` (keyset pages), ``/api/frames/{id}`` (one frame, exact bytes),
``/api/frames/{id}/raw`` (download), ``/api/connections/{id}/findings``,
``/api/connections/{id}/sessions/{sid}`` (the reconstructed conversation),
``/api/connections/{id}/timeline`` (waterfall, turns and per-method latency figures),
``/api/export.jsonl`` (the filtered frames as JSON lines), ``/api/diff?a=&b=`` (two
connections, or with ``as=&bs=`` two turns, aligned), ``/api/search?q=`` (the search index)
and ``/api/live`` (WebSocket: the server polls the database every ``poll_interval`` seconds
and pushes the frames committed since, also those several writers commit out of id order:
:mod:`acp_proxy.store.live_tail`).

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
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from acp_proxy.transport.address import check_listen
from acp_proxy.transport.server_limits import app_runner
from acp_proxy.transport.tls import scheme_for
from acp_proxy.web import store
from acp_proxy.web.api import (
    DB_KEY,
    POLL_INTERVAL,
    POLL_KEY,
    SOCKETS_KEY,
    api_connections,
    api_diff,
    api_events,
    api_export,
    api_findings,
    api_frame,
    api_frame_raw,
    api_frames,
    api_info,
    api_live,
    api_search,
    api_session,
    api_timeline,
    api_values,
)
from acp_proxy.web.guard import READ_LINE_BYTES, TOKEN_KEY, _guard

__all__ = [
    "InspectorHandle",
    "make_app",
    "serve_forever",
    "start_in_thread",
]

STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


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
