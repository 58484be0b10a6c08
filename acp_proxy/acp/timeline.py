"""Session timeline reconstruction: fold ``session/update`` payloads into entities (sans-I/O).

This follows the v2 seed text (``shared/acp/seeds``) to the letter and accepts the v1 variants.

Public API::

    tl = SessionTimeline("sess_1")
    for update in updates:               # each: the ``params.update`` object of a session/update
        tl.apply(update, seq=frame_seq)  # returns the Item it created or touched
    tl.items                             # Entity and Event objects, in order of first appearance
    tl.entities()                        # only the entities (history), same order
    tl.history_updates(version=2)        # history re-emitted in finished form (for replay;
                                         # version=1 gives v1 chunks / tool_call / plan)
    tl.to_json()                         # plain data (lists/dicts/str/int) for ``show --json``

Rules implemented:

- An entity is keyed by (entity type, id): ``user_message`` / ``agent_message`` /
  ``agent_thought`` by ``messageId``, ``tool_call`` by ``toolCallId``, ``terminal`` by
  ``terminalId``, ``plan`` by ``plan.planId`` (the v1 ``plan`` variant is the session's one
  anonymous plan, id ``""``), ``compaction`` by ``compactionId``. Same id, different type:
  different entities. Entities keep the position of their first update.
- Message upserts: ``content`` omitted leaves it unchanged, ``null`` or ``[]`` clears, an array
  replaces everything (also content from earlier chunks); ``*_chunk`` appends one block to
  whatever is current. Other fields patch (omitted unchanged, ``null`` removes, value
  replaces); chunk ``_meta`` is chunk-scoped and does not touch the entity.
- v1 chunks without ``messageId``: consecutive chunks of one type form one message (with a
  synthetic id ``~1``, ``~2``...); anything else in between starts a new one.
- Tool calls (``tool_call`` in v1, ``tool_call_update``): fields patch as above, ``content``
  ``null``/``[]`` clears, an array replaces; ``tool_call_content_chunk`` appends one item.
- Terminals: ``terminal_update`` patches ``command``/``cwd``/``exitStatus``/``_meta``;
  ``output`` is an authoritative snapshot (``{"data": base64}`` replaces, ``null`` clears);
  ``terminal_output_chunk`` appends its base64-decoded bytes.
- Plans: ``plan_update`` replaces the plan's content (``plan`` object) as a whole;
  ``plan_removed`` marks it removed; v1 ``plan`` replaces the entries of the anonymous plan.
- Compactions: a first-seen id starts ``in_progress`` with no optional fields; ``status``,
  ``error``, ``_meta`` patch; ``summary`` ``null``/``[]`` clears, an array replaces;
  ``compaction_summary_chunk`` appends.
- ``state_update``, ``usage_update``, ``available_commands_update``,
  ``config_option_update``, ``session_info_update`` and v1 ``current_mode_update`` are
  events kept in place; they also update :attr:`SessionTimeline.facts`.
- ``notice`` is a live-only event (``live_only=True``): shown in place, never history.
- Any other variant (``_vendor`` or future) is an ``unknown`` event holding the raw payload,
  kept in place and re-emitted unchanged by :meth:`SessionTimeline.history_updates`.

For very long recordings a renderer may call :meth:`SessionTimeline.drain` to take the items
gathered so far and forget them; a later update to a drained entity starts a fresh
``continued`` entity (patch semantics on an empty entity).
"""

from __future__ import annotations

import base64
import binascii
import itertools
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.updates import (
    ENTITY_UPDATES as _ENTITY_VARIANTS,
)
from acp_proxy.acp.updates import (
    EVENT_VARIANTS,
    KNOWN_VARIANTS,
    LIVE_ONLY_VARIANTS,
    MESSAGE_TYPES,
    entity_key,
)

# the content-like field of each entity type
_CONTENT_FIELD = {
    "user_message": "content",
    "agent_message": "content",
    "agent_thought": "content",
    "tool_call": "content",
    "compaction": "summary",
}

# the whole-message upsert variant of each message type
_UPSERT_VARIANT = {
    "user_message": "user_message",
    "agent_message": "agent_message",
    "agent_thought": "agent_thought",
    "tool_call": "tool_call_update",
    "terminal": "terminal_update",
    "plan": "plan_update",
    "compaction": "compaction_update",
}


