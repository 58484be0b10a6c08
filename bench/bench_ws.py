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

``--sdk``: instead, issue 27's WebSocket hop, A/B: ``bench_http.py``'s SDK peer
(``bench_sdk_agent.py``) reached directly on its own server, through ``serve --upstream``
(with and without ``--record``) and through ``serve [--record] -- <that agent>``, with
``bench_http.py``'s client and measures, in ``--rounds`` rounds; with ``--base DIR`` each
round also runs the proxy rows with ``DIR``'s ``acp_proxy`` (``PYTHONPATH``; e.g. a ``git
worktree`` of main), alternating.
Medians over the rounds of each row's ratio to the direct row of its own round. The row
``tcp byte relay (floor)`` is the cheapest hop Python's asyncio can make: a TCP relay that
writes what it reads (no WebSocket parsing, no recording; ``--tcp-relay``), i.e. what any
Python proxy in front of that server costs at least, on this machine, at this load. The
agent rows are also compared (``x stdio``) with the same agent spoken to over its own pipes
(``sdk agent, stdio (direct)``): the SDK's stdio transport is slower than its server's
WebSocket, so that is the direct path an agent behind ``serve -- AGENT`` has.

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


def run_tcp_relay(target: str) -> None:
    """``--tcp-relay HOST:PORT``: a byte relay to ``target``; prints ``listening on http://``."""
    host, port = target.rsplit(":", 1)
    small = 64 * 1024  # reads under glibc's mmap threshold, as acp-proxy's (READ_SIZE)

    class Pipe(asyncio.Protocol):
        def __init__(self) -> None:
            self.peer: asyncio.Transport | None = None
            self.early: list[bytes] = []

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            assert isinstance(transport, asyncio.Transport)
            transport.max_size = small  # type: ignore[attr-defined]
            transport.pause_reading()
            asyncio.get_running_loop().create_task(self.dial(transport))

        async def dial(self, transport: asyncio.Transport) -> None:
            loop = asyncio.get_running_loop()
            back, _ = await loop.create_connection(lambda: Back(transport), host, int(port))
            back.max_size = small  # type: ignore[attr-defined]
            self.peer = back
            transport.resume_reading()

        def data_received(self, data: bytes) -> None:
            assert self.peer is not None
            self.peer.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.peer is not None:
                self.peer.close()

    class Back(asyncio.Protocol):
        def __init__(self, front: asyncio.Transport) -> None:
            self.front = front

        def data_received(self, data: bytes) -> None:
            self.front.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.front.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Pipe, "127.0.0.1", 0)
        bound = server.sockets[0].getsockname()[1]
        print(f"listening on http://127.0.0.1:{bound}/acp", file=sys.stderr, flush=True)
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


