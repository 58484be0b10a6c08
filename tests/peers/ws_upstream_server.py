"""An in-process ACP-ish WebSocket server to stand upstream of ``acp-proxy ws --upstream``.

It echoes every message (text as text, binary as binary), remembers the handshake headers
it saw, answers with its own ``Acp-Connection-Id`` and a ``Set-Cookie``, and on the text
``close-me CODE REASON`` closes with that code and reason. It records how clients closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web


@dataclass
class Upstream:
    url: str = ""
    seen_headers: list[dict[str, str]] = field(default_factory=list)
    closes: list[tuple[int | None, str]] = field(default_factory=list)
    refuse_with: int | None = None
    runner: Any = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen_headers.append(dict(request.headers))
        if self.refuse_with is not None:
            return web.Response(status=self.refuse_with, text="go away\n")
        ws = web.WebSocketResponse(protocols=("acp.v1",), heartbeat=None)
        ws.headers["Acp-Connection-Id"] = f"upstream-{len(self.seen_headers)}"
        ws.headers["Set-Cookie"] = "affinity=node-7; Path=/"
        await ws.prepare(request)
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                if msg.data.startswith("close-me "):
                    _, code, reason = msg.data.split(" ", 2)
                    await ws.close(code=int(code), message=reason.encode())
                    break
                await ws.send_str(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
        self.closes.append((ws.close_code, ""))
        return ws

    async def start(self) -> Upstream:
        app = web.Application()
        app.router.add_get("/acp", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"ws://127.0.0.1:{port}/acp"
        return self

    async def stop(self) -> None:
        await self.runner.cleanup()
