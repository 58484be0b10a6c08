"""``acp-proxy web URL`` following two real proxies recording into one PostgreSQL at once.

Two ``acp-proxy --record URL`` processes (two "hosts") flood at the same time, so their
batches overlap: the follower's horizon waits for a writer in progress, and it queries
again what lies above the horizon. A WebSocket follower of the real inspector must be
pushed every frame the database ends up with, each exactly once (store/live_tail.py).
(The exact interleaving that lost a late batch before is made on purpose in
``test_pg_api.py``; here it happens only sometimes.)
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from urllib.parse import urlsplit

import aiohttp
import orjson
import psycopg

from acp_proxy.store.pg import connect_pg
from tests.conftest import proxy_exe
from tests.web.helpers import web_server

LINES = 20000
# An agent that floods LINES notifications in bursts (batches back to back on both writers).
PACED_AGENT = f"""
import sys, time
update = '"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"%d"}}'
line = ('{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s","update":{{'
        + update + '}}}}}}\\n').encode()
for n in range({LINES}):
    sys.stdout.buffer.write(line % n)
    if n % 500 == 499:
        sys.stdout.buffer.flush()
        time.sleep(0.005)
sys.stdout.buffer.flush()
"""


def _recorder(url: str, host: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*proxy_exe(), "--record", url, "--label", host, "--", sys.executable, "-c", PACED_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def _follow(base: str, pushed: list[tuple[int, int]], stop: asyncio.Event) -> None:
    parts = urlsplit(base)
    origin = f"{parts.scheme}://{parts.netloc}"
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(f"{origin}/api/live?{parts.query}") as ws,
    ):
        await ws.send_str(orjson.dumps({"follow": True, "after_id": 0, "filter": {}}).decode())
        while not stop.is_set():
            try:
                msg = await ws.receive(timeout=0.5)
            except TimeoutError:
                continue
            data = orjson.loads(msg.data)
            if data["type"] == "frames":
                pushed.extend((f["connection_id"], f["seq"]) for f in data["frames"])


def test_every_frame_of_two_concurrent_writers_is_pushed_once(pg_url: str) -> None:
    connect_pg(pg_url, create=True).close()  # the schema, for the inspector to start on
    stored = "SELECT connection_id, seq FROM frames ORDER BY id"
    with web_server(pg_url) as base:  # type: ignore[arg-type]

        async def run() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
            pushed: list[tuple[int, int]] = []
            stop = asyncio.Event()
            follower = asyncio.create_task(_follow(base, pushed, stop))
            await asyncio.sleep(0.5)  # (subscribed)
            recorders = [_recorder(pg_url, host) for host in ("alpha", "beta")]
            for proc in recorders:  # the agent writes, then exits: the proxy with it
                err = await asyncio.to_thread(proc.stderr.read)  # type: ignore[union-attr]
                assert await asyncio.to_thread(proc.wait, 60) == 0, err
                assert proc.stdin is not None
                proc.stdin.close()
            with psycopg.connect(pg_url) as conn:
                rows = [(int(c), int(s)) for c, s in conn.execute(stored).fetchall()]
            for _ in range(200):  # the follower catches up (polls every 0.2 s)
                if len(pushed) >= len(rows):
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # (and nothing more, nor twice)
            stop.set()
            await follower
            return pushed, rows

        pushed, rows = asyncio.run(run())
    assert len(rows) == 2 * LINES
    assert len(pushed) == len(set(pushed)), "a frame was pushed twice"
    assert sorted(pushed) == sorted(rows)
