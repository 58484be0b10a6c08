"""Request latency, turn duration and time to first agent chunk, for ``--metrics``.

Measured in the writer (off the forwarding path) from the frame rows it builds anyway: a
request row and its response row (paired by the indexer, which puts the request's method
on the response) give a request's duration, by the proxy's monotonic clock at forwarding.
A ``session/prompt`` is a turn; its first ``agent_message_chunk`` update gives the time to
first chunk. The method label is one of :data:`SPEC_METHODS` or ``other``, so a peer
inventing method names cannot make the label set grow. The histograms travel to the proxy
as a snapshot (:meth:`Timings.snapshot`), a plain JSON-able dict.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import Any

from acp_proxy.recorder.writer.rows import ControlOp, Op, RowsOp
from acp_proxy.wire.frame import A2C, C2A

SPEC_METHODS = frozenset(
    {
        "$/cancel_request",
        "auth/login",
        "auth/logout",
        "authenticate",
        "document/didChange",
        "document/didClose",
        "document/didFocus",
        "document/didOpen",
        "document/didSave",
        "elicitation/complete",
        "elicitation/create",
        "fs/read_text_file",
        "fs/write_text_file",
        "initialize",
        "logout",
        "mcp/connect",
        "mcp/disconnect",
        "mcp/message",
        "nes/accept",
        "nes/close",
        "nes/reject",
        "nes/start",
        "nes/suggest",
        "providers/disable",
        "providers/list",
        "providers/set",
        "session/cancel",
        "session/close",
        "session/delete",
        "session/fork",
        "session/list",
        "session/load",
        "session/new",
        "session/prompt",
        "session/request_permission",
        "session/resume",
        "session/set_config_option",
        "session/set_mode",
        "session/update",
        "terminal/create",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
        "terminal/wait_for_exit",
    }
)
"""Every method of the ACP schemas (v1, v1 unstable, v2 ``meta.json``): the label values."""

OTHER = "other"

REQUEST_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Upper bounds (seconds) of the request duration histogram: a ping to a long turn."""

TURN_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
FIRST_CHUNK_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)

PENDING_LIMIT = 4096
"""Unanswered requests remembered per connection (the oldest forgotten past it)."""

# frame row columns (recorder/writer/rows.py): ..., mono 3, direction 4, ..., kind 8, rpc_id 9,
# method 10, session_id 11, update_kind 12
_MONO, _DIRECTION, _KIND, _ID, _METHOD, _SESSION, _UPDATE = 3, 4, 8, 9, 10, 11, 12


class Histogram:
    """Counts per bucket (not cumulative), their sum and count."""

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.total += seconds
        self.count += 1

    def snapshot(self) -> dict[str, Any]:
        return {"bounds": list(self.bounds), "counts": list(self.counts), "sum": self.total}


class _Pending:
    """One connection's unanswered requests and open turns."""

    __slots__ = ("first_chunk", "requests")

    def __init__(self) -> None:
        self.requests: OrderedDict[tuple[str, Any], tuple[str, int]] = OrderedDict()
        self.first_chunk: dict[Any, int] = {}  # session -> prompt sent (no chunk seen yet)


def method_label(method: Any) -> str:
    """``method`` if the spec has it, else ``other``."""
    return method if isinstance(method, str) and method in SPEC_METHODS else OTHER


class Timings:
    """The writer's histograms, fed with the frame rows of each batch."""

    def __init__(self) -> None:
        self.requests: dict[str, Histogram] = {}
        self.turns = Histogram(TURN_BUCKETS)
        self.first_chunk = Histogram(FIRST_CHUNK_BUCKETS)
        self._pending: dict[Any, _Pending] = {}
        self.changes = 0  # observations so far (a snapshot is worth sending when it grew)

    def observe_ops(self, ops: list[Op]) -> None:
        """Take one batch of the writer's operations (frame rows and connection changes)."""
        for op in ops:
            if type(op) is RowsOp:
                if op.frames:
                    self.observe(op.conn, op.frames)
            elif type(op) is ControlOp and op.op == "close":
                self.closed(op.conn)

    def observe(self, conn: Any, rows: list[tuple[Any, ...]]) -> None:
        """Take the frame rows of one connection, in order."""
        pending = self._pending.get(conn)
        if pending is None:
            pending = self._pending[conn] = _Pending()
        for row in rows:
            kind = row[_KIND]
            if kind == "request":
                key = (row[_DIRECTION], row[_ID])
                method = row[_METHOD]
                pending.requests[key] = (method_label(method), row[_MONO])
                if len(pending.requests) > PENDING_LIMIT:
                    pending.requests.popitem(last=False)
                if method == "session/prompt" and row[_DIRECTION] == C2A:
                    pending.first_chunk[row[_SESSION]] = row[_MONO]
            elif kind == "response":
                asked = A2C if row[_DIRECTION] == C2A else C2A
                found = pending.requests.pop((asked, row[_ID]), None)
                if found is None:
                    continue
                label, sent = found
                seconds = max(0, row[_MONO] - sent) / 1e9
                histogram = self.requests.get(label)
                if histogram is None:
                    histogram = self.requests[label] = Histogram(REQUEST_BUCKETS)
                histogram.observe(seconds)
                if label == "session/prompt" and asked == C2A:
                    self.turns.observe(seconds)
                    pending.first_chunk.pop(row[_SESSION], None)
                self.changes += 1
            elif kind == "notification" and row[_UPDATE] == "agent_message_chunk":
                prompted = pending.first_chunk.pop(row[_SESSION], None)
                if prompted is not None:
                    self.first_chunk.observe(max(0, row[_MONO] - prompted) / 1e9)
                    self.changes += 1

    def closed(self, conn: Any) -> None:
        """The connection ended: forget what it left unanswered."""
        self._pending.pop(conn, None)

    def snapshot(self) -> dict[str, Any]:
        """The histograms as plain data (what the writer process sends to the proxy)."""
        return {
            "requests": {label: h.snapshot() for label, h in sorted(self.requests.items())},
            "turns": self.turns.snapshot(),
            "first_chunk": self.first_chunk.snapshot(),
        }
