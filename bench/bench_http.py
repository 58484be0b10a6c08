"""Benchmark: ``acp-proxy serve`` over Streamable HTTP and over WebSocket vs the peer direct.

One run, two comparisons, the same raw aiohttp client on every path:

1. The issue's baseline, the same peers connected directly: ``bench/bench_sdk_agent.py``
   (an SDK agent) on the SDK's own HTTP/WS server (``acp.http.asgi`` under uvicorn) reached
   directly (``sdk server http|ws (direct)``), versus ``serve --upstream --record`` in
   front of that server and ``serve --record -- <that agent over stdio>``.
2. The proxy's own cost: ``bench/bench_agent.py`` (a raw stdio peer) over its pipes
   (``stdio direct``, not a network transport) versus ``serve`` with and without
   ``--record``, over HTTP (``POST /acp`` + the connection's SSE stream) and WebSocket.

Throughput: one flood of ``--frames`` (SDK peer: ``--sdk-frames``) notifications (~300 B
each) per measurement, frames/s until its response arrives. Latency: ``--rtt`` sequential
pings (HTTP: the POST, then its response on SSE), p50/p99 in microseconds. Each row's ratios
are against the direct row of its half. ``cpu/fr`` and ``cpu/rt``: CPU microseconds of the
server's process tree (Linux ``/proc``) per frame of the flood and per round trip, steadier
than the latency on a loaded machine.

    python bench/bench_http.py                 # defaults: 20000 (SDK: 5000) frames, 1000 pings
    python bench/bench_http.py --half http --rounds 5 --base /tmp/main-checkout   # A/B

``tcp relay (floor)``: the SDK server behind a bare asyncio byte relay (no HTTP parsed,
nothing recorded), the least a second Python process on the path costs. ``--base DIR``: each
``serve`` row is also run from the code in DIR (``PYTHONPATH``; ``serve`` is ``acp-proxy``
from PATH, which runs the code ``PYTHONPATH`` selects), in the same sitting; ``--rounds N``
repeats everything and prints the medians; ``--half`` limits the rows to one transport.

``--burst 10,50,200``: instead, time to the ``initialize`` answer of bursts of that many
connections opened at once (p50/max from the common start, each held until all are open):
a ``sh`` agent that answers ``initialize`` then is ``cat`` (:data:`BURST_AGENT`), started
and initialized over its pipes by the bench itself (the baseline: what starting that many
agents costs here), then ``serve`` in front of the same agent.

Numbers depend on the machine and its load; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from burst import BURST_HEADER, Closer, burst_line, handshake_burst

AGENT = [sys.executable, str(Path(__file__).parent / "bench_agent.py")]
SDK_AGENT = [sys.executable, str(Path(__file__).parent / "bench_sdk_agent.py")]
URL_RE = re.compile(rb"listening on (http://\S+)")
INIT = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
BURST_AGENT = ["sh", "-c", """read line; echo '{"jsonrpc":"2.0","id":0,"result":{}}'; exec cat"""]
"""The ``--burst`` agent: answers ``initialize``, then echoes (cheap to start, as ``cat``)."""


def request(n: int, method: str, params: str = "{}") -> str:
    return f'{{"jsonrpc":"2.0","id":{n},"method":"{method}","params":{params}}}'


class Stdio:
    """The agent over its pipes."""

    def __init__(self, argv: list[str] = AGENT) -> None:
        self.argv = argv

    async def __aenter__(self) -> Stdio:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=1 << 24
        )
        await self.call(INIT)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()

    async def call(self, line: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()
        count = 0
        while True:
            got = await self.proc.stdout.readline()
            count += 1
            if b'"result"' in got:
                return count


class Http:
    """``serve`` over POST + the connection's SSE stream."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> Http:
        self.session = aiohttp.ClientSession()
        json_type = {"Content-Type": "application/json"}
        async with self.session.post(self.url, data=INIT, headers=json_type) as resp:
            assert resp.status == 200
            self.cid = resp.headers["Acp-Connection-Id"]
        self.headers = {**json_type, "Acp-Connection-Id": self.cid}
        self.stream = await self.session.get(
            self.url, headers={"Accept": "text/event-stream", "Acp-Connection-Id": self.cid}
        )
        self.buffer = b""
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stream.close()
        async with self.session.delete(self.url, headers={"Acp-Connection-Id": self.cid}):
            pass
        await self.session.close()

    async def call(self, line: str) -> int:
        async with self.session.post(self.url, data=line, headers=self.headers) as resp:
            assert resp.status == 202
        count = 0
        while True:
            while b"\n\n" not in self.buffer:
                self.buffer += await self.stream.content.readany()
            events = self.buffer.split(b"\n\n")
            self.buffer = events.pop()
            for event in events:
                count += 1
                if b'"result"' in event:
                    self.buffer = b"\n\n".join([*events[events.index(event) + 1 :], self.buffer])
                    return count


