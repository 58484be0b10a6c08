"""The SDK's own ACP server (``acp.http.asgi``) run by uvicorn, for ``serve --upstream`` tests.

``asgi_upstream.py`` binds 127.0.0.1 on a free port, prints ``listening on http://...`` and
serves the SDK test agent (tests/peers/sdk_agent.py) over Streamable HTTP and WebSocket.
Like a load balancer, it sets ``Set-Cookie: affinity=node1`` on every HTTP response and echoes
the ``Cookie`` header it got as ``X-Cookie-Seen``.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from acp.http.asgi import create_asgi_app

sys.path.insert(0, str(Path(__file__).parent))
from sdk_agent import EchoishAgent


def agent_for(conn: Any) -> EchoishAgent:
    agent = EchoishAgent()
    agent.on_connect(conn)
    return agent


def with_affinity_cookie(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        cookie = dict(scope["headers"]).get(b"cookie", b"")

        async def send_with_cookie(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"set-cookie", b"affinity=node1; Path=/"))
                headers.append((b"x-cookie-seen", cookie))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_cookie)

    return wrapped


if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}/acp", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        with_affinity_cookie(create_asgi_app(agent_for)),
        log_level="warning",
        ws="websockets-sansio",
    )
    uvicorn.Server(config).run(sockets=[sock])
