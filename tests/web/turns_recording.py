"""A recording of two runs of one conversation, made by the real proxy in front of
``tests/peers/web_turns_agent.py``, for the inspector's turn, replay, label and preview tests.

Connection 1 (``--label "run A"``): a new session, one turn, exit 0. Connection 2 (``"run
B"``): the session resumed with replay (a notice replayed: a ``replay.no-notice`` finding),
the same turn answered differently (one chunk's text), then a prompt that makes the agent
kill itself (``signal 9``; the prompt unanswered: a ``jsonrpc.request-answered`` finding).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.conftest import proxy_exe
from tests.peers import PEERS

AGENT = [sys.executable, str(PEERS / "web_turns_agent.py")]
SID = "sess_turns"
PROMPT = "Fix the failing test"


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **obj}).encode() + b"\n"


def _drive(db: Path, label: str, agent_args: list[str], steps: list[tuple[bytes, bytes]]) -> int:
    """Run the real proxy in front of the turns agent; send each line once the agent's
    output holds the step's marker (so a permission is answered after it is asked)."""
    proc = subprocess.Popen(
        [*proxy_exe(), "--record", str(db), "--label", label, "--", *AGENT, *agent_args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(iter(proc.stdout.readline, b"")))  # type: ignore[union-attr]
    reader.start()
    assert proc.stdin is not None
    try:
        for line, marker in steps:
            proc.stdin.write(line)
            proc.stdin.flush()
            deadline = time.monotonic() + 60
            while marker not in b"".join(got):
                assert time.monotonic() < deadline, f"no {marker!r} in {b''.join(got)[-400:]!r}"
                assert proc.poll() is None or marker == b"", proc.stderr.read()  # type: ignore[union-attr]
                time.sleep(0.02)
        proc.stdin.close()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(10)
    return code


def _opening(replay: bool) -> list[tuple[bytes, bytes]]:
    hello = {"protocolVersion": 2, "info": {"name": "turns-client", "version": "0.3"}}
    steps = [(_line({"id": 1, "method": "initialize", "params": hello}), b'"id":1,')]
    if replay:
        params = {"sessionId": SID, "cwd": "/tmp", "replayFrom": "start"}
        steps.append((_line({"id": 2, "method": "session/resume", "params": params}), b'"id":2,'))
    else:
        params = {"cwd": "/tmp", "mcpServers": []}
        steps.append((_line({"id": 2, "method": "session/new", "params": params}), b"commands"))
    return steps


def _turn(rid: int, text: str, turn: int) -> list[tuple[bytes, bytes]]:
    prompt = {"sessionId": SID, "prompt": [{"type": "text", "text": text}]}
    answer = {"outcome": {"outcome": "selected", "optionId": "allow"}}
    return [
        (
            _line({"id": rid, "method": "session/prompt", "params": prompt}),
            b'"id":%d,' % (100 + turn),
        ),
        (_line({"id": 100 + turn, "result": answer}), b'"stopReason"' * turn),
    ]


def make_turns_db(db: Path) -> None:
    """Record the two connections described above into ``db``."""
    assert _drive(db, "run A", [], [*_opening(False), *_turn(3, PROMPT, 1)]) == 0
    die = {"sessionId": SID, "prompt": [{"type": "text", "text": "die now"}]}
    steps = [*_opening(True), *_turn(3, PROMPT, 1)]
    steps.append((_line({"id": 4, "method": "session/prompt", "params": die}), b""))
    _drive(db, "run B", ["--answer", "broken"], steps)
