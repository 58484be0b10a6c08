"""An ACP v1 agent on the agent-client-protocol SDK that differs on every run, as real ones do.

What an unchanged real agent varies between two runs of one script: a jittery start-up
(``initialize`` answered after ``--start-delay`` seconds, default random 0-1.2 s), uuid4
sessionIds, toolCallIds and messageIds, ``updatedAt`` timestamps, a ``_meta`` traceparent,
and ``available_commands_update`` sent right after its session/new answer (where it lands
against the client's first prompt on the wire is chance; ``--commands-after-prompt`` holds
it until the first prompt has arrived). Each prompt streams a reply, runs a tool call behind
a permission request and ends the turn. ``--changed`` alters the reply text (the regression
the gates must catch); ``--prompt-delay S`` makes every turn S seconds longer. Options,
not environment variables: the SDK's ``spawn_agent_process`` does not pass the
environment on.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import random
import uuid
from typing import Any

import acp
from acp import schema as s
from tool_turn import permissioned_tool_call

parser = argparse.ArgumentParser()
parser.add_argument("--start-delay", type=float, default=None)
parser.add_argument("--commands-after-prompt", action="store_true")
parser.add_argument("--changed", action="store_true")
parser.add_argument("--prompt-delay", type=float, default=0.0)
OPTIONS = parser.parse_args()


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


class Agent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.commands_sent = asyncio.Event()
        self.prompted = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> s.InitializeResponse:
        delay = OPTIONS.start_delay
        await asyncio.sleep(random.uniform(0.0, 1.2) if delay is None else delay)
        return s.InitializeResponse.model_validate(
            {"protocolVersion": 1, "agentInfo": {"name": "random-ids-agent", "version": "1.0"}}
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> s.NewSessionResponse:
        session_id = str(uuid.uuid4())
        asyncio.get_running_loop().create_task(self.announce(session_id))
        return s.NewSessionResponse(session_id=session_id)

    async def announce(self, session_id: str) -> None:
        """The commands, just after the session/new answer is written (or the first prompt)."""
        await asyncio.sleep(0.001)
        if OPTIONS.commands_after_prompt:
            await self.prompted.wait()
        raw = self.conn._conn
        await raw.send_notification(
            "session/update",
            {
                "sessionId": session_id,
                "update": {
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": [{"name": "plan", "description": "Make a plan"}],
                },
            },
        )
        self.commands_sent.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> s.PromptResponse:
        self.prompted.set()
        await self.commands_sent.wait()  # what the agent sends keeps its own order
        await asyncio.sleep(OPTIONS.prompt_delay)
        raw = self.conn._conn
        text = " ".join(getattr(b, "text", "") for b in prompt)
        said = f"Sure thing: {text}" if OPTIONS.changed else f"Sure: {text}"
        message_id = str(uuid.uuid4())
        for part in (said[: len(said) // 2], said[len(said) // 2 :]):
            await raw.send_notification(
                "session/update",
                {
                    "sessionId": session_id,
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "messageId": message_id,
                        "content": {"type": "text", "text": part},
                    },
                    "_meta": {"traceparent": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"},
                },
            )
        tool_id = f"toolu_{uuid.uuid4()}"
        await permissioned_tool_call(
            self.conn, session_id, tool_id, "write notes.txt", "allow", "reject"
        )
        await raw.send_notification(
            "session/update",
            {
                "sessionId": session_id,
                "update": {
                    "sessionUpdate": "session_info_update",
                    "title": text[:20],
                    "updatedAt": now(),
                },
            },
        )
        return s.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


async def main() -> None:
    await acp.run_agent(Agent())


if __name__ == "__main__":
    asyncio.run(main())
