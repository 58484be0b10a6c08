"""An SDK client for the tests: ``sdk_http_client.py URL`` or ``sdk_http_client.py -- AGENT...``.

Over Streamable HTTP (``acp.http.create_http_stream``) or over stdio (the SDK's
``spawn_agent_process``) it runs initialize, session/new, one prompt (answering the
permission request with its first option) and, when the agent can load sessions, a
session/load of that session on a second connection; then prints one JSON line with what it
saw (every session/update and permission request as the SDK parsed them), so that the two
transports can be compared.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import acp
from acp.schema import AllowedOutcome, RequestPermissionResponse, TextContentBlock


class Collector:
    """Keeps what the agent sent; allows every permission with the first option."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.seen.append(["update", session_id, update.model_dump(mode="json", by_alias=True)])

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        self.seen.append(["permission", session_id, [o.option_id for o in options]])
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )


@contextlib.asynccontextmanager
async def connection(target: list[str], client: Collector) -> AsyncIterator[Any]:
    if target[0] == "--":
        async with acp.spawn_agent_process(client, target[1], *target[2:]) as (conn, _proc):
            yield conn
        return
    from acp.http import create_http_stream

    transport = create_http_stream(target[0])
    conn = acp.connect_to_agent(client, transport)
    try:
        yield conn
    finally:
        await conn.close()


async def main(target: list[str]) -> None:
    client = Collector()
    out: dict[str, Any] = {}
    async with connection(target, client) as conn:
        init = await conn.initialize(protocol_version=1)
        out["init"] = init.model_dump(mode="json", by_alias=True)
        session = await conn.new_session(cwd="/tmp", mcp_servers=[])
        out["session"] = session.session_id
        result = await conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(type="text", text="hello")]
        )
        out["stop"] = result.stop_reason
    out["turn"] = client.seen
    caps = out["init"].get("agentCapabilities") or {}
    if caps.get("loadSession"):
        client.seen = []
        async with connection(target, client) as conn:
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd="/tmp", session_id=out["session"], mcp_servers=[])
        out["load"] = client.seen
    print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
