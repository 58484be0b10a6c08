"""SDK clients (agent-client-protocol 1.0.0rc3) that record what they observe."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import acp
from acp import schema as s1
from acp.experimental import v2
from acp.experimental.v2 import schema as s2

# The SDK logs a traceback for update variants it does not know (the _vendor_x updates).
logging.getLogger().setLevel(logging.CRITICAL)

TIMEOUT = 60.0


def dump(model: Any) -> Any:
    if model is None:
        return None
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass
class Observed:
    """What a client saw: updates in arrival order, results, requests from the agent."""

    updates: list[Any] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    agent_requests: list[Any] = field(default_factory=list)


class V1Client:
    def __init__(self, observed: Observed) -> None:
        self.observed = observed

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.observed.updates.append((session_id, dump(update)))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kw: Any
    ) -> Any:
        self.observed.agent_requests.append(
            ("session/request_permission", session_id, dump(tool_call), [dump(o) for o in options])
        )
        return s1.RequestPermissionResponse(
            outcome=s1.AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )


async def run_v1_client(argv: Sequence[str], prompts: Sequence[str], cwd: str) -> Observed:
    """initialize, session/new, then one session/prompt per text; returns observations."""
    observed = Observed()
    async with acp.spawn_agent_process(V1Client(observed), argv[0], *argv[1:]) as (conn, _proc):
        init = await asyncio.wait_for(conn.initialize(protocol_version=1), TIMEOUT)
        observed.results.append(("initialize", dump(init)))
        new = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), TIMEOUT)
        observed.results.append(("session/new", dump(new)))
        for text in prompts:
            result = await asyncio.wait_for(
                conn.prompt(
                    session_id=new.session_id, prompt=[s1.TextContentBlock(type="text", text=text)]
                ),
                TIMEOUT,
            )
            observed.results.append(("session/prompt", dump(result)))
    return observed


class V2Client:
    def __init__(self, observed: Observed) -> None:
        self.observed = observed
        self.idle = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        data = dump(update)
        self.observed.updates.append((session_id, data))
        if data.get("sessionUpdate") == "state_update" and data.get("state") == "idle":
            self.idle.set()


async def run_v2_client(argv: Sequence[str], prompts: Sequence[str], cwd: str) -> Observed:
    """v2: initialize, session/new, then per text a prompt and a wait for idle."""
    observed = Observed()
    client = V2Client(observed)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        conn = v2.connect_to_agent(client, proc.stdin, proc.stdout)
        init = await asyncio.wait_for(
            conn.initialize(protocol_version=2, info=s2.Implementation(name="t", version="1")),
            TIMEOUT,
        )
        observed.results.append(("initialize", dump(init)))
        new = await asyncio.wait_for(conn.new_session(cwd=cwd), TIMEOUT)
        observed.results.append(("session/new", dump(new)))
        for text in prompts:
            client.idle.clear()
            result = await asyncio.wait_for(
                conn.prompt(
                    session_id=new.session_id, prompt=[s2.TextContentBlock(type="text", text=text)]
                ),
                TIMEOUT,
            )
            observed.results.append(("session/prompt", dump(result)))
            await asyncio.wait_for(client.idle.wait(), TIMEOUT)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    return observed
