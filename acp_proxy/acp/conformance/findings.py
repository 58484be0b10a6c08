"""Findings and how they are reported: one per rule and side, grouped, repeats folded.

:class:`Reporter` is the base of :class:`~acp_proxy.acp.conformance.checker.ConnectionChecker`:
``_report`` quotes the rule table (:mod:`acp_proxy.acp.rules`) for the side that broke a rule,
folds a finding repeated frame after frame into one (:class:`_Run`), gathers close findings of
one rule into one that names all their frames (:data:`GROUP_GAP`) and counts what goes over
``max_per_rule``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from acp_proxy.acp.exchanges import InitializeFacts
from acp_proxy.acp.rules import RULE_BY_ID, Side, Tier
from acp_proxy.wire.frame import C2A, Direction

GROUP_GAP = 8
"""Findings of one rule and side that frames this close together name each other (one
grouped finding: "#16 and #17 answer notifications ..."), up to :data:`GROUP_MAX` frames."""

GROUP_MAX = 10

RUN_MAX = 100
"""At most this many repeats of one finding are one finding (memory stays bounded)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One conformance finding: which rule, how bad, who broke it, where and why.

    ``side`` is the peer that broke the rule (``client`` or ``agent``; ``None`` for notes
    about the recording itself), ``seqs`` every frame the finding names (``#seq`` as in
    ``acp-proxy dump``), and ``reason`` says what happened, starting with the side.
    :attr:`rule_text` quotes the rule as it applies to that side.
    """

    rule: str
    tier: Tier
    connection_id: int
    seqs: tuple[int, ...]
    reason: str
    session_id: str | None = None
    side: Side | None = None

    @property
    def rule_text(self) -> str:
        return RULE_BY_ID[self.rule].text_for(self.side)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "tier": self.tier,
            "side": self.side,
            "connection": self.connection_id,
            "seqs": list(self.seqs),
            "session": self.session_id,
            "reason": self.reason,
            "rule_text": self.rule_text,
        }


@dataclass(slots=True)
class _Group:
    """Findings of one rule and side being gathered into one (see :data:`GROUP_GAP`)."""

    rule: str
    side: Side | None
    session_id: str | None
    frames: list[int]  # the frames that broke the rule
    seqs: set[int]  # every frame named
    subjects: list[str]
    last: int  # frame count when the group last grew


@dataclass(slots=True)
class _Run:
    """A finding repeated frame after frame (one rule, side, session, reason, and the same
    frames but the last): reported once, naming the run's frames (see :data:`GROUP_GAP`)."""

    first: Finding
    lasts: list[int]  # the last frame each repeat names
    at: int  # frame count when the run last grew

    def repeated_by(self, found: Finding, frames: int) -> bool:
        first = self.first
        return (
            frames - self.at <= GROUP_GAP
            and (found.rule, found.side, found.session_id, found.reason)
            == (first.rule, first.side, first.session_id, first.reason)
            and found.seqs[:-1] == first.seqs[:-1]
            and bool(found.seqs)
            and found.seqs[-1] > self.lasts[-1]
            and len(self.lasts) < RUN_MAX
        )

    def finding_for_all(self) -> Finding:
        first = self.first
        if len(self.lasts) == 1:
            return first
        reason = f"{first.reason} ({len(self.lasts)} times: {frames_text(self.lasts, ', ')})"
        seqs = (*first.seqs[:-1], *self.lasts)
        return Finding(
            first.rule, first.tier, first.connection_id, seqs, reason, first.session_id, first.side
        )


