"""ACP clients on one host of the fleet test, run there by the test (``ip netns exec``).

``python -m tests.peers.fleet_client sdk URL TOKEN NAME,NAME...``: one SDK peer
(``acp.ws``) per name, each with its own WebSocket connection: initialize and session/new,
then one session/prompt per line read on stdin (all peers at once; the text is the peer's
name and the line), ``ok`` on stdout after each round. At end of input the peers close and
one JSON line lists, per peer, every frame it sent and received (exact text) and the
lines of its rounds.

``python -m tests.peers.fleet_client light URL TOKEN N FRAMES TAG``: N plain WebSocket
connections at once to an echo agent (``cat``), FRAMES requests each, every echo checked;
one JSON line of counts.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import aiohttp

from tests.peers.sdk_ws import TapClient


class Peer:
    """One SDK client connection and the frames that crossed it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sent: list[str] = []
        self.received: list[str] = []
        self.connection_id: str | None = None
        self.conn: Any = None
        self.session_id = ""
        self.lines: list[str] = []

    async def open(self, url: str, token: str) -> None:
        import acp
        from acp.ws import create_websocket_stream

        transport = await create_websocket_stream(url, headers={"Authorization": f"Bearer {token}"})
        ws = transport._ws  # type: ignore[attr-defined]
        self.connection_id = ws.response.headers.get("Acp-Connection-Id")
        real_send, real_recv = ws.send, ws.recv

        async def send(data: Any, *args: Any, **kwargs: Any) -> None:
            self.sent.append(data if isinstance(data, str) else bytes(data).decode())
            await real_send(data, *args, **kwargs)

        async def recv(*args: Any, **kwargs: Any) -> Any:
            data = await real_recv(*args, **kwargs)
            self.received.append(data if isinstance(data, str) else bytes(data).decode())
            return data

        ws.send, ws.recv = send, recv
        self.client = TapClient()
        self.conn = acp.connect_to_agent(self.client, transport)
        await self.conn.initialize(protocol_version=1)
        session = await self.conn.new_session(cwd="/tmp")
        self.session_id = session.session_id

    async def prompt(self, line: str) -> None:
        from acp.schema import TextContentBlock

        result = await self.conn.prompt(
            session_id=self.session_id, prompt=[TextContentBlock(text=f"{self.name} {line}")]
        )
        assert result.stop_reason == "end_turn", result
        self.lines.append(line)

    def report(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "connection_id": self.connection_id,
            "session_id": self.session_id,
            "sent": self.sent,
            "received": self.received,
            "lines": self.lines,
            "texts": self.client.texts,
        }


async def sdk(url: str, token: str, names: list[str]) -> None:
    peers = [Peer(name) for name in names]
    await asyncio.gather(*(p.open(url, token) for p in peers))
    print("ok", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if not line:
            break
        await asyncio.gather(*(p.prompt(line) for p in peers))
        print("ok", flush=True)
    await asyncio.gather(*(p.conn.close() for p in peers))
    print(json.dumps([p.report() for p in peers]), flush=True)


def light_frame(tag: str, client: int, n: int) -> str:
    """The ``n``-th request of light client ``client``: distinct bytes, varied lengths."""
    pad = "x" * ((client * 7 + n * 13) % 61)
    return (
        f'{{"jsonrpc":"2.0","id":{n},"method":"_fleet/ping",'
        f'"params":{{"host":"{tag}","client":{client},"pad":"{pad}"}}}}'
    )


async def light(url: str, token: str, count: int, frames: int, tag: str) -> None:
    ready = asyncio.Barrier(count)
    headers = {"Authorization": f"Bearer {token}"}

    async def one(session: aiohttp.ClientSession, client: int) -> int:
        async with session.ws_connect(url, headers=headers, heartbeat=None) as ws:
            await ready.wait()  # all connections (and their agents) up before traffic
            for n in range(frames):
                frame = light_frame(tag, client, n)
                await ws.send_str(frame)
                msg = await ws.receive()
                assert msg.type == aiohttp.WSMsgType.TEXT and msg.data == frame, msg
            await ws.close()
        return frames

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        done = await asyncio.gather(*(one(session, c) for c in range(count)))
    print(json.dumps({"connections": len(done), "frames": sum(done)}), flush=True)


def main(argv: list[str]) -> None:
    mode, url, token = argv[:3]
    if mode == "sdk":
        asyncio.run(sdk(url, token, argv[3].split(",")))
    else:
        asyncio.run(light(url, token, int(argv[3]), int(argv[4]), argv[5]))


if __name__ == "__main__":
    main(sys.argv[1:])
