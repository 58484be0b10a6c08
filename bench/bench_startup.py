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

Wall time on a shared machine follows its load, so a second table gives what load does not
move: the CPU time the proxy process has used when its agent starts (the agent, ``sh``, reads
the proxy's ``/proc/PID/schedstat`` at once, with a builtin; the proxy goes on meanwhile, so
this is a little over), in the same rounds, against ``direct``: what a bare ``python`` has
used when it runs its first statement (the agent's own interpreter start-up).

The proxy is run as installed: the ``acp-proxy`` console script beside ``sys.executable``
(what ``pip install`` makes in a virtualenv), not a version manager's shim found first on
``PATH`` (pyenv's is a bash script that adds 50-100 ms to every launch before Python
starts). ``--compare DIR`` runs each proxy target a second time with ``DIR`` (another
checkout, e.g. the commit before a change) first on ``PYTHONPATH``, in the same rounds:
a before/after in one sitting.

Usage::

    python bench/bench_startup.py [--runs 20] [--only direct,proxy,record] [--pg-url URL]
        [--compare DIR]
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
    beside = Path(sys.executable).with_name("acp-proxy")
    if beside.is_file():
        return [str(beside)]
    exe = shutil.which("acp-proxy")
    return [exe] if exe else [sys.executable, "-m", "acp_proxy"]


def command(target: str, work: Path, run: int, pg_url: str | None) -> list[str]:
    target = target.split("@")[0]
    if target == "direct":
        return list(AGENT)
    if target == "proxy":
        return [*proxy_command(), "--", *AGENT]
    store = str(work / f"start-{run}.db") if target == "record" else pg_url
    assert store is not None
    return [*proxy_command(), "--record", store, "--", *AGENT]


def environment(target: str) -> dict[str, str]:
    """The targets' environment: ``.pyc`` files written (as an installed package has them,
    whatever ``PYTHONDONTWRITEBYTECODE`` says here; the warm-up run writes them), and for
    ``record@DIR`` the directory ``DIR`` first on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    _, _, tree = target.partition("@")
    if tree:
        rest = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, rest) if p)
    return env


SCHEDSTAT_AGENT = ["/bin/sh", "-c", 'read -r t < "/proc/$PPID/schedstat"; echo "$t"']
"""An agent that prints the CPU nanoseconds its parent (the proxy) has run so far."""


def cpu_command(argv: list[str]) -> list[str]:
    """``argv`` with its agent replaced by :data:`SCHEDSTAT_AGENT` (``direct``: a bare
    ``python`` printing its own figure)."""
    if argv == AGENT:
        return [sys.executable, "-c", "print(open('/proc/self/schedstat').read())"]
    return [*argv[: argv.index("--") + 1], *SCHEDSTAT_AGENT]


def cpu_before_agent(argv: list[str], env: dict[str, str]) -> float:
    """Seconds of CPU the process started by ``argv`` had used when its agent started."""
    done = subprocess.run(
        cpu_command(argv), stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60
    )
    fields = done.stdout.split()
    if not fields:
        raise SystemExit(f"bench_startup: no schedstat from {' '.join(argv)}: {done.stderr!r}")
    return int(fields[0]) / 1e9


def first_answer(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from launching ``argv`` to reading the answer to ``initialize``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
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
    parser.add_argument(
        "--compare",
        metavar="DIR",
        help="also run each proxy target with DIR first on PYTHONPATH (another checkout)",
    )
    args = parser.parse_args()
    targets = [t for t in args.only.split(",") if t]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    if args.compare:
        tree = str(Path(args.compare).resolve())
        targets += [f"{t}@{tree}" for t in targets if t != "direct"]
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
                targets = [t for t in targets if not t.startswith("record-pg")]
        try:
            times: dict[str, list[float]] = {t: [] for t in targets}
            cpu: dict[str, list[float]] = {t: [] for t in targets}
            url = pg.url if pg else None
            for target in targets:  # one warm-up each (page cache, .pyc files)
                first_answer(command(target, work, -1, url), environment(target))
            for run in range(args.runs):
                for target in targets:
                    argv = command(target, work, run, url)
                    times[target].append(first_answer(argv, environment(target)))
                    argv = command(target, work, args.runs + run, url)
                    cpu[target].append(cpu_before_agent(argv, environment(target)))
        finally:
            if pg is not None and pg.server is not None:
                pg.server.stop()
    base = statistics.median(times["direct"]) if "direct" in times else None
    print(f"launch -> first answer, {args.runs} runs each, load {os.getloadavg()[0]:.2f}")
    print(f"proxy: {' '.join(proxy_command())}")
    if args.compare:
        print(f"@: with {args.compare} first on PYTHONPATH")
    print(f"{'target':<12} {'median':>9} {'fastest':>9} {'slowest':>9} {'added':>9}")
    for target, values in times.items():
        median = statistics.median(values)
        added = f"{(median - base) * 1000:+8.1f}ms" if base is not None else "-"
        name = target.split("@")[0] + ("@" if "@" in target else "")
        print(
            f"{name:<12} {median * 1000:7.1f}ms {min(values) * 1000:7.1f}ms "
            f"{max(values) * 1000:7.1f}ms {added:>9}"
        )
    print("CPU the proxy had used when its agent started (direct: python's own start-up)")
    base_cpu = statistics.median(cpu["direct"]) if "direct" in cpu else None
    print(f"{'target':<12} {'median':>9} {'fastest':>9} {'- direct':>9}")
    for target, values in cpu.items():
        median = statistics.median(values)
        more = f"{(median - base_cpu) * 1000:+8.1f}ms" if base_cpu is not None else "-"
        name = target.split("@")[0] + ("@" if "@" in target else "")
        print(f"{name:<12} {median * 1000:7.1f}ms {min(values) * 1000:7.1f}ms {more:>9}")


if __name__ == "__main__":
    main()
