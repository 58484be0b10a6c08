"""An ACP v1 agent written with the agent-client-protocol SDK, for replay tests.

Mints random sessionIds; each prompt streams text, runs a tool call behind a permission
request, sends a notice and an unknown ``_vendor_x`` update, and ends the turn.
AGENT_VARIANT=changed alters the text (the regression the agent-side diff must catch).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import acp
from acp import schema as s
from tool_turn import permissioned_tool_call

CHANGED = os.environ.get("AGENT_VARIANT") == "changed"


class Agent:
    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> s.InitializeResponse:
        return s.InitializeResponse.model_validate(
            {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": os.environ.get("AGENT_LOAD") == "1"},
                "agentInfo": {"name": "sdk-test-agent", "version": "1.0"},
            }
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> s.NewSessionResponse:
        return s.NewSessionResponse(session_id=f"sess-{uuid.uuid4().hex[:12]}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> s.PromptResponse:
        text = " ".join(getattr(b, "text", "") for b in prompt)
        said = f"ECHO: {text}" if CHANGED else f"echo: {text}"
        raw = self.conn._conn
        for part in (said[: len(said) // 2], said[len(said) // 2 :]):
            await self.conn.session_update(
                session_id,
                s.AgentMessageChunk(
                    session_update="agent_message_chunk",
                    content=s.TextContentBlock(type="text", text=part),
                ),
            )
        await raw.send_notification(
            "session/update",
            {
                "sessionId": session_id,
                "update": {"sessionUpdate": "notice", "title": "rate limited", "severity": "info"},
            },
        )
        tool_id = f"call-{len(text)}"
        await permissioned_tool_call(self.conn, session_id, tool_id, "touch file", "ok", "no")
        await raw.send_notification(
            "session/update",
            {
                "sessionId": session_id,
                "update": {"sessionUpdate": "_vendor_x", "weird": [1, 2.50, "\u00e9"]},
            },
        )
        return s.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


async def main() -> None:
    await acp.run_agent(Agent())


if __name__ == "__main__":
    asyncio.run(main())
