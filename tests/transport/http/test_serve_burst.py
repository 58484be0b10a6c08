"""``serve``: one connection's agent starting never holds up another's ``initialize``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2

from tests.peers.slow_start import stalled_agent
from tests.transport.http.helpers import serving

INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
JSON = {"Content-Type": "application/json"}
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}'
AGENT = f"#!/bin/sh\nread line\necho '{ANSWER.decode()}'\nexec cat\n"
BOUND = 30.0
"""A bound on each wait (not a threshold: the proxy answers at once with the fix)."""


def test_an_initialize_is_answered_while_another_connections_agent_is_starting(
    tmp_path: Path,
) -> None:
    async def run(url: str) -> None:
        async with httpx2.AsyncClient(timeout=BOUND) as client:
            first = asyncio.create_task(client.post(url, content=INIT, headers=JSON))
            await asyncio.wait_for(asyncio.to_thread(start.wait_blocked), BOUND)
            start.unstall()
            # The first agent's exec waits for the lease; the second initialize must not.
            second = await client.post(url, content=INIT, headers=JSON)
            assert second.status_code == 200, second.text
            assert second.content.rstrip(b"\n") == ANSWER
            assert not first.done()
            start.release()
            answer = await asyncio.wait_for(first, BOUND)  # started, or its exec failed
            assert answer.status_code in (200, 502), answer.text

    with stalled_agent(tmp_path, AGENT) as start, serving(["--", str(start.command)]) as server:
        asyncio.run(run(server.url))
    assert "Traceback" not in server.stderr_text
