"""Benchmark: WebSocket frames/s and round-trip latency, through acp-proxy vs direct.

One run measures, against the same echo peer and with the same client:

- ``direct``: client -> echo WebSocket server;
- ``ws --upstream``: client -> ``acp-proxy ws --upstream`` -> the same echo server;
- ``ws --upstream --record``: the same, recording every frame to SQLite;
- ``ws -- cat``: client -> ``acp-proxy ws`` -> ``cat`` as a stdio "agent" (frames <-> lines);
- ``ws -- cat --record``: the same, recording.

``--burst 10,50,200``: instead, handshake time of bursts of that many connections opened at
once (p50/max from the common start, each connection held until all are open): the direct
echo server (the baseline) and ``ws -- cat`` (one ``cat`` started per connection).

Throughput: each connection sends ``--frames`` JSON-RPC frames (~``--size`` bytes) without
waiting and reads the echoes; frames/s counts one direction. Latency: ``--rtt`` sequential
request/echo round trips on one connection, p50/p99 in microseconds. Ratios are relative to
``direct`` (throughput: higher is better; latency: lower is better).

    python bench/bench_ws.py                   # defaults: 20000 frames, 2000 round trips
    python bench/bench_ws.py --frames 50000 --connections 4 --size 1000

Numbers depend on the machine and its load; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))
from burst import BURST_HEADER, Closer, burst_line, handshake_burst

URL_RE = re.compile(rb"listening on (ws://\S+)")


async def _echo(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(max_msg_size=0)
    await ws.prepare(request)
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.TEXT:
            await ws.send_str(msg.data)
        elif msg.type == aiohttp.WSMsgType.BINARY:
            await ws.send_bytes(msg.data)
    return ws


def run_echo_server() -> None:
    """``--echo-server``: a plain aiohttp echo server at /acp; prints its URL on stdout."""

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/acp", _echo)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(f"ws://127.0.0.1:{runner.addresses[0][1]}/acp", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def frame(n: int, size: int) -> str:
    head = f'{{"jsonrpc":"2.0","id":{n},"method":"_bench/echo","params":{{"pad":"'
    return head + "x" * max(0, size - len(head) - 3) + '"}}'


async def throughput(url: str, frames: int, size: int, connections: int) -> float:
    async def one(session: aiohttp.ClientSession, c: int) -> None:
        async with session.ws_connect(url, max_msg_size=0) as ws:
            payloads = [frame(c * frames + n, size) for n in range(frames)]

            async def send() -> None:
                for p in payloads:
                    await ws.send_str(p)

            sender = asyncio.create_task(send())
            for p in payloads:
                msg = await ws.receive()
                if msg.data != p:
                    raise SystemExit(f"bad echo on {url}: {msg!r}")
            await sender

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        # Warm up (agent start-up, connection set-up) outside the measurement.
        async with session.ws_connect(url) as ws:
            await ws.send_str(frame(0, size))
            await ws.receive()
        start = time.perf_counter()
        await asyncio.gather(*(one(session, c) for c in range(connections)))
        elapsed = time.perf_counter() - start
    return frames * connections / elapsed


async def latency(url: str, rounds: int, size: int) -> tuple[float, float]:
    samples: list[float] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(url, max_msg_size=0) as ws:
        for n in range(rounds + 50):
            p = frame(n, size)
            start = time.perf_counter()
            await ws.send_str(p)
            msg = await ws.receive()
            took = time.perf_counter() - start
            if msg.data != p:
                raise SystemExit(f"bad echo on {url}: {msg!r}")
            if n >= 50:  # the first ones warm things up
                samples.append(took * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


async def ws_burst(url: str, n: int) -> list[float]:
    """Seconds each of ``n`` WebSocket upgrades to ``url`` opened at once took."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def opener() -> Closer:
            ws = await session.ws_connect(url, timeout=aiohttp.ClientWSTimeout(ws_close=60))
            return ws.close

        return await handshake_burst(n, opener)


