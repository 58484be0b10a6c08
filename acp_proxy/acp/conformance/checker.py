"""The conformance engine behind ``acp-proxy check`` (sans-I/O, streaming).

Feed a :class:`ConnectionChecker` one connection's frames in order
(:meth:`~ConnectionChecker.feed`, or :meth:`~ConnectionChecker.feed_rows` for a reader's rows)
and call :meth:`ConnectionChecker.finish` at the end; each call returns the :class:`Finding`
objects it produced. Rules are the table in :mod:`acp_proxy.acp.rules`; the checker keeps
only open state (pending requests, sessions' current work, entity ids, a few recent
notifications) so memory does not grow with the length of a recording but for the entity ids
that must not be reused, and at most ``max_per_rule`` findings per rule and connection (the
rest are only counted).

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
from collections.abc import Iterable
from typing import Any

import orjson

from acp_proxy.acp.conformance.findings import GROUP_GAP, Finding, frames_text
from acp_proxy.acp.conformance.framing import MAX_LINE_BYTES, RECENT_NOTIFICATIONS, FramingChecks
from acp_proxy.acp.conformance.state import FrameTimes
from acp_proxy.acp.exchanges import Exchanges, InitializeFacts
from acp_proxy.acp.rules import TIERS
from acp_proxy.acp.turns import TurnTracker
from acp_proxy.acp.updates import ENTITY_OF_UPDATE
from acp_proxy.wire.frame import (
    A2C,
    C2A,
    KEY_BINARY,
    KEY_C2A,
    KEY_OTHER,
    KEY_SHIFT,
    Frame,
    wire_key,
)
from acp_proxy.wire.surrogates import UNPARSED

Row = tuple[int, bytes]
"""A frame as :meth:`ConnectionChecker.feed_rows` takes it: its
:func:`~acp_proxy.wire.frame.wire_key` (sequence number, direction, binary flag) and raw
bytes. Its time is asked for only when a finding names it (:data:`FrameTimes`)."""

_CHUNK_ENTITIES = {
    variant: ENTITY_OF_UPDATE[variant][0]
    for variant in ("agent_message_chunk", "agent_thought_chunk")
}
"""The variants :meth:`ConnectionChecker.feed_rows` checks in line, with their entity
type."""

_FORGOTTEN: Any = object()
""":meth:`ConnectionChecker.feed_rows`' last session id when no chunk was taken in line."""


__all__ = [
    "MAX_LINE_BYTES",
    "ConnectionChecker",
    "DamagedFrame",
    "Finding",
    "FrameTimes",
    "frames_text",
]


class DamagedFrame(ValueError):
    """A row no recorder writes (a recording edited or damaged by hand): the message names
    the frame."""


