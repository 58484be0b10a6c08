"""Mismatches, bad input and bad recordings: clear errors, no hang, no traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_proxy.testing import AcpError, AcpTestClient
from tests.conftest import run_proxy
from tests.replay.conftest import Recorded, replay_argv


async def test_mismatch_names_the_nearest_candidate_and_differences(v1_recording: Recorded) -> None:
    async with AcpTestClient.spawn(replay_argv(v1_recording.path)) as client:
        await client.initialize(protocol_version=1)
        session = await client.new_session(cwd="/tmp/any")
        assert session.session_id == v1_recording.session_id
        with pytest.raises(AcpError) as err:
            await session.prompt("hullo")
        # The server keeps going: the recorded prompt still replays afterwards.
        assert await session.prompt("hello") == "end_turn"
        assert await session.read_text() == "echo: hello"
    e = err.value
    assert e.code == -32602
    assert "session/prompt" in e.message
    assert "nearest recorded candidate: session/prompt" in e.message
    assert 'params.prompt[0].text: recorded "hello", got "hullo"' in e.message
    assert e.data["asked"]["params"]["prompt"][0]["text"] == "hullo"
    assert e.data["differences"] == [
        {"path": "params.prompt[0].text", "recorded": "hello", "got": "hullo"}
    ]
    assert e.data["nearest"]["method"] == "session/prompt"
    assert 'params.prompt[0].text: recorded "hello", got "hullo"' in client.stderr.decode()


async def test_unknown_method_and_bad_frames(v1_recording: Recorded) -> None:
    async with AcpTestClient.spawn(replay_argv(v1_recording.path)) as client:
        await client.initialize(protocol_version=1)
        with pytest.raises(AcpError) as err:
            await client.request("_vendor/never_recorded", {"a": 1})
        assert err.value.code == -32601
        assert "_vendor/never_recorded" in err.value.message
        await client.send_raw(b"this is not json\n")
        await client.send_raw(b"\xff\xfe\n")
        await client.send_raw(b"[]\n")
        # Still alive and answering.
        session = await client.new_session()
        assert session.session_id == v1_recording.session_id
    errors = [
        e.message
        for e in client.received()
        if isinstance(e.message, dict) and e.message.get("id") is None and "error" in e.message
    ]
    assert [m["error"]["code"] for m in errors] == [-32700, -32700, -32600]
    assert client.proc.returncode == 0
    assert b"Traceback" not in client.stderr


async def test_strict_mode_enforces_the_recorded_order(v1_recording: Recorded) -> None:
    argv = replay_argv(v1_recording.path, "--match", "strict")
    async with AcpTestClient.spawn(argv) as client:
        with pytest.raises(AcpError) as err:
            await client.request("session/new", {"cwd": "/x", "mcpServers": []})
        assert "next in order, --match strict" in err.value.message
        assert 'method: recorded "initialize", got "session/new"' in err.value.message
        await client.initialize(protocol_version=1)
        session = await client.new_session()
        assert await session.prompt("hello") == "end_turn"


async def test_loose_mode_serves_repeats_fifo_and_sequential_never_goes_back(
    v1_recording: Recorded,
) -> None:
    # Loose: "second prompt" first, then both "hello"s still replay (FIFO for repeats).
    async with AcpTestClient.spawn(replay_argv(v1_recording.path)) as client:
        await client.initialize(protocol_version=1)
        session = await client.new_session()
        assert await session.prompt("second prompt") == "end_turn"
        assert await session.read_text() == "echo: second prompt"
        for _ in range(2):
            assert await session.prompt("hello") == "end_turn"
            assert await session.read_text() == "echo: hello"
        with pytest.raises(AcpError):
            await session.prompt("hello")  # only two were recorded
    # Sequential: after "second prompt" the earlier "hello"s are gone.
    argv = replay_argv(v1_recording.path, "--match", "sequential")
    async with AcpTestClient.spawn(argv) as client:
        await client.initialize(protocol_version=1)
        session = await client.new_session()
        assert await session.prompt("second prompt") == "end_turn"
        with pytest.raises(AcpError) as err:
            await session.prompt("hello")
        assert "nothing left to replay" in err.value.message


async def test_ignore_paths(v1_recording: Recorded) -> None:
    argv = replay_argv(v1_recording.path, "--ignore", "prompt.*.text")
    async with AcpTestClient.spawn(argv) as client:
        await client.initialize(protocol_version=1)
        session = await client.new_session()
        assert await session.prompt("anything at all") == "end_turn"
        assert await session.read_text() == "echo: hello"
    # cwd is ignored by default; --no-default-ignores makes it count.
    argv = replay_argv(v1_recording.path, "--no-default-ignores")
    async with AcpTestClient.spawn(argv) as client:
        await client.initialize(protocol_version=1)
        with pytest.raises(AcpError) as err:
            await client.new_session(cwd="/not/the/recorded/cwd")
        assert "params.cwd" in err.value.message


def test_missing_and_corrupt_recordings_are_one_line_errors(tmp_path: Path) -> None:
    missing = run_proxy(["replay", str(tmp_path / "nope.db")])
    assert missing.returncode == 1
    assert missing.stderr.decode().strip() == f"Error: no such recording: {tmp_path / 'nope.db'}"
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"garbage" * 500)
    bad = run_proxy(["replay", str(corrupt)])
    assert bad.returncode == 1 and b"Traceback" not in bad.stderr
    assert len(bad.stderr.decode().strip().splitlines()) == 1
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    bad = run_proxy(["replay", str(text)])
    assert bad.returncode == 1 and b"Traceback" not in bad.stderr
    assert len(bad.stderr.decode().strip().splitlines()) == 1


def test_unknown_session_and_connection_options(v1_recording: Recorded) -> None:
    done = run_proxy(["replay", str(v1_recording.path), "--session", "sess-unknown"])
    assert done.returncode == 1
    assert done.stderr.decode().strip() == (
        "Error: unknown session sess-unknown: it is not in this recording"
    )
    done = run_proxy(["replay", str(v1_recording.path), "--connection", "7"])
    assert done.returncode == 1
    assert done.stderr.decode().strip() == "Error: no connection 7 in this recording (has: 1)"


def test_session_option_selects_its_connections(v1_recording: Recorded) -> None:
    sid = v1_recording.session_id
    init = b'{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":1}}\n'
    done = run_proxy(["replay", str(v1_recording.path), "--session", sid], stdin=init)
    assert done.returncode == 0
    assert done.stdout.startswith(b'{"jsonrpc":"2.0","id":"a","result":{"protocolVersion":1')


def test_string_ids_are_spliced_and_the_rest_is_byte_exact(v1_recording: Recorded) -> None:
    conn = sqlite3.connect(v1_recording.path)
    (recorded,) = conn.execute(
        "SELECT raw FROM frames WHERE method='initialize' AND direction='a2c'"
    ).fetchone()
    conn.close()
    init = b'{"jsonrpc":"2.0","id":"x\\"y","method":"initialize","params":{"protocolVersion":1}}\n'
    done = run_proxy(["replay", str(v1_recording.path)], stdin=init)
    assert done.stdout == bytes(recorded).replace(b'"id":0', b'"id":"x\\"y"', 1)
