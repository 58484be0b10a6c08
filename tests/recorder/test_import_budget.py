"""The stdio proxy imports only what forwarding needs before it forwards its first byte.

An editor launches ``acp-proxy --record ... -- AGENT`` for every agent session and waits
for the agent's first answer; whatever the proxy imports before it forwards is on that
wait (docs/performance.md, "Start-up"). The database, the store, the analyses, asyncio and
the other commands belong to the writer process or to later. This is a list, not a
timing: the real console script runs under ``python -X importtime``, the agent writes a
mark on its stderr (which the proxy passes on to its own) once it has read the first
request, and every module the proxy imported before the mark must be on the allow-list
(``acp_proxy``'s own, and packages outside the standard library) and on no deny-list.
The plain launch (``[--record X] [--label L] -- AGENT``, ``ACP_PROXY_RECORD``) starts its agent
without click; a command line it leaves to click (``--grace 5``) is checked as well.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import importtime_proxy

MARK = "import-budget: the agent has the first request"

AGENT = f"""
import sys
line = sys.stdin.buffer.readline()
sys.stderr.write({MARK!r} + "\\n")
sys.stderr.flush()
sys.stdout.buffer.write(b'{{"jsonrpc":"2.0","id":0,"result":{{}}}}\\n')
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
"""

REQUEST = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'

ALLOWED_OWN = frozenset(
    {
        "acp_proxy",
        "acp_proxy.cli",
        "acp_proxy.commands",
        "acp_proxy.commands.stdio_launch",
        "acp_proxy.console",
        "acp_proxy.counters",
        "acp_proxy.recorder",
        "acp_proxy.recorder.handle",
        "acp_proxy.recorder.ipc",
        "acp_proxy.recorder.journal",
        "acp_proxy.recorder.shipper",
        "acp_proxy.recorder.spool",
        "acp_proxy.recorder.writer",
        "acp_proxy.recorder.writer.switches",
        "acp_proxy.recorder.writer.priority",
        "acp_proxy.store",
        "acp_proxy.store.location",
        "acp_proxy.transport",
        "acp_proxy.transport.chunks",
        "acp_proxy.transport.process",
        "acp_proxy.transport.process.agent",
        "acp_proxy.transport.process.watchdog",
        "acp_proxy.transport.stdio",
        "acp_proxy.transport.stdio.proxy",
        "acp_proxy.wire",
        "acp_proxy.wire.frame",
    }
)
"""acp-proxy's modules the stdio proxy may import before it forwards (a new one: think)."""

ALLOWED_OWN_CLICK = ALLOWED_OWN | {
    "acp_proxy.commands.group",
    "acp_proxy.commands.metrics_options",
    "acp_proxy.commands.options",
    "acp_proxy.commands.otlp_live",
    "acp_proxy.commands.proxy",
    "acp_proxy.commands.redact_options",  # option definitions: click and os only
    "acp_proxy.commands.tls_options",
    "acp_proxy.commands.ui",
}
"""... and through click (an option the plain launch leaves to it, e.g. ``--grace``)."""

ALLOWED_OUTSIDE_STDLIB = frozenset({"org"})
"""Packages outside the standard library it may import then (beyond what ``site`` loads).

(``org``: not a package; the standard library's ``copy`` tries ``org.python.core``, Jython's,
and ``-X importtime`` lists the attempt.) Through click: click too."""

DENIED = (
    # the database and the store: the writer process's
    "sqlite3",
    "_sqlite3",
    "psycopg",
    "acp_proxy.store.engine",
    "acp_proxy.store.schema",
    "acp_proxy.store.pg",
    "acp_proxy.store.columns",
    "acp_proxy.recorder.writer.pipeline",
    "acp_proxy.recorder.writer.rows",
    "acp_proxy.recorder.writer.sink",
    "acp_proxy.recorder.writer.sink_pg",
    "acp_proxy.recorder.writer.otlp_live",
    # analyses, presentation, the other commands and transports
    "acp_proxy.acp",
    "acp_proxy.analysis",
    "acp_proxy.formats",
    "acp_proxy.report",
    "acp_proxy.replay",
    "acp_proxy.web",
    "acp_proxy.commands.common",
    "acp_proxy.transport.ws",
    "acp_proxy.transport.http",
    "acp_proxy.transport.address",
    # libraries the forwarding path does not use
    "asyncio",
    "concurrent.futures",
    "aiohttp",
    "orjson",
    "opentelemetry",
    "ssl",
    "socket",
    "json",
    "difflib",
    "ipaddress",
    "logging",
    "textwrap",
)
"""Modules (and their submodules) the stdio proxy must not import before it forwards."""

