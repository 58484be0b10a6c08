"""`acp-proxy replay --client`: the recorded client against a real agent, diffed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import acp
import orjson
import pytest
from acp import schema as s1

from tests.conftest import proxy_exe, run_proxy
from tests.replay.conftest import AGENT_V1, AGENTS, Recorded


def test_same_agent_has_no_differences(v1_recording: Recorded) -> None:
    done = run_proxy(["replay", "--client", str(v1_recording.path), "--", *AGENT_V1], timeout=120)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    # Random sessionIds minted by the live agent were mapped back to the recorded one.
    assert done.stdout.decode().strip() == (
        "no differences: the agent sent the 26 recorded message(s)"
    )


def test_changed_agent_is_caught(v1_recording: Recorded) -> None:
    done = run_proxy(
        ["replay", "--client", str(v1_recording.path), "--", *AGENT_V1],
        env={"AGENT_VARIANT": "changed"},
        timeout=120,
    )
    assert done.returncode == 1
    out = done.stdout.decode()
    removed = [line for line in out.splitlines() if line.startswith("-notification")]
    added = [line for line in out.splitlines() if line.startswith("+notification")]
    assert len(removed) == len(added) == 3
    assert all('"text":"echo:' in line for line in removed)
    assert all('"text":"ECHO:' in line for line in added)
    assert out.splitlines()[-1] == "differences found: recorded 26 agent message(s), live 26"


def test_client_mode_needs_an_agent_and_reports_a_missing_one(v1_recording: Recorded) -> None:
    done = run_proxy(["replay", "--client", str(v1_recording.path)])
    assert done.returncode == 2 and b"--client needs the agent command" in done.stderr
    done = run_proxy(["replay", "--client", str(v1_recording.path), "--", "no-such-agent-xyz"])
    assert done.returncode == 127
    assert done.stderr.decode().strip() == "acp-proxy: agent command not found: no-such-agent-xyz"


# -- both gates against an agent that differs on every run (ids, timestamps, start-up) ----------

RANDOM_AGENT = [sys.executable, str(AGENTS / "sdk_agent_random.py")]
SCRIPT = ["hello", "write the notes"]


class ScriptClient:
    """The SDK's client side: allows every tool call; notes the agent's commands."""

    def __init__(self) -> None:
        self.commands = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        if getattr(update, "session_update", None) == "available_commands_update":
            self.commands.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kw: Any
    ) -> Any:
        return s1.RequestPermissionResponse(
            outcome=s1.AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )


async def run_script(argv: list[str], cwd: str, *, wait_for_commands: bool) -> None:
    """initialize, session/new, a prompt per line of SCRIPT: through ``argv`` (the proxy).

    ``wait_for_commands``: the first prompt goes out after the agent's commands arrived, so
    in the recording they come before it (else the agent is told to send them after it).
    """
    client = ScriptClient()
    async with acp.spawn_agent_process(client, argv[0], *argv[1:]) as (conn, _proc):
        await asyncio.wait_for(conn.initialize(protocol_version=1), 60)
        new = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), 60)
        if wait_for_commands:
            await asyncio.wait_for(client.commands.wait(), 60)
        for text in SCRIPT:
            block = s1.TextContentBlock(type="text", text=text)
            await asyncio.wait_for(conn.prompt(session_id=new.session_id, prompt=[block]), 60)


def record(db: Path, cwd: Path, *agent_options: str, wait_for_commands: bool) -> Path:
    argv = [*proxy_exe(), "--record", str(db), "--", *RANDOM_AGENT, *agent_options]
    asyncio.run(run_script(argv, str(cwd), wait_for_commands=wait_for_commands))
    return db


def wire_order(db: Path) -> list[str]:
    """The recorded frames as ``c2a session/prompt`` / ``a2c available_commands_update``..."""
    done = run_proxy(["export", str(db)])
    assert done.returncode == 0, done.stderr.decode()
    out = []
    for line in done.stdout.splitlines():
        row = orjson.loads(line)
        if row.get("type") == "frame":
            msg = orjson.loads(row["text"])
            what = msg.get("params", {}).get("update", {}).get("sessionUpdate")
            out.append(f"{row['direction']} {what or msg.get('method') or 'response'}")
    return out


@pytest.fixture(scope="module")
def random_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two runs of one script against the unchanged agent, and one against a changed one.

    Run A: quick start-up, the agent's commands reach the client before its first prompt.
    Run B: 1.4 s more start-up, the commands cross the first prompt on the wire.
    """
    tmp = tmp_path_factory.mktemp("random")
    a = record(tmp / "a.db", tmp, "--start-delay", "0", wait_for_commands=True)
    b = record(
        tmp / "b.db",
        tmp,
        "--start-delay",
        "1.4",
        "--commands-after-prompt",
        wait_for_commands=False,
    )
    changed = record(tmp / "c.db", tmp, "--start-delay", "0", "--changed", wait_for_commands=True)
    return a, b, changed


