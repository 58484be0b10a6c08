"""The SDK's WebSocket client (``acp.ws``), with a tap on the exact frames it sent and got."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import acp
from acp.schema import (
    AllowedOutcome,
    RequestPermissionResponse,
    TextContentBlock,
)
from acp.ws import create_websocket_stream


class TapClient:
    """An SDK client that collects updates and allows every permission request."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.texts: list[str] = []

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        content = getattr(update, "content", None)
        text = getattr(content, "text", None)
        if isinstance(text, str):
            self.texts.append(text)

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=options[0].option_id))


@dataclass
class Tapped:
    """What one SDK WebSocket session sent and received, frame by frame (payload bytes)."""

    sent: list[bytes] = field(default_factory=list)
    received: list[bytes] = field(default_factory=list)
    connection_id: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    client: TapClient = field(default_factory=TapClient)


async def sdk_prompt_over_ws(url: str, text: str, headers: dict[str, str] | None = None) -> Tapped:
    """initialize, session/new and one session/prompt with the SDK's WebSocket transport."""
    tapped = Tapped()
    transport = await create_websocket_stream(url, headers=headers)
    ws = transport._ws  # type: ignore[attr-defined]
    tapped.connection_id = ws.response.headers.get("Acp-Connection-Id")
    real_send, real_recv = ws.send, ws.recv

    async def send(data: Any, *args: Any, **kwargs: Any) -> None:
        tapped.sent.append(data.encode() if isinstance(data, str) else bytes(data))
        await real_send(data, *args, **kwargs)

    async def recv(*args: Any, **kwargs: Any) -> Any:
        data = await real_recv(*args, **kwargs)
        tapped.received.append(data.encode() if isinstance(data, str) else bytes(data))
        return data

    ws.send, ws.recv = send, recv
    conn = acp.connect_to_agent(tapped.client, transport)
    try:
        init = await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd="/tmp")
        result = await conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(text=text)]
        )
        tapped.result = {
            "protocol": init.protocol_version,
            "session": session.session_id,
            "stop": result.stop_reason,
        }
    finally:
        await conn.close()
    return tapped
