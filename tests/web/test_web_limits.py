"""The inspector's generic request handling, through ``acp-proxy web``: a static name too long
for the file system is 404, an over-long request target the API's JSON 400 (not text)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

from acp_proxy.transport.server_limits import MAX_LINE_BYTES
from tests.web.helpers import record_session, web_server

SOCKET_BOUND = 60.0


def _get(netloc: str, target: str) -> tuple[int, dict[str, str], bytes]:
    host, port = netloc.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=SOCKET_BOUND) as sock:
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: {netloc}\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *fields = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    return int(status_line.split()[1]), headers, body


def test_long_static_names_and_long_queries_get_json_errors(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    record_session(db, ["hello"])
    with web_server(db) as url:
        parts = urlsplit(url)
        token = f"token={parts.query.split('token=')[1]}" if "token=" in parts.query else ""
        status, headers, body = _get(parts.netloc, f"/static/{'a' * 300}.js?{token}")
        assert status == 404, body[:200]
        assert isinstance(json.loads(body)["error"], str)
        for size in (MAX_LINE_BYTES, 100_000):
            status, headers, body = _get(parts.netloc, f"/api/search?q={'a' * size}&{token}")
            assert status == 400, body[:200]
            assert headers["content-type"].startswith("application/json"), headers
            assert f"over {MAX_LINE_BYTES} bytes" in json.loads(body)["error"]
        status, headers, body = _get(parts.netloc, f"/api/info?{token}")
        assert status == 200, body[:200]
