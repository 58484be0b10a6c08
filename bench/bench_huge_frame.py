"""Benchmark: peak memory of one huge frame through acp-proxy, with and without ``--record``.

A client sends one JSON-RPC request whose line is ``--mib`` MiB (default 256: a base64
"image" in ``session/prompt``) through ``acp-proxy [--record DB] -- AGENT``; the agent
reads the line and answers a small response. The run ends when the client has the answer
and (with ``--record``) the recording holds both frames byte-exact. Reported per target:

- peak RSS (VmHWM) of the proxy process and of its recorder writer process, sampled from
  ``/proc`` every 20 ms until the end, and their sum;
- the sum as a multiple of the frame size (the target is at most 2x the frame plus a
  constant; the constant is the idle proxy's RSS, shown in the first row);
- wall time from the first byte sent to the end.

Usage::

    python bench/bench_huge_frame.py [--mib 256] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from acp_proxy.recorder.shipper import writer_pids

AGENT = r"""
import sys
line = sys.stdin.buffer.readline()
sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":1,"result":{"bytes":%d}}\n' % len(line))
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
"""

MIB = 1024 * 1024


def vm_hwm_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM) in KiB, 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakSampler:
    """Samples VmHWM of the proxy and its writer processes until stopped."""

    def __init__(self, proxy_pid: int) -> None:
        self.proxy_pid = proxy_pid
        self.proxy = 0
        self.writer = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(0.02)

    def sample(self) -> None:
        self.proxy = max(self.proxy, vm_hwm_kib(self.proxy_pid))
        for pid in writer_pids(self.proxy_pid):
            self.writer = max(self.writer, vm_hwm_kib(pid))

    def stop(self) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()


def frame(mib: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s",'
    head += b'"prompt":[{"type":"image","mimeType":"image/png","data":"'
    tail = b'"}]}}\n'
    return head + b"A" * (mib * MIB - len(head) - len(tail)) + tail


def recorded(db: Path, size: int) -> bool:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT count(*), max(size) FROM frames").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return bool(row[0] >= 2 and row[1] == size)


def run(target: str, data: bytes, workdir: Path) -> dict[str, float]:
    db = workdir / f"{target}.db"
    args = ["acp-proxy"]
    if target == "record":
        args += ["--record", str(db)]
    args += ["--", sys.executable, "-c", AGENT]
    start = time.monotonic()
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    sampler = PeakSampler(proc.pid)
    view = memoryview(data)
    for i in range(0, len(data), MIB):
        proc.stdin.write(view[i : i + MIB])
    proc.stdin.flush()
    answer = proc.stdout.readline()
    assert answer.startswith(b'{"jsonrpc"'), answer[:200]
    if target == "record":
        while not recorded(db, len(data)) and proc.poll() is None:
            time.sleep(0.05)
    elapsed = time.monotonic() - start
    sampler.stop()
    proc.stdin.close()
    proc.wait(60)
    if target == "record":
        con = sqlite3.connect(db)
        (raw,) = con.execute("SELECT raw FROM frames WHERE size = ?", (len(data),)).fetchone()
        con.close()
        assert raw == data, "the recorded frame differs from what was sent"
    return {"proxy": sampler.proxy / 1024, "writer": sampler.writer / 1024, "seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="frame size in MiB")
    parser.add_argument("--keep", type=Path, help="keep the recordings in this directory")
    opts = parser.parse_args()
    workdir = opts.keep or Path(tempfile.mkdtemp(prefix="acp-huge-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        small = run("plain", frame(1), workdir)
        data = frame(opts.mib)
        rows = [("1 MiB frame, plain proxy (the constant)", small)]
        rows.append((f"{opts.mib} MiB frame, plain proxy", run("plain", data, workdir)))
        rows.append((f"{opts.mib} MiB frame, --record", run("record", data, workdir)))
        print("| target | proxy peak | writer peak | sum | sum / frame | time |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, r in rows:
            total = r["proxy"] + r["writer"]
            ratio = total / (len(data) / MIB) if "MiB frame," in name and "1 MiB" not in name else 0
            print(
                f"| {name} | {r['proxy']:.0f} MB | {r['writer']:.0f} MB | {total:.0f} MB | "
                f"{ratio:.2f}x | {r['seconds']:.1f} s |"
            )
        print(f"load average: {os.getloadavg()[0]:.2f}")
    finally:
        if opts.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
