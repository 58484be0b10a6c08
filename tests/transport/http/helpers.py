"""Starting ``acp-proxy serve`` as a user would, and reading what it recorded."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tests.peers import PEERS
from tests.transport.ws.helpers import Server, listening

HERE = Path(__file__).parent
SDK_AGENT = [sys.executable, str(PEERS / "sdk_agent.py")]
SDK_HTTP_CLIENT = [sys.executable, str(PEERS / "sdk_http_client.py")]
DEMO = [sys.executable, "-m", "acp_proxy.demo.agent"]
URL_RE = re.compile(rb"listening on (http://\S+)")


def serving(args: list[str], env: dict[str, str] | None = None) -> AbstractContextManager[Server]:
    """Run ``acp-proxy serve --listen 127.0.0.1:0 ARGS`` until the block ends."""
    return listening(["serve", "--listen", "127.0.0.1:0", *args], env, URL_RE)


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