def run_sdk(rounds: int, frames: int, rtt: int, base: str | None) -> None:
    """``--sdk``: the SDK peer direct vs through ``serve`` over WebSocket, A/B by round."""
    import bench_http as bh

    exe = shutil.which("acp-proxy")
    if exe is None:
        raise SystemExit("acp-proxy is not installed: pip install -e .")
    here = str(Path(__file__).resolve().parent.parent)
    codes = [("", here)] + ([("base ", str(Path(base).resolve()))] if base else [])
    rows: dict[str, list[tuple[float, float, float, float, float]]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench_ws_sdk_"))

    def one(name: str, url: str, pid_url: str) -> tuple[float, float, float]:
        """One row's flood and round trips; ``url`` empty: the SDK agent over its pipes."""
        pid = bh.PIDS.get(pid_url)
        peer = bh.Ws(url) if url else bh.Stdio(bh.SDK_AGENT)
        fps, p50, _, _, cpu_rt = asyncio.run(bh.measure(peer, frames, rtt, "_", pid))
        print(
            f"  {name:<36} {fps:>8,.0f} frames/s  p50 {p50:>5.0f} us  cpu/rt {cpu_rt:>4.0f}"
            f"  (load {os.getloadavg()[0]:.1f})",
            file=sys.stderr,
        )
        return fps, p50, cpu_rt

    own: dict[str, list[float]] = {}  # agent rows: frames/s / the agent over its own pipes
    for r in range(rounds):
        order = codes if r % 2 == 0 else codes[::-1]
        with bh.sdk_server() as sdk:
            d_fps, d_p50, d_cpu = one("sdk server ws (direct)", sdk, sdk)
            rows.setdefault("sdk server ws (direct)", []).append((d_fps, 1, d_p50, 1, d_cpu))
            s_fps, s_p50, _ = one("sdk agent, stdio (direct)", "", "")
            rows.setdefault("sdk agent, stdio (direct)", []).append(
                (s_fps, s_fps / d_fps, s_p50, s_p50 / d_p50, 0)
            )
            own.setdefault("sdk agent, stdio (direct)", []).append(1.0)
            hostport = sdk.removeprefix("http://").split("/", 1)[0]
            with bh.listening([sys.executable, __file__, "--tcp-relay", hostport]) as relay:
                fps, p50, cpu = one("tcp byte relay (floor)", relay, relay)
            rows.setdefault("tcp byte relay (floor)", []).append(
                (fps, fps / d_fps, p50, p50 / d_p50, cpu)
            )
            for tag, path in order:
                os.environ["PYTHONPATH"] = path
                db = tmp / f"{r}{tag.strip()}.db"
                for name, args, agent in (
                    ("serve --upstream, WS", ["--upstream", sdk], None),
                    (
                        "serve --upstream --record, WS",
                        ["--record", f"{db}u", "--upstream", sdk],
                        None,
                    ),
                    ("serve -- SDK agent, WS", [], bh.SDK_AGENT),
                    ("serve --record -- SDK agent, WS", ["--record", f"{db}a"], bh.SDK_AGENT),
                ):
                    with bh.serve(args, agent) as url:
                        fps, p50, cpu = one(tag + name, url, url)
                    rows.setdefault(tag + name, []).append(
                        (fps, fps / d_fps, p50, p50 / d_p50, cpu)
                    )
                    if agent is not None:
                        own.setdefault(tag + name, []).append(fps / s_fps)
    shutil.rmtree(tmp, ignore_errors=True)
    header = (
        f"{'path (medians of ' + str(rounds) + ' rounds)':<37} {'frames/s':>9} {'x direct':>8} "
        f"{'p50 us':>7} {'x direct':>8} {'cpu/rt':>6} {'x stdio':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, got in rows.items():
        m = [statistics.median(col) for col in zip(*got, strict=True)]
        mine = f"{statistics.median(own[name]):>7.2f}" if name in own else f"{'-':>7}"
        print(
            f"{name:<37} {m[0]:>9,.0f} {m[1]:>8.2f} {m[2]:>7.0f} {m[3]:>8.2f} {m[4]:>6.0f} {mine}"
        )
    print("cpu/rt: CPU us per round trip of the server's process tree (serve and what it started)")
    print("x stdio: frames/s against the same SDK agent spoken to over its own pipes (no proxy)")
    print(f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20000, help="frames per connection")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--rtt", type=int, default=2000, help="round trips for latency")
    parser.add_argument("--size", type=int, default=200, help="approximate frame size (bytes)")
    parser.add_argument("--burst", help="handshake bursts instead, e.g. 10,50,200")
    parser.add_argument("--sdk", action="store_true", help="the SDK peer direct vs serve, A/B")
    parser.add_argument("--rounds", type=int, default=3, help="--sdk: rounds")
    parser.add_argument("--base", help="--sdk: also run the proxy rows with DIR's acp_proxy")
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tcp-relay", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tcp_relay:
        run_tcp_relay(args.tcp_relay)
        return 0
    if args.sdk:
        run_sdk(args.rounds, args.frames, args.rtt, args.base)
        return 0
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
