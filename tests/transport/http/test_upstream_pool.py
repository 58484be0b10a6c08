"""``serve --upstream http://``: the POSTs' keep-alive client (transport/http/pool.py).

Through the real ``acp-proxy serve`` in front of the SDK's own server (connections counted
by a TCP relay between them) and in front of a scripted upstream that answers each method
with a different framing, an error status, a cut or garbled answer, or ``Connection: close``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx2

from tests.transport.http.helpers import rows, serving
from tests.transport.http.test_upstream import sdk_server

JSON = {"Content-Type": "application/json"}


def body(n: int, method: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": {}}).encode()


class Accepting:
    """A listening socket on 127.0.0.1:0 serving each connection on a thread; counts them."""

    def __init__(self, serve_one: Callable[[socket.socket], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.serve_one = serve_one
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            self.serve_one(conn)


@contextmanager
def counting_relay(upstream: str) -> Iterator[Accepting]:
    """A TCP relay to ``upstream``'s host:port that counts the connections made to it."""
    host, port = upstream.removeprefix("http://").split("/")[0].rsplit(":", 1)

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)

    def relay(conn: socket.socket) -> None:
        with socket.create_connection((host, int(port))) as out:
            back = threading.Thread(target=pipe, args=(out, conn), daemon=True)
            back.start()
            with suppress(OSError):
                pipe(conn, out)
            back.join(30)

    server = Accepting(relay)
    try:
        yield server
    finally:
        server.sock.close()


def test_posts_reuse_one_upstream_connection(tmp_path: Path) -> None:
    db = tmp_path / "up.db"
    with sdk_server() as upstream, counting_relay(upstream) as relay:
        via = f"http://127.0.0.1:{relay.port}/acp"
        with (
            serving(["--upstream", via, "--record", str(db)]) as srv,
            httpx2.Client(timeout=30) as c,
        ):
            init = c.post(srv.url, content=body(0, "initialize"), headers=JSON)
            assert init.status_code == 200, init.text
            cid = init.headers["Acp-Connection-Id"]
            statuses = [
                c.post(
                    srv.url,
                    content=body(n, "session/new"),
                    headers={**JSON, "Acp-Connection-Id": cid},
                ).status_code
                for n in range(1, 9)
            ]
            connections = relay.connections  # before the DELETE (aiohttp's, its own)
            assert c.delete(srv.url, headers={"Acp-Connection-Id": cid}).status_code == 202
    assert statuses == [202] * 8
    assert connections == 1  # nine POSTs, one connection to the upstream
    c2a = rows(db, "select count(*) from frames where direction='c2a'")[0][0]
    assert c2a == 9


ANSWERS = {
    "initialize": (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAcp-Connection-Id: up-1\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        b'5;ext=1\r\n{"jso\r\n1f\r\nnrpc":"2.0","id":0,"result":{}}\r\n0\r\nX-T: 1\r\n\r\n'
    ),
    "length": b"HTTP/1.1 202 Accepted\r\nX-Up: yes\r\nContent-Length: 0\r\n\r\n",
    "error": (
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nSet-Cookie: a=1\r\n"
        b"Set-Cookie: b=2\r\nContent-Length: 5\r\n\r\nbusy\n"
    ),
    "close": b"HTTP/1.1 202 Accepted\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
    "cut": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789",
    "garbled": b"220 smtp.example.com ESMTP\r\n\r\n",
}
CLOSE_AFTER = {"close", "cut", "garbled"}
ANSWERS["idle"] = ANSWERS["length"]  # then the upstream closes the idle connection


def scripted(conn: socket.socket) -> None:
    """Answers each POST by its JSON-RPC method (:data:`ANSWERS`), keeping the connection."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
        head, _, buf = buf.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(buf) < length:
            buf += conn.recv(65536)
        request, buf = buf[:length], buf[length:]
        conn.sendall(ANSWERS[json.loads(request)["method"]])
        if json.loads(request)["method"] in CLOSE_AFTER:
            return
        if json.loads(request)["method"] == "idle":
            time.sleep(0.3)  # then closed while idle, without having said so
            return


def test_framings_statuses_and_broken_answers_from_the_upstream(tmp_path: Path) -> None:
    db = tmp_path / "up.db"
    upstream = Accepting(scripted)
    url = f"http://127.0.0.1:{upstream.port}/acp"
    with serving(["--upstream", url, "--record", str(db)]) as srv, httpx2.Client(timeout=30) as c:

        def post(n: int, method: str) -> httpx2.Response:
            return c.post(
                srv.url, content=body(n, method), headers={**JSON, "Acp-Connection-Id": "up-1"}
            )

        init = post(0, "initialize")
        length, error = post(1, "length"), post(2, "error")
        seen = [upstream.connections]
        closing, after_close = post(3, "close"), post(4, "length")
        seen.append(upstream.connections)
        cut, after_cut = post(5, "cut"), post(6, "length")
        garbled, after_garbled = post(7, "garbled"), post(8, "length")
        stderr = srv.stderr_text
    upstream.sock.close()
    # chunked (with an extension and a trailer): the body without its framing
    assert (init.status_code, init.content) == (200, b'{"jsonrpc":"2.0","id":0,"result":{}}')
    assert init.headers["Acp-Connection-Id"] == "up-1"
    assert (length.status_code, length.headers["X-Up"]) == (202, "yes")
    # an error status, its headers (both cookies) and body, as the upstream sent them
    assert (error.status_code, error.content, error.headers["Retry-After"]) == (503, b"busy\n", "7")
    assert error.headers.get_list("Set-Cookie") == ["a=1", "b=2"]
    # kept alive until the upstream said Connection: close; then a new one
    assert seen == [1, 2]
    assert closing.status_code == 202 and after_close.status_code == 202
    # an answer cut short or not HTTP: 502 saying so, and the next POST is served
    assert cut.status_code == 502 and "broke its answer" in cut.text, cut.text
    assert "middle of a response" in cut.text
    assert garbled.status_code == 502 and "breaks HTTP/1.1" in garbled.text, garbled.text
    assert after_cut.status_code == after_garbled.status_code == 202
    assert "502 the upstream" in stderr
    assert upstream.connections == 4
    a2c = rows(db, "select raw from frames where direction='a2c'")
    assert a2c == [(b'{"jsonrpc":"2.0","id":0,"result":{}}',)]


def test_a_connection_the_upstream_closed_while_idle_is_not_reused(tmp_path: Path) -> None:
    upstream = Accepting(scripted)
    url = f"http://127.0.0.1:{upstream.port}/acp"
    with serving(["--upstream", url]) as srv, httpx2.Client(timeout=30) as c:
        first = c.post(srv.url, content=body(1, "idle"), headers=JSON)
        time.sleep(1.0)  # the upstream has closed that connection (keep-alive timeout)
        second = c.post(srv.url, content=body(2, "length"), headers=JSON)
    upstream.sock.close()
    assert (first.status_code, second.status_code) == (202, 202), second.text
    assert upstream.connections == 2


def test_an_upstream_nobody_listens_on_is_502(tmp_path: Path) -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with serving(["--upstream", f"http://127.0.0.1:{port}/acp"]) as srv:
        got = httpx2.post(srv.url, content=body(0, "initialize"), headers=JSON, timeout=30)
    assert got.status_code == 502 and "unreachable" in got.text, got.text
