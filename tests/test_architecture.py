"""The layering is enforced: `lint-imports` keeps the contracts in pyproject.toml, in the test run.

The contracts ([tool.importlinter] in pyproject.toml): layers bottom to top console < wire <
acp < store | replay < formats | analysis < recorder < transport | report < web < demo |
testing | mcp < commands < cli, and inside transport/ process < stdio < ws < http, nothing
imports upward (transport and report not each other either); wire, acp and replay import no
I/O library; click only in commands/ and cli.py; sqlite3 and psycopg only in store/ (one
engine object per backend); no cycles between sibling modules or packages, imports under
``if TYPE_CHECKING:`` included. The tests below also prove the check can fail: the same
configuration on a temporary copy of the package with one deliberate bad import in it must
be BROKEN. The tests' own layout is kept too: tests/ mirrors acp_proxy/ folder for folder, and
every fake peer a test launches lives in tests/peers/.

Two checks beside the contracts: no module of the package is over 700 lines (split by job;
an explicit allow-list, each entry with its reason), and no module outside store/ tells the
engines apart (picks ``connect_pg`` or compares a ``postgresql://`` scheme) but the few that
are about one engine by design, each named with its reason.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports(cwd: Path, *, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports")
    assert exe is not None, "import-linter is not installed: pip install -e '.[test]'"
    env = dict(os.environ)
    if pythonpath is not None:  # the copy shadows the installed package
        env["PYTHONPATH"] = f"{pythonpath}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return subprocess.run(
        [exe, "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_contracts_are_kept() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 kept, 0 broken" in done.stdout, done.stdout


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of the package and its pyproject.toml, for breaking on purpose."""
    shutil.copytree(
        ROOT / "acp_proxy", tmp_path / "acp_proxy", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    copy = _lint_imports(tmp_path, pythonpath=tmp_path)
    assert copy.returncode == 0, copy.stdout + copy.stderr  # the untouched copy passes
    return tmp_path


@pytest.mark.parametrize(
    ("module", "source", "broken"),
    [
        # an upward import: the pure bottom reaching for a command
        ("wire/upward.py", "from acp_proxy.commands import common\n", "Layers"),
        # the inspector reaching into the CLI again (what web/cli.py did)
        ("web/uses_click.py", "import acp_proxy.commands.ui\n", "Layers"),
        # a transport reaching up: process/ starting a WebSocket
        ("transport/process/dials.py", "import acp_proxy.transport.ws.rules\n", "Transports"),
        # click outside commands/
        ("transport/options.py", "import click\n", "click"),
        ("report/options.py", "import click\n", "click"),
        # presentation reaching for the sockets, or the CLI
        ("report/live.py", "import acp_proxy.transport\n", "Layers"),
        ("report/usage.py", "from acp_proxy.commands import common\n", "Layers"),
        # I/O in the pure core
        ("acp/spawns.py", "import subprocess\n", "pure"),
        ("replay/stores.py", "import sqlite3\n", "pure"),
        # the store reaching up for what records into it
        ("store/ships.py", "import acp_proxy.recorder.shipper\n", "Layers"),
        # a format reading a recording without the store's reader
        ("formats/peeks.py", "from acp_proxy.analysis import compare\n", "Layers"),
        # a database driver outside the store: the writer's sink, a command, the inspector
        ("recorder/writer/raw_sql.py", "import sqlite3\n", "sqlite3 and psycopg"),
        ("commands/pg_direct.py", "import psycopg\n", "sqlite3 and psycopg"),
        ("web/pg_pool.py", "from psycopg import pq\n", "sqlite3 and psycopg"),
        # a cycle between two sibling modules
        ("recorder/loop_a.py", "import acp_proxy.recorder.loop_b\n", "cycles"),
    ],
)
def test_a_bad_import_breaks_a_contract(
    package_copy: Path, module: str, source: str, broken: str
) -> None:
    path = package_copy / "acp_proxy" / module
    path.write_text(f'"""A deliberate violation."""\n\n{source}')
    if module == "recorder/loop_a.py":
        (path.parent / "loop_b.py").write_text(
            '"""The other half."""\n\nimport acp_proxy.recorder.loop_a\n'
        )
    done = _lint_imports(package_copy, pythonpath=package_copy)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if " BROKEN" in line]
    assert any(broken in line for line in failed), done.stdout
    assert Path(module).stem in done.stdout  # the report names the culprit


