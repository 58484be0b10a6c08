"""A scripted ACP agent that answers late, for the causal-order tests of every mode.

``late_peer.py stdio DELAY``: an agent over stdio that waits ``DELAY`` seconds before each
answer. ``late_peer.py http late-202|late-sse DELAY``: the same agent served at ``/acp`` on
127.0.0.1 (port printed as ``listening on http://...``), Streamable HTTP and WebSocket:
``late-202`` puts each answer on the SSE stream at once and sends the POST's 202 ``DELAY``
seconds later (so the answer reaches the client before the 202); ``late-sse`` sends the 202 at
once and the answer ``DELAY`` seconds later; a WebSocket peer answers ``DELAY`` seconds late.

The script: ``initialize``, ``session/new`` (session ``s1``), ``session/prompt`` (an update, a
``session/request_permission`` request; the client's answer brings an update and ``end_turn``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any

from aiohttp import WSMsgType, web

Message = dict[str, Any]


class Script:
    """What the agent says to each client message."""

    def __init__(self) -> None:
        self.prompt_id: Any = None

    def answer(self, message: Message) -> list[Message]:
        rid, method = message.get("id"), message.get("method")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
            return [{"jsonrpc": "2.0", "id": rid, "result": result}]
        if method == "session/new":
            return [{"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}}]
        if method == "session/prompt":
            self.prompt_id = rid
            options = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]
            ask = {"sessionId": "s1", "toolCall": {"toolCallId": "t1"}, "options": options}
            return [
                _update("thinking"),
                {
                    "jsonrpc": "2.0",
                    "id": "perm-1",
                    "method": "session/request_permission",
                    "params": ask,
                },
            ]
        if method is None and rid == "perm-1":
            end = {"jsonrpc": "2.0", "id": self.prompt_id, "result": {"stopReason": "end_turn"}}
            return [_update("done"), end]
        return []


def _update(text: str) -> Message:
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": chunk},
    }


def _line(message: Message) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


async def stdio(delay: float) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    script = Script()
    async for line in reader:
        if not line.strip():
            continue
        await asyncio.sleep(delay)
        for out in script.answer(json.loads(line)):
            sys.stdout.buffer.write(_line(out) + b"\n")
            sys.stdout.flush()


class HttpAgent:
    """The script over Streamable HTTP (one connection stream) and WebSocket."""

    def __init__(self, late: str, delay: float) -> None:
        self.late = late
        self.delay = delay
        self.scripts: dict[str, Script] = {}
        self.queues: dict[str, asyncio.Queue[bytes]] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET" and request.headers.get("Upgrade", "").lower() == "websocket":
            return await self.websocket(request)
        cid = request.headers.get("Acp-Connection-Id", "")
        if request.method == "DELETE":
            self.queues.pop(cid, None)
            return web.Response(status=202)
        if request.method == "GET":
            return await self.stream(request, cid)
        message = json.loads(await request.read())
        if message.get("method") == "initialize":
            cid = f"c{len(self.scripts) + 1}"
            self.scripts[cid] = Script()
            self.queues[cid] = asyncio.Queue()
            (answer,) = self.scripts[cid].answer(message)
            return web.Response(
                body=_line(answer),
                content_type="application/json",
                headers={"Acp-Connection-Id": cid},
            )
        out = self.scripts[cid].answer(message)
        if self.late == "late-202":
            self.push(cid, out)
            await asyncio.sleep(self.delay)
        else:
            asyncio.get_running_loop().call_later(self.delay, self.push, cid, out)
        return web.Response(status=202, headers={"Acp-Connection-Id": cid})

    def push(self, cid: str, out: list[Message]) -> None:
        queue = self.queues.get(cid)
        for message in out:
            if queue is not None:
                queue.put_nowait(_line(message))

    async def stream(self, request: web.Request, cid: str) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if request.headers.get("Acp-Session-Id") is not None:
            return resp  # everything goes on the connection stream
        queue = self.queues[cid]
        while cid in self.queues:
            try:
                data = await asyncio.wait_for(queue.get(), 0.5)
            except TimeoutError:
                continue
            await resp.write(b"data: " + data + b"\n\n")
        return resp

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=("acp.v1",), heartbeat=None)
        await ws.prepare(request)
        script = Script()
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await asyncio.sleep(self.delay)
                for out in script.answer(json.loads(msg.data)):
                    await ws.send_str(_line(out).decode())
        return ws


async def http(late: str, delay: float) -> None:
    app = web.Application()
    app.router.add_route("*", "/acp", HttpAgent(late, delay).handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/acp", file=sys.stderr, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        asyncio.run(stdio(float(sys.argv[2])))
    else:
        asyncio.run(http(sys.argv[2], float(sys.argv[3])))
