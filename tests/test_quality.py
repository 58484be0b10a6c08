"""The package type-checks (mypy --strict), lints and is formatted clean (ruff), in the test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_lints_clean() -> None:
    done = _run("ruff", "check", "acp_proxy", "tests", "bench", "scripts")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_on_the_package() -> None:
    done = _run("mypy", "acp_proxy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean() -> None:
    done = _run("ruff", "format", "--check", "acp_proxy", "tests", "bench", "scripts")
    assert done.returncode == 0, done.stdout + done.stderr
