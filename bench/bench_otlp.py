"""Benchmark: ``acp-proxy --record`` with and without live OTLP export, in one run.

Through the real proxy and the benchmark agent (bench/bench_agent.py), for each of: no
``--otlp-endpoint``; a working OTLP/HTTP collector (a local receiver decoding every request
with the official protobuf messages); a stalled collector (accepts TCP, never answers):

- forwarding: frames/s from writing the first request to reading the last response, for
  ``--pings`` pipelined ``bench/ping`` requests (each one span) and a ``bench/flood`` of
  ``--frames`` ~300-byte ``agent_message_chunk`` notifications (events);
- recorded/s: frames in the database over the time from the first request to the proxy's
  exit (the recording complete), and the time from the last response to that exit;
- spans received by the collector, and spans counted as dropped (``otlp_drop`` events).

Usage::

    python bench/bench_otlp.py [--frames 200000] [--pings 20000]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.peers.otlp_collector import otlp_collector, stalled_collector

HERE = Path(__file__).resolve().parent
AGENT = [sys.executable, str(HERE / "bench_agent.py")]


def run(db: Path, endpoint: str | None, pings: int, frames: int) -> dict[str, float]:
    argv = ["acp-proxy", "--record", str(db)]
    if endpoint is not None:
        argv += ["--otlp-endpoint", endpoint]
    proc = subprocess.Popen(
        [*argv, "--", *AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    requests = [
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "bench/ping", "params": {}}).encode()
        + b"\n"
        for i in range(pings)
    ]
    flood = {"jsonrpc": "2.0", "id": "flood", "method": "bench/flood", "params": {"count": frames}}
    requests.append(json.dumps(flood).encode() + b"\n")
    errors: list[bytes] = []
    threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True).start()
    start = time.perf_counter()

    def write() -> None:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(requests))
        proc.stdin.flush()

    threading.Thread(target=write, daemon=True).start()
    expected = pings + frames + 1
    for seen, _line in enumerate(proc.stdout, 1):
        if seen == expected:
            break
    forwarded = time.perf_counter()
    proc.stdin.close()
    proc.wait()
    done = time.perf_counter()
    rec = sqlite3.connect(db)
    recorded = rec.execute("SELECT count(*) FROM frames").fetchone()[0]
    drops = sum(
        json.loads(d)["spans"]
        for (d,) in rec.execute("SELECT detail FROM events WHERE kind = 'otlp_drop'")
    )
    rec.close()
    frames_total = 2 * (pings + 1) + frames  # both directions
    return {
        "forward_fps": frames_total / (forwarded - start),
        "recorded_fps": recorded / (done - start),
        "recorded": recorded,
        "tail_s": done - forwarded,
        "otlp_dropped": drops,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--pings", type=int, default=20_000)
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, float], int | None]] = []
    with tempfile.TemporaryDirectory(prefix="bench-otlp-") as tmp:
        rows.append(("--record", run(Path(tmp) / "a.db", None, args.pings, args.frames), None))
        with otlp_collector() as (url, got):
            result = run(Path(tmp) / "b.db", url, args.pings, args.frames)
            time.sleep(0.5)
            rows.append(("--record --otlp-endpoint (live)", result, len(got.spans())))
        with stalled_collector() as url:
            result = run(Path(tmp) / "c.db", url, args.pings, args.frames)
            rows.append(("--record --otlp-endpoint (stalled)", result, 0))
    total = 2 * (args.pings + 1) + args.frames
    print(f"{args.pings} pipelined pings + a flood of {args.frames} chunks = {total} frames")
    print(
        f"{'target':38} {'forward fr/s':>12} {'recorded/s':>11} {'recorded':>9} "
        f"{'tail s':>7} {'spans rcvd':>10} {'dropped':>8}"
    )
    for name, r, received in rows:
        print(
            f"{name:38} {r['forward_fps']:12,.0f} {r['recorded_fps']:11,.0f} "
            f"{int(r['recorded']):9,} {r['tail_s']:7.2f} "
            f"{'-' if received is None else f'{received:,}':>10} {int(r['otlp_dropped']):8,}"
        )


if __name__ == "__main__":
    main()
