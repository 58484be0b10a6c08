"""Builders for check tests: JSON-RPC frames, v1/v2 preludes, recordings written as SQLite."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from acp_proxy.acp.conformance import ConnectionChecker, Finding
from acp_proxy.store.schema import connect
from acp_proxy.wire.frame import Direction, Frame
from tests.conftest import proxy_exe
from tests.helpers import Capture, insert_frames

Line = tuple[Direction, bytes]
SID = "s1"


def line(obj: Any) -> bytes:
    return obj if isinstance(obj, bytes) else orjson.dumps(obj) + b"\n"


def C(obj: Any) -> Line:
    return ("c2a", line(obj))


def A(obj: Any) -> Line:
    return ("a2c", line(obj))


def rq(rid: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def ok(rid: Any, **result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def er(rid: Any, code: int = -32601, message: str = "nope") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def nt(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def up(variant: str, sid: str = SID, **fields: Any) -> dict[str, Any]:
    return nt("session/update", sessionId=sid, update={"sessionUpdate": variant, **fields})


TEXT = {"type": "text", "text": "hi"}

V1_CLIENT_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
V1_AGENT_CAPS = {
    "loadSession": True,
    "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
    "sessionCapabilities": {"resume": {}, "list": {}, "close": {}},
}
V2_CLIENT_CAPS = {"elicitation": {"form": {}}}
V2_AGENT_CAPS = {"session": {"prompt": {"image": {}}}}


def v1_prelude(client_caps: Any = None, agent_caps: Any = None) -> list[Line]:
    return [
        C(
            rq(
                0,
                "initialize",
                protocolVersion=1,
                clientCapabilities=V1_CLIENT_CAPS if client_caps is None else client_caps,
            )
        ),
        A(
            ok(
                0,
                protocolVersion=1,
                agentCapabilities=V1_AGENT_CAPS if agent_caps is None else agent_caps,
                authMethods=[],
            )
        ),
        C(rq(1, "session/new", cwd="/work", mcpServers=[])),
        A(ok(1, sessionId=SID)),
    ]


def v2_prelude(client_caps: Any = None, agent_caps: Any = None, auth: Any = None) -> list[Line]:
    return [
        C(
            rq(
                0,
                "initialize",
                protocolVersion=2,
                capabilities=V2_CLIENT_CAPS if client_caps is None else client_caps,
            )
        ),
        A(
            ok(
                0,
                protocolVersion=2,
                capabilities=V2_AGENT_CAPS if agent_caps is None else agent_caps,
                authMethods=[] if auth is None else auth,
            )
        ),
        C(rq(1, "session/new", cwd="/work", mcpServers=[])),
        A(ok(1, sessionId=SID)),
    ]


def v1_turn(rid: int = 2, stop: str = "end_turn") -> list[Line]:
    return [
        C(rq(rid, "session/prompt", sessionId=SID, prompt=[TEXT])),
        A(up("user_message_chunk", content=TEXT)),
        A(up("agent_message_chunk", content=TEXT)),
        A(up("tool_call", toolCallId=f"t{rid}", title="read", kind="read", status="pending")),
        A(up("tool_call_update", toolCallId=f"t{rid}", status="completed")),
        A(ok(rid, stopReason=stop)),
    ]


def v2_turn(rid: int = 2, mid: str | None = None, stop: str = "end_turn") -> list[Line]:
    mid = mid or f"u{rid}"
    return [
        C(rq(rid, "session/prompt", sessionId=SID, prompt=[TEXT])),
        A(up("state_update", state="running")),
        A(up("user_message", messageId=mid, content=[TEXT])),
        A(ok(rid, messageId=mid)),
        A(up("agent_thought_chunk", messageId=f"m{rid}", content=TEXT)),
        A(up("agent_message_chunk", messageId=f"m{rid}", content=TEXT)),
        A(up("tool_call_update", toolCallId=f"t{rid}", status="in_progress", kind="read")),
        A(up("tool_call_update", toolCallId=f"t{rid}", status="completed")),
        A(up("state_update", state="idle", stopReason=stop)),
    ]


CLEAN_V1 = v1_prelude() + v1_turn()
CLEAN_V2 = v2_prelude() + v2_turn()
BROKEN_V2 = [
    *v2_prelude(),
    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),  # 5
    A(ok(2)),  # 6: no messageId (error, the agent's)
    A(up("state_update", state="running")),  # 7
    A(up("state_update", state="idle")),  # 8: no stopReason (warning)
    A(b'{"jsonrpc":"2.0","method":"_vendor/tick"}\r\n'),  # 9: CRLF (info)
]
"""A v2 connection with one finding of each tier (error at 6, warning at 8, info at 9)."""


def check(*args: str) -> subprocess.CompletedProcess[str]:
    """``acp-proxy check ARGS`` through the real executable, as a user or a CI job runs it."""
    return subprocess.run(
        [*proxy_exe(), "check", *args], capture_output=True, text=True, timeout=120
    )


def run_engine(
    frames: Sequence[Line],
    *,
    transport: str | None = "stdio",
    frames_dropped: int = 0,
    binary_at: Iterable[int] = (),
) -> list[Finding]:
    """Feed ``frames`` (seq 1, 2, ...) to one ConnectionChecker; return all findings."""
    binary = set(binary_at)
    checker = ConnectionChecker(1, transport=transport, frames_dropped=frames_dropped)
    out = checker.drain()
    for seq, (direction, raw) in enumerate(frames, 1):
        out += checker.feed(Frame.wire(direction, raw, seq, seq * 1000, binary=seq in binary))
    out += checker.finish()
    return out


def rules_of(findings: Iterable[Finding]) -> set[str]:
    return {f.rule for f in findings}


def write_recording(
    path: Path,
    connections: Sequence[Sequence[Line]],
    *,
    transport: str = "stdio",
    protocol_version: int | None = None,
) -> None:
    """Write connections of frames straight into a recording database."""
    db: sqlite3.Connection = connect(path, create=True)
    try:
        db.execute("BEGIN")
        now = time.time()
        for frames in connections:
            insert_frames(
                db,
                frames,
                connection={
                    "started_at": now,
                    "ended_at": now + 1,
                    "transport": transport,
                    "protocol_version": protocol_version,
                },
                start_ts=now,
            )
        db.execute("COMMIT")
    finally:
        db.close()


def generated_frames(
    turns: int, chunks: int, chunk_bytes: int, bad_every: int = 0
) -> Iterator[Line]:
    """A v2 connection of ``turns`` clean turns with ``chunks`` padded message chunks each.

    Every ``bad_every``-th turn has one chunk without a messageId (a ``v2.message-id``
    error). Frames are generated lazily: nothing here grows with the recording.
    """
    pad = "x" * chunk_bytes
    yield from v2_prelude()
    for i in range(2, turns + 2):
        turn = v2_turn(i)
        yield from turn[:6]
        chunk = A(
            up("agent_message_chunk", messageId=f"m{i}", content={"type": "text", "text": pad})
        )
        for _ in range(chunks):
            yield chunk
        if bad_every and i % bad_every == 0:
            yield A(up("agent_message_chunk", content=TEXT))
        yield from turn[6:]


def write_generated(path: Path, frames: Iterable[Line]) -> int:
    """Stream generated frames into a one-connection recording; return the frame count."""
    count = 0
    now = time.time()

    def counted() -> Iterator[Line]:
        nonlocal count
        for frame in frames:
            count += 1
            yield frame

    insert_frames(
        path,
        (Capture(d, raw, mono_ns=seq) for seq, (d, raw) in enumerate(counted(), 1)),
        connection={"started_at": now, "ended_at": now + 1, "transport": "stdio"},
        start_ts=now,
    )
    return count
