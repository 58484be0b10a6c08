"""Handshake security of ``acp-proxy ws``: bind address, token, Origin, bad requests."""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit

import aiohttp
import pytest

from tests.conftest import ECHO_AGENT, run_proxy
from tests.transport.ws.helpers import ws_server

TOKEN = "t0ken-" + "x" * 20


async def _status(url: str, headers: dict[str, str] | None = None) -> int:
    """101 if the upgrade succeeded (and an echo round trip works), else the HTTP status."""
    async with aiohttp.ClientSession() as session:
        try:
            ws = await session.ws_connect(url, headers=headers)
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.send_str("ping?")
        assert (await ws.receive()).data == "ping?"
        await ws.close()
        return 101


def test_non_loopback_bind_requires_a_token() -> None:
    done = run_proxy(["ws", "--listen", "0.0.0.0:0", "--", *ECHO_AGENT])
    assert done.returncode == 2
    assert b"--token" in done.stderr and b"Traceback" not in done.stderr


def test_bad_listen_values_are_one_line_errors() -> None:
    for value in ("nonsense", "127.0.0.1:99999", "[::1"):
        done = run_proxy(["ws", "--listen", value, "--", *ECHO_AGENT])
        assert done.returncode == 2, value
        assert b"--listen" in done.stderr and b"Traceback" not in done.stderr


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_proxy(["ws", "--listen", f"127.0.0.1:{port}", "--", *ECHO_AGENT])
    assert done.returncode == 1
    assert b"cannot listen on 127.0.0.1" in done.stderr and b"Traceback" not in done.stderr


async def test_token_is_checked_on_the_upgrade() -> None:
    with ws_server(["--", *ECHO_AGENT], env={"ACP_PROXY_TOKEN": TOKEN}) as server:
        assert await _status(server.url) == 401
        assert await _status(server.url, {"Authorization": "Bearer wrong"}) == 401
        assert await _status(server.url, {"Authorization": f"Basic {TOKEN}"}) == 401
        assert await _status(server.url + "?token=" + TOKEN[:-1]) == 401
        assert await _status(server.url, {"Authorization": f"Bearer {TOKEN}"}) == 101
        assert await _status(server.url + "?token=" + TOKEN) == 101
    assert server.stderr_text.count("401 missing or wrong token") == 4
    assert TOKEN not in server.stderr_text


async def test_token_allows_a_non_loopback_bind() -> None:
    import os
    import signal
    import subprocess

    from tests.conftest import proxy_exe

    proc = subprocess.Popen(
        [*proxy_exe(), "ws", "--listen", "0.0.0.0:0", "--", *ECHO_AGENT],
        stderr=subprocess.PIPE,
        env={**os.environ, "ACP_PROXY_TOKEN": TOKEN},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert "listening on ws://0.0.0.0:" in line
        port = urlsplit(line.split()[-1]).port
        url = f"ws://127.0.0.1:{port}/acp"
        assert await _status(url) == 401
        assert await _status(url, {"Authorization": f"Bearer {TOKEN}"}) == 101
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


async def test_origin_allowlist_stops_other_sites_and_dns_rebinding() -> None:
    with ws_server(["--allow-origin", "https://app.example.com", "--", *ECHO_AGENT]) as server:
        port = urlsplit(server.url).port
        # A rebinding page: the browser thinks it talks to evil.example, which resolves to us.
        assert await _status(server.url, {"Origin": f"http://evil.example:{port}"}) == 403
        assert await _status(server.url, {"Origin": "https://app.example.com.evil.io"}) == 403
        assert await _status(server.url, {"Origin": "null"}) == 403
        assert await _status(server.url, {"Origin": "https://app.example.com"}) == 101
        # Pages served from this host over loopback, and non-browser clients (no Origin).
        assert await _status(server.url, {"Origin": "http://localhost:5173"}) == 101
        assert await _status(server.url, {"Origin": "http://127.0.0.1:3000"}) == 101
        assert await _status(server.url) == 101
    assert "403 origin http://evil.example" in server.stderr_text


async def test_bad_handshakes_get_http_errors_and_never_crash_the_server() -> None:
    with ws_server(["--", *ECHO_AGENT]) as server:
        base = server.url.removesuffix("/acp")
        async with aiohttp.ClientSession() as session:
            async with session.get(server.url) as resp:  # a plain GET, no upgrade
                assert resp.status == 426
                assert "WebSocket upgrade" in await resp.text()
            async with session.get(base + "/elsewhere") as resp:
                assert resp.status == 404
            async with session.post(server.url, data=b"{}") as resp:
                assert resp.status == 405
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await session.ws_connect(base + "/not-acp")
            assert info.value.status == 404
        # Raw garbage and a half-finished request on the socket.
        host, port = "127.0.0.1", urlsplit(server.url).port
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 60)
        assert b" 400 " in answer.split(b"\r\n")[0]
        writer.close()
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
        writer.close()
        assert await _status(server.url) == 101
        assert server.proc.poll() is None
    assert "Traceback" not in server.stderr_text
    assert "426 expected a WebSocket upgrade" in server.stderr_text
