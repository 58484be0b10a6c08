"""The conformance rule table: every rule ``acp-proxy check`` knows, with tier and quoted text.

Each :class:`Rule` has a stable id (``area.name``), a tier (``error`` for a MUST,
``warning`` for a SHOULD, ``info`` for everything else, as the ACP conformance kit tiers
its findings), the protocol versions it applies to, the side that can break it (the
client, the agent, either peer, or the recorder) and the rule text it enforces, quoted
from the ACP spec (the v2 seed text wins over older documents). Rules either peer can break
are quoted as they apply to the side that broke them (:meth:`Rule.text_for`): a client
answering a notification breaks "The Client MUST NOT reply to a Notification". The checks
themselves live in :mod:`acp_proxy.acp.conformance`, which reports findings by rule id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Tier = Literal["error", "warning", "info"]
TIERS: tuple[Tier, ...] = ("error", "warning", "info")
TIER_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}

Applies = Literal["all", "v1", "v2"]
"""``v1``: connections that negotiated protocol version 1 (or none); ``v2``: version 2+."""

Side = Literal["client", "agent"]
"""The peer that broke a rule."""

Breaker = Literal["client", "agent", "peer", "recorder"]
"""Who can break a rule: always the client, always the agent, either peer (the finding
says which), or nobody on the wire (the recording itself)."""

_NAMES = {"client": ("Client", "client", "agent"), "agent": ("Agent", "agent", "client")}


@dataclass(frozen=True, slots=True)
class Rule:
    """One checkable rule: id, tier, versions, who can break it and the text it quotes.

    ``template`` may name the side with ``{Side}``/``{side}`` and the other one with
    ``{other}``; ``by_side`` holds a whole other text for a side where the spec words the
    rule differently for it.
    """

    id: str
    tier: Tier
    applies: Applies
    template: str
    breaker: Breaker = "peer"
    by_side: tuple[tuple[Side, str], ...] = ()

    def applies_to(self, version: int) -> bool:
        if self.applies == "all":
            return True
        return (version >= 2) == (self.applies == "v2")

    @property
    def text(self) -> str:
        """The rule text for either side (``acp-proxy check --rules``)."""
        if self.breaker in ("client", "agent"):
            return self.text_for(self.breaker)
        return self.template.format(Side="Peer", side="peer", other="other peer")

    def text_for(self, side: Side | None) -> str:
        """The rule as it applies to ``side`` (the generic text when ``None``)."""
        if side is None:
            return self.text
        for who, text in self.by_side:
            if who == side:
                return text
        upper, lower, other = _NAMES[side]
        return self.template.format(Side=upper, side=lower, other=other)


_AGENT_AREAS = frozenset({"v1", "v2", "entity", "notice", "compaction", "replay"})
"""Areas whose rules only the agent can break (turns, updates, replays)."""


def _r(
    rule_id: str,
    tier: Tier,
    text: str,
    applies: Applies = "all",
    breaker: Breaker | None = None,
    by_side: tuple[tuple[Side, str], ...] = (),
) -> Rule:
    if breaker is None:
        area = rule_id.split(".")[0]
        breaker = "agent" if area in _AGENT_AREAS else "recorder" if area == "recording" else "peer"
    return Rule(rule_id, tier, applies, text, breaker, by_side)


RULES: tuple[Rule, ...] = (
    # -- framing -------------------------------------------------------------------------
    _r("framing.utf8", "error", "ACP messages are JSON-RPC 2.0 encoded as UTF-8."),
    _r("framing.json", "error", "stdio carries newline-delimited JSON: one JSON message per line."),
    _r(
        "framing.blank-line",
        "warning",
        "stdio carries one message per line; a blank line is not a message.",
    ),
    _r(
        "framing.unterminated",
        "warning",
        "Messages are delimited by newlines (\\n); the last line had none.",
    ),
    _r("framing.crlf", "info", "Messages are delimited by \\n; this line ends with \\r\\n."),
    _r(
        "framing.size",
        "info",
        "No maximum message size; the conformance kit flags lines over 64 MiB (never truncated).",
    ),
    _r(
        "framing.binary",
        "info",
        "WebSocket: each JSON-RPC message is one text frame; binary frames are ignored by SDKs.",
    ),
    _r(
        "jsonrpc.envelope",
        "error",
        'A JSON-RPC message is an object with "jsonrpc": "2.0" and either a method (request, '
        "notification) or result/error (response); an id is a string or a number.",
    ),
    _r(
        "jsonrpc.batch",
        "error",
        "v2: a line may be a batch (a JSON array); an empty array is invalid (-32600). "
        "v1 has no batches.",
    ),
    _r(
        "jsonrpc.response-id-echo",
        "error",
        "The {Side}'s responses MUST carry the id of the {other}'s request they answer, exactly "
        '(1, 1.0 and "1" differ); each direction has its own id space.',
    ),
    _r(
        "jsonrpc.result-xor-error",
        "error",
        "A response MUST carry exactly one of result or error.",
    ),
    _r(
        "jsonrpc.notification-answered",
        "error",
        "The {Side} MUST NOT reply to a Notification (the {other}'s notifications get no "
        "response).",
    ),
    _r(
        "jsonrpc.one-response",
        "error",
        "Every request gets exactly one response: the {Side} MUST answer each request of the "
        "{other} once.",
    ),
    _r(
        "jsonrpc.request-answered",
        "error",
        "Every request gets a response: the {Side} MUST answer each request of the {other}, "
        "also after $/cancel_request (a result or -32800).",
    ),
    _r(
        "jsonrpc.extension-answered",
        "error",
        "Extension methods start with _; the {Side} must still answer the {other}'s extension "
        "requests (e.g. -32601 when it does not know the method).",
    ),
    # -- lifecycle -------------------------------------------------------------------------
    _r(
        "lifecycle.initialize-first",
        "error",
        "Clients MUST first complete the initialization phase: initialize is the first message.",
        by_side=(
            (
                "agent",
                "The Agent waits for the client's initialize: initialize is the first message "
                "of a connection, before anything the Agent sends.",
            ),
        ),
    ),
    _r(
        "lifecycle.capabilities",
        "error",
        "The {Side} MUST NOT call methods (or send prompt content) that the {other}'s "
        "capabilities did not advertise.",
    ),
    _r("lifecycle.absolute-path", "error", "File paths in the protocol MUST be absolute."),
    _r(
        "turn.permission-cancelled",
        "error",
        "The Client MUST respond to all pending session/request_permission requests with the "
        "cancelled outcome.",
        breaker="client",
    ),
    # -- v1 turns --------------------------------------------------------------------------
    _r(
        "v1.cancel-stop-reason",
        "error",
        "After session/cancel the Agent MUST respond to the original session/prompt request "
        "with the cancelled stop reason.",
        "v1",
    ),
    _r(
        "v1.updates-after-turn",
        "error",
        "The Agent MUST send all updates for a turn before responding to its session/prompt.",
        "v1",
    ),
    # -- v2 turns (seed text) --------------------------------------------------------------
    _r(
        "v2.prompt-message-id",
        "error",
        "The session/prompt response returns the inserted user message's messageId: a "
        "required, non-null string.",
        "v2",
    ),
    _r(
        "v2.prompt-user-message",
        "error",
        "The Agent MUST also report the inserted user message through a user_message update "
        "or user_message_chunk updates using the returned messageId.",
        "v2",
    ),
    _r(
        "v2.running-before-idle",
        "error",
        "The Agent MUST report running when foreground work starts or resumes.",
        "v2",
    ),
    _r(
        "v2.stop-reason",
        "warning",
        "When foreground work ends, the Agent MUST report idle and SHOULD include the "
        "corresponding stop reason.",
        "v2",
    ),
    _r(
        "v2.cancel-idle",
        "error",
        "After session/cancel the Agent MUST send an idle state_update with the cancelled "
        "stop reason, not error.",
        "v2",
    ),
    _r(
        "v2.nothing-after-cancel",
        "error",
        "Updates after session/cancel MUST be sent before the idle state_update that reports "
        "cancellation.",
        "v2",
    ),
    _r(
        "v2.error-idle-tools",
        "warning",
        "Before reporting a failure (idle, stopReason error) the Agent SHOULD give each tool "
        "call the failed work left unfinished a terminal status.",
        "v2",
    ),
    _r(
        "v2.message-id",
        "error",
        "The Agent MUST include an opaque messageId on message updates and message chunks.",
        "v2",
    ),
    _r(
        "v2.work-left-running",
        "info",
        "When foreground work ends the Agent MUST report idle; the recording ended while the "
        "session was still running.",
        "v2",
    ),
    # -- entities, notices, compaction, enums -----------------------------------------------
    _r(
        "entity.id-reuse",
        "error",
        "The Agent MUST NOT reuse an ID for a different entity of the same type within a "
        "session; distinct inserted submissions get distinct message IDs.",
    ),
    _r(
        "notice.fields",
        "error",
        "notice: title is required, non-null, non-empty plain text; severity is required and "
        "non-null.",
    ),
    _r(
        "compaction.fields",
        "error",
        "compactionId and status are required and non-null on every compaction_update; "
        "compactionId and content on each compaction_summary_chunk.",
    ),
    _r(
        "compaction.terminal-status",
        "error",
        "The Agent MUST report a terminal status when a reported compaction ends.",
    ),
    _r(
        "enum.reserved",
        "warning",
        "Open enums: values beginning with _ are implementation-specific extensions; other "
        "unknown values are reserved for future ACP variants.",
    ),
    # -- replay windows --------------------------------------------------------------------
    _r(
        "replay.before-response",
        "error",
        "session/load (and v2 session/resume with replayFrom) replays the history as "
        "session/update notifications, all before responding.",
    ),
    _r(
        "replay.plain-resume",
        "error",
        "session/resume without replayFrom (and every v1 session/resume) MUST NOT replay history.",
    ),
    _r(
        "replay.no-notice",
        "warning",
        "Live-only notices SHOULD NOT be replayed.",
    ),
    # -- the recording itself --------------------------------------------------------------
    _r(
        "recording.order",
        "warning",
        "A response was recorded before its request: the recording is not in causal order "
        "(paired anyway; replay answers the request with it).",
    ),
    _r(
        "recording.incomplete",
        "info",
        "The recorder dropped frames of this connection; findings may be artefacts of the gap.",
    ),
)

RULE_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