@dataclass(slots=True, eq=False)
class Entity:
    """One history entity (message, thought, tool call, terminal, plan, compaction).

    ``fields`` holds the patched fields (everything except the id and the content-like
    field); ``content`` the current content blocks / tool call items / compaction summary
    (``None`` while unset); ``output`` a terminal's bytes (``None`` while unknown).
    """

    type: str
    id: str
    first_seq: int | None = None
    last_seq: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    content: list[Any] | None = None
    output: bytearray | None = None
    updates: int = 0
    synthetic_id: bool = False
    removed: bool = False
    continued: bool = False
    replayed: bool = False
    problems: list[str] = field(default_factory=list)

    item = "entity"

    def text(self) -> str:
        """The concatenated text of the content (text blocks, tool call text content)."""
        return "".join(_block_text(b) for b in self.content or ())

    def output_text(self) -> str:
        return bytes(self.output or b"").decode("utf-8", "replace")

    def to_update(self) -> dict[str, Any]:
        """This entity in finished form as one upsert ``sessionUpdate`` payload."""
        variant = _UPSERT_VARIANT[self.type]
        out: dict[str, Any] = {"sessionUpdate": variant}
        if self.type == "plan":
            plan = dict(self.fields.get("plan") or {})
            if self.id:
                plan["planId"] = self.id
            out["plan"] = plan
            if "_meta" in self.fields:
                out["_meta"] = self.fields["_meta"]
            return out
        id_field = {
            "tool_call": "toolCallId",
            "terminal": "terminalId",
            "compaction": "compactionId",
        }.get(self.type, "messageId")
        out[id_field] = self.id
        out.update(self.fields)
        content_field = _CONTENT_FIELD.get(self.type)
        if content_field is not None:
            out[content_field] = list(self.content or [])
        if self.type == "terminal" and self.output is not None:
            out["output"] = {"data": base64.b64encode(bytes(self.output)).decode("ascii")}
        return out

    def to_updates(self, version: int = 2) -> list[dict[str, Any]]:
        """This entity in finished form for a peer speaking ``version``.

        v2: the one upsert of :meth:`to_update` (it replaces whatever the peer holds).
        v1 has no message upserts: messages become one ``*_chunk`` per content block (with
        ``messageId`` unless it was synthetic), tool calls a ``tool_call``, the anonymous
        plan a ``plan``.
        """
        if version != 1:
            return [self.to_update()]
        if self.type in MESSAGE_TYPES:
            chunk: dict[str, Any] = {"sessionUpdate": f"{self.type}_chunk"}
            if not self.synthetic_id:
                chunk["messageId"] = self.id
            return [{**chunk, "content": block} for block in self.content or ()]
        if self.type == "tool_call":
            return [{**self.to_update(), "sessionUpdate": "tool_call"}]
        if self.type == "plan" and not self.id:
            plan = self.fields.get("plan")
            entries = plan.get("entries") if isinstance(plan, dict) else None
            return [{"sessionUpdate": "plan", "entries": entries if entries is not None else []}]
        return [self.to_update()]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "item": "entity",
            "type": self.type,
            "id": self.id,
            "firstSeq": self.first_seq,
            "lastSeq": self.last_seq,
            "updates": self.updates,
        }
        for flag in ("synthetic_id", "removed", "continued", "replayed"):
            if getattr(self, flag):
                out[_camel(flag)] = True
        out["fields"] = self.fields
        if self.type in _CONTENT_FIELD:
            out[_CONTENT_FIELD[self.type]] = self.content
            if self.type in MESSAGE_TYPES:
                out["text"] = self.text()
        if self.type == "terminal":
            raw = bytes(self.output) if self.output is not None else None
            out["output"] = None if raw is None else base64.b64encode(raw).decode("ascii")
            out["outputText"] = None if raw is None else raw.decode("utf-8", "replace")
        if self.problems:
            out["problems"] = self.problems
        return out


