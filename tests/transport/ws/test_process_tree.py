"""``acp-proxy ws`` leaves no process of a wrapped agent's tree, after kill -9 or SIGTERM."""

from __future__ import annotations

import base64
import os
import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.transport.process.test_process_tree import (
    assert_all_gone,
    kill_tree,
    tree_pids,
    wrapper_agent,
)
from tests.transport.ws.helpers import ws_server

TIMEOUT = 60.0


def upgrade(url: str) -> socket.socket:
    """A raw WebSocket upgrade to ``url`` (the server then starts an agent for it)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    sock = socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, answer
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_ws_leaves_no_process_of_the_agents_tree(tmp_path: Path, sig: signal.Signals) -> None:
    pidfile = tmp_path / "pids"
    pids: list[int] = []
    with ws_server(["--grace", "0.5", "--", *wrapper_agent(pidfile)]) as server:
        sock = upgrade(server.url)
        try:
            pids = tree_pids(pidfile, server.proc)
            server.proc.send_signal(sig)
            server.proc.wait(TIMEOUT)
            assert_all_gone(pids)
        finally:
            sock.close()
            kill_tree(pids)
