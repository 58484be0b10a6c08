"""Framing and JSON-RPC checks: lines, envelopes, and requests paired with their responses.

:class:`FramingChecks` checks a frame's bytes (size, line ends, UTF-8, JSON), the JSON-RPC
envelope and batches, pairs requests with responses (exact id text, a bounded window for
responses recorded before their request) and names the notification a response with
``"id": null`` answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from acp_proxy.acp.conformance.findings import GROUP_GAP, _side
from acp_proxy.acp.conformance.sessions import SessionChecks
from acp_proxy.acp.conformance.state import _get, _Notification, _Pending, _str
from acp_proxy.wire.frame import C2A, Direction, other_direction
from acp_proxy.wire.jsonrpc import Message, parse_json
from acp_proxy.wire.surrogates import UNPARSED, classify_encodable

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Lines above this size get a ``framing.size`` info finding (the conformance kit's limit)."""

ANSWERED_MEMORY = 4096
"""How many answered request ids per connection are remembered to spot duplicate responses."""

NULL_ID_ERROR_CODES = frozenset({-32700, -32600})
"""Error responses that may carry ``"id": null`` (the request could not be read)."""

RECENT_NOTIFICATIONS = 16
"""How many of a side's latest notifications (of the last :data:`GROUP_GAP` x 2 frames) are
kept to name the one a response with id null answers: the one its error text names, else
the nearest one before it (a run of such answers takes the run's nearest ones in order)."""


