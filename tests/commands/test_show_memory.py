"""Flat memory: ``show`` and ``stats`` stream a big recording instead of loading it.

Peak RSS of the command is measured in a fresh wrapper process (RUSAGE_CHILDREN of that
wrapper covers exactly one child), for a 100k-frame and a 10k-frame recording: the big one
must stay well under 200 MB and close to the small one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.acp.generate import generate
from tests.conftest import proxy_exe

MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if done.returncode:
    sys.exit(done.stderr.decode())
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_rss_mb(args: list[str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *proxy_exe(), *args],
        capture_output=True,
        timeout=600,
        check=True,
    )
    return int(done.stdout) / 1024  # ru_maxrss is in KiB on Linux


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("big")
    small, big = base / "small.db", base / "big.db"
    assert generate(small, 100) == 10_004
    assert generate(big, 1000) == 100_004
    return small, big


@pytest.mark.slow
@pytest.mark.parametrize("command", [["show"], ["stats"]])
def test_peak_memory_stays_flat(recordings: tuple[Path, Path], command: list[str]) -> None:
    small, big = recordings
    small_mb = peak_rss_mb([*command, str(small)])
    big_mb = peak_rss_mb([*command, str(big)])
    assert big_mb < 200, f"{command[0]} on 100k frames peaked at {big_mb:.0f} MB"
    assert big_mb < small_mb + 40, f"{command[0]}: {small_mb:.0f} MB -> {big_mb:.0f} MB"