class Reporter:
    """Reporting state and methods shared by every area of the checker."""

    connection_id: int
    max_per_rule: int
    frames: int
    counts: dict[str, int]
    per_rule: dict[str, int]
    suppressed: dict[str, int]
    facts: InitializeFacts
    _out: list[Finding]
    _sender: Side | None  # the side that sent the frame being checked
    _group: _Group | None
    _run: _Run | None

    effective_version: int
    """The version the rules follow: the negotiated one, v1 when there was none (an
    attribute, read by every rule: :meth:`_observed` sets it again when ``facts`` change)."""

    def _observed(self) -> None:
        """``facts`` learnt from ``initialize``: the version the rules follow again."""
        self.effective_version = self.facts.protocol_version or 1

    def _report(
        self,
        rule_id: str,
        seqs: tuple[int, ...],
        reason: str,
        session_id: str | None = None,
        side: Side | None = None,
    ) -> None:
        """Report a finding; ``side`` defaults to who can break the rule, else the sender."""
        rule = RULE_BY_ID[rule_id]
        if not rule.applies_to(self.effective_version):
            return
        if rule.breaker == "recorder":
            side = None
        elif rule.breaker != "peer":
            side = rule.breaker
        elif side is None:
            side = self._sender
        if side is not None:
            reason = f"{side}: {reason}"
        found = Finding(rule_id, rule.tier, self.connection_id, seqs, reason, session_id, side)
        run = self._run
        if run is not None and run.repeated_by(found, self.frames):
            run.lasts.append(seqs[-1])
            run.at = self.frames
            return
        self._flush_run()
        if seqs:
            self._run = _Run(found, [seqs[-1]], self.frames)
        else:
            self._emit(found)

    def _flush_run(self) -> None:
        """Emit the finding being repeated: one for the whole run, naming each frame."""
        run, self._run = self._run, None
        if run is not None:
            self._emit(run.finding_for_all())

    def _emit(self, found: Finding) -> None:
        self.counts[found.tier] += 1
        n = self.per_rule.get(found.rule, 0) + 1
        self.per_rule[found.rule] = n
        if n > self.max_per_rule:
            self.suppressed[found.rule] = self.suppressed.get(found.rule, 0) + 1
            return
        self._out.append(found)

    def _grouped(
        self,
        rule_id: str,
        seq: int,
        named: tuple[int, ...],
        subject: str,
        side: Side | None,
        session_id: str | None = None,
    ) -> None:
        """A finding that joins the open group of its rule and side when frames are close."""
        g = self._group
        if (
            g is None
            or (g.rule, g.side, g.session_id) != (rule_id, side, session_id)
            or self.frames - g.last > GROUP_GAP
            or len(g.frames) >= GROUP_MAX
        ):
            self._flush_group()
            g = self._group = _Group(rule_id, side, session_id, [], set(), [], self.frames)
        g.frames.append(seq)
        g.seqs.update((seq, *named))
        g.subjects.append(subject)
        g.last = self.frames

    def _flush_group(self) -> None:
        g, self._group = self._group, None
        if g is None:
            return
        reason = _GROUP_TEXT[g.rule](g.frames, g.subjects, g.side)
        self._report(g.rule, tuple(sorted(g.seqs)), reason, g.session_id, g.side)

    def drain(self) -> list[Finding]:
        """Findings reported but not yet returned (e.g. ``recording.incomplete``)."""
        self._flush_run()
        return self._take()

    def _take(self) -> list[Finding]:
        out, self._out = self._out, []
        return out


def frames_text(seqs: Sequence[int], sep: str = ",") -> str:
    """Frame numbers as ``#5,#6-#15``: three or more consecutive ones as a range."""
    parts: list[str] = []
    n = 0
    while n < len(seqs):
        end = n
        while end + 1 < len(seqs) and seqs[end + 1] == seqs[end] + 1:
            end += 1
        if end - n >= 2:
            parts.append(f"#{seqs[n]}\u2013#{seqs[end]}")
        else:
            parts.extend(f"#{x}" for x in seqs[n : end + 1])
        n = end + 1
    return sep.join(parts)


def _side(direction: Direction) -> Side:
    """The side that sends frames in ``direction``."""
    return "client" if direction == C2A else "agent"


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _notifications_answered(frames: list[int], subjects: list[str], side: Side | None) -> str:
    paired = [(f, s) for f, s in zip(frames, subjects, strict=True) if s]
    unpaired = [f"#{f}" for f, s in zip(frames, subjects, strict=True) if not s]
    if paired:
        verb = "answers" if len(paired) == 1 else "answer"
        text = _and([f"#{f}" for f, _s in paired]) + f" {verb} "
        text += ("notification " if len(paired) == 1 else "notifications ") + _and(
            [s for _f, s in paired]
        )
        if unpaired:
            text += f"; {_and(unpaired)} cannot be paired with a notification (none recent"
            text += " left unanswered)"
        return text
    verb = "answers" if len(frames) == 1 else "answer"
    text = _and(unpaired) + f" {verb} "
    return text + (
        "a notification: a response with id null that is not a parse/invalid-request error"
        if len(frames) == 1
        else "notifications: responses with id null that are not parse/invalid-request errors"
    )


def _orphan_responses(frames: list[int], subjects: list[str], side: Side | None) -> str:
    other = "agent" if side == "client" else "client"
    if len(frames) == 1:
        return f"response #{frames[0]} ({subjects[0]}) answers no request of the {other}"
    numbers = _and([f"#{f}" for f in frames])
    return f"responses {numbers} ({_and(subjects)}) answer no request of the {other}"


_GROUP_TEXT = {
    "jsonrpc.notification-answered": _notifications_answered,
    "jsonrpc.response-id-echo": _orphan_responses,
}
"""How a group of findings of a rule reads (frames that broke it, subjects, side)."""
