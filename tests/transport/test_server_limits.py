"""The shared HTTP limits of every server, through the real executables.

``acp-proxy ws``, ``acp-proxy replay --listen`` and ``acp-proxy web``: a request line of
100 KB is refused with one stderr line (no aiohttp traceback); a client that sends half a
header and stalls is disconnected after the header timeout (``ACP_PROXY_HEADER_TIMEOUT``),
while a normal client is still served.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import proxy_exe

URL_RE = re.compile(rb"(?:ws|http)://(127\.0\.0\.1):(\d+)")
TIMEOUT = 60.0
HEADER_TIMEOUT = 1.0


class Running:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, lines: list[bytes]) -> None:
        self.proc = proc
        self.port = port
        self.lines = lines

    def stderr_after(self, start: int) -> list[str]:
        return [line.decode("utf-8", "replace") for line in self.lines[start:]]


@contextmanager
def server(args: list[str], url_on_stdout: bool = False) -> Iterator[Running]:
    proc = subprocess.Popen(
        [*proxy_exe(), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ACP_PROXY_HEADER_TIMEOUT": str(HEADER_TIMEOUT)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    stream = proc.stdout if url_on_stdout else proc.stderr
    port = None
    for line in iter(stream.readline, b""):
        match = URL_RE.search(line)
        if match:
            port = int(match.group(2))
            break
    assert port is not None, "the server did not start"
    lines: list[bytes] = []

    def drain() -> None:
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, b""):
            lines.append(line)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
        yield Running(proc, port, lines)
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
        thread.join(10)


def http_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(request)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
            if b"\r\n\r\n" in out and b"Connection: close" in out:
                break
        return out


def _recording(tmp_path: Path) -> Path:
    db = tmp_path / "r.db"
    request = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    done = subprocess.run(
        [*proxy_exe(), "--record", str(db), "--", "cat"], input=request, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    return db


def _servers(tmp_path: Path) -> dict[str, tuple[list[str], bool]]:
    db = _recording(tmp_path)
    return {
        "ws": (["ws", "--listen", "127.0.0.1:0", "--", sys.executable, "-c", "pass"], False),
        "replay": (["replay", str(db), "--listen", "127.0.0.1:0"], False),
        "web": (["web", str(db), "--listen", "127.0.0.1:0"], True),
    }


@pytest.mark.parametrize("kind", ["ws", "replay", "web"])
def test_a_huge_request_line_is_refused_in_one_line(tmp_path: Path, kind: str) -> None:
    args, on_stdout = _servers(tmp_path)[kind]
    with server(args, on_stdout) as s:
        start = len(s.lines)
        answer = http_exchange(s.port, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.split(b" ", 2)[1] in (b"400", b"431"), answer[:200]
        deadline = time.monotonic() + TIMEOUT
        while len(s.lines) == start and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # anything else it would print comes with the same incident
        err = s.stderr_after(start)
        assert len(err) == 1, err
        assert err[0].startswith("acp-proxy: ") and "Traceback" not in err[0], err


@pytest.mark.parametrize("kind", ["ws", "replay", "web"])
def test_a_stalled_header_is_cut_off_and_others_are_served(tmp_path: Path, kind: str) -> None:
    args, on_stdout = _servers(tmp_path)[kind]
    with server(args, on_stdout) as s:
        stalled = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(5)]
        try:
            for sock in stalled:
                sock.sendall(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                sock.settimeout(TIMEOUT)
            started = time.monotonic()
            # A normal client meanwhile is answered.
            answer = http_exchange(
                s.port, b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            assert answer.startswith(b"HTTP/1.1 "), answer[:200]
            for sock in stalled:
                assert sock.recv(65536) == b""  # closed by the server, no answer
            assert time.monotonic() - started < TIMEOUT / 2
        finally:
            for sock in stalled:
                sock.close()
        assert s.proc.poll() is None