@dataclass(slots=True, eq=False)
class Event:
    """A non-entity timeline item: state, usage, notice (live-only), facts, unknown, rpc.

    ``kind`` is the ``sessionUpdate`` variant, ``"unknown"`` for variants this model does not
    know (``variant`` then holds the original value, ``payload`` the raw update), or a
    kind added by :mod:`acp_proxy.acp.model` (``rpc``, ``notification``, ``invalid``).
    """

    kind: str
    payload: Any
    seq: int | None = None
    variant: str | None = None
    live_only: bool = False
    replayed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    item = "event"

    @property
    def history(self) -> bool:
        """Whether the event belongs to replayable history (unknown ones are preserved)."""
        return self.kind == "unknown" and not self.live_only

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"item": "event", "kind": self.kind, "seq": self.seq}
        if self.variant is not None:
            out["variant"] = self.variant
        if self.live_only:
            out["liveOnly"] = True
        if self.replayed:
            out["replayed"] = True
        out["payload"] = self.payload
        out.update(self.extra)
        return out


@dataclass(slots=True, eq=False)
class Exchange:
    """A JSON-RPC request and (once seen) its response, paired per direction.

    ``direction`` is the request's (``c2a`` or ``a2c``); ``latency_ns`` the monotonic time
    between the two frames as the proxy forwarded them.
    """

    direction: str
    id: str
    method: str
    params: Any
    seq: int | None = None
    mono_ns: int | None = None
    response: Any = None
    response_seq: int | None = None
    response_mono_ns: int | None = None
    answered: bool = False
    replayed: bool = False
    drained: bool = False
    """Set by :meth:`SessionTimeline.drain`; an answer arriving later re-adds the exchange."""
    extra: dict[str, Any] = field(default_factory=dict)

    item = "rpc"

    @property
    def latency_ns(self) -> int | None:
        if self.response_mono_ns is None or self.mono_ns is None:
            return None
        return self.response_mono_ns - self.mono_ns

    @property
    def is_error(self) -> bool:
        return isinstance(self.response, dict) and "error" in self.response

    def to_json(self) -> dict[str, Any]:
        latency = self.latency_ns
        out: dict[str, Any] = {
            "item": "rpc",
            "direction": self.direction,
            "id": self.id,
            "method": self.method,
            "seq": self.seq,
            "params": self.params,
            "answered": self.answered,
            "responseSeq": self.response_seq,
            "latencyMs": None if latency is None else round(latency / 1e6, 3),
        }
        if self.answered and isinstance(self.response, dict):
            if "error" in self.response:
                out["error"] = self.response.get("error")
            else:
                out["result"] = self.response.get("result")
        if self.replayed:
            out["replayed"] = True
        out.update(self.extra)
        return out


Item = Entity | Event | Exchange


@dataclass(slots=True)
class SessionFacts:
    """The session's latest state as reported by events (``None`` until reported)."""

    state: str | None = None
    stop_reason: Any = None
    error: Any = None
    usage: Any = None
    mode: Any = None
    title: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    commands: Any = None
    config_options: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "stopReason": self.stop_reason,
            "error": self.error,
            "usage": self.usage,
            "currentModeId": self.mode,
            "title": self.title,
            "info": self.info,
            "availableCommands": self.commands,
            "configOptions": self.config_options,
        }


