"""Traffic of the official Python SDK (client and agent) through the real proxy checks clean."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from acp import spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    RequestPermissionResponse,
    TextContentBlock,
)

from tests.conftest import proxy_exe
from tests.peers import PEERS

SDK_AGENT = PEERS / "sdk_agent.py"


class AllowingClient:
    """A minimal SDK client: keeps updates, allows the first permission option."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=options[0].option_id))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def test_sdk_client_and_sdk_agent_session_checks_clean(tmp_path: Path) -> None:
    db = tmp_path / "sdk.db"
    client = AllowingClient()
    argv = [*proxy_exe(), "--record", str(db), "--", sys.executable, str(SDK_AGENT)]
    async with spawn_agent_process(client, argv[0], *argv[1:]) as (conn, proc):
        await asyncio.wait_for(
            conn.initialize(
                protocol_version=1,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="check-test-client", version="1.0"),
            ),
            60,
        )
        session = await asyncio.wait_for(conn.new_session(cwd=str(tmp_path), mcp_servers=[]), 60)
        for text in ("hello", "again"):
            result = await asyncio.wait_for(
                conn.prompt(
                    session_id=session.session_id,
                    prompt=[TextContentBlock(type="text", text=text)],
                ),
                60,
            )
            assert result.stop_reason == "end_turn"
    await asyncio.wait_for(proc.wait(), 60)
    assert client.updates

    done = await asyncio.to_thread(
        subprocess.run,
        [*proxy_exe(), "check", str(db), "--json"],
        capture_output=True,
        timeout=120,
    )
    doc = orjson.loads(done.stdout)
    findings = [f for c in doc["connections"] for f in c["findings"]]
    assert done.returncode == 0, findings
    assert [f for f in findings if f["tier"] != "info"] == []
    (conn_doc,) = doc["connections"]
    assert conn_doc["protocol_version"] == 1
    assert conn_doc["frames"] >= 12  # initialize, session/new, 2 prompts with permissions
