"""Benchmark: acp-proxy against the agent alone and a minimal asyncio relay, in one run.

For each target it measures, through real pipes and processes:

- throughput: frames/s and MB/s of ~300-byte ``agent_message_chunk`` notifications, from
  sending one ``bench/flood`` request to receiving its response (which comes after the
  last chunk);
- request round-trip latency p50/p99 at low load (one ``bench/ping`` at a time);
- for the proxy: peak RSS (VmHWM of the proxy process), the time from the last frame
  reaching the client until the recording is complete (the proxy has exited after
  flushing), the frames actually recorded and the frames the recorder dropped.

Usage::

    python bench/bench_proxy.py [--frames 1000000] [--pings 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
AGENT = [sys.executable, str(HERE / "bench_agent.py")]
RELAY = [sys.executable, str(HERE / "relay.py")]


@dataclass
class Result:
    """What one target measured."""

    name: str
    frames: int = 0
    seconds: float = 0.0
    nbytes: int = 0
    p50_us: float = 0.0
    p99_us: float = 0.0
    peak_rss_mb: float | None = None
    drain_s: float | None = None
    recorded: int | None = None
    dropped: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    @property
    def mbps(self) -> float:
        return self.nbytes / self.seconds / 1e6 if self.seconds else 0.0


def vm_hwm_mb(pid: int) -> float | None:
    """Peak resident set size of ``pid`` so far (Linux), in MB."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Peer:
    """The bench client: writes requests to a target's stdin and reads its stdout."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.out = self.proc.stdout.fileno()
        self.buf = b""
        self.next_id = 1

    def send(self, method: str, params: dict[str, object] | None = None) -> bytes:
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        return b'{"jsonrpc":"2.0","id":%d,"result"' % rid

    def read_until(self, marker: bytes) -> tuple[int, int]:
        """Read until a line starting with ``marker``; return (lines before it, bytes read)."""
        lines = 0
        total = 0
        buf = self.buf
        while True:
            pos = buf.find(b"\n" + marker) if buf else -1
            if buf.startswith(marker):
                pos = -1
                end = buf.index(b"\n") + 1
                self.buf = buf[end:]
                return lines, total + end
            if pos >= 0:
                lines += buf.count(b"\n", 0, pos + 1)
                total += pos + 1
                buf = buf[pos + 1 :]
                continue
            # keep the last partial line, count the complete ones
            cut = buf.rfind(b"\n") + 1
            lines += buf.count(b"\n", 0, cut)
            total += cut
            buf = buf[cut:]
            data = os.read(self.out, 1 << 20)
            if not data:
                raise RuntimeError("target closed its stdout early")
            buf += data

    def close(self, timeout: float = 600) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        # drain what is left so the target never blocks on a full pipe
        while True:
            ready, _, _ = select.select([self.out], [], [], timeout)
            if not ready or not os.read(self.out, 1 << 20):
                break
        return self.proc.wait(timeout)


def run_target(name: str, argv: list[str], frames: int, pings: int, db: Path | None) -> Result:
    res = Result(name)
    peer = Peer(argv)
    # warm up (imports, first allocations) before measuring anything
    peer.read_until(peer.send("bench/ping"))
    lat: list[float] = []
    for _ in range(pings):
        t0 = time.perf_counter_ns()
        peer.read_until(peer.send("bench/ping"))
        lat.append((time.perf_counter_ns() - t0) / 1000)
    lat.sort()
    res.p50_us = statistics.median(lat)
    res.p99_us = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    t0 = time.perf_counter()
    got, nbytes = peer.read_until(peer.send("bench/flood", {"count": frames}))
    t1 = time.perf_counter()
    if got != frames:
        res.notes.append(f"received {got} chunks instead of {frames}")
    res.frames, res.nbytes, res.seconds = got, nbytes, t1 - t0
    is_proxy = "acp-proxy" in Path(argv[0]).name
    if is_proxy:
        res.peak_rss_mb = vm_hwm_mb(peer.proc.pid)
    pid = peer.proc.pid
    hwm = res.peak_rss_mb
    code = peer.close()
    res.drain_s = time.perf_counter() - t1
    if code != 0:
        res.notes.append(f"exit code {code}")
    del pid, hwm
    if db is not None:
        con = sqlite3.connect(db)
        try:
            res.recorded = con.execute(
                "SELECT count(*) FROM frames WHERE update_kind = 'agent_message_chunk'"
            ).fetchone()[0]
            res.dropped = con.execute("SELECT sum(frames_dropped) FROM connections").fetchone()[0]
        finally:
            con.close()
    return res


def rss_sampled(argv: list[str]) -> list[str]:
    """Wrap ``argv`` so its peak RSS is printed to a side file when it exits."""
    return argv


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=1_000_000, help="chunks per flood")
    ap.add_argument("--pings", type=int, default=2000, help="round trips for latency")
    ap.add_argument("--keep", type=Path, help="keep the recording in this directory")
    ap.add_argument(
        "--only", default="agent,relay,proxy,proxy-record", help="comma-separated targets"
    )
    args = ap.parse_args()
    exe = shutil.which("acp-proxy")
    if exe is None:
        print("acp-proxy is not installed (pip install -e .)", file=sys.stderr)
        return 2
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="acp-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    db = tmp / "bench.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    targets = {
        "agent": ("agent directly", AGENT, None),
        "relay": ("asyncio line relay (baseline)", [*RELAY, *AGENT], None),
        "proxy": ("acp-proxy (no recording)", [exe, "--", *AGENT], None),
        "proxy-record": ("acp-proxy --record", [exe, "--record", str(db), "--", *AGENT], db),
    }
    results: list[Result] = []
    for key in args.only.split(","):
        name, argv, rec = targets[key]
        print(f"running: {name} ...", file=sys.stderr, flush=True)
        results.append(run_target(name, argv, args.frames, args.pings, rec))
    base = next((r for r in results if "baseline" in r.name), None)
    direct = next((r for r in results if r.name == "agent directly"), None)
    print()
    print(f"{args.frames:,} agent_message_chunk frames (~{results[0].nbytes // max(1, results[0].frames)} B each), {args.pings} pings; {os.cpu_count()} CPUs")
    print()
    print("| target | frames/s | MB/s | vs baseline | RTT p50 | RTT p99 | added p99 | peak RSS | recorded | dropped | recording complete after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        ratio = f"{r.fps / base.fps:.2f}x" if base else "-"
        added = f"{(r.p99_us - direct.p99_us):+.0f} µs" if direct and r is not direct else "-"
        rss = f"{r.peak_rss_mb:.0f} MB" if r.peak_rss_mb is not None else "-"
        rec = f"{r.recorded:,}" if r.recorded is not None else "-"
        drop = str(r.dropped) if r.dropped is not None else "-"
        drain = f"{r.drain_s:.2f} s" if r.recorded is not None and r.drain_s is not None else "-"
        print(
            f"| {r.name} | {r.fps:,.0f} | {r.mbps:.0f} | {ratio} | {r.p50_us:.0f} µs | "
            f"{r.p99_us:.0f} µs | {added} | {rss} | {rec} | {drop} | {drain} |"
        )
    for r in results:
        for note in r.notes:
            print(f"note: {r.name}: {note}")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
