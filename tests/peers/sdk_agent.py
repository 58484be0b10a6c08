"""An ACP v1 agent written with the official Python SDK (agent-client-protocol), for tests.

Each prompt streams three ``agent_message_chunk`` updates (one with non-ASCII text and a
large one when the prompt says "big"), asks ``session/request_permission`` and reports the
chosen option in a final chunk, then ends the turn with ``end_turn``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from acp import InitializeResponse, NewSessionResponse, PromptResponse, run_agent
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    Implementation,
    PermissionOption,
    TextContentBlock,
    ToolCallUpdate,
)


class EchoishAgent:
    """Answers every prompt with a few chunks and one permission request."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="sdk-test-agent", version="0.0.1"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self.sessions += 1
        return NewSessionResponse(session_id=f"sess_{self.sessions}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt)
        chunks = [f"you said: {text}", "naïve café — ünïcödé ✓", "done"]
        if "big" in text:
            chunks.append("x" * 3_000_000)
        for i, chunk in enumerate(chunks):
            await self.conn.session_update(
                session_id=session_id,
                update=AgentMessageChunk(
                    content=TextContentBlock(type="text", text=chunk), message_id=f"msg_{i}"
                ),
            )
        answer = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="call_1", title="write a file"),
            options=[
                PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                PermissionOption(option_id="deny", name="Deny", kind="reject_once"),
            ],
        )
        chosen = getattr(answer.outcome, "option_id", "cancelled")
        await self.conn.session_update(
            session_id=session_id,
            update=AgentMessageChunk(
                content=TextContentBlock(type="text", text=f"permission: {chosen}"),
                message_id="msg_final",
            ),
        )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    sys.stderr.write("sdk agent starting\n")
    sys.stderr.flush()
    asyncio.run(run_agent(EchoishAgent()))
