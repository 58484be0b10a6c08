"""The benchmark's peer written with the official Python SDK (``agent-client-protocol``).

Extension methods, so every transport routes them the same way (no session stream):

- ``_bench/ping`` is answered at once (round-trip latency);
- ``_bench/flood`` with ``{"count": N}`` sends N ``_bench/chunk`` notifications (about 300
  bytes each, the text of ``bench_agent.py``'s chunks), then answers (throughput).

``python bench/bench_sdk_agent.py`` runs it over stdio (``run_agent``); with ``--serve`` it
is served by the SDK's own Streamable HTTP + WebSocket server (``acp.http.asgi``) under
uvicorn on 127.0.0.1 (a free port, printed as ``listening on http://.../acp``): the peer
"connected directly" over the network that ``bench_http.py`` compares ``serve`` against.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

from acp import InitializeResponse, run_agent
from acp.schema import AgentCapabilities, Implementation

CHUNK_TEXT = "The quick brown fox jumps over the lazy dog. " * 2 + "Lorem ipsum dolor."


class BenchAgent:
    """Answers ``initialize`` and the two bench extension methods."""

    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="bench-sdk-agent", version="1"),
        )

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "bench/flood":
            for n in range(int(params.get("count", 0))):
                chunk = {"messageId": f"msg_{n // 50:08d}", "text": f"{CHUNK_TEXT}{n:08d}"}
                await self.conn.ext_notification("bench/chunk", chunk)
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


def serve() -> None:
    import uvicorn
    from acp.http.asgi import create_asgi_app

    def agent_for(conn: Any) -> BenchAgent:
        agent = BenchAgent()
        agent.on_connect(conn)
        return agent

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn runs
    port = sock.getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}/acp", file=sys.stderr, flush=True)
    config = uvicorn.Config(create_asgi_app(agent_for), log_level="warning", ws="websockets-sansio")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        asyncio.run(run_agent(BenchAgent()))
