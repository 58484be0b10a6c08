"""An ACP v2 agent written with the agent-client-protocol SDK (acp.experimental.v2).

Each prompt inserts the user message (returning its messageId) and then, in the
background, reports running, a thought, a chunked agent message, a terminal (snapshot +
output chunks + exit), a compaction (started, summary chunk, completed), a notice, an
unknown ``_vendor_x`` update, usage and idle.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

from acp.experimental import v2
from acp.experimental.v2 import schema as s


class Agent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.turns = 0
        self.tasks: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, info: Any, **kwargs: Any) -> Any:
        return s.InitializeResponse.model_validate(
            {"protocolVersion": 2, "info": {"name": "sdk-v2-agent", "version": "1.0"}}
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> Any:
        return s.NewSessionResponse(session_id=f"v2-{uuid.uuid4().hex[:10]}")

    async def _update(self, session_id: str, update: dict[str, Any]) -> None:
        await self.conn._conn.send_notification(
            "session/update", {"sessionId": session_id, "update": update}
        )

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        self.turns += 1
        n = self.turns
        blocks = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in prompt]
        text = " ".join(b.get("text", "") for b in blocks)
        await self._update(
            session_id, {"sessionUpdate": "user_message", "messageId": f"u{n}", "content": blocks}
        )
        task = asyncio.create_task(self._work(session_id, n, text))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return s.PromptResponse(message_id=f"u{n}")

    async def _work(self, sid: str, n: int, text: str) -> None:
        await asyncio.sleep(0.05)
        u = self._update
        await u(sid, {"sessionUpdate": "state_update", "state": "running"})
        await u(
            sid,
            {
                "sessionUpdate": "agent_thought_chunk",
                "messageId": f"t{n}",
                "content": {"type": "text", "text": "thinking"},
            },
        )
        await u(
            sid,
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"a{n}",
                "content": {"type": "text", "text": "echo: "},
            },
        )
        await u(
            sid,
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"a{n}",
                "content": {"type": "text", "text": text},
            },
        )
        await u(
            sid,
            {
                "sessionUpdate": "terminal_update",
                "terminalId": f"term{n}",
                "command": "ls",
                "cwd": "/tmp",
            },
        )
        for part in (b"file1\n", b"file2\n"):
            await u(
                sid,
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": f"term{n}",
                    "data": base64.b64encode(part).decode(),
                },
            )
        await u(
            sid,
            {
                "sessionUpdate": "terminal_update",
                "terminalId": f"term{n}",
                "exitStatus": {"exitCode": 0},
            },
        )
        await u(
            sid,
            {
                "sessionUpdate": "compaction_update",
                "compactionId": f"c{n}",
                "status": "in_progress",
            },
        )
        await u(
            sid,
            {
                "sessionUpdate": "compaction_summary_chunk",
                "compactionId": f"c{n}",
                "content": {"type": "text", "text": "summary so far"},
            },
        )
        await u(
            sid,
            {"sessionUpdate": "compaction_update", "compactionId": f"c{n}", "status": "completed"},
        )
        await u(sid, {"sessionUpdate": "notice", "title": "slow model", "severity": "warning"})
        await u(sid, {"sessionUpdate": "_vendor_x", "payload": {"k": [1, 2.50, None]}})
        await u(sid, {"sessionUpdate": "usage_update", "used": 100 * n, "size": 1000})
        await u(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})

    async def cancel_session(self, session_id: str, **kwargs: Any) -> None:
        return None


async def main() -> None:
    await v2.run_agent(Agent())


if __name__ == "__main__":
    asyncio.run(main())