TYPE_ONLY = (
    '"""A deliberate violation: an annotation-only import."""\n\n'
    "from __future__ import annotations\n\n"
    "from typing import TYPE_CHECKING\n\n"
    "if TYPE_CHECKING:\n"
    "    import {target}\n"
)


@pytest.mark.parametrize(
    ("files", "culprit"),
    [
        # a WebSocket module annotating with the HTTP endpoint, which imports ws/ already
        ({"transport/ws/annotates.py": "acp_proxy.transport.http.endpoint"}, ".ws -> .http"),
        # two sibling modules that only name each other's types
        (
            {
                "store/loop_a.py": "acp_proxy.store.loop_b",
                "store/loop_b.py": "acp_proxy.store.loop_a",
            },
            ".loop_",
        ),
    ],
)
def test_a_type_only_loop_breaks_the_no_cycles_contract(
    package_copy: Path, files: dict[str, str], culprit: str
) -> None:
    """Type-only imports count (``exclude_type_checking_imports = false``): a mode handed the
    whole server "for its annotations" is a loop in the design, and is reported as one."""
    for module, target in files.items():
        (package_copy / "acp_proxy" / module).write_text(TYPE_ONLY.format(target=target))
    done = _lint_imports(package_copy, pythonpath=package_copy)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if " BROKEN" in line]
    assert "No import cycles between sibling modules BROKEN" in failed, done.stdout
    assert culprit in done.stdout, done.stdout


PACKAGE = ROOT / "acp_proxy"

MAX_MODULE_LINES = 700
"""A module longer than this is doing more than one job: split it by job (see docs/design.md)."""

LONG_MODULES: dict[str, str] = {}
"""Modules allowed over :data:`MAX_MODULE_LINES`, each with its reason: a table that reads best
whole (one row a rule, a method, a state), never "it grew". Keep it empty or nearly so."""


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_is_over_700_lines_without_a_reason() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    unexplained = {name: n for name, n in long.items() if name not in LONG_MODULES}
    assert not unexplained, f"over {MAX_MODULE_LINES} lines, split by job: {unexplained}"
    stale = sorted(set(LONG_MODULES) - set(long))
    assert not stale, f"no longer long, drop from LONG_MODULES: {stale}"


ENGINE_NAMES = frozenset({"connect_pg", "is_pg_url", "PgDatabase", "SqliteConnection"})
"""What picks or names one engine: a module that uses one of these chooses SQLite or PostgreSQL
itself, instead of asking the engine object (:func:`acp_proxy.store.engine.engine_for`)."""

ENGINE_SCHEMES = frozenset({"postgres://", "postgresql://"})
"""A URL scheme compared in code (not in help text): telling the engines apart by hand."""

ONE_ENGINE_MODULES = {
    "recorder/writer/sink.py": "the SQLite sink: one sink per engine, picked by name in "
    "pipeline.py's table of sinks",
    "recorder/writer/sink_pg.py": "the PostgreSQL sink (the same table)",
    "recorder/writer/settle_pg.py": "settles the PostgreSQL sink's commits left in doubt",
}
"""Modules outside store/ that are about one engine by design, each with its reason."""


