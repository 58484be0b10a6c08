"""A bare install (no ``postgres`` or ``otlp`` extra): one line before anything is forwarded.

The extras are made missing for the real proxy (and its writer process) by a
``sitecustomize`` on ``PYTHONPATH`` that fails every import of the named packages, as
Python does where they are not installed.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import run_proxy

BLOCKER = """\
import os, sys
BLOCKED = set(filter(None, os.environ.get("TEST_BLOCK_IMPORTS", "").split(",")))
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Missing())
"""

AGENT = ["sh", "-c", "echo agent-started >&2; exec cat"]
"""Says on stderr when it runs: what the proxy decided before, it said before this line."""

LINES = b"".join(b'{"jsonrpc":"2.0","method":"n","params":%d}\n' % i for i in range(200))


def _without(tmp_path: Path, *packages: str) -> dict[str, str]:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "TEST_BLOCK_IMPORTS": ",".join(packages)}


def _said(stderr: bytes) -> list[str]:
    """Its lines, but a slow drain's progress lines (they depend on the machine's load)."""
    drain = ("acp-proxy: recording: writing the last", "acp-proxy: recording: done,")
    return [line for line in stderr.decode().splitlines() if not line.startswith(drain)]


def test_postgresql_without_the_postgres_extra_is_one_line_before_forwarding(
    tmp_path: Path,
) -> None:
    env = _without(tmp_path, "psycopg")
    done = run_proxy(
        ["--record", "postgresql://me@127.0.0.1:1/nowhere", "--", *AGENT], LINES, env=env
    )
    said = _said(done.stderr)
    assert done.returncode == 0, said
    assert done.stdout == LINES
    assert "Traceback" not in done.stderr.decode()
    line = (
        "acp-proxy: recording disabled: recording into PostgreSQL needs psycopg: "
        "pip install 'acp-proxy[postgres]'; forwarding continues"
    )
    assert said == [line, "agent-started"]


def test_live_otlp_without_the_otlp_extra_is_one_line_from_the_proxy_before_forwarding(
    tmp_path: Path,
) -> None:
    env = _without(tmp_path, "opentelemetry")
    db = tmp_path / "a.db"
    for extra in ({}, {"ACP_PROXY_RECORDER": "thread"}):
        done = run_proxy(
            ["--record", str(db), "--otlp-endpoint", "http://127.0.0.1:9/", "--", *AGENT],
            LINES,
            env={**env, **extra},
        )
        said = _said(done.stderr)
        assert done.returncode == 0, said
        assert done.stdout == LINES
        line = "acp-proxy: OTLP export disabled: it needs pip install 'acp-proxy[otlp]'"
        assert said == [line, "agent-started"], extra
