"""``acp-proxy connect http://.../acp``: the stdio bridge over Streamable HTTP, chained to serve."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import proxy_exe
from tests.transport.http.helpers import DEMO, rows, sdk_client_run, serving


def test_sdk_stdio_client_through_connect_and_serve_equals_stdio(tmp_path: Path) -> None:
    bridge_db = tmp_path / "bridge.db"
    serve_db = tmp_path / "serve.db"
    argv = [*DEMO, "--state", str(tmp_path / "http-state")]
    with serving(["--record", str(serve_db), "--", *argv]) as server:
        chained = sdk_client_run(
            ["--", *proxy_exe(), "connect", server.url, "--record", str(bridge_db)]
        )
    direct = sdk_client_run(["--", *DEMO, "--state", str(tmp_path / "direct-state")])
    assert chained == direct
    assert chained["load"], "session/load replayed over the chain"
    # both ends recorded the same messages
    assert rows(bridge_db, "select distinct transport from connections") == [("http-connect",)]
    for direction in ("c2a", "a2c"):
        sql = "select raw from frames where direction=? order by connection_id, seq"
        bridge = sorted(bytes(r) for (r,) in rows(bridge_db, sql, direction))
        served = sorted(bytes(r) for (r,) in rows(serve_db, sql, direction))
        assert bridge == served


def test_connect_http_needs_initialize_first_and_says_so(tmp_path: Path) -> None:
    with serving(["--", *DEMO]) as server:
        done = subprocess.run(
            [*proxy_exe(), "connect", server.url],
            input=b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n',
            capture_output=True,
            timeout=60,
        )
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "first message must be initialize" in err and "Traceback" not in err


def test_connect_http_reports_a_refused_token(tmp_path: Path) -> None:
    with serving(["--token", "right", "--", *DEMO]) as server:
        done = subprocess.run(
            [*proxy_exe(), "connect", server.url, "--token", "wrong"],
            input=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
            capture_output=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert "401" in done.stderr.decode() and "Traceback" not in done.stderr.decode()
