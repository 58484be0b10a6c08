"""Shared helpers for the web inspector tests: recordings made through the real proxy,
a big generated recording, and the real ``acp-proxy web`` server in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from acp_proxy.acp.index import IndexColumns
from acp_proxy.store.schema import connect
from tests.conftest import proxy_exe, run_proxy
from tests.helpers import Capture, insert_frames
from tests.peers import PEERS

HERE = Path(__file__).parent
SCRIPTED_AGENT = [sys.executable, str(PEERS / "web_scripted_agent.py")]
ARTIFACTS = HERE.parent.parent / "test-artifacts" / "web"
SESSION_ID = "sess_web_1"


def request(rid: int, method: str, params: dict[str, Any]) -> bytes:
    return (
        json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        + b"\n"
    )


def prompt(rid: int, text: str) -> bytes:
    return request(
        rid, "session/prompt", {"sessionId": SESSION_ID, "prompt": [{"type": "text", "text": text}]}
    )


def opening() -> bytes:
    return request(
        1,
        "initialize",
        {
            "protocolVersion": 2,
            "clientInfo": {"name": "web-test-client", "version": "0.1"},
            "clientCapabilities": {},
        },
    ) + request(2, "session/new", {"cwd": "/tmp", "mcpServers": []})


def record_session(db: Path, prompts: list[str]) -> None:
    """Record one connection through the real proxy and the scripted agent."""
    stdin = opening() + b"".join(prompt(3 + i, text) for i, text in enumerate(prompts))
    done = run_proxy(["--record", str(db), "--", *SCRIPTED_AGENT], stdin=stdin)
    assert done.returncode == 0, done.stderr


def rows(db: Path, query: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def touch_heartbeat(db: Path) -> None:
    """Refresh ``last_seen_at`` of the open connections, as the recorder's heartbeat does.

    For tests that need a connection to read as *running* whatever the recorder's heartbeat
    period; harmless where the recorder writes heartbeats itself.
    """
    conn = sqlite3.connect(db, timeout=30)
    try:
        with conn:
            conn.execute(
                "UPDATE connections SET last_seen_at = ? WHERE ended_at IS NULL", (time.time(),)
            )
    finally:
        conn.close()


def make_big_db(path: Path, frames: int, *, connections: int = 2) -> None:
    """A recording with ``frames`` frames written straight into SQLite (fast to build)."""
    per = frames // connections
    now = time.time()
    conn = connect(path, create=True)
    try:
        for c in range(1, connections + 1):
            first = (c - 1) * per
            last = frames if c == connections else c * per
            insert_frames(
                conn,
                (_big_frame(c, i - first + 1, now, i) for i in range(first, last)),
                connection={
                    "id": c,
                    "started_at": now,
                    "ended_at": now + 60,
                    "transport": "stdio",
                    "agent_command": ["big-agent"],
                    "protocol_version": 2,
                },
            )
    finally:
        conn.close()


_FILLER = "x" * 200


def _big_frame(c: int, seq: int, now: float, i: int) -> Capture:
    if seq % 2:
        raw = (
            f'{{"jsonrpc":"2.0","id":{seq},"method":"session/prompt","params":{{"sessionId":'
            f'"s{c}","prompt":[{{"type":"text","text":"{_FILLER}"}}]}}}}\n'
        ).encode()
        cols = IndexColumns("request", str(seq), "session/prompt", f"s{c}")
        return Capture("c2a", raw, ts=now + i / 1000, mono_ns=i * 1000, columns=cols)
    raw = f'{{"jsonrpc":"2.0","id":{seq - 1},"result":{{"messageId":"m{seq}"}}}}\n'.encode()
    cols = IndexColumns("response", str(seq - 1), "session/prompt", f"s{c}")
    return Capture("a2c", raw, ts=now + i / 1000, mono_ns=i * 1000, columns=cols)


URL_RE = re.compile(r"(http://\S+)")


@contextlib.contextmanager
def web_server(db: Path, *extra: str, timeout: float = 60) -> Iterator[str]:
    """Run ``acp-proxy web DB --listen 127.0.0.1:0`` and yield its URL (token included)."""
    proc = subprocess.Popen(
        [*proxy_exe(), "web", str(db), "--listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        url = _read_url(proc, proc.stdout, timeout)
        yield url
    finally:
        stop(proc)


def _read_url(proc: subprocess.Popen[bytes], stream: Any, timeout: float) -> str:
    found: list[str] = []
    lines: list[bytes] = []

    def read() -> None:
        for line in stream:
            lines.append(line)
            m = URL_RE.search(line.decode(errors="replace"))
            if m:
                found.append(m.group(1))
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    if not found:
        stop(proc)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise AssertionError(f"no inspector URL printed: {lines!r} {err}")
    return found[0]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _await_recording(db: Path, timeout: float = 60) -> None:
    """Wait until the proxy's writer process has created the recording (it does so while
    the first frames wait: the proxy does not, so its agent answers sooner), opening it
    read-only so as never to create it here; a place that never becomes one is left to the
    test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not db.is_dir():
        if db.exists():
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                try:
                    conn.execute("SELECT 1 FROM connections LIMIT 1").fetchall()
                    return
                finally:
                    conn.close()
            except sqlite3.Error:
                pass
        time.sleep(0.02)


