"""A scripted client that drives an agent through the real ``acp-proxy --record``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import proxy_exe

AGENT = [sys.executable, str(Path(__file__).parent / "scripted_agent.py")]


class Client:
    """Line-oriented JSON-RPC client over the proxy's stdio (answers permission requests)."""

    def __init__(self, db: Path, agent: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*proxy_exe(), "--record", str(db), "--", *(agent or AGENT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.next_id = 0
        self.updates: list[dict[str, Any]] = []

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        return self.read_until(lambda msg: "method" not in msg and msg.get("id") == my_id)

    def until_idle(self) -> dict[str, Any]:
        """Read (answering permission requests) until the agent reports ``idle``."""

        def idle(msg: dict[str, Any]) -> bool:
            update = (msg.get("params") or {}).get("update") or {}
            return update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"

        return self.read_until(idle)

    def read_until(self, done: Any) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the proxy closed stdout"
            msg: dict[str, Any] = json.loads(line)
            if msg.get("method") == "session/request_permission":
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
                    }
                )
                continue
            if done(msg):
                return msg
            self.updates.append(msg)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def record_v1(db: Path) -> None:
    """One v1 connection: initialize, new, two prompts (one failing), then load in another."""
    c = Client(db)
    c.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": "test-client"}})
    sid = c.request("session/new", {"cwd": "/work", "mcpServers": []})["result"]["sessionId"]
    c.request("session/prompt", {"sessionId": sid, "prompt": [text("say hello")]})
    c.request("session/prompt", {"sessionId": sid, "prompt": [text("fail")]})
    assert c.close() == 0
    c = Client(db)
    c.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": "test-client"}})
    c.request("session/load", {"sessionId": "sess_1", "cwd": "/work", "mcpServers": []})
    c.request("session/prompt", {"sessionId": "sess_1", "prompt": [text("again")]})
    assert c.close() == 0


def record_v2(db: Path, prompts: int = 2) -> None:
    c = Client(db)
    c.request("initialize", {"protocolVersion": 2, "info": {"name": "test-client-v2"}})
    sid = c.request("session/new", {"cwd": "/work"})["result"]["sessionId"]
    for n in range(prompts):
        c.request("session/prompt", {"sessionId": sid, "prompt": [text(f"question {n}")]})
        c.until_idle()
    c.request("_vendor/ping", {})
    assert c.close() == 0
