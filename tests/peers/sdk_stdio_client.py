"""An SDK client over stdio for the bridge chain: ``sdk_stdio_client.py -- AGENT...``.

Launches AGENT (here: ``acp-proxy connect ...``) with the SDK's ``spawn_agent_process``,
runs initialize, session/new and one prompt, and prints one JSON line with what it got.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import acp
from acp.schema import TextContentBlock


class Collector:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        if content is not None and getattr(content, "text", None) is not None:
            self.chunks.append(content.text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main(argv: list[str]) -> None:
    client = Collector()
    async with acp.spawn_agent_process(client, argv[0], *argv[1:]) as (conn, _proc):
        init = await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd="/tmp")
        result = await conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(text="over the bridge")]
        )
        print(
            json.dumps(
                {
                    "protocol": init.protocol_version,
                    "session": session.session_id,
                    "stop": result.stop_reason,
                    "chunks": client.chunks,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[sys.argv.index("--") + 1 :]))
