"""The counters the forwarding paths keep for ``--metrics``: plain integer increments.

Each key is incremented by one thread only (a pump thread per direction for stdio, the
event loop for WebSocket and HTTP), so a ``+=`` needs no lock; a scrape
(:mod:`acp_proxy.transport.metrics`) reads them as they are. Nothing here imports
prometheus_client: forwarding never calls into it. A bottom layer (beside console), so the
recorder's connection handles, which every transport calls, can count too.
"""

from __future__ import annotations

from collections import defaultdict


class Forwarded:
    """Frames and bytes forwarded in one direction."""

    __slots__ = ("frames", "nbytes")

    def __init__(self) -> None:
        self.frames = 0
        self.nbytes = 0

    def lines(self, data: bytes) -> None:
        """A chunk of a newline-framed stream was forwarded: count its bytes and its lines."""
        self.nbytes += len(data)
        self.frames += data.count(b"\n")

    def frame(self, nbytes: int) -> None:
        """One whole message (WebSocket, HTTP) of ``nbytes`` was forwarded."""
        self.nbytes += nbytes
        self.frames += 1

    def messages(self, raws: list[bytes]) -> None:
        """Whole messages forwarded together."""
        self.nbytes += sum(map(len, raws))
        self.frames += len(raws)


class Counters:
    """Everything the process counts while forwarding, by direction and by transport."""

    def __init__(self) -> None:
        self.enabled = False  # set by --metrics; off, the transports skip counting
        self.forwarded: defaultdict[str, Forwarded] = defaultdict(Forwarded)
        self.connections_open: defaultdict[str, int] = defaultdict(int)
        self.connections_total: defaultdict[str, int] = defaultdict(int)

    def opened(self, transport: str) -> None:
        """A connection of ``transport`` (stdio, websocket, http) began."""
        self.connections_open[transport] += 1
        self.connections_total[transport] += 1

    def closed(self, transport: str) -> None:
        """A connection of ``transport`` ended."""
        self.connections_open[transport] -= 1


COUNTERS = Counters()
"""The process's counters (one process serves one ``--metrics`` endpoint)."""
