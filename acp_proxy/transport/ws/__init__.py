"""The WebSocket transport's public names, from the modules that hold them (one job each).

* :mod:`~acp_proxy.transport.ws_server`: the server (handshake, dispatch, :func:`serve`);
* :mod:`~acp_proxy.transport.ws_agent`: one connection bridged to one agent process;
* :mod:`~acp_proxy.transport.ws_upstream`: one connection relayed to an upstream WebSocket;
* :mod:`~acp_proxy.transport.ws_connect`: ``acp-proxy connect``, stdio to a WebSocket;
* :mod:`~acp_proxy.transport.ws_io`: aiohttp WebSocket objects and close helpers they share;
* :mod:`~acp_proxy.transport.ws_bridge`: the rules, as pure functions.

Built on aiohttp (server and client in one library, per-message size limit, ping/pong
heartbeat, close codes with reasons, ``decode_text=False`` so text payloads arrive as the
exact bytes that crossed).
"""

from __future__ import annotations

from acp_proxy.transport.ws_agent import AgentBridge
from acp_proxy.transport.ws_connect import ConnectSettings, run_connect
from acp_proxy.transport.ws_io import (
    AnyWebSocket,
    CloseInfo,
    close_info,
    close_quietly,
    log,
    record_close,
)
from acp_proxy.transport.ws_server import SessionHandler, WsServer, WsSettings, format_url, serve
from acp_proxy.transport.ws_upstream import relay_websockets

__all__ = [
    "AgentBridge",
    "AnyWebSocket",
    "CloseInfo",
    "ConnectSettings",
    "SessionHandler",
    "WsServer",
    "WsSettings",
    "close_info",
    "close_quietly",
    "format_url",
    "log",
    "record_close",
    "relay_websockets",
    "run_connect",
    "serve",
]