class Ws:
    """``serve`` over its WebSocket half."""

    def __init__(self, url: str) -> None:
        self.url = "ws://" + url.removeprefix("http://")

    async def __aenter__(self) -> Ws:
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(self.url, max_msg_size=0)
        await self.call(INIT)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.session.close()

    async def call(self, line: str) -> int:
        await self.ws.send_str(line)
        count = 0
        while True:
            msg = await self.ws.receive()
            count += 1
            if '"result"' in msg.data:
                return count


SETTLE_SECONDS = 1.0
"""Pause between a flood and the round trips measured after it."""

PIDS: dict[str, int] = {}
"""The process serving each URL :func:`listening` printed (its CPU time is measured)."""


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` and its descendants (Linux ``/proc``; else 0)."""
    if pid is None:
        return 0.0
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += cpu_seconds(int(child))
    except (OSError, ValueError, IndexError):
        pass
    return total


async def measure(
    peer: Stdio | Http | Ws, frames: int, rounds: int, prefix: str = "", pid: int | None = None
) -> tuple[float, float, float, float, float]:
    """``prefix``: ``_`` for the SDK peer, whose bench methods are extension methods.

    Also the CPU time of ``pid``'s process tree (the server measured) per frame of the flood
    and per round trip, in microseconds: on a loaded machine steadier than the latency."""
    async with peer as p:
        await p.call(request(1, f"{prefix}bench/flood", '{"count":100}'))  # warm up
        cpu = cpu_seconds(pid)
        start = time.perf_counter()
        got = await p.call(request(2, f"{prefix}bench/flood", json.dumps({"count": frames})))
        fps = got / (time.perf_counter() - start)
        # A recording writes a burst after it (the proxy's journal holds it until it pauses):
        # let that finish, counted as the flood's CPU, so the round trips below measure round
        # trips alone.
        await asyncio.sleep(SETTLE_SECONDS)
        cpu_frame = (cpu_seconds(pid) - cpu) / got * 1e6
        samples = []
        for n in range(rounds + 50):
            if n == 50:
                cpu = cpu_seconds(pid)
            t = time.perf_counter()
            await p.call(request(10 + n, f"{prefix}bench/ping"))
            if n >= 50:
                samples.append((time.perf_counter() - t) * 1e6)
        cpu_rtt = (cpu_seconds(pid) - cpu) / rounds * 1e6
    samples.sort()
    p99 = samples[int(len(samples) * 0.99) - 1]
    return fps, statistics.median(samples), p99, cpu_frame, cpu_rtt


async def stdio_burst(n: int) -> list[float]:
    """Seconds until each of ``n`` agents started at once answered ``initialize``."""

    async def opener() -> Closer:
        peer = Stdio(BURST_AGENT)
        await peer.__aenter__()
        return peer.__aexit__

    return await handshake_burst(n, opener)


async def http_burst(url: str, n: int) -> list[float]:
    """Seconds until each of ``n`` ``initialize`` POSTs sent at once was answered."""
    json_type = {"Content-Type": "application/json"}
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=timeout
    ) as session:

        async def opener() -> Closer:
            async with session.post(url, data=INIT, headers=json_type) as resp:
                assert resp.status == 200, await resp.text()
                cid = resp.headers["Acp-Connection-Id"]
            return lambda: session.delete(url, headers={"Acp-Connection-Id": cid})

        return await handshake_burst(n, opener)


def run_bursts(sizes: list[int]) -> None:
    """``--burst``: initialize p50/max for each burst size, the agents direct vs ``serve``."""
    print(BURST_HEADER)
    print("-" * len(BURST_HEADER))
    with serve([], BURST_AGENT) as url:
        for n in sizes:
            print(burst_line("agents direct (pipes)", n, asyncio.run(stdio_burst(n))), flush=True)
            print(burst_line("serve initialize POST", n, asyncio.run(http_burst(url, n))))
    print(f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})")


@contextmanager
def serve(
    args: list[str], agent: list[str] | None = AGENT, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``acp-proxy serve`` from PATH (``env``: e.g. a PYTHONPATH selecting other code)."""
    exe = shutil.which("acp-proxy")
    if exe is None:
        raise SystemExit("acp-proxy is not installed: pip install -e .")
    argv = [exe, "serve", "--listen", "127.0.0.1:0", "--heartbeat", "0", *args]
    with listening(argv + (["--", *agent] if agent else []), env) as url:
        yield url


class _Pipe(asyncio.Protocol):
    """One side of :func:`tcp_relay`: bytes in on one socket go out on the other."""

    def __init__(self, target: tuple[str, int], other: _Pipe | None = None) -> None:
        self.target, self.other = target, other
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.other is None:  # a client came: dial the target, then read
            transport.pause_reading()
            self.dialing = asyncio.ensure_future(self._dial())

    async def _dial(self) -> None:
        loop = asyncio.get_running_loop()
        _, self.other = await loop.create_connection(lambda: _Pipe(self.target, self), *self.target)
        assert self.transport is not None
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        assert self.other is not None and self.other.transport is not None
        self.other.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()


async def tcp_relay(url: str) -> None:
    """``--tcp-relay URL``: relay TCP bytes to URL's host:port, nothing parsed or recorded
    (asyncio protocols, the cheapest a Python hop gets): the floor of a second process."""
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Pipe((host, int(port))), "127.0.0.1", 0)
    bound = server.sockets[0].getsockname()
    print(f"listening on http://127.0.0.1:{bound[1]}/acp", file=sys.stderr, flush=True)
    await asyncio.Event().wait()


@contextmanager
def sdk_server() -> Iterator[str]:
    """The SDK peer on the SDK's own server (uvicorn): the direct network baseline."""
    with listening([*SDK_AGENT, "--serve"]) as url:
        yield url


@contextmanager
def listening(argv: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``argv`` until the block ends; the URL it prints on stderr."""
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    assert proc.stderr is not None
    try:
        for line in iter(proc.stderr.readline, b""):
            match = URL_RE.search(line)
            if match:
                url = match.group(1).decode()
                PIDS[url] = proc.pid
                yield url
                break
        else:
            raise SystemExit("acp-proxy serve did not start")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20000, help="notifications per flood")
    parser.add_argument("--rtt", type=int, default=1000, help="round trips for latency")
    parser.add_argument("--sdk-frames", type=int, default=5000, help="per flood, SDK peer")
    parser.add_argument("--burst", help="initialize bursts instead, e.g. 10,50,200")
    parser.add_argument(
        "--base", metavar="DIR", help="also run each serve row with PYTHONPATH=DIR (A/B)"
    )
    parser.add_argument("--half", choices=["http", "ws", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=1, help="repeat; print the medians")
    parser.add_argument("--tcp-relay", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.burst:
        run_bursts([int(n) for n in args.burst.split(",")])
        return 0
    if args.tcp_relay:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(tcp_relay(args.tcp_relay))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench_http_"))
    results: dict[str, list[tuple[float, float, float, float, float]]] = {}
    bases: dict[str, str] = {}
    halves = ["http", "ws"] if args.half == "both" else [args.half]
    variants: list[tuple[str, dict[str, str] | None]] = [("", None)]
    if args.base:
        base_env = {**os.environ, "PYTHONPATH": str(Path(args.base).resolve())}
        variants.append((" (base)", base_env))

    def run(name: str, base: str, peer: Stdio | Http | Ws, prefix: str = "") -> None:
        frames = args.sdk_frames if prefix else args.frames
        pid = PIDS.get(peer.url) if isinstance(peer, Http) else None
        if isinstance(peer, Ws):
            pid = PIDS.get("http://" + peer.url.removeprefix("ws://"))
        fps, p50, p99, cpu_f, cpu_r = asyncio.run(measure(peer, frames, args.rtt, prefix, pid))
        results.setdefault(name, []).append((fps, p50, p99, cpu_f, cpu_r))
        bases[name] = base
        print(
            f"  {name:<40} {fps:>10,.0f} frames/s  p50 {p50:>7.0f} us  p99 {p99:>7.0f} us"
            f"  load {os.getloadavg()[0]:.1f}",
            file=sys.stderr,
        )

    def peers(url: str, name: str, base: str, prefix: str) -> None:
        for half in halves:
            peer = Http(url) if half == "http" else Ws(url)
            if base:
                run(f"{name} {half}", f"{base} {half} (direct)", peer, prefix)
            else:
                run(f"{name} {half} (direct)", "", peer, prefix)

    print(f"bench_http: {args.frames} notifications, {args.rtt} round trips", file=sys.stderr)
    for _ in range(args.rounds):
        # 1. The issue's baseline: the same SDK peers connected directly, over the network.
        with sdk_server() as url:
            peers(url, "sdk server", "", "_")
            with listening([sys.executable, __file__, "--tcp-relay", url]) as relay:
                peers(relay, "tcp relay (floor)", "sdk server", "_")
            for suffix, env in variants:
                up = ["--record", str(tmp / "up.db"), "--upstream", url]
                with serve(up, None, env) as proxy:
                    peers(proxy, f"serve --upstream --record{suffix}", "sdk server", "_")
        for suffix, env in variants:
            with serve(["--record", str(tmp / "sdk.db")], SDK_AGENT, env) as url:
                peers(url, f"serve --record -- sdk agent{suffix}", "sdk server", "_")
        # 2. The proxy's own cost: a raw stdio peer, against its pipes (not a network baseline).
        run("stdio direct", "", Stdio())
        for suffix, env in variants:
            with serve([], AGENT, env) as url:
                peers(url, f"serve{suffix}", "stdio", "")
            with serve(["--record", str(tmp / "rec.db")], AGENT, env) as url:
                peers(url, f"serve --record{suffix}", "stdio", "")
    shutil.rmtree(tmp, ignore_errors=True)
    medians = {
        name: tuple(statistics.median(column) for column in zip(*rows, strict=True))
        for name, rows in results.items()
    }
    header = (
        f"{'path':<40} {'frames/s':>9} {'x base':>6} {'p50 us':>7} {'p99 us':>7} "
        f"{'x base':>6} {'cpu/fr':>6} {'cpu/rt':>6}"
    )
    print(header)
    print("-" * len(header))
    for name, (fps, p50, p99, cpu_f, cpu_r) in medians.items():
        ref = medians.get(_direct(bases[name]))
        fx = f"{fps / ref[0]:>6.2f}" if ref else f"{'':>6}"
        px = f"{p50 / ref[1]:>6.2f}" if ref else f"{'':>6}"
        cpu = f"{cpu_f:>6.1f} {cpu_r:>6.0f}" if name != "stdio direct" else ""
        print(f"{name:<40} {fps:>9,.0f} {fx} {p50:>7.0f} {p99:>7.0f} {px} {cpu}")
    print(
        "x base: against the row named 'direct' of the same half (sdk server, or stdio);"
        " cpu/fr, cpu/rt:\nCPU us of the server process tree (the SDK server, or serve"
        " and what it started) per\nframe of the flood and per round trip"
        + (f"; medians of {args.rounds} rounds" if args.rounds > 1 else "")
        + (f"; (base): PYTHONPATH={args.base}" if args.base else "")
    )
    print(f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})")
    return 0


def _direct(base: str) -> str:
    """The row a ratio is against: ``sdk server http (direct)``, or ``stdio direct``."""
    return "stdio direct" if base.startswith("stdio") else base


if __name__ == "__main__":
    sys.exit(main())
