"""The tool call every SDK test agent makes in a turn: announced, permission asked, settled.

Run as scripts, the agents import this from their own folder (``sys.path[0]``).
"""

from __future__ import annotations

from typing import Any

from acp import schema as s


async def permissioned_tool_call(
    conn: Any, session_id: str, tool_id: str, title: str, allow: str, reject: str
) -> str:
    """Announce ``tool_id``, ask the client, report how it ended; the option chosen."""
    await conn.session_update(
        session_id,
        s.ToolCallStart(
            session_update="tool_call",
            tool_call_id=tool_id,
            title=title,
            kind="edit",
            status="pending",
        ),
    )
    answer = await conn.request_permission(
        session_id=session_id,
        tool_call=s.ToolCallUpdate(tool_call_id=tool_id),
        options=[
            s.PermissionOption(option_id=allow, name="Allow", kind="allow_once"),
            s.PermissionOption(option_id=reject, name="Reject", kind="reject_once"),
        ],
    )
    chosen: str = getattr(answer.outcome, "option_id", "cancelled")
    await conn.session_update(
        session_id,
        s.ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=tool_id,
            status="completed" if chosen == allow else "failed",
        ),
    )
    return chosen