class FramingChecks(SessionChecks):
    """Checks of the frames' bytes and of the JSON-RPC layer."""

    def _frame(self, seq: int, direction: Direction, raw: bytes, value: Any = UNPARSED) -> None:
        """Check one text frame's bytes, then each message it holds (``value``: its JSON
        value when the frame was parsed already)."""
        if len(raw) > MAX_LINE_BYTES:
            self._report("framing.size", (seq,), f"frame of {len(raw)} bytes (over 64 MiB)")
        if self.transport == "stdio":
            if raw.endswith(b"\r\n"):
                self._report("framing.crlf", (seq,), "line ends with \\r\\n")
            elif not raw.endswith(b"\n"):
                self._report("framing.unterminated", (seq,), "last line has no newline")
        msg = classify_encodable(raw, value)
        if msg.kind == "invalid":
            self._invalid(seq, msg)
        elif msg.kind == "batch":
            if self.effective_version < 2:
                self._report(
                    "jsonrpc.batch", (seq,), f"a batch of {len(msg.items)} on a v1 connection"
                )
            for item in msg.items:
                if item.kind == "invalid":
                    self._invalid(seq, item)
                else:
                    self._message(seq, direction, item)
        else:
            self._message(seq, direction, msg)

    def _invalid(self, seq: int, msg: Message) -> None:
        reason = msg.reason or "invalid"
        if not self._first_seen:
            self._first_seen = True
            self._report(
                "lifecycle.initialize-first",
                (seq,),
                f"the first frame is not initialize ({reason})",
            )
        if reason == "blank line":
            self._report("framing.blank-line", (seq,), "blank line")
        elif reason == "not valid UTF-8":
            self._report("framing.utf8", (seq,), "frame is not valid UTF-8")
        elif reason.startswith("not JSON"):
            self._report("framing.json", (seq,), reason)
        elif reason == "empty batch":
            self._report("jsonrpc.batch", (seq,), "empty batch []")
        elif (
            reason == "neither a call nor a response"
            and isinstance(msg.payload, dict)
            and "id" in msg.payload
        ):
            self._report(
                "jsonrpc.result-xor-error", (seq,), "response has neither result nor error"
            )
        else:
            self._report("jsonrpc.envelope", (seq,), reason)

    def _message(self, seq: int, direction: Direction, msg: Message) -> None:
        for problem in msg.problems:
            rule = (
                "jsonrpc.result-xor-error"
                if problem == "response has both result and error"
                else "jsonrpc.envelope"
            )
            self._report(rule, (seq,), problem)
        if msg.id is not None and msg.id[:1] in ("{", "[", "t", "f"):
            self._report("jsonrpc.envelope", (seq,), f"id {msg.id} is not a string or number")
        if not self._first_seen:
            self._first_seen = True
            if not (direction == C2A and msg.kind == "request" and msg.method == "initialize"):
                what = msg.method or f"a response id {msg.id}"
                who = "client" if direction == C2A else "agent"
                self._report(
                    "lifecycle.initialize-first",
                    (seq,),
                    f"the first message is {what} from the {who}, not the client's initialize",
                )
        if msg.kind == "request":
            assert msg.id is not None and msg.method is not None
            params = msg.params
            sid = _str(params, "sessionId")
            req = _Pending(msg.method, seq, sid)
            early = self._exchanges.request(direction, msg.id, req)
            if direction == C2A:
                self._client_request(seq, msg.method, params, req)
            else:
                self._agent_request(seq, msg.method, params)
            if early is not None:
                self._early_response(seq, (direction, msg.id), req, early)
        elif msg.kind == "notification":
            assert msg.method is not None
            self._notification(seq, direction, msg.method, msg.params)
        elif msg.kind == "response":
            assert msg.id is not None
            self._response(seq, direction, msg)

    def _orphans(
        self, expired: Sequence[tuple[tuple[Direction, str], tuple[int, Message]]]
    ) -> None:
        """Responses that found no request within the early window answer nothing."""
        for key, (seq, msg) in expired:
            self._grouped(
                "jsonrpc.response-id-echo", seq, (), f"id {msg.id}", _side(other_direction(key[0]))
            )

    def _same_value(self, direction: Direction, id_text: str) -> tuple[Direction, str] | None:
        value = _id_value(id_text)
        if value is None:
            return None
        for key in self._pending:
            if key[0] == direction and _id_value(key[1]) == value:
                return key
        return None

    def _early_response(
        self, seq: int, key: tuple[Direction, str], req: _Pending, early: tuple[int, Message]
    ) -> None:
        """A request whose response was recorded before it: pair them, note the order."""
        rseq, msg = early
        self._report(
            "recording.order",
            (rseq, seq),
            f"response #{rseq} was recorded before its request #{seq} ({req.method})",
            req.session_id,
        )
        self._answered_now(rseq, key, req, msg)

    def _response(self, seq: int, direction: Direction, msg: Message) -> None:
        assert msg.id is not None
        key = (other_direction(direction), msg.id)
        req = self._exchanges.answer(direction, msg.id)
        if req is None:
            if msg.id == "null":
                err = msg.error
                code = err.get("code") if isinstance(err, dict) else None
                if code not in NULL_ID_ERROR_CODES:
                    self._notification_answer(seq, direction, err)
                return
            first = self._answered.get(key)
            if first is not None:
                self._report(
                    "jsonrpc.one-response",
                    (first, seq),
                    f"second response to request id {msg.id} (first answered at #{first})",
                )
                return
            same = self._same_value(key[0], msg.id)
            if same is not None:  # the same id value spelled differently ("a\u0062", "ab")
                key = same
                req = self._pending.pop(key)
                self._answered_now(seq, key, req, msg)
                return
            loose = _loose_id(msg.id)
            near = next(
                (
                    (k, p)
                    for k, p in self._pending.items()
                    if k[0] == key[0] and _loose_id(k[1]) == loose
                ),
                None,
            )
            if near is not None:
                self._report(
                    "jsonrpc.response-id-echo",
                    (near[1].seq, seq),
                    f"response id {msg.id} does not echo the request id {near[0][1]} exactly",
                    near[1].session_id,
                )
                del self._pending[near[0]]
                key, req = near
            else:
                # Perhaps recorded just before its request (a recorder race): wait a little.
                self._exchanges.hold_early(direction, msg.id, (seq, msg))
                return
        self._answered_now(seq, key, req, msg)

    def _answered_now(
        self, seq: int, key: tuple[Direction, str], req: _Pending, msg: Message
    ) -> None:
        self._answered[key] = seq
        if len(self._answered) > ANSWERED_MEMORY:
            self._answered.popitem(last=False)
        if key[0] == C2A:
            self._client_request_answered(seq, req, msg)
        else:
            self._agent_request_answered(seq, req, msg)

    def _notification_answer(self, seq: int, direction: Direction, error: Any) -> None:
        """A response with id null that is no parse/invalid-request error: it answers a
        notification of the other side. Name the one its error text names, else the nearest
        unanswered one before it (by time), else none ("cannot be paired")."""
        side = _side(direction)
        recent = self._notifications[other_direction(direction)]
        while recent and self.frames - recent[0][2] > 2 * GROUP_GAP:
            recent.popleft()
        message = _get(error, "message")
        text = message if isinstance(message, str) else orjson.dumps(error).decode()
        run = self._null_runs[direction]
        named = next((n for n in reversed(recent) if n[1] in text), None)
        if named is not None:
            recent.remove(named)
            run.clear()
            subject = f"`{named[1]}` #{named[0]} (named in its error)"
            self._grouped("jsonrpc.notification-answered", seq, (named[0],), subject, side)
            return
        if not recent:
            run.clear()
            self._grouped("jsonrpc.notification-answered", seq, (), "", side)
            return
        nearest = recent.pop()
        self._grouped("jsonrpc.notification-answered", seq, (nearest[0],), "", side)
        g = self._group
        assert g is not None
        if len(g.subjects) < len(run) + 1 or any(f < self.frames - GROUP_GAP for f, _, _ in run):
            run.clear()
        run.append((self.frames, seq, nearest))
        # answers in a row take the nearest notifications before them first in, first
        # answered: the run's first answer the oldest of them
        taken = sorted(n for _f, _seq, n in run)
        run[:] = [(f, a, n) for (f, a, _old), n in zip(run, taken, strict=True)]
        times = self._times([s for _f, a, n in run for s in (a, n[0])])
        g.subjects[len(g.subjects) - len(run) :] = [
            _by_time_subject(n, times.get(a, 0), times.get(n[0], 0)) for _f, a, n in run
        ]

    def _finish_requests(self) -> None:
        """End of the connection: report the requests that were never answered."""
        self._orphans(self._exchanges.expire_all())
        self._flush_group()
        for (direction, rid), req in self._pending.items():
            who = _side(other_direction(direction))
            if req.method.startswith("_"):
                self._report(
                    "jsonrpc.extension-answered",
                    (req.seq,),
                    f"extension request {req.method} id {rid} was never answered by the {who}",
                    req.session_id,
                    who,
                )
                continue
            extra = ""
            if req.cancel_seq is not None:
                extra = (
                    f" (cancelled by $/cancel_request #{req.cancel_seq}: still needs a response)"
                )
            self._report(
                "jsonrpc.request-answered",
                (req.seq,) if req.cancel_seq is None else (req.seq, req.cancel_seq),
                f"{req.method} id {rid} got no response from the {who} before the recording "
                f"ended{extra}",
                req.session_id,
                who,
            )


def _by_time_subject(n: _Notification, answer_ns: int, notified_ns: int) -> str:
    """How an answer paired by time with the notification ``n`` names it (a time 0:
    unknown)."""
    gap = (answer_ns - notified_ns) / 1e6
    when = ""
    if answer_ns and notified_ns and gap >= 0:
        when = f": {gap:.1f} ms before" if gap >= 0.1 else ": under 0.1 ms before"
    return f"`{n[1]}` #{n[0]} (by time{when})"


def _id_value(text: str) -> tuple[str, Any] | None:
    """An id's JSON value with its type, so that 1 and 1.0 and "1" stay different."""
    value, reason = parse_json(text.encode())
    if reason is not None:
        return None
    return (type(value).__name__, value)


def _loose_id(text: str) -> str:
    """Ids that a sloppy peer might confuse (1, 1.0, "1") map to the same key."""
    value, reason = parse_json(text.encode())
    if reason is not None:
        return text
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return text
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return text
