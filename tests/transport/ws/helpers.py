"""Starting ``acp-proxy ws`` as a user would and finding its URL; shared by the tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.conftest import proxy_exe
from tests.helpers import listening_url
from tests.peers import PEERS

HERE = Path(__file__).parent
SDK_AGENT = [sys.executable, str(PEERS / "sdk_echo_agent.py")]
SDK_CLIENT = [sys.executable, str(PEERS / "sdk_stdio_client.py")]
TEE = [sys.executable, str(PEERS / "tee_agent.py")]
URL_RE = re.compile(rb"listening on (ws://\S+)")


@dataclass
class Server:
    """A running ``acp-proxy ws`` or ``serve`` process, its URL and what it wrote on stderr."""

    proc: subprocess.Popen[bytes]
    url: str
    stderr: list[bytes] = field(default_factory=list)
    returncode: int | None = None

    @property
    def ws_url(self) -> str:
        """``serve``'s URL for a WebSocket client (it serves both on one port)."""
        return "ws://" + self.url.removeprefix("http://")

    @property
    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM and wait: the proxy closes its connections and flushes the recording."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.returncode = self.proc.wait(timeout)
        return self.returncode


def _drain(stream: object, sink: list[bytes]) -> None:
    for line in iter(stream.readline, b""):  # type: ignore[attr-defined]
        sink.append(line)


def ws_server(args: list[str], env: dict[str, str] | None = None) -> AbstractContextManager[Server]:
    """Run ``acp-proxy ws --listen 127.0.0.1:0 ARGS`` until the block ends."""
    return listening(["ws", "--listen", "127.0.0.1:0", *args], env)


@contextmanager
def listening(
    args: list[str], env: dict[str, str] | None = None, url_re: re.Pattern[bytes] = URL_RE
) -> Iterator[Server]:
    """Run ``acp-proxy ARGS`` (a command that prints "listening on URL") until the block ends."""
    argv = [*proxy_exe(), *args]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    url, lines = listening_url(proc, url_re)
    server = Server(proc, url, lines)
    thread = threading.Thread(target=_drain, args=(proc.stderr, lines), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        if proc.poll() is None:
            server.stop()
        thread.join(10)


@contextlib.asynccontextmanager
async def serving(handler: Any) -> AsyncIterator[str]:
    """An aiohttp server on 127.0.0.1 port 0 answering ``/acp`` with ``handler``; its URL."""
    app = web.Application()
    app.router.add_get("/acp", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"ws://127.0.0.1:{runner.addresses[0][1]}/acp"
    finally:
        await runner.cleanup()
