"""Shared fixtures: the real ``acp-proxy`` executable, test agents and temporary recordings."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers import PEERS

ECHO_AGENT = [sys.executable, str(PEERS / "echo_agent.py")]


def proxy_exe() -> list[str]:
    """The installed console script, as a user runs it."""
    exe = shutil.which("acp-proxy")
    assert exe is not None, "acp-proxy is not installed: pip install -e '.[test]'"
    return [exe]


def importtime_proxy() -> list[str]:
    """The console script beside the interpreter (as ``pip install`` makes it), under
    ``python -X importtime`` (which lists every import on stderr); else the package's
    ``__main__`` (the same ``cli.main``)."""
    script = Path(sys.executable).with_name("acp-proxy")
    if script.is_file() and b"python" in script.read_bytes()[:200]:
        return [sys.executable, "-X", "importtime", str(script)]
    return [sys.executable, "-X", "importtime", "-m", "acp_proxy"]


@pytest.fixture
def acp_proxy() -> list[str]:
    return proxy_exe()


@pytest.fixture
def echo_agent() -> list[str]:
    return list(ECHO_AGENT)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "session.db"


def run_proxy(
    args: list[str], stdin: bytes = b"", timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run ``acp-proxy ARGS`` to completion with ``stdin``; returns the completed process."""
    return subprocess.run(
        [*proxy_exe(), *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def echo_proxy(
    db: Path | str,
    *flags: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """``acp-proxy --record DB [FLAGS] -- echo_agent.py``, all three pipes to the test."""
    return subprocess.Popen(
        [*proxy_exe(), "--record", str(db), *flags, "--", *ECHO_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def echo_through(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Send ``data`` through a proxy in front of the echo agent and read it all back.

    It writes everything before reading: keep ``data`` well under the pipes' buffers
    (~64 KB each way) or both sides block.
    """
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(data)
    proc.stdin.flush()
    got = b""
    while len(got) < len(data):
        chunk = os.read(proc.stdout.fileno(), 1 << 20)
        assert chunk, "the proxy stopped forwarding"
        got += chunk
    assert got == data


DRAIN_PROGRESS = (b"acp-proxy: recording: writing the last ", b"acp-proxy: recording: done, ")
"""The informational lines of a slow exit drain (printed after 1 s, so they depend on load)."""


def incident_lines(stderr: bytes) -> list[bytes]:
    """acp-proxy's own stderr lines except the drain progress: what a test may forbid."""
    return [
        line
        for line in stderr.splitlines()
        if line.startswith(b"acp-proxy:") and not line.startswith(DRAIN_PROGRESS)
    ]


def frame_count(db: Path) -> int:
    """Frames in the recording so far (0 if the file or its tables do not exist yet)."""
    if not db.exists():
        return 0
    con = sqlite3.connect(db, timeout=30)
    try:
        return int(con.execute("SELECT count(*) FROM frames").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        con.close()


def frames_of(db: Path, connection_id: int | None = None) -> list[tuple[str, bytes]]:
    """(direction, raw) of every recorded frame, in order."""
    conn = sqlite3.connect(db)
    try:
        query = "SELECT direction, raw FROM frames"
        args: tuple[object, ...] = ()
        if connection_id is not None:
            query += " WHERE connection_id = ?"
            args = (connection_id,)
        return [
            (d, bytes(r)) for d, r in conn.execute(query + " ORDER BY connection_id, seq", args)
        ]
    finally:
        conn.close()


@pytest.fixture
def sqlite_rows() -> Iterator[object]:
    yield frames_of


def own_pg_server(prefix: str = "acp-proxy-pg-") -> Iterator[object]:
    """A real PostgreSQL server of its own, started, and stopped and removed after (skips
    where PostgreSQL is not installed; see :mod:`tests.pg_server`)."""
    from tests.pg_server import PgServer, find_bindir

    if find_bindir() is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    # Not under pytest's temporary root: every pytest run as the same user (an inner one of
    # the plugin tests, another run on the machine) makes /tmp/pytest-of-USER mode 0700, and
    # the server's user could no longer reach its socket or data directory.
    base = Path(tempfile.mkdtemp(prefix=prefix))
    server = PgServer(base / "pg")
    server.init()
    server.start()
    try:
        yield server
    finally:
        if server.running():
            server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """One real PostgreSQL server for the whole run."""
    yield from own_pg_server()


@pytest.fixture
def pg_url(pg_server: object) -> str:
    """The URL (password included) of a new empty database on the test server."""
    from tests.pg_server import PgServer

    assert isinstance(pg_server, PgServer)
    return pg_server.database()