class SessionTimeline:
    """The reconstructed state of one session: entities and events in first-appearance order."""

    def __init__(self, session_id: str | None = None) -> None:
        self.session_id = session_id
        self.items: list[Item] = []
        self.facts = SessionFacts()
        self.replaying = False
        """Set by the caller while a load/resume replay window is open; marks items."""
        self._entities: dict[tuple[str, str], Entity] = {}
        self._drained: set[tuple[str, str]] = set()
        self._anon = itertools.count(1)
        self._last_anon: Entity | None = None
        self._last_item: Item | None = None
        self.update_count = 0

    # -- feeding -------------------------------------------------------------------------

    def apply(self, update: Any, *, seq: int | None = None) -> Item:
        """Fold one ``params.update`` payload; return the entity or event it touched."""
        self.update_count += 1
        variant = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not isinstance(variant, str) or variant not in KNOWN_VARIANTS:
            return self._event("unknown", update, seq, variant=_variant_text(variant))
        if variant in EVENT_VARIANTS:
            assert isinstance(update, dict)
            self._apply_fact(variant, update)
            return self._event(variant, update, seq, live_only=variant in LIVE_ONLY_VARIANTS)
        assert isinstance(update, dict)
        etype, _id_field, op = _ENTITY_VARIANTS[variant]
        key = entity_key(update)
        anonymous = False
        if key is None:
            if op == "chunk" and etype in MESSAGE_TYPES and update.get("messageId") is None:
                anonymous = True  # v1: a chunk without messageId
            else:
                return self._event("unknown", update, seq, variant=variant, extra_problem=True)
        if anonymous:
            entity = self._anonymous_message(etype, seq)
        else:
            assert key is not None
            entity = self._entity(key, seq)
        entity.last_seq = seq
        entity.updates += 1
        if op == "upsert":
            self._upsert(entity, update)
        elif op == "chunk":
            self._chunk(entity, update)
        elif op == "remove":
            entity.removed = True
        else:  # v1plan: the whole entry list each time
            _patch(entity.fields, {k: v for k, v in update.items() if k != "sessionUpdate"})
            entity.fields["plan"] = {"type": "items", "entries": update.get("entries")}
            entity.fields.pop("entries", None)
        self._last_item = entity
        return entity

    def add_event(self, event: Event | Exchange) -> Event | Exchange:
        """Insert an externally built event (e.g. an RPC exchange) in timeline order."""
        self.items.append(event)
        self._last_item = event
        self._last_anon = None
        return event

    def interject(self, event: Event) -> Event:
        """Insert an event that broke into the conversation (a stray answer, an invalid
        frame) without ending the v1 message being streamed: the chunks around it stay one
        message."""
        self.items.append(event)
        return event

    def end_group(self) -> None:
        """Stop grouping v1 id-less chunks: the next one starts a new message (the model
        calls this when a turn or a replay window ends)."""
        self._last_anon = None

    def _event(
        self,
        kind: str,
        payload: Any,
        seq: int | None,
        *,
        variant: str | None = None,
        live_only: bool = False,
        extra_problem: bool = False,
    ) -> Event:
        event = Event(
            kind, payload, seq, variant=variant, live_only=live_only, replayed=self.replaying
        )
        if extra_problem:
            event.extra["problem"] = "entity update without a usable id"
        self.add_event(event)
        return event

    def _entity(self, key: tuple[str, str], seq: int | None) -> Entity:
        entity = self._entities.get(key)
        if entity is None:
            entity = Entity(key[0], key[1], first_seq=seq, replayed=self.replaying)
            if key in self._drained:
                entity.continued = True
            if key[0] == "compaction":
                entity.fields["status"] = "in_progress"
            self._entities[key] = entity
            self.items.append(entity)
        if self._last_item is not entity:
            self._last_anon = None
        return entity

    def _anonymous_message(self, etype: str, seq: int | None) -> Entity:
        last = self._last_anon
        if last is not None and last.type == etype and self._last_item is last:
            return last
        entity = self._entity((etype, f"~{next(self._anon)}"), seq)
        entity.synthetic_id = True
        self._last_anon = entity
        return entity

    def _upsert(self, entity: Entity, update: dict[str, Any]) -> None:
        content_field = _CONTENT_FIELD.get(entity.type)
        patch: dict[str, Any] = {}
        for name, value in update.items():
            if name in ("sessionUpdate", "messageId", "toolCallId", "terminalId", "compactionId"):
                continue
            if name == content_field:
                if value is None or value == []:
                    entity.content = [] if value == [] else None
                elif isinstance(value, list):
                    entity.content = list(value)
                else:
                    entity.problems.append(f"{name} is neither an array nor null")
                continue
            if entity.type == "terminal" and name == "output":
                if value is None:
                    entity.output = None
                elif isinstance(value, dict) and isinstance(value.get("data"), str):
                    data = _b64(value["data"], entity)
                    entity.output = bytearray(data) if data is not None else entity.output
                else:
                    entity.problems.append("output snapshot without base64 data")
                continue
            patch[name] = value
        if entity.type == "plan":
            plan = patch.pop("plan", None)
            if isinstance(plan, dict):
                entity.fields["plan"] = {k: v for k, v in plan.items() if k != "planId"}
            entity.removed = False
        _patch(entity.fields, patch)

    def _chunk(self, entity: Entity, update: dict[str, Any]) -> None:
        if entity.type == "terminal":
            data = update.get("data")
            if isinstance(data, str):
                decoded = _b64(data, entity)
                if decoded is not None:
                    if entity.output is None:
                        entity.output = bytearray()
                    entity.output += decoded
            else:
                entity.problems.append("terminal_output_chunk without base64 data")
            return
        block = update.get("content")
        if entity.content is None:
            entity.content = []
        entity.content.append(block)

    def _apply_fact(self, variant: str, update: dict[str, Any]) -> None:
        facts = self.facts
        if variant == "state_update":
            facts.state = update.get("state")
            facts.stop_reason = update.get("stopReason")
            facts.error = update.get("error")
        elif variant == "usage_update":
            facts.usage = {k: v for k, v in update.items() if k != "sessionUpdate"}
        elif variant == "current_mode_update":
            facts.mode = update.get("currentModeId")
        elif variant == "available_commands_update":
            facts.commands = update.get("availableCommands")
        elif variant == "config_option_update":
            facts.config_options = update.get("configOptions")
        elif variant == "session_info_update":
            patch = {k: v for k, v in update.items() if k != "sessionUpdate"}
            _patch(facts.info, patch)
            if "title" in update:
                facts.title = update.get("title")

    # -- reading -------------------------------------------------------------------------

    def entity(self, etype: str, eid: str) -> Entity | None:
        return self._entities.get((etype, eid))

    def entities(self) -> list[Entity]:
        """History entities in order of first appearance."""
        return [i for i in self.items if isinstance(i, Entity)]

    def history_updates(self, version: int = 2) -> list[dict[str, Any]]:
        """The history in finished form, in order: each entity as :meth:`Entity.to_updates`
        for ``version``, unknown updates unchanged; notices, state, usage and other events
        are left out (not history)."""
        out: list[dict[str, Any]] = []
        for item in self.items:
            if isinstance(item, Entity):
                if not item.removed:
                    out.extend(item.to_updates(version))
            elif isinstance(item, Event) and item.history:
                out.append(item.payload)
        return out

    def drain(self, *, settled_only: bool = False) -> list[Item]:
        """Take the items gathered so far and forget them (flat memory for renderers).

        With ``settled_only`` the items from the first still unanswered request on stay,
        so a renderer can print that request together with its answer later.
        """
        items = self.items
        if settled_only:
            cut = next(
                (n for n, i in enumerate(items) if isinstance(i, Exchange) and not i.answered),
                len(items),
            )
            items, self.items = items[:cut], items[cut:]
            if self.items:
                for item in items:
                    if isinstance(item, Entity):
                        self._entities.pop((item.type, item.id), None)
                        if not item.synthetic_id:
                            self._drained.add((item.type, item.id))
                return items
        self.items = []
        for item in items:
            if isinstance(item, Exchange):
                item.drained = True
            elif isinstance(item, Entity):
                key = (item.type, item.id)
                self._entities.pop(key, None)
                if not item.synthetic_id:
                    self._drained.add(key)
        self._last_anon = None
        self._last_item = None
        return items

    def to_json(self) -> dict[str, Any]:
        """Plain data: the session id, its facts and every item in order."""
        return {
            "sessionId": self.session_id,
            "facts": self.facts.to_json(),
            "items": [item.to_json() for item in self.items],
        }


def _patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """Patch semantics: ``null`` removes the field, a value replaces it."""
    for name, value in patch.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value


def _b64(data: str, entity: Entity) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        entity.problems.append("invalid base64 terminal data")
        return None


def _block_text(block: Any) -> str:
    if not isinstance(block, dict):
        return ""
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    inner = block.get("content")  # tool call content: {"type": "content", "content": {...}}
    if block.get("type") == "content" and isinstance(inner, dict):
        return _block_text(inner)
    return ""


def _variant_text(variant: Any) -> str | None:
    if variant is None or isinstance(variant, str):
        return variant
    return repr(variant)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
