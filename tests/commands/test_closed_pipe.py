"""Every command that writes to stdout stops quietly when stdout's reader is gone
(``acp-proxy export DB | head``), as ``git log | head`` does: nothing on stderr, exit 1.

The reader end of the pipe is closed before the command starts, so its first write meets
the closed pipe whatever the size of its output (no timing involved).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import proxy_exe
from tests.formats.helpers import make_big_recording

COMMANDS = [
    ["ls", "{db}"],
    ["ls", "{db}", "--json"],
    ["show", "{db}"],
    ["show", "{db}", "--raw"],
    ["show", "{db}", "--json"],
    ["dump", "{db}"],
    ["dump", "{db}", "--full"],
    ["stats", "{db}"],
    ["stats", "{db}", "--json"],
    ["check", "{db}"],
    ["check", "{db}", "--format", "sarif"],
    ["check", "--rules"],
    ["export", "{db}"],
    ["export", "{db}", "--no-redact"],
    ["export", "{db}", "--format", "otlp"],
    ["search", "{db}", "lorem"],
    ["diff", "{db}", "{db}"],
    ["--help"],
    ["show", "--help"],
]


@pytest.fixture(scope="module")
def big_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("pipe") / "big.db"
    make_big_recording(db, 3000, text_size=200)
    return db


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_stdout_ends_the_command_quietly(big_recording: Path, args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (head) is gone before the first byte
    try:
        done = subprocess.run(
            [*proxy_exe(), *(a.format(db=big_recording) for a in args)],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.stderr == b""
    assert done.returncode == 1


LONG_OUTPUTS = [
    ["show", "{db}"],
    ["show", "{db}", "--raw"],
    ["dump", "{db}"],
    ["dump", "{db}", "--full"],
    ["export", "{db}"],
    ["export", "{db}", "--no-redact"],
]
"""Commands whose output of the big recording is far more than a pipe holds (64 KiB)."""


@pytest.mark.parametrize("args", LONG_OUTPUTS, ids=" ".join)
def test_a_reader_that_stops_midway_ends_the_command_quietly(
    big_recording: Path, args: list[str]
) -> None:
    """``| head -c 4096``: the command is mid-stream (a query open) when the pipe closes."""
    proc = subprocess.Popen(
        [*proxy_exe(), *(a.format(db=big_recording) for a in args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    head = proc.stdout.read(4096)
    proc.stdout.close()  # the command is blocked on a full pipe now, or soon
    _, err = proc.communicate(timeout=120)
    assert len(head) == 4096
    assert err == b""
    assert proc.returncode == 1
