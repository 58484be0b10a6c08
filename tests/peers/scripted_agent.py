"""A scripted ACP agent for the model/show/stats tests (raw JSON lines on stdio).

It speaks whichever protocol version the client's ``initialize`` asks for (1 or 2) and, for
each ``session/prompt``, emits a fixed set of update variants: messages (chunks and upserts),
a thought, a plan, a tool call that asks permission and streams content, a terminal, a
compaction, usage, a live-only notice and an unknown ``_vendor_x`` update. v1 ``session/load``
replays a short history before answering. The prompt text ``fail`` makes a v1 prompt fail.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

VERSION = 1
next_id = 0
sessions = 0


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def update(sid: str, upd: dict[str, Any]) -> None:
    send(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": upd}}
    )


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    if not line:
        return None
    msg: dict[str, Any] = json.loads(line)
    return msg


def ask_permission(sid: str, call_id: str) -> Any:
    global next_id
    next_id += 1
    send(
        {
            "jsonrpc": "2.0",
            "id": next_id,
            "method": "session/request_permission",
            "params": {
                "sessionId": sid,
                "toolCall": {"toolCallId": call_id, "title": "Write file"},
                "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
            },
        }
    )
    while True:
        msg = read()
        if msg is None:
            sys.exit(0)
        if msg.get("id") == next_id and "method" not in msg:
            return msg.get("result")


def prompt_v1(req: dict[str, Any]) -> None:
    sid = req["params"]["sessionId"]
    words = "".join(b.get("text", "") for b in req["params"]["prompt"])
    if words == "fail":
        send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32603, "message": "boom"}})
        return
    update(sid, {"sessionUpdate": "agent_thought_chunk", "content": text("thinking")})
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": text("Hello")})
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": text(", world")})
    update(
        sid,
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Say hello", "priority": "high", "status": "completed"},
                {"content": "Write file", "priority": "low", "status": "pending"},
            ],
        },
    )
    update(
        sid,
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_1",
            "title": "Write file",
            "kind": "edit",
            "status": "pending",
        },
    )
    ask_permission(sid, "call_1")
    update(
        sid,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "status": "completed",
            "content": [{"type": "content", "content": text("wrote 3 bytes")}],
        },
    )
    update(sid, {"sessionUpdate": "current_mode_update", "currentModeId": "code"})
    update(
        sid, {"sessionUpdate": "notice", "severity": "warning", "title": "MCP server unavailable"}
    )
    update(sid, {"sessionUpdate": "_vendor_x", "payload": {"n": 1}})
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": text("Done.")})
    send({"jsonrpc": "2.0", "id": req["id"], "result": {"stopReason": "end_turn"}})


def prompt_v2(req: dict[str, Any]) -> None:
    sid = req["params"]["sessionId"]
    n = req["id"]
    uid = f"msg_user_{n}"
    update(sid, {"sessionUpdate": "state_update", "state": "running"})
    send({"jsonrpc": "2.0", "id": req["id"], "result": {"messageId": uid}})
    update(
        sid, {"sessionUpdate": "user_message", "messageId": uid, "content": req["params"]["prompt"]}
    )
    update(
        sid, {"sessionUpdate": "agent_thought_chunk", "messageId": f"m{n}", "content": text("hmm")}
    )
    update(sid, {"sessionUpdate": "agent_message", "messageId": f"m{n}", "content": [text("A")]})
    update(
        sid, {"sessionUpdate": "agent_message_chunk", "messageId": f"m{n}", "content": text("B")}
    )
    update(
        sid,
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "p1",
                "entries": [{"content": "Check", "priority": "high", "status": "in_progress"}],
            },
        },
    )
    update(
        sid,
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": f"call_{n}",
            "title": "Run tests",
            "kind": "execute",
            "status": "pending",
        },
    )
    update(sid, {"sessionUpdate": "state_update", "state": "requires_action"})
    ask_permission(sid, f"call_{n}")
    update(sid, {"sessionUpdate": "state_update", "state": "running"})
    update(
        sid,
        {"sessionUpdate": "tool_call_update", "toolCallId": f"call_{n}", "status": "in_progress"},
    )
    update(
        sid,
        {
            "sessionUpdate": "tool_call_content_chunk",
            "toolCallId": f"call_{n}",
            "content": {"type": "content", "content": text("3 passed")},
        },
    )
    update(
        sid,
        {
            "sessionUpdate": "terminal_update",
            "terminalId": f"t{n}",
            "command": "pytest",
            "cwd": "/work",
        },
    )
    update(
        sid,
        {
            "sessionUpdate": "terminal_output_chunk",
            "terminalId": f"t{n}",
            "data": base64.b64encode(b"collected 3 items\n").decode(),
        },
    )
    update(
        sid,
        {"sessionUpdate": "terminal_update", "terminalId": f"t{n}", "exitStatus": {"exitCode": 0}},
    )
    update(
        sid, {"sessionUpdate": "tool_call_update", "toolCallId": f"call_{n}", "status": "completed"}
    )
    update(sid, {"sessionUpdate": "notice", "severity": "info", "title": "Retrying model request"})
    update(sid, {"sessionUpdate": "_vendor_x", "payload": {"n": n}})
    update(
        sid,
        {"sessionUpdate": "compaction_update", "compactionId": f"cmp{n}", "status": "in_progress"},
    )
    update(
        sid,
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": f"cmp{n}",
            "content": text("## Retained"),
        },
    )
    update(
        sid,
        {"sessionUpdate": "compaction_update", "compactionId": f"cmp{n}", "status": "completed"},
    )
    update(
        sid,
        {
            "sessionUpdate": "usage_update",
            "used": 53000,
            "size": 200000,
            "cost": {"amount": 0.045, "currency": "USD"},
        },
    )
    update(sid, {"sessionUpdate": "agent_message", "messageId": f"m{n}", "content": [text("C")]})
    update(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})


def main() -> None:
    global VERSION, sessions
    while True:
        msg = read()
        if msg is None:
            return
        method = msg.get("method")
        if "id" not in msg or method is None:
            continue
        params = msg.get("params") or {}
        if method == "initialize":
            VERSION = params.get("protocolVersion", 1)
            info_key = "agentInfo" if VERSION == 1 else "info"
            send(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "result": {
                        "protocolVersion": VERSION,
                        info_key: {"name": "scripted-agent", "version": "0.1"},
                        "agentCapabilities": {"loadSession": True},
                    },
                }
            )
        elif method == "session/new":
            sessions += 1
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": f"sess_{sessions}"}})
        elif method == "session/load":
            sid = params["sessionId"]
            update(
                sid, {"sessionUpdate": "user_message_chunk", "content": text("earlier question")}
            )
            update(sid, {"sessionUpdate": "agent_message_chunk", "content": text("earlier ")})
            update(sid, {"sessionUpdate": "agent_message_chunk", "content": text("answer")})
            send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
        elif method == "session/prompt":
            (prompt_v1 if VERSION == 1 else prompt_v2)(msg)
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "nope"}})


if __name__ == "__main__":
    main()
