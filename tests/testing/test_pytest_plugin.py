"""The pytest plugin, used by an outer pytest run exactly as a project would use it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.replay.conftest import AGENT_V1

INNER = """
import json, os, pytest

AGENT = json.loads(os.environ["INNER_AGENT"])

@pytest.mark.acp_agent(*AGENT)
async def test_echo(acp_agent):
    async with acp_agent.connect() as client:
        await client.initialize(protocol_version=1)
        session = await client.new_session()
        assert await session.prompt("hello") == "end_turn"
        assert await session.read_text() == "echo: hello"
    print("MODE", acp_agent.mode)
"""


def run_inner(tmp: Path, *args: str, agent: list[str]) -> subprocess.CompletedProcess[str]:
    import json

    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "INNER_AGENT": json.dumps(agent)},
    )


def test_record_modes(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    (tmp_path / "test_inner.py").write_text(INNER)
    # A plain test beside it: the plugin never gets in the way of tests that do not use it.
    (tmp_path / "test_plain.py").write_text("def test_ok():\n    assert True\n")
    recording = tmp_path / "acp_recordings" / "test_inner" / "test_echo.jsonl"
    # none (the default): no recording yet -> a clear failure.
    first = run_inner(tmp_path, agent=AGENT_V1)
    assert first.returncode == 1
    assert f"no ACP recording at {recording}" in first.stdout
    assert "1 passed, 1 error" in first.stdout
    # once: records through the proxy.
    second = run_inner(tmp_path, "--acp-record-mode=once", agent=AGENT_V1)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "MODE record" in second.stdout and recording.exists()
    assert recording.read_bytes().startswith(b"{")  # the text export format
    assert sorted(p.name for p in recording.parent.iterdir()) == ["test_echo.jsonl"]
    # none: replays; the real agent is not even runnable now.
    broken = ["/nonexistent/agent"]
    third = run_inner(tmp_path, agent=broken)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "MODE replay" in third.stdout
    # all: re-records, so a changed agent now fails the test.
    fifth = run_inner(
        tmp_path, "--acp-record-mode=all", agent=["env", "AGENT_VARIANT=changed", *AGENT_V1]
    )
    assert fifth.returncode == 1
    assert "ECHO: hello" in fifth.stdout and "1 failed, 1 passed" in fifth.stdout
