"""Starting ``acp-proxy serve`` as a user would, and reading what it recorded."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import proxy_exe
from tests.helpers import listening_url
from tests.peers import PEERS

HERE = Path(__file__).parent
SDK_AGENT = [sys.executable, str(PEERS / "sdk_agent.py")]
SDK_HTTP_CLIENT = [sys.executable, str(PEERS / "sdk_http_client.py")]
DEMO = [sys.executable, "-m", "acp_proxy.demo.agent"]
URL_RE = re.compile(rb"listening on (http://\S+)")


@dataclass
class Serve:
    """A running ``acp-proxy serve``: its process, URL and stderr."""

    proc: subprocess.Popen[bytes]
    url: str
    stderr: list[bytes] = field(default_factory=list)

    @property
    def ws_url(self) -> str:
        return "ws://" + self.url.removeprefix("http://")

    @property
    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")

    def stop(self, timeout: float = 120) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


@contextmanager
def serving(args: list[str], env: dict[str, str] | None = None) -> Iterator[Serve]:
    """Run ``acp-proxy serve --listen 127.0.0.1:0 ARGS`` until the block ends."""
    proc = subprocess.Popen(
        [*proxy_exe(), "serve", "--listen", "127.0.0.1:0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    url, lines = listening_url(proc, URL_RE)
    server = Serve(proc, url, lines)

    def drain() -> None:
        for line in iter(proc.stderr.readline, b""):  # type: ignore[union-attr]
            lines.append(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        yield server
    finally:
        server.stop()


def rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def sdk_client_run(target: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run tests/peers/sdk_http_client.py against ``target``; what it saw."""
    import json

    done = subprocess.run(
        [*SDK_HTTP_CLIENT, *target],
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def record_sdk_http_run(db: Path) -> str:
    """One SDK HTTP client run (initialize, session/new, a prompt with a permission
    request, DELETE) through ``serve --record DB`` to the SDK agent; the serve URL."""
    with serving(["--record", str(db), "--", *SDK_AGENT]) as server:
        sdk_client_run([server.url])
    return server.url
