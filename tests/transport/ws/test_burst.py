"""A burst of connections: one connection's agent starting never holds up another's upgrade."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from tests.peers.slow_start import stalled_agent
from tests.transport.ws.helpers import ws_server

BOUND = 30.0
"""A bound on each wait (not a threshold: the proxy answers at once with the fix)."""


async def test_an_upgrade_completes_while_another_connections_agent_is_starting(
    tmp_path: Path,
) -> None:
    with stalled_agent(tmp_path) as start, ws_server(["--", str(start.command)]) as server:
        async with aiohttp.ClientSession() as session:
            first = asyncio.create_task(session.ws_connect(server.url))
            await asyncio.wait_for(asyncio.to_thread(start.wait_blocked), BOUND)
            start.unstall()
            # The first connection's agent is still being started (its exec waits for the
            # lease): the second connection's upgrade and echo must not wait for it.
            second = await asyncio.wait_for(session.ws_connect(server.url), BOUND)
            await second.send_str('{"jsonrpc":"2.0","method":"_b"}')
            echoed = await asyncio.wait_for(second.receive(), BOUND)
            assert echoed.data == '{"jsonrpc":"2.0","method":"_b"}'
            assert not first.done()
            await second.close()
            start.release()
            try:  # the first agent starts now, or its exec fails (the file was open)
                ws = await asyncio.wait_for(first, BOUND)
                await ws.close()
            except aiohttp.WSServerHandshakeError as exc:
                assert exc.status == 502
    assert "Traceback" not in server.stderr_text
