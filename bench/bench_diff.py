"""Benchmark: ``acp-proxy diff`` of two big recordings, exact or greedy, at 10k and 100k frames.

A is a generated v2 recording (``tests/acp/generate.py``); B is A with a few turns changed
(a chunk dropped, one changed, a turn inserted, one removed far away, the first and last
turns touched, so the common ends trim little). Each size is diffed by the real executable
(``--json``), which says whether the alignment was exact; the same run also times, in
this process, the comparison with turns first and the old path (the frame LCS alone,
greedy past its limit) on the same two recordings, under the same load.

Usage::

    python bench/bench_diff.py [--sizes 10000,100000] [--chunks 93]
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

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.acp.generate import frames, frames_per_turn  # noqa: E402
from tests.helpers import insert_frames  # noqa: E402


def _recordings(turns: int, chunks: int) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    every = list(frames(turns, chunks))
    size = frames_per_turn(chunks)
    parts = [every[:4]] + [every[4 + t * size : 4 + (t + 1) * size] for t in range(turns)]
    a = [f for part in parts for f in part]
    parts[1] = [(d, raw.replace(b"question 0", b"question zero")) for d, raw in parts[1]]
    del parts[3][10]
    parts[6][12] = (parts[6][12][0], parts[6][12][1].replace(b"word", b"WORD"))
    parts.insert(9, [(d, raw.replace(b"question 4", b"question 4b")) for d, raw in parts[5]])
    del parts[max(10, turns - 5)]
    parts[-1] = [(d, raw.replace(b"end_turn", b"cancelled")) for d, raw in parts[-1]]
    return a, [f for part in parts for f in part]


def _in_process(a_db: Path, b_db: Path, *, turns: bool) -> tuple[float, bool]:
    """The comparison in this process: (seconds, exact); ``turns=False``: the frame LCS
    alone, greedy past its limit (before turns first)."""
    from acp_proxy.acp import lcs
    from acp_proxy.analysis.compare import compare_connections
    from acp_proxy.store.engine import open_database

    turn_pairs = lcs.turn_pairs
    if not turns:
        lcs.turn_pairs = lambda *args, **kwargs: None  # type: ignore[assignment]
    try:
        a, b = open_database(a_db), open_database(b_db)
        start = time.perf_counter()
        result = compare_connections(a, 1, b, 1)
        seconds = time.perf_counter() - start
        a.close()
        b.close()
        return seconds, result.alignment.exact
    finally:
        lcs.turn_pairs = turn_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="Frames a side, comma-separated.")
    parser.add_argument("--chunks", type=int, default=93)
    opts = parser.parse_args()
    exe = shutil.which("acp-proxy")
    assert exe, "acp-proxy is not installed"
    with tempfile.TemporaryDirectory(prefix="bench-diff-") as tmp:
        for size in (int(s) for s in opts.sizes.split(",")):
            turns = max(12, size // frames_per_turn(opts.chunks))
            a, b = _recordings(turns, opts.chunks)
            a_db, b_db = Path(tmp) / f"a{size}.db", Path(tmp) / f"b{size}.db"
            insert_frames(a_db, a, index=True)
            insert_frames(b_db, b, index=True)
            print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            start = time.perf_counter()
            done = subprocess.run(
                [exe, "diff", str(a_db), str(b_db), "--json"], capture_output=True
            )
            seconds = time.perf_counter() - start
            assert done.returncode in (0, 1), done.stderr.decode()
            out = orjson.loads(done.stdout)
            exact = out["alignment"]["exact"]
            new_seconds, new_exact = _in_process(a_db, b_db, turns=True)
            old_seconds, old_exact = _in_process(a_db, b_db, turns=False)
            word = {True: "exact", False: "greedy"}
            print(
                f"{len(a)} x {len(b)} frames: acp-proxy diff {seconds:.2f}s {word[exact]} "
                f"({len(out['removed'])} removed, {len(out['added'])} added, "
                f"{len(out['changed'])} changed)\n"
                f"  in-process: turns first {new_seconds:.2f}s {word[new_exact]}, "
                f"frame LCS alone (before) {old_seconds:.2f}s {word[old_exact]}"
            )


if __name__ == "__main__":
    main()