def _engine_picks(path: Path) -> list[str]:
    """Where ``path`` names an engine: imports of :data:`ENGINE_NAMES`, scheme literals."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"{node.lineno}: {a.name}" for a in node.names if a.name in ENGINE_NAMES]
        elif isinstance(node, ast.Constant) and node.value in ENGINE_SCHEMES:
            found.append(f"{node.lineno}: {node.value!r}")
    return found


def test_only_the_store_tells_the_engines_apart() -> None:
    """sqlite3 and psycopg are imported only in store/ (the engines-in-store contract); this
    checks the other half: no module outside store/ picks an engine by name or by URL."""
    picks = {
        name: found
        for path in _modules()
        if not (name := str(path.relative_to(PACKAGE))).startswith("store/")
        and (found := _engine_picks(path))
    }
    unexplained = {name: found for name, found in picks.items() if name not in ONE_ENGINE_MODULES}
    assert not unexplained, f"ask the engine object (store/engine.py) instead: {unexplained}"
    stale = sorted(set(ONE_ENGINE_MODULES) - set(picks))
    assert not stale, f"no longer engine-specific, drop from ONE_ENGINE_MODULES: {stale}"


def test_the_engine_check_finds_a_module_that_picks_an_engine(tmp_path: Path) -> None:
    module = tmp_path / "picks.py"
    module.write_text(
        "from acp_proxy.store.pg import connect_pg\n\n"
        "def open_it(url):\n"
        "    return connect_pg(url, create=False) if url.startswith('postgresql://') else None\n"
    )
    assert _engine_picks(module) == ["1: connect_pg", "4: 'postgresql://'"]


NOT_FRAMES = {
    "store/edit.py:Capture": "what insert_frames makes a frame of: no id, connection or seq yet",
    "testing/client.py:LogEntry": "the test client's own log (public API of acp_proxy.testing): "
    "sent or received from its side, with the parsed message; never stored",
}
"""Records with a frame's ``direction`` and ``raw`` that are not frames, each with its reason."""


def _records(path: Path) -> list[tuple[str, set[str]]]:
    """(class name, field names) of every dataclass and NamedTuple in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ClassDef):
            continue
        decorators = [ast.unparse(d) for d in node.decorator_list]
        named_tuple = any(ast.unparse(b) == "NamedTuple" for b in node.bases)
        if named_tuple or any(d.startswith("dataclass") for d in decorators):
            fields = {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            out.append((node.name, fields))
    return out


def test_the_package_has_one_frame_value() -> None:
    """wire/frame.py's Frame is the one frame shape: readers yield it, analyses take it."""
    shapes = sorted(
        f"{path.relative_to(PACKAGE)}:{name}"
        for path in _modules()
        for name, fields in _records(path)
        if {"direction", "raw"} <= fields
    )
    assert shapes == sorted(["wire/frame.py:Frame", *NOT_FRAMES]), shapes


TEST_ONLY_FOLDERS = {"peers"}
"""Folders of tests/ with no package folder: every fake agent, client and server (one place)."""

DATA_FOLDERS = {"commands/schemas", "testing/acp_recordings"}
"""Data the tests read (official report schemas, the pytest plugin's committed recordings)."""


def _folders(top: Path) -> set[str]:
    return {
        path.relative_to(top).as_posix()
        for path in top.rglob("*")
        if path.is_dir() and not any(part.startswith((".", "__")) for part in path.parts)
    }


def test_the_tests_mirror_the_package() -> None:
    """tests/X/Y holds the tests of acp_proxy/X/Y: a folder there without a package folder
    (a feature like ``check`` or ``websocket``, a package folder that moved) is an error."""
    package = _folders(ROOT / "acp_proxy")
    strays = sorted(
        folder
        for folder in _folders(ROOT / "tests")
        if folder not in package
        and folder.split("/")[0] not in TEST_ONLY_FOLDERS
        and not any(folder == data or folder.startswith(f"{data}/") for data in DATA_FOLDERS)
    )
    assert not strays, f"tests/ folders with no acp_proxy/ folder of the same path: {strays}"
    missing = sorted(data for data in DATA_FOLDERS if not (ROOT / "tests" / data).is_dir())
    assert not missing, f"allow-listed data folders that are gone: {missing}"


MAIN = re.compile(r"^if __name__ == .__main__.:", re.MULTILINE)


def test_every_peer_a_test_runs_is_in_tests_peers() -> None:
    """A script the tests launch (``if __name__ == "__main__":``) lives in tests/peers/."""
    scripts = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("*.py")
        if MAIN.search(path.read_text(encoding="utf-8")) and path.parent != ROOT / "tests" / "peers"
    )
    assert not scripts, f"peers outside tests/peers/: {scripts}"
