"""A scripted ACP v2 agent for the inspector's turn, replay and preview tests (stdio).

``initialize`` names the agent (``turns-agent 2.0``); ``session/new`` is followed by an
``available_commands_update`` (3 commands); ``session/resume`` with ``replayFrom`` replays
the history (a user and an agent message, then a live-only notice: a ``replay.no-notice``
finding) before answering; each ``session/prompt`` sends ``session_info_update`` (the title),
the user message, two chunks of the answer, a permission request (answered by the client)
and idle. ``--answer WORD`` changes the answer's last word (so two runs differ in one
chunk); a prompt saying ``die`` makes the agent kill itself with SIGKILL. ``initialize`` is
answered after 0.3 s, so start-up takes longer than the turns (the timeline folds it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

out = sys.stdout.buffer
ANSWER = sys.argv[sys.argv.index("--answer") + 1] if "--answer" in sys.argv else "fine"
SESSION = "sess_turns"


def send(obj: dict[str, Any]) -> None:
    out.write(json.dumps({"jsonrpc": "2.0", **obj}, separators=(",", ":")).encode() + b"\n")
    out.flush()


def update(upd: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": SESSION, "update": upd}})


def text(blocks: Any) -> str:
    return "".join(b.get("text", "") for b in blocks or [] if isinstance(b, dict))


def message(kind: str, mid: str, said: str) -> None:
    update({"sessionUpdate": kind, "messageId": mid, "content": [{"type": "text", "text": said}]})


turn = 0
for line in sys.stdin.buffer:
    msg = json.loads(line)
    method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
    if method == "initialize":
        time.sleep(0.3)  # a slow start-up: the timeline folds it
        info = {"name": "turns-agent", "version": "2.0"}
        caps = {"session": {"prompt": {}, "resume": {}}}
        send({"id": rid, "result": {"protocolVersion": 2, "info": info, "capabilities": caps}})
    elif method == "session/new":
        send({"id": rid, "result": {"sessionId": SESSION}})
        names = ("help", "plan", "review")
        commands = [{"name": n, "description": f"/{n} command"} for n in names]
        update({"sessionUpdate": "available_commands_update", "availableCommands": commands})
    elif method == "session/resume":
        message("user_message", "u_old", "What was the question again?")
        message("agent_message", "a_old", "You asked about the tests.")
        update(
            {
                "sessionUpdate": "notice",
                "severity": "info",
                "title": "Heads up",
                "message": "replayed by mistake",
            }
        )
        send({"id": rid, "result": {}})
    elif method == "session/prompt":
        turn += 1
        said = text(params.get("prompt"))
        if "die" in said:
            os.kill(os.getpid(), signal.SIGKILL)
        update({"sessionUpdate": "state_update", "state": "running"})
        send({"id": rid, "result": {"messageId": f"u{turn}"}})
        message("user_message", f"u{turn}", said)
        update({"sessionUpdate": "session_info_update", "title": f"Turn {turn}: {said[:30]}"})
        for part in ("The tests look ", ANSWER + "."):
            update(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": f"a{turn}",
                    "content": {"type": "text", "text": part},
                }
            )
        send(
            {
                "id": 100 + turn,
                "method": "session/request_permission",
                "params": {
                    "sessionId": SESSION,
                    "toolCall": {"toolCallId": f"t{turn}", "title": "Run the tests"},
                    "options": [
                        {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                        {"optionId": "deny", "name": "Reject", "kind": "reject_once"},
                    ],
                },
            }
        )
    elif method is None and rid is not None and rid >= 100:  # the permission answer
        update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    elif rid is not None:
        send({"id": rid, "error": {"code": -32601, "message": "method not found"}})
