"""Benchmark: ``acp-proxy show``, ``stats`` and ``ls`` on a generated recording (default 1M
frames); ``stats`` and ``ls`` with ``--recount`` (every frame read) against the per-connection
aggregates (derived by the first run, then read), in the same run.

The recording (one v2 connection: turns of a prompt, running, user_message, response,
93 agent message chunks, two tool call updates, idle) is written straight into SQLite by
``tests/acp/generate.py``. Each command runs as the real executable with its output sent
to /dev/null; the benchmark reports wall time, frames/s and the command's peak RSS,
which should not grow with the recording (``show --json`` is measured too: it builds one
connection's whole state, so it does grow).

Usage::

    python bench/bench_inspect.py [--frames 1000000] [--keep DIR] [--no-json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.acp.generate import frames_per_turn, generate  # noqa: E402

MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if done.returncode:
    sys.exit(done.stderr.decode())
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run(args: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of ``acp-proxy ARGS``."""
    exe = shutil.which("acp-proxy")
    assert exe, "acp-proxy is not installed"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, exe, *args], capture_output=True, check=True
    )
    return time.perf_counter() - start, int(done.stdout) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="Keep the recording in this directory.")
    parser.add_argument("--no-json", action="store_true", help="Skip show --json.")
    opts = parser.parse_args()
    workdir = opts.keep or Path(tempfile.mkdtemp(prefix="bench-inspect-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "inspect.db"
    if db.exists():
        db.unlink()
    turns = max(1, opts.frames // frames_per_turn(93))
    start = time.perf_counter()
    count = generate(db, turns)
    print(
        f"generated {count} frames ({db.stat().st_size / 1e6:.0f} MB) "
        f"in {time.perf_counter() - start:.1f}s"
    )
    # stats and ls: counting every frame (--recount), then from the per-connection
    # aggregates: the first run derives and stores them, the next ones read them.
    commands = [
        ["ls", "--recount"],
        ["ls"],
        ["ls"],
        ["stats", "--recount"],
        ["stats"],
        ["stats"],
        ["stats", "--json"],
        ["show"],
    ]
    if not opts.no_json:
        commands.append(["show", "--json"])
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for command in commands:
        seconds, rss = run([*command, str(db)])
        name = " ".join(command)
        first.setdefault(name, seconds)
        last[name] = seconds
        print(
            f"{name:<16} {seconds:7.2f}s  {count / seconds:9.0f} frames/s  peak RSS {rss:6.0f} MB"
        )
    for name in ("ls", "stats"):
        full = last[f"{name} --recount"]
        print(
            f"{name}: {full:.2f}s counting every frame, {first[name]:.2f}s deriving the "
            f"aggregates, {last[name]:.2f}s from them ({full / last[name]:.0f}x)"
        )
    if opts.keep is None:
        shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
