"""``serve``: a POST whose body stops coming is cut off like a stalled header (408, closed)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.transport.http.helpers import serving

SOCKET_BOUND = 60.0
"""How long a socket waits for the server (a bound, so a held socket fails the test)."""


def test_stalled_bodies_are_cut_off_and_the_server_still_serves(tmp_path: Path) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
    with serving(["--", "cat"], env={"ACP_PROXY_HEADER_TIMEOUT": "1"}) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        head = (
            b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
        try:
            for sock in stalled:
                sock.settimeout(SOCKET_BOUND)
                sock.sendall(head + body[:10])  # then nothing more
            for sock in stalled:
                answer = b""
                while chunk := sock.recv(65536):  # until the server closes the socket
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
                assert b"the body stalled" in answer
        finally:
            for sock in stalled:
                sock.close()
        with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_BOUND) as sock:
            whole = b'{"jsonrpc":"2.0","id":1}'  # a body that arrives whole: read, answered
            sock.sendall(
                b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(whole), whole)
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert "Traceback" not in server.stderr_text
    assert server.stderr_text.count("408 the body stalled") == 10, server.stderr_text
