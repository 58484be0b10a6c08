"""A scripted ACP v2 agent for the web inspector tests (stdio, newline-delimited JSON).

It answers ``initialize``, ``session/new`` and ``session/prompt``; each prompt produces a
running state, the user message, a folded thought, a streamed agent message, a tool call
(pending then completed), a plan, a live-only notice, an unknown ``_vendor`` update and an
idle state. A prompt whose text contains ``xss`` makes the agent answer with a message
carrying ``<script>`` markup; ``bad-utf8`` makes it write one line of invalid UTF-8.
"""

from __future__ import annotations

import json
import sys
from typing import Any

out = sys.stdout.buffer


def send(obj: Any) -> None:
    out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    out.flush()


def update(session: str, upd: dict[str, Any]) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session, "update": upd},
        }
    )


def prompt_text(params: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in params.get("prompt", []) if isinstance(b, dict))


turn = 0
for line in sys.stdin.buffer:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if not isinstance(msg, dict) or "method" not in msg:
        continue
    method, params, rid = msg["method"], msg.get("params") or {}, msg.get("id")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": 2,
                    "agentInfo": {"name": "scripted-agent", "version": "1.0"},
                    "agentCapabilities": {},
                },
            }
        )
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "sess_web_1"}})
    elif method == "session/prompt":
        turn += 1
        sid = params.get("sessionId", "sess_web_1")
        text = prompt_text(params)
        user_id = f"msg_user_{turn}"
        update(sid, {"sessionUpdate": "state_update", "state": "running"})
        send({"jsonrpc": "2.0", "id": rid, "result": {"messageId": user_id}})
        update(
            sid,
            {
                "sessionUpdate": "user_message",
                "messageId": user_id,
                "content": [{"type": "text", "text": text}],
            },
        )
        update(
            sid,
            {
                "sessionUpdate": "agent_thought_chunk",
                "messageId": f"msg_agent_{turn}",
                "content": {"type": "text", "text": "Let me think about the request carefully."},
            },
        )
        if "bad-utf8" in text:
            out.write(b'{"jsonrpc":"2.0","method":"_vendor/bytes","params":{"x":"\xff\xfe"}}\n')
            out.flush()
        reply = (
            "<script>window.__xss=1;alert('xss')</script><img src=x onerror=alert(2)>"
            if "xss" in text
            else f"Answer number {turn}: the code looks fine."
        )
        for part in (reply[: len(reply) // 2], reply[len(reply) // 2 :]):
            update(
                sid,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": f"msg_agent_{turn}",
                    "content": {"type": "text", "text": part},
                },
            )
        tool = f"tool_{turn}"
        update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": tool,
                "title": "Read main.py",
                "kind": "read",
                "status": "pending",
            },
        )
        update(
            sid,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": tool,
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "def main(): ..."}}
                ],
            },
        )
        update(
            sid,
            {
                "sessionUpdate": "plan_update",
                "plan": {
                    "type": "items",
                    "planId": "plan-1",
                    "entries": [
                        {"content": "Check syntax", "priority": "high", "status": "completed"},
                        {
                            "content": "Suggest improvements",
                            "priority": "medium",
                            "status": "pending",
                        },
                    ],
                },
            },
        )
        update(
            sid,
            {
                "sessionUpdate": "notice",
                "severity": "warning",
                "title": "Rate limit close",
                "message": "80% of the hourly budget used",
            },
        )
        update(sid, {"sessionUpdate": "_vendor_telemetry", "tokens": 42 * turn})
        update(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    elif rid is not None:
        send(
            {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}}
        )
