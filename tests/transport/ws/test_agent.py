"""``acp-proxy ws -- AGENT``: real SDK WebSocket clients, real agents, real recordings.

Every test runs the installed ``acp-proxy`` executable on 127.0.0.1 port 0.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sqlite3
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import ECHO_AGENT, frames_of
from tests.peers.sdk_ws import sdk_prompt_over_ws
from tests.transport.ws.helpers import SDK_AGENT, TEE, ws_server

DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]
HAS_DEMO = importlib.util.find_spec("acp_proxy.demo.agent") is not None


def _agent_logs(log_dir: Path) -> tuple[bytes, bytes]:
    (inp,) = log_dir.glob("*.in")
    (out,) = log_dir.glob("*.out")
    return inp.read_bytes(), out.read_bytes()


def _split_lines(data: bytes) -> list[bytes]:
    assert data.endswith(b"\n")
    return [line for line in data.split(b"\n")[:-1]]


async def _byte_compare(tmp_path: Path, agent: list[str], text: str) -> tuple[object, Path]:
    db = tmp_path / "ws.db"
    logs = tmp_path / "agent-io"
    logs.mkdir()
    with ws_server(["--record", str(db), "--", *TEE, str(logs), "--", *agent]) as server:
        tapped = await sdk_prompt_over_ws(server.url, text)
        server.stop()
    assert server.returncode == 0, server.stderr_text
    agent_in, agent_out = _agent_logs(logs)
    # What the agent read is exactly what the SDK client sent, one line per text frame.
    assert agent_in == b"".join(frame + b"\n" for frame in tapped.sent)
    # What the client received is exactly what the agent wrote, one frame per line.
    assert tapped.received == _split_lines(agent_out)
    # And the recording holds the same payloads, in order, per direction.
    frames = frames_of(db)
    assert [raw for d, raw in frames if d == "c2a"] == tapped.sent
    assert [raw for d, raw in frames if d == "a2c"] == tapped.received
    conn = sqlite3.connect(db)
    row = conn.execute(
        "SELECT transport, peer, headers, exit_status, protocol_version FROM connections"
    ).fetchone()
    assert row[0] == "websocket" and row[1].startswith("127.0.0.1:")
    assert tapped.connection_id and tapped.connection_id in row[2]
    assert row[3] == 0 and row[4] == 1
    return tapped, db


async def test_sdk_client_to_sdk_agent_byte_exact(tmp_path: Path) -> None:
    tapped, _ = await _byte_compare(tmp_path, SDK_AGENT, "héllo over WebSocket")
    assert tapped.result["stop"] == "end_turn"  # type: ignore[attr-defined]
    assert tapped.client.texts == ["echo: ", "héllo over WebSocket"]  # type: ignore[attr-defined]


@pytest.mark.skipif(not HAS_DEMO, reason="the demo agent (acp_proxy.demo.agent) is not built yet")
async def test_sdk_client_to_demo_agent_byte_exact(tmp_path: Path) -> None:
    tapped, db = await _byte_compare(tmp_path, DEMO_AGENT, "hello demo")
    assert tapped.result["stop"] == "end_turn"  # type: ignore[attr-defined]
    # The demo's turn includes a permission request answered by the client: both directions.
    conn = sqlite3.connect(db)
    methods = {m for (m,) in conn.execute("SELECT method FROM frames WHERE method IS NOT NULL")}
    assert {
        "initialize",
        "session/new",
        "session/prompt",
        "session/update",
        "session/request_permission",
    } <= methods


async def _raw_session(url: str, **kwargs: object) -> aiohttp.ClientWebSocketResponse:
    session = aiohttp.ClientSession()
    ws = await session.ws_connect(url, **kwargs)  # type: ignore[arg-type]
    ws._test_session = session  # type: ignore[attr-defined]
    return ws


async def _done(ws: aiohttp.ClientWebSocketResponse) -> None:
    await ws.close()
    await ws._test_session.close()  # type: ignore[attr-defined]


async def test_newline_in_text_frame_is_refused_with_1007_never_altered(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"
    with ws_server(["--record", str(db), "--", *ECHO_AGENT]) as server:
        ws = await _raw_session(server.url)
        await ws.send_str('{"jsonrpc":"2.0","method":"_a"}')
        assert (await ws.receive()).data == '{"jsonrpc":"2.0","method":"_a"}'
        await ws.send_str('{"jsonrpc":"2.0",\n"method":"_pretty"}')
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert msg.data == 1007
        assert "newline" in msg.extra
        await _done(ws)
        server.stop()
    assert "newline" in server.stderr_text
    frames = frames_of(db)
    # The refused frame is recorded as received, but the agent never saw it.
    assert frames == [
        ("c2a", b'{"jsonrpc":"2.0","method":"_a"}'),
        ("a2c", b'{"jsonrpc":"2.0","method":"_a"}'),
        ("c2a", b'{"jsonrpc":"2.0",\n"method":"_pretty"}'),
    ]
    conn = sqlite3.connect(db)
    (detail,) = conn.execute("SELECT detail FROM events WHERE kind='websocket_close'").fetchone()
    assert '"code":1007' in detail


async def test_binary_is_recorded_not_forwarded_and_bad_utf8_lines_become_binary(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ws.db"
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import os, sys\n"
        "for line in sys.stdin.buffer:\n"
        "    os.write(1, line)\n"
        "    os.write(1, b'\\xff\\xfe not utf-8\\r\\n')\n"
    )
    with ws_server(["--record", str(db), "--", sys.executable, str(agent)]) as server:
        ws = await _raw_session(server.url)
        await ws.send_bytes(b"\x00\x01binary")
        await ws.send_str("after binary")
        first = await ws.receive()
        second = await ws.receive()
        assert (first.type, first.data) == (aiohttp.WSMsgType.TEXT, "after binary")
        # Not UTF-8: cannot be a text frame, so it crosses as binary, bytes unchanged
        # (the \r stays; only the \n terminator is framing).
        assert (second.type, second.data) == (aiohttp.WSMsgType.BINARY, b"\xff\xfe not utf-8\r")
        await _done(ws)
        server.stop()
    conn = sqlite3.connect(db)
    rows = [
        (d, bytes(r), b)
        for d, r, b in conn.execute("SELECT direction, raw, binary FROM frames ORDER BY seq")
    ]
    assert rows == [
        ("c2a", b"\x00\x01binary", 1),
        ("c2a", b"after binary", 0),
        ("a2c", b"after binary", 0),
        ("a2c", b"\xff\xfe not utf-8\r", 1),
    ]
    assert conn.execute("SELECT count(*) FROM events WHERE kind='binary_ignored'").fetchone() == (
        1,
    )


async def test_oversize_message_closes_1009_with_reason_and_server_lives_on(
    tmp_path: Path,
) -> None:
    with ws_server(["--max-message-size", "1K", "--", *ECHO_AGENT]) as server:
        ws = await _raw_session(server.url)
        await ws.send_str("x" * 1024)  # exactly at the limit: fine
        assert (await ws.receive()).data == "x" * 1024
        await ws.send_str("y" * 1025)
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 1009
        assert msg.extra.startswith("message too big: over the 1024-byte limit")
        await _done(ws)
        ws = await _raw_session(server.url)
        await ws.send_str("still serving")
        assert (await ws.receive()).data == "still serving"
        await _done(ws)


async def test_the_limit_is_exact_for_compressed_messages_too() -> None:
    """permessage-deflate: aiohttp's own check is off by one there; the proxy's is not."""
    with ws_server(["--max-message-size", "1K", "--", *ECHO_AGENT]) as server:
        ws = await _raw_session(server.url, compress=15)
        assert ws.compress == 15  # the extension was negotiated
        await ws.send_str("x" * 1024)
        assert (await ws.receive()).data == "x" * 1024
        await ws.send_str("y" * 1025)
        msg = await ws.receive()
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.CLOSE, 1009)
        # Refused on the way in (not by the agent's echo coming back over the limit).
        assert msg.extra.startswith("message too big: over the 1024-byte limit")
        await _done(ws)


async def test_agent_exit_closes_the_connection_with_its_status(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"
    agent = ["sh", "-c", 'read line; printf "%s\\n" "$line"; exit 3']
    with ws_server(["--record", str(db), "--", *agent]) as server:
        ws = await _raw_session(server.url)
        await ws.send_str("one")
        assert (await ws.receive()).data == "one"
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert (msg.data, msg.extra) == (1011, "agent exited with status 3")
        await _done(ws)
        ws = await _raw_session(server.url)
        await ws.send_str("two")
        assert (await ws.receive()).data == "two"
        await _done(ws)
        server.stop()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT exit_status FROM connections ORDER BY id").fetchall() == [
        (3,),
        (3,),
    ]


async def test_agent_ends_when_its_connection_does(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"
    stubborn = tmp_path / "stubborn.py"
    # Ignores stdin EOF and SIGTERM: only SIGKILL after the grace periods ends it.
    stubborn.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
        "time.sleep(3600)\n"
    )
    with ws_server(
        ["--record", str(db), "--grace", "0.3", "--", sys.executable, str(stubborn)]
    ) as server:
        ws = await _raw_session(server.url)
        assert (await ws.receive()).data == "ready"
        await ws.close(code=4001, message=b"client says bye")
        await ws._test_session.close()  # type: ignore[attr-defined]
        conn = sqlite3.connect(db)
        for _ in range(600):
            row = conn.execute("SELECT pid, exit_status FROM connections").fetchone()
            if row is not None and row[1] is not None:
                break
            await asyncio.sleep(0.05)
        assert row is not None and row[1] == -9, row
        with pytest.raises(ProcessLookupError):
            os.kill(row[0], 0)
        (detail,) = conn.execute(
            "SELECT detail FROM events WHERE kind='websocket_close'"
        ).fetchone()
        assert '"code":4001' in detail and "client says bye" in detail


async def test_unstartable_agent_gets_502_and_a_missing_one_exits_127(tmp_path: Path) -> None:
    from tests.conftest import run_proxy

    done = run_proxy(["ws", "--listen", "127.0.0.1:0", "--", "no-such-agent-xyz"])
    assert done.returncode == 127
    assert done.stderr.decode().strip() == "acp-proxy: agent command not found: no-such-agent-xyz"
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    with ws_server(["--", str(script)]) as server:
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await session.ws_connect(server.url)
            assert info.value.status == 502
    assert "not executable" in server.stderr_text
    assert "Traceback" not in server.stderr_text


async def test_agent_line_over_the_limit_closes_1009(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"
    agent = [
        "sh",
        "-c",
        'read line; echo small; head -c 3000 /dev/zero | tr "\\0" x; echo; sleep 3600',
    ]
    with ws_server(
        ["--record", str(db), "--max-message-size", "1K", "--grace", "0.2", "--", *agent]
    ) as server:
        ws = await _raw_session(server.url)
        await ws.send_str("go")
        assert (await ws.receive()).data == "small"
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE and msg.data == 1009
        assert msg.extra == "the agent wrote a line over the 1024-byte limit"
        await _done(ws)
        server.stop()
    conn = sqlite3.connect(db)
    assert [bytes(r) for (r,) in conn.execute("SELECT raw FROM frames ORDER BY seq")] == [
        b"go",
        b"small",
    ]
    (status,) = conn.execute("SELECT exit_status FROM connections").fetchone()
    assert status is not None and status < 0  # the sleeping agent was ended by a signal


async def test_lines_of_one_read_are_each_a_message_up_to_one_over_the_limit(
    tmp_path: Path,
) -> None:
    """Lines that arrive in one read are recorded together and sent one message each (a
    binary one among them), and a line over the limit in the middle closes 1009: neither it
    nor the lines after it are sent or recorded."""
    db = tmp_path / "ws.db"
    burst = b"one\n\xff\xfe\ntwo\n" + b"x" * 3000 + b"\nafter\n"
    code = f"import os, sys, time; sys.stdin.readline(); os.write(1, {burst!r}); time.sleep(3600)"
    agent = [sys.executable, "-c", code]
    with ws_server(
        ["--record", str(db), "--max-message-size", "1K", "--grace", "0.2", "--", *agent]
    ) as server:
        ws = await _raw_session(server.url)
        await ws.send_str("go")
        got = [await ws.receive() for _ in range(4)]
        assert [(m.type, m.data) for m in got[:3]] == [
            (aiohttp.WSMsgType.TEXT, "one"),
            (aiohttp.WSMsgType.BINARY, b"\xff\xfe"),
            (aiohttp.WSMsgType.TEXT, "two"),
        ]
        assert (got[3].type, got[3].data) == (aiohttp.WSMsgType.CLOSE, 1009)
        await _done(ws)
        server.stop()
    conn = sqlite3.connect(db)
    recorded = conn.execute('SELECT raw, "binary" FROM frames ORDER BY seq').fetchall()
    assert [(bytes(r), b) for r, b in recorded] == [
        (b"go", 0),
        (b"one", 0),
        (b"\xff\xfe", 1),
        (b"two", 0),
    ]


async def test_ping_pong_keepalive_drops_a_silent_peer(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"
    with ws_server(["--record", str(db), "--heartbeat", "0.2", "--", *ECHO_AGENT]) as server:
        async with aiohttp.ClientSession() as session:
            ws = await session.ws_connect(server.url, autoping=False)
            # A live peer: answer three pings by hand, the connection stays up.
            pings = 0
            while pings < 3:
                msg = await ws.receive()
                assert msg.type == aiohttp.WSMsgType.PING, msg
                await ws.pong(msg.data)
                pings += 1
            await ws.send_str("still here")
            while (msg := await ws.receive()).type == aiohttp.WSMsgType.PING:
                await ws.pong(msg.data)
            assert msg.data == "still here"
            # A silent peer: stop answering; the proxy gives up on it and ends the agent.
            while True:
                msg = await ws.receive(timeout=60)
                if msg.type != aiohttp.WSMsgType.PING:
                    break
            assert msg.type in (
                aiohttp.WSMsgType.CLOSE,
                aiohttp.WSMsgType.CLOSED,
                aiohttp.WSMsgType.ERROR,
            )
        conn = sqlite3.connect(db)
        for _ in range(600):
            row = conn.execute("SELECT exit_status FROM connections").fetchone()
            if row is not None and row[0] is not None:
                break
            await asyncio.sleep(0.05)
        assert row == (0,)  # the echo agent ended normally once its stdin closed


async def test_sigterm_closes_connections_with_1001_and_ends_agents(tmp_path: Path) -> None:
    db = tmp_path / "ws.db"
    with ws_server(["--record", str(db), "--", *ECHO_AGENT]) as server:
        ws = await _raw_session(server.url)
        await ws.send_str("hello")
        assert (await ws.receive()).data == "hello"
        server.proc.send_signal(15)
        msg = await ws.receive()
        assert (msg.type, msg.data, msg.extra) == (
            aiohttp.WSMsgType.CLOSE,
            1001,
            "acp-proxy is shutting down",
        )
        await _done(ws)
        assert server.proc.wait(120) == 0
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT exit_status, ended_at IS NOT NULL FROM connections").fetchone() == (
        0,
        1,
    )
