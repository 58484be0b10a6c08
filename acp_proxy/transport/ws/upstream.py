"""Upstream mode of ``acp-proxy ws``: each client WebSocket relayed to its own upstream one.

Message for message in both directions, recorded on the way; close codes and reasons pass
through (:func:`acp_proxy.transport.ws.rules.relay_close`), end-to-end handshake headers
too, and a refused upstream handshake is answered to the client with its status.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web
from multidict import CIMultiDict

from acp_proxy.recorder.handle import ConnectionRecorder
from acp_proxy.transport.tls import tls_failure
from acp_proxy.transport.ws.handshake import Handshake
from acp_proxy.transport.ws.rules import (
    CLOSE_GOING_AWAY,
    downstream_response_headers,
    parse_subprotocols,
    relay_close,
    upstream_request_headers,
)
from acp_proxy.transport.ws.sockets import (
    AnyWebSocket,
    ClientWebSocket,
    CloseInfo,
    Cork,
    close_info,
    close_quietly,
    data_queued,
    record_close,
    settle,
    take_queued,
)
from acp_proxy.wire.frame import A2C, C2A, Direction


async def serve_upstream(handshake: Handshake) -> web.StreamResponse:
    """Open the upstream WebSocket for this upgrade request and relay until either closes."""
    s = handshake.settings
    request = handshake.request
    assert s.upstream is not None
    headers = CIMultiDict(
        upstream_request_headers(request.headers.items(), strip_authorization=s.token is not None)
    )
    try:
        up = await handshake.client_session().ws_connect(
            s.upstream,
            headers=headers,
            protocols=parse_subprotocols(request.headers.get("Sec-WebSocket-Protocol")),
            heartbeat=s.heartbeat,
            max_msg_size=s.max_message + 1,
            decode_text=False,
        )
    except aiohttp.WSServerHandshakeError as exc:
        status = exc.status if 400 <= exc.status < 500 else 502
        return handshake.refuse(
            status,
            f"upstream refused the WebSocket handshake: {exc.status} {exc.message}",
        )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return handshake.refuse(
            502,
            f"cannot reach upstream {s.upstream}: {tls_failure(exc) or exc or type(exc).__name__}",
        )
    assert isinstance(up, ClientWebSocket)
    try:
        ws = await handshake.accept(
            [up.protocol] if up.protocol else [],
            downstream_response_headers(up.response_headers),
        )
    except BaseException:
        await up.close(code=CLOSE_GOING_AWAY, message=b"client handshake failed")
        raise
    rec = handshake.record_connection("ws-upstream", ws, agent_command=[s.upstream])
    await relay_websockets(ws, up, rec, request.transport)
    return ws


async def _pump_ws(
    src: AnyWebSocket,
    dst: AnyWebSocket,
    dst_transport: Any,
    direction: Direction,
    rec: ConnectionRecorder,
    by: str,
) -> CloseInfo:
    """Forward messages from ``src`` to ``dst`` until ``src`` closes; return how it closed.

    The messages ``src`` has already read when one arrives are taken with it (a turn):
    recorded in one call, before any is sent (causal order), then sent together
    (:class:`Cork`). A lone message (a round trip) is recorded and sent on its own.
    """
    dst_ok = True
    cork = Cork(dst_transport)
    try:
        while True:
            msg = await src.receive()
            if msg.type != WSMsgType.TEXT and msg.type != WSMsgType.BINARY:
                return close_info(msg, src, by)
            if not data_queued(src):
                rec.frame(direction, msg.data, binary=msg.type == WSMsgType.BINARY)
                if dst_ok:
                    dst_ok = await _send(dst, msg)
                continue
            turn, last = await take_queued(src, msg)
            rec.frames(
                direction, [m.data for m in turn], [m.type == WSMsgType.BINARY for m in turn]
            )
            if dst_ok:
                cork.hold()
                for m in turn:
                    dst_ok = await _send(dst, m)
                    if not dst_ok:
                        break
                cork.release()
            if last is not None:
                return close_info(last, src, by)
    finally:
        cork.release()


async def _send(dst: AnyWebSocket, msg: aiohttp.WSMessage) -> bool:
    """Send one message; False if ``dst`` is gone (what follows is then only recorded)."""
    try:
        await dst.send_frame(msg.data, msg.type)
    except (ConnectionError, RuntimeError):
        return False
    return True


async def relay_websockets(
    client: web.WebSocketResponse,
    upstream: ClientWebSocket,
    rec: ConnectionRecorder,
    client_transport: Any,
) -> None:
    """WebSocket <-> WebSocket, message for message; close codes and reasons pass through."""
    up_transport = upstream.transport
    c2a = asyncio.create_task(_pump_ws(client, upstream, up_transport, C2A, rec, "client"))
    a2c = asyncio.create_task(_pump_ws(upstream, client, client_transport, A2C, rec, "upstream"))
    try:
        done, _ = await asyncio.wait({c2a, a2c}, return_when=asyncio.FIRST_COMPLETED)
        first = c2a if c2a in done else a2c
        info = first.result()
        record_close(rec, info.by, info.code, info.reason)
        other_ws: AnyWebSocket = upstream if first is c2a else client
        code, reason = relay_close(info.code, info.reason, peer=info.by)
        await close_quietly(other_ws, code, reason)
        await settle(c2a if first is a2c else a2c, 10.0)
    finally:
        c2a.cancel()
        a2c.cancel()
        await close_quietly(client, CLOSE_GOING_AWAY, "")
        await close_quietly(upstream, CLOSE_GOING_AWAY, "")
        rec.close()