DENIED_FAST = (*DENIED, "click", "acp_proxy.commands.group", "acp_proxy.commands.proxy")
"""... nor, for the plain launch (``[--record X] [--label L] -- AGENT``), click or the click
command: :mod:`acp_proxy.commands.stdio_launch` starts the agent without them."""

_LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \|( *)(\S+)")


def _imported(stderr: str) -> list[str]:
    return [m.group(2) for m in map(_LINE.match, stderr.splitlines()) if m is not None]


def _site_modules() -> set[str]:
    """What the interpreter imports before any code of ours (``site``, ``.pth`` files)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return set(_imported(done.stderr))


def _imports_before_forwarding(
    tmp_path: Path, flags: list[str], extra_env: dict[str, str]
) -> tuple[list[str], list[str]]:
    """(modules imported before the agent had the first request, all the proxy's imports)."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_PROXY_")}
    env.update(extra_env)
    proc = subprocess.Popen(
        [*importtime_proxy(), *flags, "--", sys.executable, "-I", str(agent)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    out, err = proc.communicate(REQUEST, timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")
    assert b'"id":0' in out
    text = err.decode(errors="replace")
    assert MARK in text, text
    before, _, _ = text.partition(MARK)
    return _imported(before), _imported(text)


def _denied(module: str, denied: tuple[str, ...]) -> str | None:
    for name in denied:
        if module == name or module.startswith(name + "."):
            return name
    return None


PG = "postgresql://nobody@127.0.0.1:1/none"


@pytest.mark.parametrize(
    ("flags", "env", "fast"),
    [
        pytest.param(["--record", "session.db"], {}, True, id="sqlite"),
        pytest.param(["--record", PG], {}, True, id="postgresql"),
        pytest.param([], {}, True, id="no-recording"),
        pytest.param(["--label=editor 1", "--record=session.db"], {}, True, id="label"),
        pytest.param([], {"ACP_PROXY_RECORD": "session.db"}, True, id="env"),
        # what the plain launch leaves to click (the same defaults, given): click's budget
        pytest.param(["--record", "session.db", "--grace", "5"], {}, False, id="click-sqlite"),
        pytest.param(["--record", PG, "--queue-mb", "16"], {}, False, id="click-postgresql"),
        pytest.param([], {"ACP_PROXY_REDACT": "0"}, False, id="click-redact-env"),
    ],
)
def test_the_proxy_imports_only_what_forwarding_needs_before_it_forwards(
    tmp_path: Path, flags: list[str], env: dict[str, str], fast: bool
) -> None:
    before, everything = _imports_before_forwarding(tmp_path, flags, env)
    assert "acp_proxy.transport.stdio.proxy" in before  # the mark came after forwarding began
    assert ("click" not in before) == fast, "the plain launch is click's, or the other way"
    site = _site_modules()  # (not ours: what the interpreter loads for every program)
    deny = DENIED_FAST if fast else DENIED
    denied = sorted(
        {f"{m} ({_denied(m, deny)})" for m in before if _denied(m, deny) and m not in site}
    )
    assert not denied, f"imported before forwarding: {denied}"
    allowed_own = ALLOWED_OWN if fast else ALLOWED_OWN_CLICK
    own = sorted(m for m in before if m.startswith("acp_proxy") and m not in allowed_own)
    assert not own, f"not on the allow-list of acp_proxy modules: {own}"
    allowed_outside = ALLOWED_OUTSIDE_STDLIB if fast else ALLOWED_OUTSIDE_STDLIB | {"click"}
    outside = sorted(
        {
            m.partition(".")[0]
            for m in before
            if m not in site
            and m.partition(".")[0] not in sys.stdlib_module_names
            and m.partition(".")[0] not in allowed_outside
            and not m.startswith("acp_proxy")
        }
    )
    assert not outside, f"packages outside the standard library: {outside}"
    # and a session that ends normally never loads a database driver in the proxy at all
    assert not {"sqlite3", "psycopg"} & set(everything), sorted(everything)