class ConnectionChecker(FramingChecks):
    """Checks one connection's frames against the rule table, streaming.

    ``transport`` (``stdio``, ``websocket``...) enables the line-ending rules for stdio;
    ``frames_dropped`` (from the connection row) adds a ``recording.incomplete`` note.
    ``frame_times`` gives the times of the frames a finding names (a response with id null
    paired by time says how long after its notification it came): :meth:`feed_rows`' rows
    carry none; without it those of the frames :meth:`feed` was given, else none is named.
    """

    fast_path = True
    """Whether :meth:`feed_rows` may take its short path (tests compare both ways)."""

    def __init__(
        self,
        connection_id: int,
        *,
        transport: str | None = None,
        frames_dropped: int = 0,
        max_per_rule: int = 100,
        frame_times: FrameTimes | None = None,
    ) -> None:
        self.connection_id = connection_id
        self.frame_times = frame_times
        self._fed_ns = {}
        self.transport = transport
        self.max_per_rule = max_per_rule
        self.frames = 0
        self.last_seq = 0
        self.counts = dict.fromkeys(TIERS, 0)
        self.per_rule = {}
        self.suppressed = {}
        self.facts = InitializeFacts()
        self.effective_version = 1
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
        # each side's answers with id null paired by time since the other side's last
        # notification: (frame count, seq, the notification it is paired with)
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
        """Check one frame; return the findings it produced (possibly none). The times of
        the last frames fed are kept, for the findings that name them (no finding names a
        frame :data:`GROUP_GAP` x 3 frames before the one that made it)."""
        fed = self._fed_ns
        fed[frame.seq] = frame.mono_ns
        if len(fed) > 4 * GROUP_GAP:
            del fed[next(iter(fed))]
        key = wire_key(frame.seq, frame.direction, frame.binary)
        return self.feed_rows(((key, frame.raw),))

    def feed_rows(self, rows: Iterable[Row]) -> list[Finding]:
        """Check frames given as ``(key, raw)`` rows (``key``: the frame's
        :func:`~acp_proxy.wire.frame.wire_key`; a reader's cursor: no :class:`Frame` built per
        frame); return the findings they produced. A direction neither ``c2a`` nor ``a2c``
        raises :class:`DamagedFrame`.

        The same findings as :meth:`feed` frame by frame. Each frame is parsed once. The bulk
        of a recording, the agent's ``session/update`` notifications, takes a short path (no
        :class:`~acp_proxy.wire.jsonrpc.Message`; a message or thought chunk that can break
        no rule is checked here in line); every other frame takes the general one.

        The short path reads the frame as orjson parsed it, and orjson refuses lone
        surrogates: its strings are those :func:`~acp_proxy.wire.surrogates.classify_encodable`
        gives but for NUL, which that escapes. A frame holding an escaped NUL takes the general
        path, but for a chunk, which must name a known session (a session id holding NUL is
        none: its key holds the escape) and, on v2, a messageId without one.
        """
        loads = orjson.loads
        fast = self.fast_path
        stdio = self.transport == "stdio"
        a2c_notes = self._notifications[A2C]
        c2a_null_run = self._null_runs[C2A]
        sessions = self._sessions
        # what the general path alone changes, read again after it ran
        v2 = self.effective_version >= 2
        short = fast and self._first_seen
        frames = self.frames
        seq = self.last_seq
        # the frame count from which the end-of-frame bookkeeping (held responses, grouped
        # findings) has work to do; only a frame off the in-line path changes it
        due = self._due(frames)
        # the last chunk taken in line, until a frame off that path (_FORGOTTEN: none, and
        # equal to no session id, nor to the None of a frame that is no update)
        last_sid: Any = _FORGOTTEN
        last_variant: str | None = None
        last_mid: Any = None
        max_bytes = MAX_LINE_BYTES
        shift = KEY_SHIFT
        for key, raw in rows:
            frames += 1
            if key >= 0:  # the agent's, text: the key is its sequence number
                seq = key
                size = len(raw)
                if (
                    short
                    and size <= max_bytes
                    and (not stdio or (size > 1 and raw[-1] == 10 and raw[-2] != 13))
                ):
                    try:
                        value = loads(raw)
                    except orjson.JSONDecodeError:
                        value = UNPARSED
                    else:
                        try:  # (subscripts: a missing key or a non-object is the same no)
                            if (
                                len(value) == 3  # jsonrpc, method, params
                                and value["method"] == "session/update"
                                and value["jsonrpc"] == "2.0"
                            ):
                                params = value["params"]
                                sid = params["sessionId"]
                                update = params["update"]
                                variant: Any = update["sessionUpdate"]  # (update: a dict)
                            else:
                                sid = None
                        except (KeyError, TypeError):
                            sid = None
                        if (
                            sid == last_sid  # (then a str: update a dict, as read above)
                            and variant == last_variant
                            and update.get("messageId") == last_mid
                        ):
                            # the chunk before's message: nothing the general path
                            # changes has changed, and what it noted is noted
                            taken = True
                        elif type(sid) is not str or type(variant) is not str:
                            taken = False
                        elif variant in _CHUNK_ENTITIES:
                            taken = self._chunk(seq, sid, variant, update, v2)
                            if taken:
                                last_sid, last_variant = sid, variant
                                last_mid = update.get("messageId")
                        elif b"\\u0000" not in raw:
                            taken = None  # another update: the session rules take it
                        else:
                            taken = False
                        if taken is not False:
                            # (_notified, in line)
                            a2c_notes.append((seq, variant, frames))
                            if c2a_null_run:
                                c2a_null_run.clear()
                            if taken is None:
                                self._sender = "agent"
                                self.frames = frames
                                run = self._run
                                s = sessions.get(sid)
                                if s is None:
                                    s = self._session(sid)
                                self._update(seq, s, variant, update)
                                last_sid = _FORGOTTEN
                                if self._run is not run:  # a finding: due again
                                    due = frames
                            if frames < due:
                                continue
                            self._sender = "agent"
                            self.frames = frames
                            self._end_of_frame(frames)
                            due = self._due(frames)
                            last_sid = _FORGOTTEN
                            continue
                else:
                    value = UNPARSED
                bits = 0
            else:
                bits = -key
                seq = bits >> shift
                value = UNPARSED
            if bits & KEY_OTHER:
                raise DamagedFrame(f"frame #{seq}: a direction neither c2a nor a2c")
            direction = C2A if bits & KEY_C2A else A2C
            self._sender = "client" if direction == C2A else "agent"
            self.frames = frames
            if bits & KEY_BINARY:
                self._report(
                    "framing.binary", (seq,), f"binary WebSocket frame of {len(raw)} bytes"
                )
                due = self._due(frames)  # (no end-of-frame bookkeeping after it)
                last_sid = _FORGOTTEN
                continue
            self._frame(seq, direction, raw, value)
            v2 = self.effective_version >= 2
            short = fast and self._first_seen
            self._end_of_frame(frames)
            due = self._due(frames)
            last_sid = _FORGOTTEN
        if frames != self.frames:  # as the frame-by-frame path leaves them
            self.frames = frames
            self._sender = "client" if key < 0 and -key & KEY_C2A else "agent"
        self.last_seq = seq
        return self._take()

    def _chunk(self, seq: int, sid: str, variant: str, update: dict[str, Any], v2: bool) -> bool:
        """A message or thought chunk that can break no rule (else the general path reports
        it): note the work it belongs to (v2), as :meth:`_update` does, and say True; False,
        having changed nothing, when the general path must take it."""
        s = self._sessions.get(sid)
        if s is None or s.window is not None:
            return False
        if v2:
            mid = update.get("messageId")
            if type(mid) is not str or not mid or "\0" in mid:
                return False
            entity = (_CHUNK_ENTITIES[variant], mid)
            if s.cancelled_entities and entity in s.cancelled_entities:
                return False
            if s.activity_seq is None:
                s.activity_seq = seq
            if s.state == "running" or s.state == "requires_action":
                s.work_entities.add(entity)
            return True
        return s.after is None and (s.turn_ended_seq is None or sid in self._turns.open)

    def _due(self, frames: int) -> int:
        """The frame count from which :meth:`_end_of_frame` has work to do (``frames + 1``:
        the next frame, while a response is held)."""
        if self._exchanges.held:
            return frames + 1
        due = frames + 1 + 10 * GROUP_GAP  # (anything past the next checks)
        if self._group is not None:
            due = min(due, self._group.last + GROUP_GAP + 1)
        if self._run is not None:
            due = min(due, self._run.at + GROUP_GAP + 1)
        return due

    def _end_of_frame(self, frames: int) -> None:
        """After each frame: held early responses age, and findings grouped while close are
        reported once no frame of theirs came for :data:`GROUP_GAP` frames."""
        if self._exchanges.held:
            self._orphans(self._exchanges.tick())
        if self._group is not None and frames - self._group.last > GROUP_GAP:
            self._flush_group()
        if self._run is not None and frames - self._run.at > GROUP_GAP:
            self._flush_run()

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
