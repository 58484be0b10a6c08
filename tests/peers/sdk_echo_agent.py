"""A small agent built on the agent-client-protocol SDK, speaking ACP v1 over stdio.

It answers initialize and session/new, and for each session/prompt streams the prompt's text
back as two agent_message_chunk updates before ending the turn with ``end_turn``.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import acp
from acp.schema import (
    AgentMessageChunk,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    TextContentBlock,
)


class EchoSdkAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.ids = itertools.count(1)

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=1)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"sdk_sess_{next(self.ids)}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        for part in ("echo: ", text):
            await self.conn.session_update(
                session_id,
                AgentMessageChunk(content=TextContentBlock(text=part)),
            )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(acp.run_agent(EchoSdkAgent()))
