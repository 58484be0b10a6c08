"""Helpers for the export tests: recording through the real proxy, reading DB rows."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import ECHO_AGENT, run_proxy


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
