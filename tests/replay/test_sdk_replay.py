"""Proof: SDK clients observe exactly the same thing from `acp-proxy replay` as from the agent."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_proxy
from tests.peers.sdk_clients import run_v1_client, run_v2_client
from tests.replay.conftest import V1_PROMPTS, V2_PROMPTS, Recorded, replay_argv


async def test_v1_sdk_client_sees_identical_updates_and_results(v1_recording: Recorded) -> None:
    live = v1_recording.observed
    # The recording is real: three turns, each with a permission request and a tool call.
    assert [r[0] for r in live.results] == ["initialize", "session/new", *["session/prompt"] * 3]
    assert len(live.agent_requests) == 3
    assert any(u["sessionUpdate"] == "tool_call_update" for _, u in live.updates)
    replayed = await run_v1_client(replay_argv(v1_recording.path), V1_PROMPTS, "/elsewhere")
    assert replayed.results == live.results
    assert replayed.updates == live.updates
    assert replayed.agent_requests == live.agent_requests


async def test_v2_sdk_client_sees_identical_updates_and_results(v2_recording: Recorded) -> None:
    live = v2_recording.observed
    assert [r[1] for r in live.results[2:]] == [{"messageId": "u1"}, {"messageId": "u2"}]
    kinds = [u["sessionUpdate"] for _, u in live.updates]
    assert kinds.count("state_update") == 4 and "terminal_output_chunk" in kinds
    replayed = await run_v2_client(replay_argv(v2_recording.path), V2_PROMPTS, "/elsewhere")
    assert replayed.results == live.results
    assert replayed.updates == live.updates


async def test_paced_replay_gives_the_same_observations(v2_recording: Recorded) -> None:
    replayed = await run_v2_client(
        replay_argv(v2_recording.path, "--pace", "recorded", "--max-delay", "0.2"),
        V2_PROMPTS,
        "/elsewhere",
    )
    assert replayed.results == v2_recording.observed.results
    assert replayed.updates == v2_recording.observed.updates


async def test_replaying_an_export_file(v1_recording: Recorded, tmp_path: Path) -> None:
    export = tmp_path / "v1.jsonl"
    done = run_proxy(["export", str(v1_recording.path), "--no-redact", "-o", str(export)])
    assert done.returncode == 0, done.stderr
    assert not export.read_bytes().startswith(b"SQLite")
    replayed = await run_v1_client(replay_argv(export), V1_PROMPTS, "/elsewhere")
    assert replayed.results == v1_recording.observed.results
    assert replayed.updates == v1_recording.observed.updates


def test_a_broken_export_file_is_a_one_line_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"format":"acp-proxy-recording"}\n{"type": "frame", oops\n')
    done = run_proxy(["replay", str(broken)])
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    assert len(done.stderr.decode().strip().splitlines()) == 1
    assert done.stderr.decode().startswith(f"Error: {broken}")
