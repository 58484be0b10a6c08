"""``acp-proxy check`` on recordings made through the real ``acp-proxy --record`` executable.

A canned agent plays its side of a transcript while the test plays the client; both wait
until the recording holds every earlier frame before sending, so frame numbers are the
transcript's positions (1-based) and the findings can be asserted exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from tests.acp.conformance.helpers import (
    SID,
    TEXT,
    A,
    C,
    Line,
    check,
    er,
    nt,
    ok,
    rq,
    up,
    v1_prelude,
    v1_turn,
    v2_prelude,
    v2_turn,
)
from tests.conftest import proxy_exe
from tests.peers import PEERS
from tests.peers.canned_agent import recorded

CANNED = PEERS / "canned_agent.py"


def _wait_for(db: Path, n: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while recorded(str(db)) < n:
        assert proc.poll() is None, "the proxy exited early"
        assert time.monotonic() < deadline, f"the recording never reached {n} frames"
        time.sleep(0.005)


def record(tmp_path: Path, frames: list[Line], name: str = "rec.db") -> Path:
    """Record ``frames`` through the real proxy: the test is the client, canned agent the rest."""
    db = tmp_path / name
    script = tmp_path / f"{name}.json"
    entries = []
    for direction, raw in frames:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "hex:" + raw.hex()
        entries.append(["c" if direction == "c2a" else "a", text])
    script.write_text(json.dumps(entries))
    proc = subprocess.Popen(
        [
            *proxy_exe(),
            "--record",
            str(db),
            "--",
            sys.executable,
            str(CANNED),
            str(script),
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out: dict[str, bytes] = {}

    def drain(name: str, stream: Any) -> None:
        out[name] = stream.read()

    threads = [
        threading.Thread(target=drain, args=("stdout", proc.stdout), daemon=True),
        threading.Thread(target=drain, args=("stderr", proc.stderr), daemon=True),
    ]
    for t in threads:
        t.start()
    assert proc.stdin is not None
    try:
        for index, (direction, raw) in enumerate(frames):
            if direction == "c2a":
                if index and frames[index - 1][0] == "a2c":
                    _wait_for(db, index, proc)
                proc.stdin.write(raw)
                proc.stdin.flush()
        _wait_for(db, len(frames), proc)
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for t in threads:
        t.join(10)
    agent_lines = b"".join(raw for d, raw in frames if d == "a2c")
    assert out["stdout"] == agent_lines  # the proxy forwarded every byte unchanged
    return db


def check_json(db: Path) -> tuple[int, dict[str, Any]]:
    done = check(str(db), "--json")
    assert "Traceback" not in done.stderr
    return done.returncode, orjson.loads(done.stdout)


def found(doc: dict[str, Any]) -> set[tuple[str, tuple[int, ...]]]:
    return {(f["rule"], tuple(f["seqs"])) for c in doc["connections"] for f in c["findings"]}


def test_clean_v1_session_with_load_and_cancel_passes(tmp_path: Path) -> None:
    frames = [
        *v1_prelude(),
        *v1_turn(2),
        C(rq(3, "session/prompt", sessionId=SID, prompt=[TEXT])),
        A(up("agent_message_chunk", content=TEXT)),
        A(
            rq(
                0,
                "session/request_permission",
                sessionId=SID,
                toolCall={"toolCallId": "t3"},
                options=[],
            )
        ),
        C(nt("session/cancel", sessionId=SID)),
        C(ok(0, outcome={"outcome": "cancelled"})),
        A(up("tool_call_update", toolCallId="t3", status="failed")),
        A(ok(3, stopReason="cancelled")),
        C(rq(4, "session/load", sessionId=SID, cwd="/work", mcpServers=[])),
        A(up("user_message_chunk", content=TEXT)),
        A(up("agent_message_chunk", content=TEXT)),
        A(ok(4)),
        A(up("notice", severity="info", title="loaded")),
        C(rq(5, "_vendor/stats")),
        A(er(5, -32601)),
    ]
    db = record(tmp_path, frames)
    code, doc = check_json(db)
    assert code == 0, found(doc)
    assert doc["summary"]["error"] == 0 and doc["summary"]["warning"] == 0
    assert doc["summary"]["frames"] == len(frames)
    assert doc["connections"][0]["protocol_version"] == 1
    text = check(str(db))
    assert text.returncode == 0
    assert "summary: 0 error(s), 0 warning(s), 0 info in 1 connection(s)" in text.stdout


def test_clean_v2_session_with_resume_replay_passes(tmp_path: Path) -> None:
    frames = [
        *v2_prelude(),
        *v2_turn(2),
        A(up("compaction_update", compactionId="c1", status="in_progress")),
        A(up("compaction_summary_chunk", compactionId="c1", content=TEXT)),
        A(up("compaction_update", compactionId="c1", status="completed")),
        C(rq(3, "session/resume", sessionId=SID, cwd="/work", replayFrom={"type": "start"})),
        A(up("user_message", messageId="u2", content=[])),
        A(up("user_message_chunk", messageId="u2", content=TEXT)),
        A(up("compaction_update", compactionId="c1", status="completed")),
        A(ok(3)),
        A(up("notice", severity="warning", title="MCP server unavailable")),
        A(up("_vendor_custom", payload=[1, 2])),
        *v2_turn(4),
    ]
    db = record(tmp_path, frames)
    code, doc = check_json(db)
    assert code == 0, found(doc)
    assert doc["summary"] == {
        "error": 0,
        "warning": 0,
        "info": 0,
        "connections": 1,
        "frames": len(frames),
        "passed": True,
    }


def test_broken_v1_agent_fails_with_the_right_frames(tmp_path: Path) -> None:
    frames = [
        *v1_prelude(),  # 1-4
        C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),  # 5
        C(nt("session/cancel", sessionId=SID)),  # 6
        A(ok(2, stopReason="end_turn")),  # 7
        A(up("agent_message_chunk", content=TEXT)),  # 8
        C(rq(3, "session/list")),  # 9
        A(b'{"jsonrpc":"2.0","id":"3","result":{"sessions":[]}}\n'),  # 10
        C(rq(4, "session/load", sessionId=SID, cwd="/work", mcpServers=[])),  # 11
        A(up("notice", severity="info", title="replaying")),  # 12
        A(ok(4)),  # 13
        A(up("agent_message_chunk", content=TEXT)),  # 14
        A(rq(0, "fs/read_text_file", sessionId=SID, path="notes.txt")),  # 15
    ]
    db = record(tmp_path, frames)
    code, doc = check_json(db)
    assert code == 1
    assert found(doc) == {
        ("v1.cancel-stop-reason", (6, 7)),
        ("v1.updates-after-turn", (7, 8)),
        ("jsonrpc.response-id-echo", (9, 10)),
        ("replay.no-notice", (11, 12)),
        ("replay.before-response", (13, 14)),
        ("lifecycle.absolute-path", (15,)),
        ("jsonrpc.request-answered", (15,)),
    }
    assert doc["summary"]["error"] == 6 and doc["summary"]["warning"] == 1
    assert doc["summary"]["passed"] is False


def test_broken_v2_agent_fails_with_the_right_frames(tmp_path: Path) -> None:
    frames = [
        *v2_prelude(),  # 1-4
        C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),  # 5
        A(ok(2, id="u2")),  # 6
        A(up("agent_message_chunk", content=TEXT)),  # 7
        A(up("state_update", state="idle")),  # 8
        A(up("notice", severity="loud", title="")),  # 9
        A(up("compaction_update", compactionId="c", status="in_progress")),  # 10
        *v2_turn(3)[:5],  # 11-15
        C(nt("session/cancel", sessionId=SID)),  # 16
        A(up("state_update", state="idle", stopReason="error")),  # 17
    ]
    db = record(tmp_path, frames)
    code, doc = check_json(db)
    assert code == 1
    assert found(doc) == {
        ("v2.prompt-message-id", (6,)),
        ("v2.message-id", (7,)),
        ("v2.running-before-idle", (5, 8)),  # work began with the prompt
        ("v2.stop-reason", (8,)),
        ("notice.fields", (9,)),
        ("enum.reserved", (9,)),
        ("v2.cancel-idle", (16, 17)),
        ("compaction.terminal-status", (10,)),
    }


def test_garbage_lines_from_the_agent(tmp_path: Path) -> None:
    frames = [
        *v1_prelude(),
        A(b"\xff\xfe\n"),
        A(b"\n"),
        A(b"starting up...\n"),
        A(b"[]\n"),
        A(b'{"jsonrpc":"2.0","method":"_vendor/tick"}\r\n'),
    ]
    db = record(tmp_path, frames)
    code, doc = check_json(db)
    assert code == 1
    assert found(doc) == {
        ("framing.utf8", (5,)),
        ("framing.blank-line", (6,)),
        ("framing.json", (7,)),
        ("jsonrpc.batch", (8,)),
        ("framing.crlf", (9,)),
    }


def test_the_demo_recording_passes(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    done = subprocess.run(
        [*proxy_exe(), "demo", "--db", str(db), "--quiet"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    code, doc = check_json(db)
    errors = [f for c in doc["connections"] for f in c["findings"] if f["tier"] == "error"]
    assert code == 0, errors
    assert doc["summary"]["connections"] == 4
    versions = [c["protocol_version"] for c in doc["connections"]]
    assert versions == [1, 1, 2, 2]
