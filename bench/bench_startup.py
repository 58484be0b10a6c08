"""Benchmark: launch to the first answer, as an editor starting an agent session waits for it.

For each target the bench starts the command, writes an ``initialize`` request at once and
times until the answer's line is read; the agent is ``bench_agent.py`` (stdlib only, answers
every request). Targets, run in turn round after round so that load drifts hit them alike:

- ``direct``: the agent itself (the baseline);
- ``proxy``: ``acp-proxy -- AGENT``;
- ``record``: ``acp-proxy --record FILE -- AGENT`` (a fresh file each run);
- ``record-pg``: ``acp-proxy --record postgresql://... -- AGENT`` (a private server from
  ``tests/pg_server.py``, or ``--pg-url``; skipped without Debian's postgresql).

It prints the median, the fastest and the slowest time of each, and the median minus the
direct median (what the proxy adds). The issue's target: ``record`` within direct + 60 ms.

Usage::

    python bench/bench_startup.py [--runs 20] [--only direct,proxy,record] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AGENT = [sys.executable, str(HERE / "bench_agent.py")]
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientCapabilities":{}}}\n'
)
TARGETS = ("direct", "proxy", "record", "record-pg")


def proxy_command() -> list[str]:
    exe = shutil.which("acp-proxy")
    return [exe] if exe else [sys.executable, "-m", "acp_proxy"]


def command(target: str, work: Path, run: int, pg_url: str | None) -> list[str]:
    if target == "direct":
        return list(AGENT)
    if target == "proxy":
        return [*proxy_command(), "--", *AGENT]
    store = str(work / f"start-{run}.db") if target == "record" else pg_url
    assert store is not None
    return [*proxy_command(), "--record", store, "--", *AGENT]


def first_answer(argv: list[str]) -> float:
    """Seconds from launching ``argv`` to reading the answer to ``initialize``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = time.perf_counter() - start
    proc.stdin.close()
    proc.wait(timeout=60)
    if b'"id":0' not in line:
        raise SystemExit(f"bench_startup: no answer from {' '.join(argv)}: {line[:200]!r}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="launches per target")
    parser.add_argument("--only", default=",".join(TARGETS), help="comma-separated targets")
    parser.add_argument("--pg-url", help="record into this database instead of a private one")
    args = parser.parse_args()
    targets = [t for t in args.only.split(",") if t]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        pg = None
        if "record-pg" in targets:
            try:
                sys.path.insert(0, str(HERE))
                from bench_pg import BenchPostgres

                pg = BenchPostgres(args.pg_url, work)
            except Exception as exc:  # no server to be had: say so, measure the rest
                print(f"record-pg skipped: {exc}", file=sys.stderr)
                targets.remove("record-pg")
        try:
            times: dict[str, list[float]] = {t: [] for t in targets}
            for target in targets:  # one warm-up each (page cache, .pyc files)
                first_answer(command(target, work, -1, pg.url if pg else None))
            for run in range(args.runs):
                for target in targets:
                    times[target].append(
                        first_answer(command(target, work, run, pg.url if pg else None))
                    )
        finally:
            if pg is not None and pg.server is not None:
                pg.server.stop()
    base = statistics.median(times["direct"]) if "direct" in times else None
    print(f"launch -> first answer, {args.runs} runs each, load {os.getloadavg()[0]:.2f}")
    print(f"{'target':<12} {'median':>9} {'fastest':>9} {'slowest':>9} {'added':>9}")
    for target, values in times.items():
        median = statistics.median(values)
        added = f"{(median - base) * 1000:+8.1f}ms" if base is not None else "-"
        print(
            f"{target:<12} {median * 1000:7.1f}ms {min(values) * 1000:7.1f}ms "
            f"{max(values) * 1000:7.1f}ms {added:>9}"
        )


if __name__ == "__main__":
    main()
