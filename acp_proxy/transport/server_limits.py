"""The HTTP limits and logging every aiohttp server of acp-proxy runs with.

Used by the WebSocket proxy (``acp-proxy ws``), the replay server (``replay --listen``) and
the web inspector, so each refuses the same abuse the same way:

* request line and header fields of at most :data:`MAX_LINE_BYTES` / :data:`MAX_FIELD_BYTES`
  bytes, at most :data:`MAX_HEADERS` header fields (longer: aiohttp's 400);
* a header read timeout: a connection that has not sent a complete request within
  :func:`header_timeout` seconds (``ACP_PROXY_HEADER_TIMEOUT``, default
  :data:`DEFAULT_HEADER_TIMEOUT`) is closed, and so is a keep-alive connection idle that
  long (a request being answered, or an upgraded WebSocket, is never cut);
* aiohttp's own error logging (a traceback per bad request) turned into one line per
  incident on stderr through :func:`acp_proxy.console.warn`; no access log.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from aiohttp import web

from acp_proxy.console import warn

MAX_LINE_BYTES = 8190
MAX_FIELD_BYTES = 8190
MAX_HEADERS = 128
DEFAULT_HEADER_TIMEOUT = 10.0
HEADER_TIMEOUT_ENV = "ACP_PROXY_HEADER_TIMEOUT"
MAX_DETAIL_CHARS = 200


def header_timeout() -> float:
    """Seconds a client gets to send a complete request (``ACP_PROXY_HEADER_TIMEOUT``)."""
    text = os.environ.get(HEADER_TIMEOUT_ENV, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_HEADER_TIMEOUT
    return value if value > 0 else DEFAULT_HEADER_TIMEOUT


class _OneLine(logging.Handler):
    """Each record as one ``acp-proxy: ...`` line: the message and the exception's text."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                detail = " ".join(str(exc).split()) or type(exc).__name__
                detail = detail.split(": bytearray(", 1)[0]  # not the offending bytes
                if len(detail) > MAX_DETAIL_CHARS:
                    detail = detail[: MAX_DETAIL_CHARS - 3] + "..."
                text = f"{text}: {detail}"
            warn(text.replace("Error handling request", "bad HTTP request"))
        except Exception:  # pragma: no cover - logging never raises into the server
            self.handleError(record)


def _server_logger() -> logging.Logger:
    logger = logging.getLogger("acp_proxy.http")
    if not logger.handlers:
        logger.addHandler(_OneLine())
        logger.setLevel(logging.WARNING)  # aiohttp's debug chatter (bad methods) stays out
        logger.propagate = False
    return logger


def server_options() -> dict[str, Any]:
    """Keyword arguments for :class:`aiohttp.web.AppRunner` with these limits and logging."""
    return {
        "access_log": None,
        "handle_signals": False,
        "logger": _server_logger(),
        "keepalive_timeout": header_timeout(),
        "max_line_size": MAX_LINE_BYTES,
        "max_field_size": MAX_FIELD_BYTES,
        "max_headers": MAX_HEADERS,
    }


def app_runner(app: web.Application, **kwargs: Any) -> web.AppRunner:
    """An :class:`aiohttp.web.AppRunner` for ``app`` with :func:`server_options` (overridable)."""
    return web.AppRunner(app, **(server_options() | kwargs))
