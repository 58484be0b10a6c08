"""The layering is enforced: `lint-imports` keeps the contracts in pyproject.toml, in the test run.

The contracts ([tool.importlinter] in pyproject.toml): layers bottom to top console < wire <
acp < record < replay < transport | report < web < demo | testing | mcp < commands < cli,
nothing imports upward (transport and report not each other either); wire, acp and replay
import no I/O library; click only in commands/ and cli.py; no cycles between sibling modules.
The tests below also prove the check can fail: the same configuration on a temporary copy of the
package with one deliberate bad import in it must be BROKEN.
"""

from __future__ import annotations

import os
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
    assert "4 kept, 0 broken" in done.stdout, done.stdout


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
        # click outside commands/
        ("transport/options.py", "import click\n", "click"),
        ("report/options.py", "import click\n", "click"),
        # presentation reaching for the sockets, or the CLI
        ("report/live.py", "import acp_proxy.transport\n", "Layers"),
        ("report/usage.py", "from acp_proxy.commands import common\n", "Layers"),
        # I/O in the pure core
        ("acp/spawns.py", "import subprocess\n", "pure"),
        ("replay/stores.py", "import sqlite3\n", "pure"),
        # a cycle between two sibling modules
        ("record/loop_a.py", "import acp_proxy.record.loop_b\n", "cycles"),
    ],
)
def test_a_bad_import_breaks_a_contract(
    package_copy: Path, module: str, source: str, broken: str
) -> None:
    path = package_copy / "acp_proxy" / module
    path.write_text(f'"""A deliberate violation."""\n\n{source}')
    if module == "record/loop_a.py":
        (path.parent / "loop_b.py").write_text(
            '"""The other half."""\n\nimport acp_proxy.record.loop_a\n'
        )
    done = _lint_imports(package_copy, pythonpath=package_copy)
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in done.stdout.splitlines() if " BROKEN" in line]
    assert any(broken in line for line in failed), done.stdout
    assert Path(module).stem in done.stdout  # the report names the culprit
