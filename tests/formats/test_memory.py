"""Export and import stream: peak memory does not grow with the size of the recording."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import proxy_exe
from tests.formats.helpers import make_big_recording

# Peak RSS of one child, measured by a wrapper process that has no other children.
MEASURE = """
import resource, subprocess, sys
out = open(sys.argv[1], "wb") if sys.argv[1] != "-" else subprocess.DEVNULL
done = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE)
sys.stderr.buffer.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak_kib(out: str, *args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, out, *proxy_exe(), *args],
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    code, peak = done.stdout.split()
    assert code == b"0", done.stderr
    return int(peak)


def test_export_and_import_memory_is_flat(tmp_path: Path) -> None:
    small, large = tmp_path / "small.db", tmp_path / "large.db"
    make_big_recording(small, 500, text_size=8000)
    large_bytes = make_big_recording(large, 5_000, text_size=8000)
    assert large_bytes > 38 * 1024 * 1024

    export_small = _peak_kib(str(tmp_path / "small.jsonl"), "export", str(small))
    export_large = _peak_kib(str(tmp_path / "large.jsonl"), "export", str(large))
    assert (tmp_path / "large.jsonl").stat().st_size > large_bytes
    import_small = _peak_kib("-", "import", str(tmp_path / "small.jsonl"), str(tmp_path / "s2.db"))
    import_large = _peak_kib("-", "import", str(tmp_path / "large.jsonl"), str(tmp_path / "l2.db"))
    print(
        f"peak RSS KiB: export {export_small} -> {export_large}, "
        f"import {import_small} -> {import_large} (data x10, {large_bytes >> 20} MiB)"
    )
    # Ten times the data (35 MiB more frames) may not cost more than a few MiB of memory.
    assert export_large - export_small < 12 * 1024
    assert import_large - import_small < 12 * 1024
