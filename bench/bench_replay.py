"""Benchmark: ``acp-proxy replay`` start-up on generated recordings (default 100k and 1M frames).

The recordings (one v2 connection: turns of a prompt, running, user_message, response,
93 agent message chunks, two tool call updates, idle; 100 frames a turn) are written
straight into SQLite by ``tests/acp/generate.py``. For each size the replay server runs as
a real process with a client on its stdin/stdout that sends ``initialize`` at once and
measures:

- **first response**: from starting the process to reading the ``initialize`` response
  (interpreter start-up included; ``acp-proxy --help`` alone is printed for reference);
- **first turn**: to reading the last frame of the first prompt turn (``session/new`` and
  one ``session/prompt`` sent after the first response);
- **peak RSS**: the replay process's high-water mark (``ru_maxrss``) over its whole life,
  including its exit (which reports the recorded requests the client never sent);
- **exit**: from closing its stdin to its exit.

``--baseline DIR`` runs a second target, another checkout of acp-proxy (``python -m
acp_proxy`` with ``PYTHONPATH=DIR``), on the same recordings, so one run shows before and
after.

Usage::

    python bench/bench_replay.py [--frames 100000,1000000] [--keep DIR] [--baseline DIR]
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

from tests.acp.generate import SID, frames_per_turn, generate  # noqa: E402

CHUNKS = 93
INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}\n'
NEW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n'
PROMPT = (
    b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"'
    + SID.encode()
    + b'","prompt":[{"type":"text","text":"question 0"}]}}\n'
)
TURN_A2C = frames_per_turn(CHUNKS) - 1  # agent frames of one prompt turn


Target = tuple[str, list[str], dict[str, str], Path | None]
"""(label, argv, environment, working directory)."""


def measure(argv: list[str], db: Path, env: dict[str, str], cwd: Path | None) -> dict[str, float]:
    """Run one replay and time it; see the module docstring."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*argv, "replay", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT)
    proc.stdin.flush()
    first = proc.stdout.readline()
    t_first = time.perf_counter() - start
    assert first.startswith(b'{"jsonrpc":"2.0","id":0,"result"'), first
    proc.stdin.write(NEW + PROMPT)
    proc.stdin.flush()
    proc.stdout.readline()  # session/new
    for _ in range(TURN_A2C):
        proc.stdout.readline()
    t_turn = time.perf_counter() - start
    closed = time.perf_counter()
    proc.stdin.close()
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    t_exit = time.perf_counter() - closed
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, proc.returncode
    return {
        "first": t_first,
        "turn": t_turn,
        "rss": usage.ru_maxrss / 1024,
        "exit": t_exit,
    }


def startup(argv: list[str], env: dict[str, str], cwd: Path | None) -> float:
    start = time.perf_counter()
    subprocess.run([*argv, "--help"], capture_output=True, check=True, env=env, cwd=cwd)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", default="100000,1000000", help="Comma-separated sizes.")
    parser.add_argument("--keep", type=Path, help="Keep (and reuse) the recordings here.")
    parser.add_argument("--baseline", type=Path, help="Another acp-proxy checkout to compare.")
    opts = parser.parse_args()
    workdir = opts.keep or Path(tempfile.mkdtemp(prefix="bench-replay-"))
    workdir.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("acp-proxy")
    assert exe, "acp-proxy is not installed"
    targets: list[Target] = [("this tree", [exe], dict(os.environ), None)]
    if opts.baseline is not None:
        # Run from the baseline directory: `python -m` puts the working directory first
        # on sys.path, ahead of this tree's editable install.
        base = opts.baseline.resolve()
        env = {**os.environ, "PYTHONPATH": str(base)}
        argv = [sys.executable, "-m", "acp_proxy"]
        targets.insert(0, (f"baseline {opts.baseline}", argv, env, base))
    sizes = [int(s) for s in opts.frames.split(",") if s]
    try:
        rows: list[str] = []
        for size in sizes:
            db = workdir / f"replay-{size}.db"
            turns = max(1, size // frames_per_turn(CHUNKS))
            if not db.exists():
                t = time.perf_counter()
                count = generate(db, turns, CHUNKS)
                print(f"generated {count:,} frames in {time.perf_counter() - t:.1f} s: {db}")
            for label, argv, env, cwd in targets:
                r = measure(argv, db.resolve(), env, cwd)
                rows.append(
                    f"| {label} | {size:,} | {r['first']:.2f} s | {r['turn']:.2f} s | "
                    f"{r['rss']:.0f} MB | {r['exit']:.2f} s |"
                )
                print(rows[-1], flush=True)
        print()
        for label, argv, env, cwd in targets:
            print(f"{label}: `acp-proxy --help` takes {startup(argv, env, cwd):.2f} s")
        print()
        print("| target | frames | first response | first turn | peak RSS | exit |")
        print("|---|---|---|---|---|---|")
        print("\n".join(rows))
    finally:
        if opts.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
