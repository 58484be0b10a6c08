"""Benchmark: acp-proxy against the agent alone and a minimal asyncio relay, in one run.

For each target it measures, through real pipes and processes:

- throughput: frames/s and MB/s of ~300-byte ``agent_message_chunk`` notifications, from
  sending one ``bench/flood`` request to receiving its response (which comes after the
  last chunk);
- request round-trip latency p50/p99 at low load (one ``bench/ping`` at a time);
- peak RSS of the target process (VmHWM, sampled until it exits; for "agent directly" that
  is the agent itself, for the others the relay or proxy process, agent excluded, plus
  acp-proxy's recorder writer process when recording); CPU seconds likewise;
- for ``--record``: the time from the last frame reaching the client until the recording
  is complete (the proxy has flushed and exited), the frames actually in the database,
  the frames the recorder dropped, and the recording rate (frames recorded / time from the flood
  request to the complete recording);
- ``acp-proxy --record postgresql://...`` the same way, into a local PostgreSQL server (one
  it starts from ``tests/pg_server.py`` on a private port and directory, or ``--pg-url``):
  recorded/s beside SQLite's in the same run;
- with that private server, a diagnostic: the same into a database whose schema lacks the two
  secondary indexes every flood row goes into (``frames_session``, ``frames_method_update``),
  which shows what maintaining them costs the server;
- the recording ceilings of each recording target: recorded / (the machine's CPU time over the
  run / its CPUs), the most that much work could reach with every CPU busy throughout, and
  for the private server recorded / its CPU time, the most one server process could;
- ``proxy-record-metrics``: ``acp-proxy --record`` again with ``--metrics`` served and
  scraped once a second by a thread of the benchmark (Prometheus scrapes every 15-60 s),
  to compare with ``proxy-record`` in the same run; its writer runs the live conformance
  check (``acp_proxy_findings_total``), which ``proxy-record-metrics-nocheck`` turns off
  (``ACP_PROXY_LIVE_CHECK=0``), so the two show what the check costs;
- a paced run (``--rate``, default 100,000 frames/s): the same flood written by the agent at a
  steady rate through ``acp-proxy --record`` (into SQLite, and into PostgreSQL when that is
  measured too), while a reader polls the database. It reports
  how far the recording lags behind the frames the client has already received (the
  maximum over the run, in frames and in time at that rate) and how long after the last
  frame reached the client the recording held every frame. A recorder that keeps up at
  that rate shows a lag of about one batch (~100 ms); one that cannot shows a lag that
  grows with the run.

Usage::

    python bench/bench_proxy.py [--frames 1000000] [--pings 2000] [--rate 100000] [--keep DIR]
                                [--pg-url postgresql://USER@HOST/DB]
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_proxy.recorder.shipper import writer_pids

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pg import SECONDARY_INDEXES, BenchPostgres, cpu_seconds

HERE = Path(__file__).resolve().parent
WARMUP_PINGS = 200  # also lets acp-proxy's recorder writer process finish starting
AGENT = [sys.executable, str(HERE / "bench_agent.py")]
RELAY = [sys.executable, str(HERE / "relay.py")]
NO_CHECK = ["env", "ACP_PROXY_LIVE_CHECK=0"]  # env execs the proxy: the pid sampled is the proxy's


@dataclass
class Result:
    """What one target measured."""

    name: str
    frames: int = 0
    seconds: float = 0.0
    nbytes: int = 0
    p50_us: float = 0.0
    p99_us: float = 0.0
    p999_us: float = 0.0
    peak_rss_mb: float | None = None
    cpu_s: float | None = None
    stats: str = ""
    drain_s: float | None = None
    record_fps: float | None = None
    recorded: int | None = None
    dropped: int | None = None
    rate: float | None = None  # the paced run's offered rate (frames/s)
    lag_frames: int | None = None  # the most frames forwarded but not yet in the database
    caught_up_s: float | None = None  # last frame at the client -> every frame in the database
    busy_s: float | None = None  # the machine's CPU time, flood request -> recording complete
    server_cpu_s: float | None = None  # the private PostgreSQL server's CPU time, the same span
    notes: list[str] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    @property
    def mbps(self) -> float:
        return self.nbytes / self.seconds / 1e6 if self.seconds else 0.0


def machine_busy_seconds() -> float:
    """CPU time the machine's CPUs have not been idle so far, all CPUs summed (Linux)."""
    with open("/proc/stat") as fh:
        ticks = [int(v) for v in fh.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


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


class RssSampler(threading.Thread):
    """Polls the peak RSS (VmHWM) and CPU of a process until it exits.

    A recording acp-proxy writes through a child process: its peak RSS and CPU are
    added in (so peak RSS is proxy peak + writer peak, an upper bound of the sum).
    """

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak: float | None = None
        self.cpu: float | None = None
        self.stop = threading.Event()
        self._children: dict[int, tuple[float, float]] = {}  # pid -> (peak MB, CPU s)

    def run(self) -> None:
        polls = 0
        while not self.stop.is_set():
            value = vm_hwm_mb(self.pid)
            cpu = cpu_seconds(self.pid)
            if value is None or cpu is None:
                break
            # a /proc scan costs: at each poll until the writer is found, then now and then
            if not self._children or polls % 25 == 0:
                for child in writer_pids(self.pid):
                    self._children.setdefault(child, (0.0, 0.0))
            polls += 1
            for child, (peak, used) in list(self._children.items()):
                c_rss, c_cpu = vm_hwm_mb(child), cpu_seconds(child)
                if c_rss is not None and c_cpu is not None:
                    self._children[child] = (max(peak, c_rss), max(used, c_cpu))
            extra_rss = sum(p for p, _ in self._children.values())
            extra_cpu = sum(c for _, c in self._children.values())
            self.peak, self.cpu = value + extra_rss, cpu + extra_cpu
            self.stop.wait(0.02)


class Peer:
    """The bench client: writes requests to a target's stdin and reads its stdout."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env={**os.environ, "ACP_PROXY_STATS": "1"},
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.out = self.proc.stdout.fileno()
        self.buf = b""
        self.next_id = 1
        self.stderr = ""
        self.sent = 0  # lines written to the target
        self.received = 0  # lines read from it (updated while reading)

    def send(self, method: str, params: dict[str, object] | None = None) -> bytes:
        """Send a request; return the prefix its response line starts with."""
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        self.sent += 1
        return b'{"jsonrpc":"2.0","id":%d,"result"' % rid

    def read_until(self, marker: bytes) -> tuple[int, int]:
        """Read until a line starting with ``marker``; return (lines before it, their bytes)."""
        lines = 0
        total = 0
        buf = self.buf
        while True:
            if buf.startswith(marker) and b"\n" in buf:
                self.buf = buf[buf.index(b"\n") + 1 :]
                self.received += 1
                return lines, total
            pos = buf.find(b"\n" + marker)
            if pos >= 0 and b"\n" in buf[pos + 1 :]:
                n = buf.count(b"\n", 0, pos + 1)
                lines += n
                self.received += n
                total += pos + 1
                buf = buf[pos + 1 :]
                continue
            cut = buf.rfind(b"\n") + 1 if pos < 0 else pos + 1
            n = buf.count(b"\n", 0, cut)
            lines += n
            self.received += n
            total += cut
            buf = buf[cut:]
            data = os.read(self.out, 1 << 20)
            if not data:
                raise RuntimeError("target closed its stdout early")
            buf += data

    def close(self, timeout: float = 600) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        while True:  # drain what is left so the target never blocks on a full pipe
            ready, _, _ = select.select([self.out], [], [], timeout)
            if not ready or not os.read(self.out, 1 << 20):
                break
        code = self.proc.wait(timeout)
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read().decode(errors="replace")
        return code


class LagSampler(threading.Thread):
    """Polls a recording while the proxy runs: how far it lags behind the client.

    Lag = frames the client has sent or received (so the proxy has forwarded them) minus
    the highest sequence number in the database. The client's count is read after the
    query, so the lag is never under-stated.
    """

    def __init__(self, db: Path | str, peer: Peer) -> None:
        super().__init__(daemon=True)
        self.db, self.peer = db, peer
        self.max_lag = 0
        self.recorded = 0
        self.stop = threading.Event()
        self.errors: tuple[type[Exception], ...] = (sqlite3.Error,)
        if isinstance(db, str):
            import psycopg

            self.errors = (psycopg.Error,)

    def connect(self) -> Any:
        """A read connection to the recording (a SQLite file, or a PostgreSQL URL)."""
        if isinstance(self.db, str):
            import psycopg

            return psycopg.connect(self.db, autocommit=True, connect_timeout=5)
        return sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1)

    def poll(self, con: Any) -> int:
        row = con.execute(
            "SELECT max(seq) FROM frames WHERE connection_id = (SELECT max(id) FROM connections)"
        ).fetchone()
        self.recorded = int(row[0] or 0)
        return self.peer.sent + self.peer.received - self.recorded

    def run(self) -> None:
        con: Any = None
        while not self.stop.wait(0.05):
            try:
                if con is None:
                    con = self.connect()
                self.max_lag = max(self.max_lag, self.poll(con))
            except self.errors:
                continue  # not created yet, or busy: the next poll
        if con is not None:
            con.close()

    def wait_caught_up(self, target: int, timeout: float = 600) -> float | None:
        """Seconds until the database holds ``target`` frames (None: it never did)."""
        t0 = time.perf_counter()
        con = self.connect()
        try:
            while time.perf_counter() - t0 < timeout:
                self.max_lag = max(self.max_lag, self.poll(con))
                if self.recorded >= target:
                    return time.perf_counter() - t0
                time.sleep(0.01)
        finally:
            con.close()
        return None


def recording_counts(db: Path | str) -> tuple[int, int]:
    """(chunk frames recorded, frames dropped) of a SQLite file or a PostgreSQL URL."""
    chunks = "SELECT count(*) FROM frames WHERE update_kind = 'agent_message_chunk'"
    dropped = "SELECT coalesce(sum(frames_dropped), 0) FROM connections"
    if isinstance(db, str):
        import psycopg

        with psycopg.connect(db) as pg:
            return (
                int(pg.execute(chunks).fetchone()[0]),
                int(pg.execute(dropped).fetchone()[0]),
            )
    con = sqlite3.connect(db)
    try:
        return int(con.execute(chunks).fetchone()[0]), int(con.execute(dropped).fetchone()[0])
    finally:
        con.close()


def run_target(
    name: str,
    argv: list[str],
    frames: int,
    pings: int,
    db: Path | str | None,
    rate: float | None = None,
    pg: BenchPostgres | None = None,
) -> Result:
    res = Result(name, rate=rate)
    peer = Peer(argv)
    sampler = RssSampler(peer.proc.pid)
    sampler.start()
    for _ in range(WARMUP_PINGS):  # warm up (imports, first allocations) before measuring
        peer.read_until(peer.send("bench/ping"))
    lat: list[float] = []
    for _ in range(pings):
        t0 = time.perf_counter_ns()
        peer.read_until(peer.send("bench/ping"))
        lat.append((time.perf_counter_ns() - t0) / 1000)
    lat.sort()
    if lat:
        res.p50_us = statistics.median(lat)
        res.p99_us = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        res.p999_us = lat[min(len(lat) - 1, int(len(lat) * 0.999))]
    lag = LagSampler(db, peer) if db is not None and rate else None
    if lag is not None:
        lag.start()
    server = pg.cpu() if pg is not None else None
    if server is not None:
        server.start()
    busy0 = machine_busy_seconds()
    t0 = time.perf_counter()
    params: dict[str, object] = {"count": frames, **({"rate": rate} if rate else {})}
    got, nbytes = peer.read_until(peer.send("bench/flood", params))
    t1 = time.perf_counter()
    if got != frames:
        res.notes.append(f"received {got} chunks instead of {frames}")
    res.frames, res.nbytes, res.seconds = got, nbytes, t1 - t0
    if lag is not None:
        lag.stop.set()
        lag.join()
        res.caught_up_s = lag.wait_caught_up(peer.sent + peer.received)
        res.lag_frames = lag.max_lag
    code = peer.close()
    t2 = time.perf_counter()
    res.busy_s = machine_busy_seconds() - busy0
    if server is not None:
        res.server_cpu_s = server.finish()
    sampler.stop.set()
    sampler.join()
    res.peak_rss_mb = sampler.peak
    res.cpu_s = sampler.cpu
    res.stats = " ".join(
        line.split("stats: ", 1)[1] for line in peer.stderr.splitlines() if "stats: " in line
    )
    if code != 0:
        res.notes.append(f"exit code {code}")
    if db is not None:
        res.drain_s = t2 - t1
        res.recorded, res.dropped = recording_counts(db)
        res.record_fps = res.recorded / (t2 - t0)
    return res


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for ``--metrics``)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Scraper:
    """Scrapes a ``/metrics`` URL once a second from a thread, as Prometheus would (faster)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import urllib.request

        while not self._stop.wait(1.0):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    response.read()
                self.scrapes += 1
            except OSError:
                pass  # not listening yet, or gone

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return self.scrapes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=1_000_000, help="chunks per flood")
    ap.add_argument("--pings", type=int, default=2000, help="round trips for latency")
    ap.add_argument("--keep", type=Path, help="keep the recording in this directory")
    ap.add_argument(
        "--only",
        default="agent,relay,proxy,proxy-record,proxy-record-metrics-nocheck,"
        "proxy-record-metrics,proxy-record-pg,proxy-record-pg-bare",
        help="comma-separated targets",
    )
    ap.add_argument(
        "--pg-url",
        help="PostgreSQL database for proxy-record-pg (emptied first; default: start a "
        "private server with tests/pg_server.py)",
    )
    ap.add_argument(
        "--rate",
        type=float,
        default=100_000,
        help="frames/s of the paced run through acp-proxy --record (0: no paced run)",
    )
    ap.add_argument("--proxy-args", default="", help="extra acp-proxy options, e.g. --queue-mb 16")
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
    extra = args.proxy_args.split()
    only = args.only.split(",")
    known = (
        "agent",
        "relay",
        "proxy",
        "proxy-record",
        "proxy-record-metrics-nocheck",
        "proxy-record-metrics",
        "proxy-record-pg",
        "proxy-record-pg-bare",
    )
    unknown = [key for key in only if key not in known]
    if unknown:
        print(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    pg = (
        BenchPostgres(args.pg_url, tmp)
        if any(k.startswith("proxy-record-pg") for k in only)
        else None
    )
    pg_url = pg.url if pg is not None else ""
    bare_url = (
        pg.without_secondary_indexes()
        if pg is not None and "proxy-record-pg-bare" in only
        else None
    )
    metrics_at = f"127.0.0.1:{free_port()}"
    targets: dict[str, tuple[str, list[str], Path | str | None]] = {
        "agent": ("agent directly", AGENT, None),
        "relay": ("asyncio line relay (baseline)", [*RELAY, *AGENT], None),
        "proxy": ("acp-proxy", [exe, *extra, "--", *AGENT], None),
        "proxy-record": (
            "acp-proxy --record",
            [exe, *extra, "--record", str(db), "--", *AGENT],
            db,
        ),
        "proxy-record-metrics-nocheck": (
            "acp-proxy --record --metrics, no live check",
            [*NO_CHECK, exe, *extra, "--record", str(db), "--metrics", metrics_at, "--", *AGENT],
            db,
        ),
        "proxy-record-metrics": (
            "acp-proxy --record --metrics (scraped every second, live check)",
            [exe, *extra, "--record", str(db), "--metrics", metrics_at, "--", *AGENT],
            db,
        ),
        "proxy-record-pg": (
            "acp-proxy --record postgresql://",
            [exe, *extra, "--record", pg_url, "--", *AGENT],
            pg_url,
        ),
        "proxy-record-pg-bare": (
            f"acp-proxy --record postgresql://, without {len(SECONDARY_INDEXES)} indexes "
            "(diagnostic)",
            [exe, *extra, "--record", bare_url or "", "--", *AGENT],
            bare_url,
        ),
    }
    assert set(targets) == set(known)
    results: list[Result] = []
    paced: list[Result] = []
    try:
        for key in only:
            name, argv, rec = targets[key]
            if key == "proxy-record-pg-bare" and bare_url is None:
                print(f"skipped: {name}: only on the benchmark's own server", file=sys.stderr)
                continue
            print(f"running: {name} ...", file=sys.stderr, flush=True)
            if rec == db:  # a SQLite target given twice in --only: every run its own file
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
            if pg is not None and key.startswith("proxy-record-pg"):
                rec = pg.fresh(str(rec))
            server = pg if key.startswith("proxy-record-pg") else None
            scraper = Scraper(f"http://{metrics_at}/metrics") if "--metrics" in argv else None
            results.append(run_target(name, argv, args.frames, args.pings, rec, pg=server))
            if scraper is not None:
                print(f"  {scraper.stop()} scrapes of /metrics", file=sys.stderr)
        # paced: into SQLite, and into PostgreSQL when it was measured too
        for key in ("proxy-record", "proxy-record-pg"):
            if not args.rate or (key == "proxy-record-pg" and key not in only):
                continue
            name, argv, rec = targets[key]
            print(f"running: {name}, paced at {args.rate:,.0f} frames/s ...", file=sys.stderr)
            if pg is not None and key == "proxy-record-pg":
                rec = pg.fresh()
            else:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
            paced.append(run_target(f"{name}, paced", argv, args.frames, 0, rec, rate=args.rate))
    finally:
        if pg is not None:
            pg.close()
    if not results:
        print("nothing measured: every target given to --only was skipped", file=sys.stderr)
        return 2
    base = next((r for r in results if "baseline" in r.name), None)
    direct = next((r for r in results if r.name == "agent directly"), None)
    size = results[0].nbytes // max(1, results[0].frames)
    print(
        f"\n{args.frames:,} agent_message_chunk frames of ~{size} B, {args.pings} pings, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end\n"
    )
    print(
        "| target | frames/s | MB/s | vs baseline | RTT p50 | RTT p99 | RTT p99.9 | added p99 "
        "| peak RSS "
        "| recorded | dropped | recording complete after | recorded/s | CPU s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        ratio = f"{r.fps / base.fps:.2f}x" if base else "-"
        added = f"{r.p99_us - direct.p99_us:+.0f} µs" if direct and r is not direct else "-"
        rss = f"{r.peak_rss_mb:.0f} MB" if r.peak_rss_mb is not None else "-"
        rec = f"{r.recorded:,}" if r.recorded is not None else "-"
        drop = f"{r.dropped:,}" if r.dropped is not None else "-"
        drain = f"{r.drain_s:.2f} s" if r.drain_s is not None else "-"
        rfps = f"{r.record_fps:,.0f}" if r.record_fps is not None else "-"
        cpu = f"{r.cpu_s:.1f}" if r.cpu_s is not None else "-"
        print(
            f"| {r.name} | {r.fps:,.0f} | {r.mbps:.0f} | {ratio} | {r.p50_us:.0f} µs | "
            f"{r.p99_us:.0f} µs | {r.p999_us:.0f} µs | {added} | {rss} | {rec} | {drop} | "
            f"{drain} | {rfps} | {cpu} |"
        )
    recorded = [r for r in results if r.record_fps is not None and r.busy_s]
    if recorded:
        cpus = os.cpu_count() or 1
        print(
            "\nRecording ceilings: recorded / (CPU time of the whole machine / its CPUs) is the "
            "most that\nmuch work could reach with every CPU busy all along; recorded / the "
            "database server's CPU\nthe most a server that works through one COPY at a time "
            "could (its own server only).\n"
        )
        print(
            "| target | recorded/s | machine CPU s | ceiling, all CPUs | server CPU s "
            "| ceiling, server |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for r in recorded:
            assert r.recorded is not None and r.busy_s
            server_cpu = f"{r.server_cpu_s:.2f}" if r.server_cpu_s else "-"
            server_cap = f"{r.recorded / r.server_cpu_s:,.0f}" if r.server_cpu_s else "-"
            print(
                f"| {r.name} | {r.record_fps:,.0f} | {r.busy_s:.2f} | "
                f"{r.recorded / (r.busy_s / cpus):,.0f} | {server_cpu} | {server_cap} |"
            )
    per_frame = [r for r in results if r.record_fps is not None and r.cpu_s and r.recorded]
    if per_frame:
        # What a host running proxies pays per recorded frame (the proxy and its writer
        # process; a database server elsewhere is not the proxy host's). The target:
        # PostgreSQL's at most SQLite's.
        sqlite_run = next((r for r in per_frame if "postgresql" not in r.name), None)
        print(
            "\nThe proxy host's CPU per recorded frame (proxy and writer process; the database "
            "server aside):\n"
        )
        print("| target | CPU s | recorded | CPU per frame | vs SQLite |")
        print("|---|---:|---:|---:|---:|")
        for r in per_frame:
            assert r.cpu_s is not None and r.recorded
            us = r.cpu_s / r.recorded * 1e6
            vs = "-"
            if sqlite_run is not None and sqlite_run.cpu_s and sqlite_run.recorded:
                vs = f"{us / (sqlite_run.cpu_s / sqlite_run.recorded * 1e6):.2f}x"
            print(f"| {r.name} | {r.cpu_s:.1f} | {r.recorded:,} | {us:.2f} µs | {vs} |")
    if paced:
        print(
            f"\nPaced: {paced[0].frames:,} frames offered at {args.rate:,.0f}/s through "
            "acp-proxy --record\n"
        )
        print(
            "| target | offered rate | delivered | max recording lag "
            "| every frame recorded after the last |"
        )
        print("|---|---:|---:|---:|---:|")
        for r in paced:
            assert r.rate
            lag_s = (r.lag_frames or 0) / r.rate
            caught = f"{r.caught_up_s:.2f} s" if r.caught_up_s is not None else "never"
            print(
                f"| {r.name} | {r.rate:,.0f}/s | {r.fps:,.0f}/s | {r.lag_frames or 0:,} frames "
                f"({lag_s * 1000:,.0f} ms) | {caught} |"
            )
        results.extend(paced)
    for r in results:
        if r.stats:
            print(f"recorder: {r.name}: {r.stats}")
        for note in r.notes:
            print(f"note: {r.name}: {note}")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
