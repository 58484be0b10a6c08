"""`acp-proxy replay --client`: the recorded client against a real agent, diffed."""

from __future__ import annotations

from tests.conftest import run_proxy
from tests.replay.conftest import AGENT_V1, Recorded


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