def run_bursts(sizes: list[int]) -> None:
    """``--burst``: handshake p50/max for each burst size, direct vs ``ws -- cat``."""
    exe = shutil.which("acp-proxy")
    if exe is None:
        raise SystemExit("acp-proxy is not installed: pip install -e .")
    common = [exe, "ws", "--listen", "127.0.0.1:0", "--heartbeat", "0"]
    print(BURST_HEADER)
    print("-" * len(BURST_HEADER))
    with (
        background([sys.executable, __file__, "--echo-server"], url_from_stderr=False) as echo,
        background([*common, "--", "cat"], url_from_stderr=True) as proxy,
    ):
        for n in sizes:
            for name, url in (("direct", echo), ("ws -- cat", proxy)):
                print(burst_line(name, n, asyncio.run(ws_burst(url, n))), flush=True)
    print(f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})")


@contextmanager
def background(argv: list[str], url_from_stderr: bool) -> Iterator[str]:
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if url_from_stderr else subprocess.DEVNULL,
    )
    try:
        stream = proc.stderr if url_from_stderr else proc.stdout
        assert stream is not None
        url = None
        for line in iter(stream.readline, b""):
            if not url_from_stderr:
                url = line.decode().strip()
                break
            match = URL_RE.search(line)
            if match:
                url = match.group(1).decode()
                break
        if url is None:
            raise SystemExit(f"could not start: {' '.join(argv)}")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20000, help="frames per connection")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--rtt", type=int, default=2000, help="round trips for latency")
    parser.add_argument("--size", type=int, default=200, help="approximate frame size (bytes)")
    parser.add_argument("--burst", help="handshake bursts instead, e.g. 10,50,200")
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server:
        run_echo_server()
        return 0
    if args.burst:
        run_bursts([int(n) for n in args.burst.split(",")])
        return 0
    exe = shutil.which("acp-proxy")
    if exe is None:
        raise SystemExit("acp-proxy is not installed: pip install -e .")
    tmp = Path(tempfile.mkdtemp(prefix="bench_ws_"))
    results: list[tuple[str, float, float, float]] = []

    def measure(name: str, url: str) -> None:
        fps = asyncio.run(throughput(url, args.frames, args.size, args.connections))
        p50, p99 = asyncio.run(latency(url, args.rtt, args.size))
        results.append((name, fps, p50, p99))
        print(
            f"  {name:<26} {fps:>10,.0f} frames/s  p50 {p50:>7.0f} us  p99 {p99:>7.0f} us",
            file=sys.stderr,
        )

    common = [exe, "ws", "--listen", "127.0.0.1:0", "--heartbeat", "0"]
    print(
        f"bench_ws: {args.connections} connection(s) x {args.frames} frames of ~{args.size} B, "
        f"{args.rtt} round trips",
        file=sys.stderr,
    )
    with background([sys.executable, __file__, "--echo-server"], url_from_stderr=False) as echo:
        measure("direct", echo)
        with background([*common, "--upstream", echo], url_from_stderr=True) as url:
            measure("ws --upstream", url)
        db = tmp / "upstream.db"
        with background([*common, "--record", str(db), "--upstream", echo], True) as url:
            measure("ws --upstream --record", url)
    with background([*common, "--", "cat"], url_from_stderr=True) as url:
        measure("ws -- cat", url)
    with background([*common, "--record", str(tmp / "cat.db"), "--", "cat"], True) as url:
        measure("ws -- cat --record", url)
    shutil.rmtree(tmp, ignore_errors=True)

    base_fps, base_p50 = results[0][1], results[0][2]
    header = (
        f"{'path':<26} {'frames/s':>10} {'x direct':>9} {'p50 us':>8} {'p99 us':>8} {'x direct':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, fps, p50, p99 in results:
        print(
            f"{name:<26} {fps:>10,.0f} {fps / base_fps:>9.2f} {p50:>8.0f} {p99:>8.0f} "
            f"{p50 / base_p50:>9.2f}"
        )
    print(f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
