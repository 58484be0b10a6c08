"""Replay sends what the agent sent: recorded load/resume answers, recorded request ids,
ids of invalid messages, lone surrogates; options and the terminal note (issue 11)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import proxy_exe, run_proxy
from tests.replay.recordings import (
    V1_LOAD,
    V2_RESUME,
    client_lines,
    export_frames,
    write_db,
    write_export,
)


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


@pytest.mark.parametrize(
    ("recording", "response_seq"), [(V1_LOAD, 18), (V2_RESUME, 23)], ids=["v1-load", "v2-resume"]
)
@pytest.mark.parametrize("only_connection", [True, False], ids=["-c 2", "all connections"])
def test_a_recorded_load_answer_is_sent_byte_for_byte(
    recording: Path, response_seq: int, only_connection: bool
) -> None:
    frames = export_frames(recording, 2)
    stdin = client_lines(frames, 1, 3)  # initialize, then session/load | session/resume
    options = ["-c", "2"] if only_connection else []
    proc = run_proxy(["replay", str(recording), *options], stdin)
    assert proc.returncode == 0, proc.stderr
    got = lines(proc.stdout)
    expected = [raw for _d, raw in frames[3:response_seq]]  # history frames and the response
    # Nothing added (no usage_update, no empty reset frames), nothing dropped, same bytes.
    assert got[1:] == expected
    if only_connection:
        assert got[0] == frames[1][1]
    notes = proc.stderr.decode()
    assert "sending the agent's recorded answer (connection 2 frame #3" in notes
    assert "synthesized" not in notes


def test_history_is_synthesized_only_without_a_recorded_answer() -> None:
    frames = export_frames(V1_LOAD, 2)
    # Connection 1 holds session/new and prompts, no session/load: the resume-testing case.
    proc = run_proxy(["replay", str(V1_LOAD), "-c", "1"], client_lines(frames, 1, 3))
    assert proc.returncode == 0, proc.stderr
    got = lines(proc.stdout)
    assert got[-1] == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    assert len(got) > 3  # initialize response, history, load response
    (note,) = [line for line in proc.stderr.decode().splitlines() if "session/load" in line]
    assert "no recorded answer in the recording; history synthesized from the recorded session" in (
        note
    )


INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
INIT_OK = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\n'
NEW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}\n'
NEW_OK = b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}\n'


def prompt(rpc_id: int, text: str) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1",'
        b'"prompt":[{"type":"text","text":"%s"}]}}\n' % (rpc_id, text.encode())
    )


PERMISSION = (
    b'{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"s1"}}\n'
)


def permission_turn(rpc_id: int, text: str) -> list[tuple[str, bytes]]:
    return [
        ("c2a", prompt(rpc_id, text)),
        ("a2c", PERMISSION),
        ("c2a", b'{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"cancelled"}}}\n'),
        ("a2c", b'{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}\n' % rpc_id),
    ]


def test_agent_requests_keep_their_recorded_ids_unless_taken(tmp_path: Path) -> None:
    # Two recorded agent processes whose requests have the same id.
    head = [("c2a", INIT), ("a2c", INIT_OK), ("c2a", NEW), ("a2c", NEW_OK)]
    rec = write_export(
        tmp_path / "ids.jsonl",
        [(1, [*head, *permission_turn(2, "one")]), (1, [*head, *permission_turn(2, "two")])],
    )
    answer = b'{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"cancelled"}}}\n'
    proc = subprocess.Popen(
        [*proxy_exe(), "replay", str(rec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT + NEW + prompt(2, "one"))
    proc.stdin.flush()
    assert [proc.stdout.readline() for _ in range(3)] == [INIT_OK, NEW_OK, PERMISSION]
    proc.stdin.write(answer % b"5" + prompt(3, "two"))
    proc.stdin.flush()
    got = [proc.stdout.readline() for _ in range(2)]
    assert got[0] == b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\n'
    # The second connection's request 5 would collide with the first one's: the smallest
    # unused integer instead.
    assert got[1] == PERMISSION.replace(b'"id":5', b'"id":0')
    proc.stdin.write(answer % b"0")
    proc.stdin.close()
    assert proc.stdout.read() == b'{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}\n'
    assert proc.wait(timeout=30) == 0


def test_invalid_messages_are_answered_with_their_readable_id() -> None:
    stdin = (
        b'{"jsonrpc":"2.0","id":5}\n'
        b'{"jsonrpc":"2.0","id":"x","method":7}\n'
        b'[{"jsonrpc":"2.0","id":8}]\n'
        b'{"jsonrpc":"2.0","id":{"no":1}}\n'
        b"not json\n"
    )
    proc = run_proxy(["replay", str(V1_LOAD)], stdin)
    assert proc.returncode == 0, proc.stderr
    got = [line.split(b',"error":')[0] for line in lines(proc.stdout)]
    assert got == [
        b'{"jsonrpc":"2.0","id":5',
        b'{"jsonrpc":"2.0","id":"x"',
        b'{"jsonrpc":"2.0","id":8',
        b'{"jsonrpc":"2.0","id":null',  # an object is no usable id
        b'{"jsonrpc":"2.0","id":null',  # unreadable
    ]
    assert all(b'"code":-32600' in line for line in lines(proc.stdout)[:4])


def test_the_demo_agent_answers_an_invalid_message_with_its_readable_id() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "acp_proxy.demo.agent"],
        input=b'{"jsonrpc":"2.0","id":5}\n[{"jsonrpc":"2.0","id":"b"}]\n',
        capture_output=True,
        timeout=60,
    )
    got = lines(proc.stdout)
    assert got[0].startswith(b'{"jsonrpc":"2.0","id":5,"error":{"code":-32600')
    assert got[1].startswith(b'{"jsonrpc":"2.0","id":"b","error":{"code":-32600')


SURROGATE_CALL = b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}\n'


def test_a_live_lone_surrogate_is_answered_not_a_crash() -> None:
    stdin = (
        SURROGATE_CALL
        + b'{"jsonrpc":"2.0","id":2,"method":"x","params":{"a":"\\udc00","\\ud801":1}}\n'
    )
    proc = run_proxy(["replay", str(V1_LOAD)], stdin)
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    got = lines(proc.stdout)
    assert len(got) == 2
    assert got[0].startswith(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601')
    assert b'"asked":{"method":"\\ud800"' in got[0]
    assert got[1].startswith(b'{"jsonrpc":"2.0","id":2,"error":{"code":-32601')


def test_recorded_lone_surrogates_are_matched_and_sent(tmp_path: Path) -> None:
    frames = [
        ("c2a", SURROGATE_CALL),
        ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"text":"\\udfff"}}\n'),
        ("a2c", b'{"jsonrpc":"2.0","method":"\\ud800","params":{"sessionId":"\\ud800"}}\n'),
        ("c2a", b'{"jsonrpc":"2.0","id":2,"method":"m","params":{"sessionId":"\\ud800"}}\n'),
        ("a2c", b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"\\ud800"}}\n'),
    ]
    rec = write_db(tmp_path / "surrogates.db", frames)
    proc = run_proxy(["replay", str(rec)], SURROGATE_CALL + frames[3][1])
    assert proc.returncode == 0, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert lines(proc.stdout) == [frames[1][1], frames[2][1], frames[4][1]]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--max-delay", "-1", "--pace", "recorded"], "--max-delay must be a number of seconds"),
        (["--max-delay", "nan", "--pace", "recorded"], "--max-delay must be a number of seconds"),
        (["--max-delay", "1"], "--max-delay only applies with --pace recorded"),
        (["--answer-timeout", "-2"], "--answer-timeout must be a number of seconds"),
        (["--client", "--listen", "127.0.0.1:0", "--", "cat"], "cannot be combined"),
    ],
)
def test_invalid_or_conflicting_options_are_one_line(options: list[str], message: str) -> None:
    proc = run_proxy(["replay", str(V1_LOAD), *options])
    assert proc.returncode == 2
    assert proc.stdout == b""
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("acp-proxy replay: ") and message in err


def test_a_terminal_is_told_that_replay_is_waiting_for_a_client() -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*proxy_exe(), "replay", str(V1_LOAD)],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(slave)
    assert proc.stderr is not None
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready, "nothing on stderr"
        line = proc.stderr.readline().decode()
        assert "serving" in line and "waiting for a client's JSON-RPC lines" in line
        assert line.startswith("acp-proxy: replay: ")
    finally:
        os.write(master, b"\x04")  # Ctrl-D: EOF
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        proc.wait(timeout=30)


def test_a_pipe_gets_no_terminal_note() -> None:
    proc = run_proxy(["replay", str(V1_LOAD)], b"")
    assert proc.returncode == 0
    assert b"waiting for a client" not in proc.stderr