def test_diff_passes_on_two_runs_of_an_unchanged_agent(
    random_runs: tuple[Path, Path, Path],
) -> None:
    a, b, changed = random_runs
    first_prompt = "c2a session/prompt"
    commands = "a2c available_commands_update"
    order_a, order_b = wire_order(a), wire_order(b)
    assert order_a.index(commands) < order_a.index(first_prompt)
    assert order_b.index(commands) > order_b.index(first_prompt)
    done = run_proxy(["diff", str(a), str(b), "--json"])
    doc = orjson.loads(done.stdout)
    assert done.returncode == 0, orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
    assert doc["summary"]["equal"] is True
    assert not any(t["fails"] for t in doc["timing"])  # initialize's 1.4 s is no failure
    text = run_proxy(["diff", str(a), str(b)])
    assert text.returncode == 0
    assert text.stdout.decode().splitlines()[-1].endswith(": equal")
    # a changed reply text is caught, and named member by member
    done = run_proxy(["diff", str(a), str(changed), "--json"])
    assert done.returncode == 1
    doc = orjson.loads(done.stdout)
    assert doc["added"] == doc["removed"] == []
    members = [m for c in doc["changed"] for m in c["members"]]
    assert {m["path"] for m in members} == {"params.update.content.text"}
    assert "Sure thi" in {m["new"] for m in members}  # half of "Sure thing: hello"


def test_replay_client_passes_on_an_unchanged_agent(random_runs: tuple[Path, Path, Path]) -> None:
    a, b, _changed = random_runs
    for recording in (a, b):
        done = run_proxy(["replay", "--client", str(recording), "--", *RANDOM_AGENT], timeout=120)
        assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
        *reports, verdict = done.stdout.decode().splitlines()
        assert verdict.startswith("no differences: the agent sent the ")
        # the agent's start-up is random (0-1.2 s): a slower one is reported, never a failure
        assert all(r.startswith("slower: ") and "(reported, not a failure)" in r for r in reports)
    done = run_proxy(["replay", "--client", str(a), "--", *RANDOM_AGENT, "--changed"], timeout=120)
    assert done.returncode == 1
    out = done.stdout.decode().splitlines()
    assert out[-1].startswith("differences found: recorded ")
    assert [line[:1] for line in out if '"text":"Sure' in line] == ["-", "+", "-", "+"]  # 2 turns
    assert sum(line.startswith("+") and '"text":"Sure thi' in line for line in out) == 2


def test_replay_client_reports_slower_answers_and_fails_only_past_the_limit(
    random_runs: tuple[Path, Path, Path],
) -> None:
    a = random_runs[0]  # recorded with a quick start-up and quick turns
    # 2.5 s a turn: past the 1 s report threshold and --fail-slower 1000 however slow the
    # recorded turns were on a loaded machine
    slow_agent = [*RANDOM_AGENT, "--start-delay", "1.4", "--prompt-delay", "2.5"]
    done = run_proxy(["replay", "--client", str(a), "--", *slow_agent], timeout=120)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    prompts = [line for line in lines if line.startswith("slower: session/prompt at ")]
    assert len(prompts) == 2 and all(line.endswith("(reported, not a failure)") for line in prompts)
    assert lines[-1].startswith("no differences: ")
    done = run_proxy(
        ["replay", "--client", str(a), "--fail-slower", "1000", "--", *slow_agent], timeout=120
    )
    assert done.returncode == 1, done.stdout.decode() + done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    failing = [line for line in lines if line.endswith("(past --fail-slower)")]
    assert [line.split(" at ")[0] for line in failing] == ["slower: session/prompt"] * 2
    assert lines[-1] == "slower than recorded past --fail-slower: 2 exchange(s)"
    bad = run_proxy(["replay", str(a), "--fail-slower", "1000"])
    assert bad.returncode == 2 and b"--fail-slower needs --client" in bad.stderr


def test_a_session_of_an_earlier_connection_the_fresh_agent_lacks_is_named(
    tmp_path: Path,
) -> None:
    # The demo: connection 2 loads (v1), connection 4 resumes (v2) the session that 1 / 3
    # made. A fresh demo agent without --state refuses: one line says why, and the rest of
    # that connection is not played (no step waits for frames that cannot come).
    db = tmp_path / "demo.db"
    made = run_proxy(["demo", "--db", str(db), "--quiet"], timeout=120)
    assert made.returncode == 0, made.stderr.decode()
    agent = [sys.executable, "-m", "acp_proxy.demo.agent"]
    done = run_proxy(["replay", "--client", str(db), "--", *agent], timeout=120)
    assert done.returncode == 1
    out = done.stdout.decode()
    whys = [line for line in out.splitlines() if line.startswith("why: ")]
    assert whys == [
        "why: session/load at connection 2 frame #3 asks for session sess_1 of connection 1, and"
        " this fresh",
        "why: session/resume at connection 4 frame #3 asks for session sess_1 of connection 3,"
        " and this fresh",
    ]
    assert "'Resource not found: unknown session sess_1'" in out
    assert "Check connection 1 alone (-c 1)" in " ".join(out.split())
    assert all(len(line) <= 100 for line in out.splitlines() if line[:1] not in "+- ")
    assert b"did not catch up" not in done.stderr
    assert out.count("no differences: ") == 2  # connections 1 and 3
