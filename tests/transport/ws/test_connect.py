"""``acp-proxy connect URL``: the stdio <-> WebSocket bridge for stdio-only editors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from tests.conftest import frames_of, proxy_exe, run_proxy
from tests.peers import PEERS
from tests.transport.ws.helpers import SDK_AGENT, SDK_CLIENT, TEE, ws_server

RESPONDER = [sys.executable, str(PEERS / "responder_agent.py")]
INIT = b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}\n'


def test_sdk_stdio_client_through_connect_and_ws_to_an_sdk_agent(tmp_path: Path) -> None:
    """SDK stdio client -> acp-proxy connect -> acp-proxy ws -> SDK agent, byte-compared."""
    bridge_db, server_db, logs = tmp_path / "bridge.db", tmp_path / "server.db", tmp_path / "io"
    logs.mkdir()
    with ws_server(["--record", str(server_db), "--", *TEE, str(logs), "--", *SDK_AGENT]) as srv:
        done = subprocess.run(
            [*SDK_CLIENT, "--", *proxy_exe(), "connect", srv.url, "--record", str(bridge_db)],
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr.decode()
        srv.stop()
    result = json.loads(done.stdout)
    assert result["stop"] == "end_turn" and result["chunks"] == ["echo: ", "over the bridge"]
    # Both recorders saw the same payloads; the agent saw them as lines.
    bridge, server = frames_of(bridge_db), frames_of(server_db)
    assert bridge == server and len(bridge) == 8
    (agent_in,) = logs.glob("*.in")
    (agent_out,) = logs.glob("*.out")
    assert agent_in.read_bytes() == b"".join(r + b"\n" for d, r in bridge if d == "c2a")
    assert agent_out.read_bytes() == b"".join(r + b"\n" for d, r in bridge if d == "a2c")
    assert frames_of(bridge_db)[0][1].startswith(b'{"jsonrpc":"2.0","id":0,"method":"initialize"')
    import sqlite3

    row = sqlite3.connect(bridge_db).execute("SELECT transport, peer FROM connections").fetchone()
    assert row == ("connect", srv.url)


def test_stdin_eof_waits_for_pending_answers() -> None:
    """`printf REQUEST | acp-proxy connect` still prints the response before exiting."""
    with ws_server(["--", *SDK_AGENT]) as srv:
        done = run_proxy(["connect", srv.url, "--grace", "60"], stdin=INIT, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout)
    assert answer["id"] == 7 and answer["result"]["protocolVersion"] == 1
    assert done.stdout.count(b"\n") == 1


def test_stdio_lines_cross_unchanged_and_odd_lines_are_handled(tmp_path: Path) -> None:
    db = tmp_path / "bridge.db"
    lines = (
        b'{"jsonrpc":"2.0","id":1,"method":"_a"}\r\n'
        + b"\xff\xfe not utf-8\n"
        + b'{"jsonrpc":"2.0","method":"_note"}\n'
        + b'{"jsonrpc":"2.0","id":"two","method":"_b"}'  # the last line has no newline
    )
    with ws_server(["--", *RESPONDER]) as srv:
        proc = subprocess.Popen(
            [*proxy_exe(), "connect", srv.url, "--record", str(db), "--grace", "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(lines, timeout=60)
    assert proc.returncode == 0, err.decode()
    # The bridge exits once both requests are answered. The \r (JSON whitespace) reached
    # the agent; the invalid UTF-8 line crossed as a binary frame, which stdio agents never
    # see; the unterminated last line became a whole line for the agent.
    got = [
        json.loads(line) if line.startswith(b'{"jsonrpc":"2.0","id"') else line
        for line in out.splitlines(keepends=True)
    ]
    assert got == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"got": '{"jsonrpc":"2.0","id":1,"method":"_a"}\r\n'},
        },
        b'{"jsonrpc":"2.0","method":"_note"}\n',
        {
            "jsonrpc": "2.0",
            "id": "two",
            "result": {"got": '{"jsonrpc":"2.0","id":"two","method":"_b"}\n'},
        },
    ]
    c2a = [(raw, binary) for raw, binary in _c2a_frames(db)]
    assert c2a == [
        (b'{"jsonrpc":"2.0","id":1,"method":"_a"}\r', 0),
        (b"\xff\xfe not utf-8", 1),
        (b'{"jsonrpc":"2.0","method":"_note"}', 0),
        (b'{"jsonrpc":"2.0","id":"two","method":"_b"}', 0),
    ]


def _c2a_frames(db: Path) -> list[tuple[bytes, int]]:
    import sqlite3

    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT raw, binary FROM frames WHERE direction='c2a' ORDER BY seq")
    return [(bytes(r), b) for r, b in rows]


def test_connect_errors_are_one_line() -> None:
    done = run_proxy(["connect", "http//nope"])
    assert done.returncode == 2 and b"not a WebSocket or HTTP URL" in done.stderr
    done = run_proxy(["connect", "ws://127.0.0.1:9/acp"], stdin=INIT)
    assert done.returncode == 1
    assert done.stderr.decode().startswith("acp-proxy: cannot connect to ws://127.0.0.1:9/acp")
    assert done.stderr.count(b"\n") == 1
    with ws_server(["--", *RESPONDER], env={"ACP_PROXY_TOKEN": "sekrit"}) as srv:
        env = {k: v for k, v in os.environ.items() if k != "ACP_PROXY_TOKEN"}
        refused = subprocess.run(
            [*proxy_exe(), "connect", srv.url], input=INIT, capture_output=True, timeout=60, env=env
        )
        assert refused.returncode == 1
        assert b"refused the WebSocket handshake: 401 Unauthorized: wrong or missing token" in (
            refused.stderr
        )
        ok = run_proxy(
            ["connect", srv.url, "--grace", "60"], stdin=INIT, env={"ACP_PROXY_TOKEN": "sekrit"}
        )
        assert ok.returncode == 0 and json.loads(ok.stdout)["id"] == 7


async def test_server_frames_that_stdio_cannot_carry() -> None:
    """A text frame with a newline: close 1007, exit 1. A close code != 1000: exit 1."""

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        first = await ws.receive()
        if b"newline please" in first.data.encode():
            await ws.send_str('{"pretty":\n true}')
            await ws.receive()
        else:
            await ws.close(code=4003, message=b"session expired")
        return ws

    app = web.Application()
    app.router.add_get("/acp", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"ws://127.0.0.1:{runner.addresses[0][1]}/acp"
    try:
        # Requests: after stdin ends the bridge waits for their answers (or the server).
        for text, code_text in (
            (b'{"jsonrpc":"2.0","id":1,"method":"_newline please"}\n', "close code 1007"),
            (b'{"jsonrpc":"2.0","id":1,"method":"_anything"}\n', "code 4003: session expired"),
        ):
            proc = await asyncio.create_subprocess_exec(
                *proxy_exe(),
                "connect",
                url,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(text), 60)
            assert proc.returncode == 1
            assert out == b""
            assert code_text in err.decode() and b"Traceback" not in err
    finally:
        await runner.cleanup()


def test_connect_help_mentions_the_editor_use() -> None:
    done = run_proxy(["connect", "--help"])
    assert done.returncode == 0 and b"stdin lines" in done.stdout
    assert sys.executable  # the bridge needs nothing but the installed executable


def test_sigterm_ends_the_bridge_with_143_and_keeps_the_recording(tmp_path: Path) -> None:
    import signal

    db = tmp_path / "bridge.db"
    with ws_server(["--", *RESPONDER]) as srv:
        proc = subprocess.Popen(
            [*proxy_exe(), "connect", srv.url, "--record", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(INIT)
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 7
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 128 + signal.SIGTERM
        proc.stdin.close()
    assert [d for d, _ in frames_of(db)] == ["c2a", "a2c"]
