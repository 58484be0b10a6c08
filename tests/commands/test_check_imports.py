"""``acp-proxy check`` imports only what checking needs (docs/performance.md, ``check``).

A CI job runs ``check`` on every recording; its start-up is part of each run (about 2% of
a million-frame check). This is a list, not a timing: the real console script runs
``check --json`` under ``python -X importtime`` and none of the modules below may be among
those it imported. Each was imported once and is deferred to where it is needed: the
proxy, the recorder and their options, asyncio, the statistics and aggregates of the other
analyses, JUnit's ElementTree (``--format junit`` only), the pager's ``subprocess`` (a
terminal only) and the recorder's ``socket`` (a connection row's host).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.acp.conformance.helpers import v1_prelude, write_recording
from tests.conftest import importtime_proxy

NOT_IMPORTED = frozenset(
    {
        "asyncio",
        "socket",
        "subprocess",
        "xml.etree.ElementTree",
        "acp_proxy.acp.stats",
        "acp_proxy.analysis.aggregates",
        "acp_proxy.analysis.connection",
        "acp_proxy.commands.options",
        "acp_proxy.recorder",
        "acp_proxy.store.edit",
    }
)


def imported_by(*args: str) -> set[str]:
    """The modules ``acp-proxy ARGS`` imports (the real console script)."""
    done = subprocess.run([*importtime_proxy(), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return {
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }


def test_check_imports_nothing_of_the_deny_list(tmp_path: Path) -> None:
    db = tmp_path / "tiny.db"
    write_recording(db, [v1_prelude()])
    imported = imported_by("check", str(db), "--json")
    assert "acp_proxy.acp.conformance.checker" in imported  # (the list is read)
    assert not imported & NOT_IMPORTED, sorted(imported & NOT_IMPORTED)
