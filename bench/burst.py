"""Handshake bursts for the benchmarks: N connections opened at once, each one's open time.

:func:`handshake_burst` starts ``n`` opens together and returns how long each took from the
common start (seconds); every connection stays open until all are, so N agents (or N
sockets) are alive at the same time, as in a gateway's burst. :func:`burst_line` formats
p50/max for one burst size.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

Closer = Callable[[], Awaitable[object]]
Opener = Callable[[], Awaitable[Closer]]
"""Opens one connection (a WebSocket upgrade, an ``initialize`` POST); returns its closer."""


async def handshake_burst(n: int, opener: Opener) -> list[float]:
    """Open ``n`` connections at once; the seconds each took, from the common start."""
    start = time.perf_counter()

    async def one() -> tuple[float, Closer]:
        closer = await opener()
        return time.perf_counter() - start, closer

    opened = await asyncio.gather(*(one() for _ in range(n)))
    await asyncio.gather(*(closer() for _, closer in opened), return_exceptions=True)
    return sorted(took for took, _ in opened)


def burst_line(name: str, n: int, times: list[float]) -> str:
    """``name``, the burst size and its p50/max in milliseconds."""
    p50, most = statistics.median(times) * 1e3, max(times) * 1e3
    return f"{name:<30} {n:>5} {p50:>10.0f} {most:>10.0f}"


BURST_HEADER = f"{'path':<30} {'burst':>5} {'p50 ms':>10} {'max ms':>10}"
