"""``acp-proxy web`` and the proxy's ``--ui`` option, through the real executable."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import proxy_exe, run_proxy
from tests.web.helpers import (
    SCRIPTED_AGENT,
    LiveProxy,
    make_big_db,
    opening,
    prompt,
    rows,
    stop,
    wait_until,
    web_server,
)


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def db(recording: Path) -> Path:
    return recording


def test_web_serves_a_recording_and_stops_cleanly(db: Path) -> None:
    proc = subprocess.Popen(
        [*proxy_exe(), "web", str(db), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith(f"acp-proxy: inspector for {db} on http://127.0.0.1:")
        url = line.split(" on ")[1].split()[0]
        status, info = fetch(url + "api/info")
        assert status == 200
        assert info["max_id"] == rows(db, "SELECT max(id) FROM frames")[0][0]
    finally:
        stop(proc)
    assert proc.returncode == 0
    assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()


@pytest.mark.parametrize("kind", ["missing", "corrupt", "directory", "empty"])
def test_web_bad_recording_is_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x.db"
    if kind == "corrupt":
        path.write_bytes(b"garbage" * 1000)
    elif kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    done = run_proxy(["web", str(path), "--listen", "127.0.0.1:0"], timeout=60)
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("Error: ") and str(path.name) in last, err


@pytest.fixture(scope="module")
def many_pages(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a recording of a few hundred pages."""
    path = tmp_path_factory.mktemp("pages") / "pages.db"
    make_big_db(path, 5000)
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["random-bytes", "truncated", "middle-page"])
def test_web_refuses_a_damaged_recording_as_ls_does(
    tmp_path: Path, many_pages: bytes, damage: str
) -> None:
    """A damaged file is refused up front with the line ``ls`` gives, exit 1."""
    path = tmp_path / "damaged.db"
    page = 4096
    middle = len(many_pages) // page // 2 * page
    if damage == "random-bytes":
        data = os.urandom(len(many_pages))
    elif damage == "truncated":
        data = many_pages[: middle + 100]
    else:
        data = many_pages[:middle] + os.urandom(page) + many_pages[middle + page :]
    path.write_bytes(data)
    listed = run_proxy(["ls", str(path)])
    done = run_proxy(["web", str(path), "--listen", "127.0.0.1:0"], timeout=60)
    assert listed.returncode == 1 and done.returncode == 1, done.stdout
    err = done.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err == listed.stderr.decode().strip()


def test_web_refuses_non_loopback_without_token(tmp_path: Path) -> None:
    db = tmp_path / "not-even-needed.db"  # the address is checked first
    done = run_proxy(["web", str(db), "--listen", "0.0.0.0:0"], timeout=60)
    assert done.returncode == 2
    assert "needs --token" in done.stderr.decode()
    bad = run_proxy(["web", str(db), "--listen", "nonsense"], timeout=60)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr.decode()


def test_web_with_token_on_all_interfaces(db: Path) -> None:
    with web_server(db, "--listen", "0.0.0.0:0", "--token", "tok-123") as url:
        assert url.endswith("/?token=tok-123")
        base = url.split("?")[0]
        assert fetch(base + "api/info")[0] == 401
        assert fetch(base + "api/info", {"Authorization": "Bearer tok-123"})[0] == 200
        assert fetch(base + "api/info?token=tok-123")[0] == 200


def test_web_port_in_use_is_one_line(db: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        done = run_proxy(["web", str(db), "--listen", f"127.0.0.1:{port}"], timeout=60)
    assert done.returncode == 1
    err = done.stderr.decode().strip()
    assert err.startswith(f"Error: cannot listen on 127.0.0.1:{port}") and "\n" not in err


def test_proxy_ui_serves_the_recording_live(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    proxy = LiveProxy(db, "--ui", "127.0.0.1:0")
    try:
        url = proxy.ui_url()
        assert url.startswith("http://127.0.0.1:")
        proxy.send(opening())
        proxy.wait_output(lambda out: b'"id":2' in out)

        def frames() -> list[dict[str, Any]]:
            status, data = fetch(url + "api/frames?limit=1000")
            return data["frames"] if status == 200 else []

        wait_until(lambda: len(frames()) >= 4, what="the opening frames in the inspector")
        before = len(frames())
        proxy.send(prompt(3, "live prompt"))
        wait_until(
            lambda: any(f["method"] == "session/prompt" for f in frames()),
            what="the prompt in the inspector",
        )
        wait_until(lambda: len(frames()) > before + 10, what="the turn's updates")
    finally:
        code = proxy.close()
    assert code == 0
    out = b"".join(proxy.out)
    assert b"inspector" not in out, "stdout is the ACP channel: nothing else may go there"
    assert all(line.startswith(b"{") for line in out.splitlines()[:5])


def test_proxy_ui_needs_record(tmp_path: Path) -> None:
    done = run_proxy(["--ui", "127.0.0.1:0", "--", *SCRIPTED_AGENT], timeout=60)
    assert done.returncode == 2
    assert "--ui needs --record" in done.stderr.decode()
    far = run_proxy(
        ["--record", str(tmp_path / "x.db"), "--ui", "0.0.0.0:0", "--", *SCRIPTED_AGENT], timeout=60
    )
    assert far.returncode == 2 and "--ui-token" in far.stderr.decode()


def test_proxy_ui_port_in_use_still_proxies(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        done = run_proxy(
            ["--record", str(db), "--ui", f"127.0.0.1:{port}", "--", *SCRIPTED_AGENT],
            stdin=opening(),
            timeout=60,
        )
    assert done.returncode == 0
    assert b"inspector not started" in done.stderr and b"proxying anyway" in done.stderr
    assert done.stdout.count(b"\n") == 2


def test_ws_ui_shows_websocket_frames_live(tmp_path: Path) -> None:
    """``acp-proxy ws --ui``: the inspector serves the WebSocket recording while it is made."""
    import asyncio
    import re

    import aiohttp

    db = tmp_path / "ws.db"
    proc = subprocess.Popen(
        [
            *proxy_exe(),
            "ws",
            "--listen",
            "127.0.0.1:0",
            "--record",
            str(db),
            "--ui",
            "127.0.0.1:0",
            "--",
            "cat",
        ],
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        seen = b""
        while not (b"ws://" in seen and b"http://" in seen):
            line = proc.stderr.readline()
            assert line, f"acp-proxy ws exited: {seen!r}"
            seen += line
        ws_url = re.search(rb"ws://[\d.:]+/acp", seen).group().decode()  # type: ignore[union-attr]
        ui_url = re.search(rb"http://[\d.:]+/", seen).group().decode()  # type: ignore[union-attr]
        frame = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'

        async def talk() -> str:
            async with aiohttp.ClientSession() as session, session.ws_connect(ws_url) as ws:
                await ws.send_str(frame)
                reply = await ws.receive(timeout=30)
                return str(reply.data)

        assert asyncio.run(talk()) == frame

        def frames() -> list[dict[str, Any]]:
            status, data = fetch(ui_url + "api/frames?limit=100")
            return data["frames"] if status == 200 else []

        wait_until(lambda: len(frames()) >= 2, what="both frames in the inspector")
        got = frames()
        assert {f["direction"] for f in got} == {"c2a", "a2c"}
        assert all(f["method"] == "initialize" for f in got)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
