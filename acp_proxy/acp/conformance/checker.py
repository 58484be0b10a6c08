"""The conformance engine behind ``acp-proxy check`` (sans-I/O, streaming).

Feed a :class:`ConnectionChecker` one connection's frames in order and call
:meth:`ConnectionChecker.finish` at the end; each call returns the :class:`Finding` objects
it produced. Rules are the table in :mod:`acp_proxy.acp.rules`; the checker keeps only open
state (pending requests, sessions' current work, entity ids, a few recent notifications) so
memory does not grow with the length of a recording, and at most ``max_per_rule`` findings
per rule and connection (the rest are only counted).

Each finding names the side that broke the rule (``client`` or ``agent``), every frame it
is about, and quotes the rule as it applies to that side; close findings of one rule and
side are grouped into one that names all their frames (:data:`GROUP_GAP`).

Requests are paired with responses, and ``initialize`` read, by
:mod:`acp_proxy.acp.exchanges` (per direction, exact id text, a bounded window for
responses recorded before their request), as in every other reader. Version-specific rules
follow the negotiated protocol version (the agent's answer wins; no initialize means v1);
the ``session/update`` variant lists are those of :mod:`acp_proxy.acp.updates`.

The checker is built from one class per area, each on the one before: findings (reporting),
state, fields, capabilities (a table), sessions, framing (and the JSON-RPC layer).
"""

from __future__ import annotations

from collections import OrderedDict, deque

from acp_proxy.acp.conformance.findings import GROUP_GAP, Finding, _side, frames_text
from acp_proxy.acp.conformance.framing import MAX_LINE_BYTES, RECENT_NOTIFICATIONS, FramingChecks
from acp_proxy.acp.exchanges import Exchanges, InitializeFacts
from acp_proxy.acp.rules import TIERS
from acp_proxy.acp.turns import TurnTracker
from acp_proxy.wire.frame import A2C, C2A, Frame

__all__ = ["MAX_LINE_BYTES", "ConnectionChecker", "Finding", "frames_text"]


class ConnectionChecker(FramingChecks):
    """Checks one connection's frames against the rule table, streaming.

    ``transport`` (``stdio``, ``websocket``...) enables the line-ending rules for stdio;
    ``frames_dropped`` (from the connection row) adds a ``recording.incomplete`` note.
    """

    def __init__(
        self,
        connection_id: int,
        *,
        transport: str | None = None,
        frames_dropped: int = 0,
        max_per_rule: int = 100,
    ) -> None:
        self.connection_id = connection_id
        self.transport = transport
        self.max_per_rule = max_per_rule
        self.frames = 0
        self.counts = dict.fromkeys(TIERS, 0)
        self.per_rule = {}
        self.suppressed = {}
        self.facts = InitializeFacts()
        self._first_seen = False
        # early responses are held as (seq, message)
        self._exchanges = Exchanges()
        self._pending = self._exchanges.pending  # the same dict, read here often
        self._answered = OrderedDict()
        self._sessions = {}
        self._out = []
        self._sender = None
        self._group = None
        self._run = None
        self._now_ns = 0
        # each side's answers with id null paired by time since the other side's last
        # notification: (frame count, ns, the notification it is paired with)
        self._null_runs = {
            C2A: [],
            A2C: [],
        }
        # each side's latest notifications not yet answered
        self._notifications = {
            C2A: deque(maxlen=RECENT_NOTIFICATIONS),
            A2C: deque(maxlen=RECENT_NOTIFICATIONS),
        }
        self._turns = TurnTracker()
        self._finished = False
        if frames_dropped:
            self._report(
                "recording.incomplete",
                (),
                f"{frames_dropped} frame(s) of this connection were not recorded",
            )

    # -- public API ------------------------------------------------------------------------

    @property
    def negotiated_version(self) -> int | None:
        """The protocol version from ``initialize`` (result, else request); None if unseen."""
        return self.facts.protocol_version

    def feed(self, frame: Frame) -> list[Finding]:
        """Check one frame; return the findings it produced (possibly none)."""
        seq, direction, raw, mono_ns = frame.seq, frame.direction, frame.raw, frame.mono_ns
        self.frames += 1
        self._now_ns = mono_ns
        self._sender = _side(direction)
        if frame.binary:
            self._report("framing.binary", (seq,), f"binary WebSocket frame of {len(raw)} bytes")
            return self._take()
        self._frame(seq, direction, raw)
        self._orphans(self._exchanges.tick())
        if self._group is not None and self.frames - self._group.last > GROUP_GAP:
            self._flush_group()
        if self._run is not None and self.frames - self._run.at > GROUP_GAP:
            self._flush_run()
        return self._take()

    def finish(self) -> list[Finding]:
        """End of the connection: report what never completed."""
        if self._finished:
            return []
        self._finished = True
        self._sender = None
        self._finish_requests()
        self._finish_sessions()
        self._flush_run()
        return self._take()
