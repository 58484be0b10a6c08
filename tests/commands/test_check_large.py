"""A large generated recording checks in flat memory (peak RSS of the real executable)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from tests.acp.conformance.helpers import generated_frames, write_generated
from tests.conftest import proxy_exe

# Runs a command and prints its peak RSS (KiB on Linux) and exit code: measured in a fresh
# process so nothing else this test session started counts.
MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
sys.stderr.buffer.write(done.stderr)
sys.stdout.buffer.write(done.stdout)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode, file=sys.stderr)
"""


def measured(*args: str) -> tuple[int, int, bytes]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *proxy_exe(), *args], capture_output=True, timeout=600
    )
    rss, code = done.stderr.decode().strip().splitlines()[-1].split()
    return int(rss) * 1024, int(code), done.stdout


def test_200k_frames_check_in_flat_memory(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    # 10,000 v2 turns of 20 frames, chunks padded to ~600 bytes, one error every 500 turns
    frames = write_generated(db, generated_frames(10_000, 11, 512, bad_every=500))
    assert frames == 200_024
    raw_bytes = db.stat().st_size

    baseline, code, _ = measured("check", "--rules")
    assert code == 0
    peak, code, out = measured("check", str(db), "--json")
    assert code == 1  # the injected errors fail the gate
    doc = orjson.loads(out)
    summary = doc["summary"]
    assert summary["frames"] == frames
    assert summary["error"] == 20 and summary["warning"] == 0 and summary["info"] == 0
    (conn,) = doc["connections"]
    assert len(conn["findings"]) == 20 and {f["rule"] for f in conn["findings"]} == {
        "v2.message-id"
    }
    # Streaming: the checker's peak memory stays near that of the bare command, far below
    # the size of the recording it read.
    assert raw_bytes > 100 * 1024 * 1024
    growth = peak - baseline
    assert growth < 48 * 1024 * 1024, (peak, baseline, raw_bytes)
