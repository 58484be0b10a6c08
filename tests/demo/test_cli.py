"""``acp-proxy demo``, the demo agent and the demo client as a user runs them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import proxy_exe

DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]
DEMO_CLIENT = [sys.executable, "-m", "acp_proxy.demo.client"]
EVERY_VARIANT_V2 = {
    "user_message", "agent_thought_chunk", "agent_message_chunk", "agent_message",
    "agent_thought", "plan_update", "tool_call_update", "tool_call_content_chunk", "notice",
    "_vendor_demo", "usage_update", "state_update", "session_info_update",
}  # fmt: skip
EVERY_VARIANT_V1 = {
    "user_message_chunk", "agent_thought_chunk", "agent_message_chunk", "plan", "tool_call",
    "tool_call_update", "notice", "_vendor_demo", "usage_update", "session_info_update",
}  # fmt: skip


def run(
    cmd: list[str], stdin: bytes = b"", cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=120, cwd=cwd)


def variants(db: Path, connection_id: int) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT DISTINCT update_kind FROM frames WHERE connection_id = ? "
            "AND update_kind IS NOT NULL",
            (connection_id,),
        )
        return {k for (k,) in rows}
    finally:
        conn.close()


def connections(db: Path) -> list[tuple[int, int, str, int]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT id, protocol_version, label, exit_status FROM connections ORDER BY id"
        ).fetchall()
    finally:
        conn.close()


def test_acp_proxy_demo_records_both_protocols_and_ls_reads_it(tmp_path: Path) -> None:
    done = run([*proxy_exe(), "demo"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    db = tmp_path / "acp-demo.db"
    assert db.exists()
    assert (
        "-> session/load sess_1" in out
        and '-> session/resume sess_1 replayFrom {"type": "start"}' in out
    )
    assert "Recorded into acp-demo.db:" in out and "acp-proxy ls acp-demo.db" in out
    assert [(c[1], c[2], c[3]) for c in connections(db)] == [
        (1, "demo v1", 0), (1, "demo v1", 0), (2, "demo v2", 0), (2, "demo v2", 0),
    ]  # fmt: skip
    assert variants(db, 1) >= EVERY_VARIANT_V1
    assert EVERY_VARIANT_V2 - {"agent_message", "agent_thought"} <= variants(db, 3)
    # the reconnection replays history before the resume response: chunked messages are
    # reset first, and no notice or state update is replayed
    assert {"agent_message", "agent_thought"} <= variants(db, 4)
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT seq, kind, method, update_kind FROM frames WHERE connection_id = 4 ORDER BY seq"
    ).fetchall()
    conn.close()
    start = next(r[0] for r in rows if r[1] == "request" and r[2] == "session/resume")
    end = next(r[0] for r in rows if r[1] == "response" and r[2] == "session/resume")
    # (a2c notifications only: across directions the recorder's seq order is not causal)
    window = [r[3] for r in rows if start < r[0] < end and r[1] == "notification"]
    assert window[0] == "user_message" and "_vendor_demo" in window
    assert not {"notice", "state_update", "usage_update"} & set(window)
    ls = run([*proxy_exe(), "ls", str(db)])
    assert ls.returncode == 0, ls.stderr
    lines = ls.stdout.decode().splitlines()
    assert len(lines) == 5 and all("acp-proxy demo agent 1.0.0" in line for line in lines[1:])
    # running it again replaces the previous demo recording
    again = run([*proxy_exe(), "demo", "--protocol", "1", "-q"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "### protocol" not in again.stdout.decode()
    assert [c[2] for c in connections(db)] == ["demo v1", "demo v1"]
    # --keep adds to it
    kept = run([*proxy_exe(), "demo", "--protocol", "2", "-q", "--keep"], cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert [c[2] for c in connections(db)] == ["demo v1", "demo v1", "demo v2", "demo v2"]
    assert "connection 3" in kept.stdout.decode() and "connection 1 " not in kept.stdout.decode()


def test_acp_proxy_demo_leaves_other_files_alone(tmp_path: Path) -> None:
    other = tmp_path / "notes.db"
    other.write_bytes(b"my precious notes")
    done = run([*proxy_exe(), "demo", "--db", str(other), "-q"])
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "--force" in err and "Traceback" not in err
    assert other.read_bytes() == b"my precious notes"
    keep = run([*proxy_exe(), "demo", "--db", str(other), "--keep", "-q"])
    assert keep.returncode == 1 and "Traceback" not in keep.stderr.decode()
    assert other.read_bytes() == b"my precious notes"
    directory = run([*proxy_exe(), "demo", "--db", str(tmp_path), "-q"])
    assert directory.returncode == 1 and "is a directory" in directory.stderr.decode()


def test_demo_client_drives_the_agent_directly(tmp_path: Path) -> None:
    done = run([*DEMO_CLIENT, "--protocol", "1", "--reconnect", "--", *DEMO_AGENT], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode().splitlines()
    assert "<- prompt finished: stopReason end_turn" in out
    assert "<- prompt finished: stopReason cancelled" in out
    assert out.count("   agent exited with code 0") == 2
    assert any(line.startswith("<- session sess_1 is back (") for line in out)
    missing = run([*DEMO_CLIENT, "--", "no-such-agent-xyz"])
    assert missing.returncode == 1
    assert missing.stderr.decode().startswith("demo-client: cannot start no-such-agent-xyz")
    assert "Traceback" not in missing.stderr.decode()


def test_demo_agent_answers_garbage_and_exits_cleanly() -> None:
    stdin = (
        b"this is not json\n"
        b"\xff\xfe\n"
        b"[]\n"
        b'{"jsonrpc":"2.0","id":"a","method":"no/such/method"}\r\n'
        b'{"jsonrpc":"2.0","method":"no/such/notification"}\n'
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}'
    )
    done = run(DEMO_AGENT, stdin)
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["error"]["code"] for r in replies[:4]] == [-32700, -32700, -32600, -32601]
    assert [r["id"] for r in replies[:4]] == [None, None, None, "a"]
    assert replies[4]["result"]["protocolVersion"] == 2  # last line had no newline
    assert len(replies) == 5
    assert b"demo-agent: <- initialize id=1" in done.stderr


def test_demo_agent_bad_state_file_is_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("[1, 2")
    done = run([*DEMO_AGENT, "--state", str(state)])
    assert done.returncode == 1
    err = done.stderr.decode().strip().splitlines()
    assert err == [f"demo-agent: cannot read state file {state}: " + err[0].split(": ", 2)[2]]
    assert "Traceback" not in done.stderr.decode()


def test_demo_recordings_are_byte_identical_across_runs(tmp_path: Path) -> None:
    def frames(db: Path) -> list[tuple[int, str, bytes]]:
        conn = sqlite3.connect(db)
        try:
            rows = conn.execute(
                "SELECT connection_id, direction, raw FROM frames "
                "ORDER BY connection_id, direction, seq"
            ).fetchall()
            return [(c, d, bytes(r)) for c, d, r in rows]
        finally:
            conn.close()

    dbs = [tmp_path / "a.db", tmp_path / "b.db"]
    for db in dbs:
        cmd = [*proxy_exe(), "demo", "-q", "--protocol", "2", "--cwd", "/home/u/project"]
        done = run([*cmd, "--db", str(db)], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    first, second = frames(dbs[0]), frames(dbs[1])
    assert len(first) > 80
    assert first == second
    assert b'"cwd":"/home/u/project"' in b"".join(raw for _, _, raw in first)


def test_demo_client_gives_up_on_a_silent_agent_without_leaving_it_behind(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    silent = tmp_path / "silent_agent.py"
    silent.write_text(
        "import os, sys, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "sys.stdin.readline()\n"
        "time.sleep(600)\n"
    )
    done = run([*DEMO_CLIENT, "--timeout", "2", "--", sys.executable, str(silent)])
    assert done.returncode == 1
    assert done.stderr.decode().strip() == "demo-client: no answer to initialize within 2s"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_demo_agent_imports_only_the_standard_library() -> None:
    """The agent must run where only Python is installed: nothing outside the stdlib loads."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import acp_proxy.demo.agent\n"
        "tops = {m.partition('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(tops - set(sys.stdlib_module_names) - {'acp_proxy'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=True, text=True
    )
    assert done.stdout.strip() == "[]", done.stdout
