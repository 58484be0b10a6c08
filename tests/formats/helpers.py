"""Helpers for the export tests: recording through the real proxy, reading DB rows."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ECHO_AGENT, run_proxy
from tests.helpers import Capture, insert_frames


def record(db: Path, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """Record one connection through the real proxy and the echo agent."""
    done = run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout == stdin
    return done


def cli(*args: str, stdin: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return run_proxy(list(args), stdin=stdin, timeout=timeout)


def rows(db: Path, query: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return [
            tuple(bytes(v) if isinstance(v, bytes) else v for v in r)
            for r in conn.execute(query, args)
        ]
    finally:
        conn.close()


FRAME_QUERY = (
    "SELECT seq, direction, raw, size, binary, kind, rpc_id, method, session_id, update_kind, "
    "entity_type, entity_id, ts, mono_ns FROM frames WHERE connection_id = ? ORDER BY seq"
)


INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
"""An ``initialize`` request line, the first frame of the recordings these tests make."""


def table_counts(db: Path) -> tuple[object, ...]:
    """How many connections, frames, stderr lines and events ``db`` holds."""
    return rows(
        db,
        "SELECT (SELECT count(*) FROM connections), (SELECT count(*) FROM frames), "
        "(SELECT count(*) FROM stderr_lines), (SELECT count(*) FROM events)",
    )[0]


def frame_rows(db: Path, connection_id: int) -> list[tuple[object, ...]]:
    return rows(db, FRAME_QUERY, (connection_id,))


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    """The single error line of a failed command (asserting there is exactly one)."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    err = done.stderr.decode()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: "), err
    return lines[0]


def make_big_recording(path: Path, frames: int, text_size: int = 2000) -> int:
    """A recording of ``frames`` realistic frames written straight into SQLite (fast).

    Every tenth frame carries a bearer token, so redaction has work to do. Returns the
    total raw bytes.
    """
    total = 0
    filler = ("lorem ipsum dolor sit amet " * (text_size // 27 + 1))[:text_size]

    def rows() -> Iterator[Capture]:
        nonlocal total
        for seq in range(1, frames + 1):
            secret = " Authorization: Bearer abc123def456ghi" if seq % 10 == 0 else ""
            raw = (
                '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1",'
                f'"update":{{"sessionUpdate":"agent_message_chunk","messageId":"msg_{seq}",'
                f'"content":{{"type":"text","text":"{filler}{secret}"}}}}}}}}\n'
            ).encode()
            total += len(raw)
            yield Capture("a2c", raw, ts=1767225600.0 + seq / 1000, mono_ns=seq * 1000)

    insert_frames(
        path,
        rows(),
        connection={
            "id": 1,
            "started_at": 1767225600.0,
            "transport": "stdio",
            "agent_command": ["big-agent"],
        },
    )
    return total