class LiveProxy:
    """``acp-proxy --record DB [--ui ...] -- scripted agent`` fed line by line by the test."""

    def __init__(self, db: Path, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [*proxy_exe(), "--record", str(db), *extra, "--", *SCRIPTED_AGENT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ},
        )
        self.out: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        _await_recording(db)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line)

    def ui_url(self, timeout: float = 60) -> str:
        return _read_url(self.proc, self.proc.stderr, timeout)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait_output(self, predicate: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(b"".join(self.out)):
                return
            time.sleep(0.02)
        raise AssertionError(f"agent output never matched: {b''.join(self.out)[-500:]!r}")

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(10)
        return code


def wait_until(predicate: Any, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


RICH_SESSION = "sess_rich"


def _msg(obj: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **obj}, separators=(",", ":")).encode() + b"\n"


def _upd(update: dict[str, Any]) -> bytes:
    return _msg(
        {"method": "session/update", "params": {"sessionId": RICH_SESSION, "update": update}}
    )


def _plan(*statuses: str) -> bytes:
    names = ("Read the code", "Write the fix")
    return _upd(
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "plan-rich",
                "entries": [
                    {"content": n, "priority": "high", "status": s}
                    for n, s in zip(names, statuses, strict=True)
                ],
            },
        }
    )


def _chunk(text: str, message: str) -> bytes:
    return _upd(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": message,
            "content": {"type": "text", "text": text},
        }
    )


def _prompt(rid: int, text: str) -> bytes:
    return _msg(
        {
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": RICH_SESSION, "prompt": [{"type": "text", "text": text}]},
        }
    )


