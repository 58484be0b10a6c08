"""The benchmark's baseline: a minimal asyncio line relay between our stdio and an agent.

``python bench/relay.py AGENT [ARGS]...`` forwards stdin lines to the agent and the agent's
stdout lines to stdout, one line at a time, with no recording. It is what a naive proxy
written in a few lines of asyncio looks like, and the yardstick acp-proxy is compared with.
"""

from __future__ import annotations

import asyncio
import sys

LIMIT = 256 * 1024 * 1024


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        line = await reader.readline()
        if not line:
            break
        writer.write(line)
        await writer.drain()
    writer.close()


async def main(argv: list[str]) -> int:
    loop = asyncio.get_running_loop()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LIMIT
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin = asyncio.StreamReader(limit=LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    stdout = asyncio.StreamWriter(transport, protocol, None, loop)
    to_agent = asyncio.create_task(relay(stdin, proc.stdin))
    await relay(proc.stdout, stdout)
    to_agent.cancel()
    return await proc.wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
