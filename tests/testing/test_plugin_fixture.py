"""This project's own use of the pytest plugin: a committed recording, replayed.

Re-record with: pytest tests/testing/test_plugin_fixture.py --acp-record-mode=all
"""

from __future__ import annotations

import pytest

from acp_proxy.testing import Stop
from tests.replay.conftest import AGENT_V1


@pytest.mark.acp_agent(*AGENT_V1)
async def test_turn_against_the_recorded_sdk_agent(acp_agent) -> None:  # type: ignore[no-untyped-def]
    async with acp_agent.connect() as client:
        init = await client.initialize(protocol_version=1)
        assert init["agentInfo"]["name"] == "sdk-test-agent"
        session = await client.new_session()
        assert await session.prompt("hello from the plugin") == "end_turn"
        seen = []
        while not isinstance(update := await session.next_update(), Stop):
            seen.append(update["sessionUpdate"])
        assert update.stop_reason == "end_turn"
        assert seen == [
            "agent_message_chunk",
            "agent_message_chunk",
            "notice",
            "tool_call",
            "tool_call_update",
            "_vendor_x",
        ]
        permission = [
            e.message
            for e in client.received()
            if e.message.get("method") == "session/request_permission"
        ]
        assert len(permission) == 1