def rich_frames() -> list[tuple[int, str, bytes]]:
    """A v2 conversation with known times (ms): three turns, a plan that changes between
    turns, a permission prompt inside turn 1, usage with cost, an unknown update and an
    error response ``-32603 Internal error`` ending turn 3."""
    running = _upd({"sessionUpdate": "state_update", "state": "running"})
    idle = _upd({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
    return [
        (0, "c2a", _msg({"id": 1, "method": "initialize", "params": {"protocolVersion": 2}})),
        (
            5,
            "a2c",
            _msg({"id": 1, "result": {"protocolVersion": 2, "agentInfo": {"name": "rich"}}}),
        ),
        (6, "c2a", _msg({"id": 2, "method": "session/new", "params": {"cwd": "/tmp"}})),
        (9, "a2c", _msg({"id": 2, "result": {"sessionId": RICH_SESSION}})),
        # turn 1
        (10, "c2a", _prompt(3, "Can you fix the failing test?")),
        (11, "a2c", running),
        (12, "a2c", _msg({"id": 3, "result": {"messageId": "u1"}})),
        (
            13,
            "a2c",
            _upd(
                {
                    "sessionUpdate": "user_message",
                    "messageId": "u1",
                    "content": [{"type": "text", "text": "Can you fix the failing test?"}],
                }
            ),
        ),
        (30, "a2c", _chunk("Echo: looking ", "a1")),
        (31, "a2c", _chunk("at the ", "a1")),
        (32, "a2c", _chunk("test now.", "a1")),
        (33, "a2c", _plan("in_progress", "pending")),
        (
            40,
            "a2c",
            _msg(
                {
                    "id": 0,
                    "method": "session/request_permission",
                    "params": {
                        "sessionId": RICH_SESSION,
                        "toolCall": {"toolCallId": "t1", "title": "Write tests/test_x.py"},
                        "options": [
                            {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                            {"optionId": "deny", "name": "Reject", "kind": "reject_once"},
                        ],
                    },
                }
            ),
        ),
        (
            70,
            "c2a",
            _msg({"id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}),
        ),
        (
            71,
            "a2c",
            _upd(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "t1",
                    "title": "Write tests/test_x.py",
                    "kind": "edit",
                    "status": "completed",
                    "content": [
                        {"type": "content", "content": {"type": "text", "text": "wrote 3 lines"}}
                    ],
                }
            ),
        ),
        (
            72,
            "a2c",
            _upd(
                {
                    "sessionUpdate": "usage_update",
                    "used": 1200,
                    "size": 200000,
                    "cost": {"amount": 0.02, "currency": "USD"},
                }
            ),
        ),
        (73, "a2c", _upd({"sessionUpdate": "_vendor_trace", "span": "abc"})),
        (100, "a2c", idle),
        # turn 2: the plan moves on
        (200, "c2a", _prompt(4, "And the second step?")),
        (201, "a2c", running),
        (202, "a2c", _msg({"id": 4, "result": {"messageId": "u2"}})),
        (220, "a2c", _chunk("Done.", "a2")),
        (230, "a2c", _plan("completed", "completed")),
        (300, "a2c", idle),
        # turn 3: refused
        (400, "c2a", _prompt(5, "fail please")),
        (
            410,
            "a2c",
            _msg({"id": 5, "error": {"code": -32603, "message": "Internal error"}}),
        ),
    ]


def make_rich_db(path: Path) -> None:
    """:func:`rich_frames` as one ended connection, plus a second short connection."""
    now = time.time()
    frames = [
        Capture(d, raw, ts=now + ms / 1000, mono_ns=ms * 1_000_000) for ms, d, raw in rich_frames()
    ]
    insert_frames(
        path,
        frames,
        connection={"started_at": now, "ended_at": now + 1, "protocol_version": 2},
        index=True,
    )
    other = [
        Capture(d, raw, ts=now + 0.0005 + ms / 1000, mono_ns=ms * 1_000_000)
        for ms, d, raw in rich_frames()[:4]
    ]
    insert_frames(
        path,
        other,
        connection={"started_at": now, "ended_at": now + 1, "protocol_version": 2},
        index=True,
    )


def make_diff_db(path: Path) -> None:
    """Connection 1: the rich conversation; connection 2: the same with one chunk's text
    changed and the usage update gone."""
    now = time.time()
    base = rich_frames()
    changed = []
    for ms, d, raw in base:
        if b"usage_update" in raw:
            continue
        changed.append((ms, d, raw.replace(b"Echo: looking ", b"Echo: checking ")))
    for frames in (base, changed):
        insert_frames(
            path,
            [Capture(d, raw, ts=now + ms / 1000, mono_ns=ms * 1_000_000) for ms, d, raw in frames],
            connection={"started_at": now, "ended_at": now + 1, "protocol_version": 2},
            index=True,
        )
