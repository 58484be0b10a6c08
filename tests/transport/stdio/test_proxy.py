"""The stdio proxy end to end through the real executable: bytes, stderr, exit codes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import ECHO_AGENT, frames_of, run_proxy

AWKWARD = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    b"not json\r\n"
    b"\n"
    b"\xff\xfe invalid utf-8\n"
    b'[{"jsonrpc":"2.0","method":"_x/batch"}]\n'
    b'{"jsonrpc":"2.0","method":"_vendor/unknown","params":{}}\n'
    b"no newline at the end"
)


def test_bytes_pass_through_unchanged_and_are_recorded(db_path: Path) -> None:
    done = run_proxy(["--record", str(db_path), "--", *ECHO_AGENT], stdin=AWKWARD)
    assert done.returncode == 0, done.stderr
    assert done.stdout == AWKWARD
    assert b"echo agent ready\n" in done.stderr
    frames = frames_of(db_path)
    c2a = b"".join(raw for d, raw in frames if d == "c2a")
    a2c = b"".join(raw for d, raw in frames if d == "a2c")
    assert c2a == AWKWARD and a2c == AWKWARD
    assert len([1 for d, _ in frames if d == "c2a"]) == 7
    db = sqlite3.connect(db_path)
    kinds = [k for (k,) in db.execute("SELECT kind FROM frames WHERE direction='c2a' ORDER BY seq")]
    assert kinds == ["request", "invalid", "invalid", "invalid", "batch", "notification", "invalid"]
    (stderr,) = db.execute("SELECT raw FROM stderr_lines").fetchone()
    assert bytes(stderr) == b"echo agent ready\n"
    assert db.execute("SELECT exit_status, protocol_version FROM connections").fetchone() == (0, 1)


def test_exit_code_is_the_agents(tmp_path: Path) -> None:
    done = run_proxy(["--", *ECHO_AGENT], stdin=b"x\n", env={"ECHO_EXIT": "7"})
    assert done.returncode == 7
    assert done.stdout == b"x\n"


def test_missing_agent_is_one_clear_line_and_127(db_path: Path) -> None:
    done = run_proxy(["--record", str(db_path), "--", "definitely-not-an-agent-xyz"])
    assert done.returncode == 127
    assert (
        done.stderr.decode().strip()
        == "acp-proxy: agent command not found: definitely-not-an-agent-xyz"
    )


def test_not_executable_is_126(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    done = run_proxy(["--", str(script)])
    assert done.returncode == 126
    assert b"Traceback" not in done.stderr
    assert b"not executable" in done.stderr


def test_record_file_is_private(db_path: Path) -> None:
    run_proxy(["--record", str(db_path), "--", *ECHO_AGENT], stdin=b"{}\n")
    assert db_path.stat().st_mode & 0o777 == 0o600


def test_env_var_sets_the_recording(db_path: Path) -> None:
    done = run_proxy(["--", *ECHO_AGENT], stdin=b"{}\n", env={"ACP_PROXY_RECORD": str(db_path)})
    assert done.returncode == 0
    assert frames_of(db_path) == [("c2a", b"{}\n"), ("a2c", b"{}\n")]


def test_ls_and_dump_read_the_recording(db_path: Path) -> None:
    run_proxy(["--record", str(db_path), "--", *ECHO_AGENT], stdin=AWKWARD)
    ls = run_proxy(["ls", str(db_path)])
    assert ls.returncode == 0
    lines = ls.stdout.decode().splitlines()
    assert lines[0].split()[:3] == ["#", "started", "duration"]
    assert lines[1].split()[0] == "1" and " 14 " in lines[1]
    dump = run_proxy(["dump", str(db_path)])
    text = dump.stdout.decode()
    assert "-> request initialize id=1" in text
    assert "<- invalid" in text


def test_reading_a_missing_or_corrupt_recording_is_a_clear_error(tmp_path: Path) -> None:
    missing = run_proxy(["ls", str(tmp_path / "nope.db")])
    assert missing.returncode == 1
    assert missing.stderr.decode().strip() == f"Error: no such recording: {tmp_path / 'nope.db'}"
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not sqlite" * 100)
    bad = run_proxy(["dump", str(corrupt)])
    assert bad.returncode == 1
    assert b"Traceback" not in bad.stderr and b"not a usable acp-proxy recording" in bad.stderr


def test_reading_an_empty_file_or_an_unknown_connection_is_a_clear_error(
    tmp_path: Path, db_path: Path
) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    done = run_proxy(["ls", str(empty)])
    assert done.returncode == 1
    assert done.stderr.decode().strip() == f"Error: {empty}: the file is empty, not a recording"
    assert empty.read_bytes() == b""  # a reader never turns a file into a recording
    run_proxy(["--record", str(db_path), "--", *ECHO_AGENT], stdin=b"{}\n")
    unknown = run_proxy(["dump", str(db_path), "--connection", "7"])
    assert unknown.returncode == 1
    assert unknown.stderr.decode().strip() == "Error: no connection 7 in this recording"
