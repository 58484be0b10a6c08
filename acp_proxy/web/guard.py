"""The middleware every inspector request passes, and the JSON answers it and the API give.

:func:`_guard` refuses what the inspector never serves (a request line over
``MAX_LINE_BYTES``, a method other than GET/HEAD), checks the token in constant time when
one is configured (header ``Authorization: Bearer``, ``?token=`` or the cookie it sets) and
otherwise requires a loopback ``Host`` (against DNS rebinding), and puts the strict
Content-Security-Policy and the other security headers on every response. An exception a
handler raises becomes the API's JSON error: :class:`RecordingError` 503, ``ValueError`` 400.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from acp_proxy.console import warn
from acp_proxy.store.schema import RecordingError
from acp_proxy.transport.address import is_loopback
from acp_proxy.transport.server_limits import MAX_LINE_BYTES

TOKEN_COOKIE = "acp_proxy_token"

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

TOKEN_KEY = web.AppKey("token", str)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


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
