"""What the writer measures for ``--metrics``: durations, live protocol findings, OTLP counts.

Fed in the writer's rows thread with the operations of each batch (the frame rows it built
anyway), so nothing here runs on a forwarding path. :class:`Measures` holds the
:class:`~acp_proxy.recorder.writer.timings.Timings` histograms and, when the live check is on
(:data:`LIVE_CHECK_ENV`), one :class:`~acp_proxy.acp.conformance.ConnectionChecker` per open
connection, fed the stored rows in order, so its findings are those ``acp-proxy check``
finds on the recording. They are counted by rule id (a closed set: the rule table), tier and
side. :meth:`Measures.snapshot` is plain JSON-able data; the writer process sends it to the
proxy on its progress channel (:func:`~acp_proxy.recorder.ipc.measures_line`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from acp_proxy.recorder.writer.rows import ControlOp, Op, RowsOp, RowState
from acp_proxy.recorder.writer.switches import LIVE_CHECK_ENV
from acp_proxy.recorder.writer.timings import Timings
from acp_proxy.wire.frame import wire_key

if TYPE_CHECKING:  # imported when the live check starts (not at the proxy's start-up)
    from acp_proxy.acp.conformance import ConnectionChecker, Finding


RECORDER_SIDE = "recorder"
"""The side label of findings about the recording itself (no peer broke a rule)."""

INCOMPLETE = "recording.incomplete"


def live_check_wanted(env: dict[str, str] | None = None) -> bool:
    """Whether the environment asks the writer for the live conformance check."""
    return (os.environ if env is None else env).get(LIVE_CHECK_ENV) == "1"


class LiveFindings:
    """The conformance checker run live, one per open connection; findings counted."""

    def __init__(self) -> None:
        from acp_proxy.acp.conformance import ConnectionChecker, Finding
        from acp_proxy.acp.rules import RULE_BY_ID

        self._new_checker = ConnectionChecker
        self._finding = Finding
        self._incomplete_tier = RULE_BY_ID[INCOMPLETE].tier
        self._checkers: dict[RowState, ConnectionChecker] = {}
        self._transports: dict[RowState, str | None] = {}
        self.counts: dict[tuple[str, str, str], int] = {}  # (rule, tier, side) -> findings
        self.changes = 0
        self.cpu = 0.0  # CPU seconds spent checking (the rows thread's)

    def _count(self, findings: list[Finding]) -> None:
        for f in findings:
            key = (f.rule, f.tier, f.side or RECORDER_SIDE)
            self.counts[key] = self.counts.get(key, 0) + 1
            self.changes += 1

    def _checker(self, conn: RowState) -> ConnectionChecker:
        checker = self._checkers.get(conn)
        if checker is None:
            # every finding is returned (and counted): check's cap only limits what it prints
            transport = self._transports.get(conn)
            checker = self._new_checker(0, transport=transport, max_per_rule=1 << 62)
            self._checkers[conn] = checker
        return checker

    def rows(self, conn: RowState, rows: list[tuple[Any, ...]]) -> None:
        """Check one connection's frame rows, in order."""
        checker = self._checker(conn)
        # (cid, seq, ts, mono_ns, direction, raw, size, binary, ...) -> feed_rows' rows. No
        # times: findings are only counted here (a finding's text names none without them)
        found = checker.feed_rows((wire_key(r[1], r[4], r[7]), bytes(r[5])) for r in rows)
        if found:
            self._count(found)

    def opened(self, conn: RowState, fields: dict[str, Any]) -> None:
        transport = fields.get("transport")
        self._transports[conn] = transport if isinstance(transport, str) else None

    def closed(self, conn: RowState) -> None:
        """The connection ended: its end-of-connection rules, then it is forgotten."""
        checker = self._checker(conn)
        found = checker.finish()
        if conn.losses.frames:  # check notes a connection with frames not recorded
            found.append(self._finding(INCOMPLETE, self._incomplete_tier, 0, (), "not recorded"))
        self._count(found)
        self._checkers.pop(conn, None)
        self._transports.pop(conn, None)

    def snapshot(self) -> list[list[Any]]:
        return [[rule, tier, side, n] for (rule, tier, side), n in sorted(self.counts.items())]


class Measures:
    """The writer's figures for ``--metrics``, fed each batch's operations."""

    def __init__(
        self,
        *,
        live_check: bool | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.timings = Timings()
        wanted = live_check_wanted() if live_check is None else live_check
        self.findings = LiveFindings() if wanted else None
        self.otlp: Any = None  # the live OTLP exporter (its sent and dropped counts), if any
        self.stopped = False  # a failure stopped measuring (the figures so far stay)
        self._warn = warn

    def observe_ops(self, ops: list[Op]) -> None:
        """Take one batch of the writer's operations (frame rows and connection changes).

        A failure here stops measuring, with one line; it never stops the recording."""
        if self.stopped:
            return
        try:
            self._observe_ops(ops)
        except Exception as exc:
            self.stopped = True
            if self._warn is not None:
                self._warn(f"metrics: live measures stopped ({type(exc).__name__}: {exc})")

    def _observe_ops(self, ops: list[Op]) -> None:
        self.timings.observe_ops(ops)
        findings = self.findings
        if findings is None:
            return
        cpu = time.thread_time()
        for op in ops:
            if type(op) is RowsOp:
                if op.frames:
                    findings.rows(op.conn, op.frames)
            elif type(op) is ControlOp:
                if op.op == "open":
                    findings.opened(op.conn, op.fields)
                elif op.op == "close":
                    findings.closed(op.conn)
        findings.cpu += time.thread_time() - cpu
        findings.changes += 1  # its CPU time grew

    @property
    def changes(self) -> int:
        """Grows whenever :meth:`snapshot` would say something new."""
        n = self.timings.changes
        if self.findings is not None:
            n += self.findings.changes
        otlp = self.otlp
        if otlp is not None:
            n += otlp.sent + otlp.dropped
        return n

    def snapshot(self) -> dict[str, Any]:
        """Everything as plain data (what the writer process sends to the proxy)."""
        out: dict[str, Any] = {"timings": self.timings.snapshot()}
        if self.findings is not None:
            out["findings"] = self.findings.snapshot()
            out["check_cpu"] = round(self.findings.cpu, 3)
        otlp = self.otlp
        if otlp is not None:
            out["otlp"] = {"exported": otlp.sent, "dropped": otlp.dropped}
        return out
