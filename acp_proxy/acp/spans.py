"""One connection's ACP traffic as trace spans: frames in, plain span records out (sans-I/O).

:class:`SpanMapper` is fed a connection's frames in order (direction, raw bytes, sequence
number, wall time, monotonic nanoseconds: what the recorder stores per frame) and returns
the :class:`SpanRecord` items that just ended; :meth:`SpanMapper.finish` ends the rest.
Nothing here imports OpenTelemetry: the records are plain data that
:mod:`acp_proxy.formats.otlp` turns into the official SDK/protobuf objects. The mapping
(and why) is written down in ``docs/otlp.md``:

- one trace per session (``acp.session`` root span), one per connection for what belongs
  to no session (``acp.connection``: ``initialize``, authentication, invalid frames...);
- ``invoke_agent`` per turn (v1: ``session/prompt`` to its response; v2: to the ``idle``
  state update), with the GenAI attributes; ``execute_tool`` per tool call;
- a span per other request/response pair, in both directions (the agent's permission,
  ``fs/*`` and ``terminal/*`` requests are children of the turn, or of the tool call they
  are about);
- other session updates become span events (consecutive chunks of one message folded
  into one event);
- a request whose ``params._meta.traceparent`` is a valid W3C trace context joins that
  trace (its span's parent is the remote span, with a link back to where it would be);
- ids are derived from the recording (the connection's start time, the session id and the
  order in which spans start), so the same recording always gives the same spans.

Content (prompt text, message and tool output text, request params and results) is only
recorded with ``include_content=True``.

The span records themselves (and their ids) are :mod:`acp_proxy.acp.span_records`.
Pairing, ``initialize`` facts and turn boundaries come from :mod:`acp_proxy.acp.exchanges`
and :mod:`acp_proxy.acp.model` (the same rules as ``show``, ``stats`` and the checker).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from acp_proxy.acp.exchanges import Exchanges, InitializeFacts, session_id_of
from acp_proxy.acp.model import SESSION_RESULT_METHODS, replays_history
from acp_proxy.acp.span_records import (
    TOOL_END_STATUSES,
    AttrValue,
    SpanEvent,
    SpanRecord,
    cap,
    content_text,
    derive_id,
    json_text,
    parse_traceparent,
    str_or_none,
)
from acp_proxy.acp.turns import Turn, TurnTracker
from acp_proxy.acp.updates import entity_key
from acp_proxy.wire.frame import Direction, Frame
from acp_proxy.wire.jsonrpc import Message
from acp_proxy.wire.surrogates import classify_encodable


@dataclass(slots=True)
class _Request:
    span: SpanRecord
    method: str
    session_id: str | None
    direction: Direction


@dataclass(slots=True)
class _Session:
    span: SpanRecord
    last_ns: int


class SpanMapper:
    """Feed one connection's frames in order; collect the spans that ended.

    ``identity`` names the connection within its recording (the export and the live
    exporter both use its ``started_at`` as text), so ids are reproducible.
    ``connection_attributes`` are added to the connection's root span.
    """

    def __init__(
        self,
        identity: str,
        *,
        include_content: bool = False,
        connection_attributes: dict[str, AttrValue] | None = None,
    ) -> None:
        self.identity = identity
        self.include_content = include_content
        self.facts = InitializeFacts()
        self.tracker = TurnTracker()
        self._exchanges: Exchanges[_Request, tuple[Message, int, int]] = Exchanges()
        self._sessions: dict[str, _Session] = {}
        self._turns: dict[str, tuple[Turn, SpanRecord]] = {}  # open turn per session
        self._prompt_rpc: dict[str, SpanRecord] = {}  # v2 prompt rpc span per prompt id
        self._tools: dict[tuple[str, str], SpanRecord] = {}  # open tool calls
        self._tools_done: set[tuple[str, str]] = set()  # (session, call id) that ended
        self._replays: dict[str, SpanRecord] = {}  # session -> its load/resume span
        self._ended: list[SpanRecord] = []
        self._count = 0
        self._first: tuple[int, int] | None = None  # (wall ns, mono ns) of the first frame
        self.last_ns = 0
        self.frames = 0
        self._conn_trace = derive_id(128, "trace", identity, "")
        self.connection_span = self._new_span(
            "acp.connection", "internal", 0, trace_id=self._conn_trace, parent=None
        )
        if connection_attributes:
            self.connection_span.attributes.update(connection_attributes)
        self._started = False

    # -- ids and spans ---------------------------------------------------------------------

    def _new_span(
        self,
        name: str,
        kind: str,
        start_ns: int,
        *,
        trace_id: int,
        parent: int | None,
    ) -> SpanRecord:
        self._count += 1
        span_id = derive_id(64, "span", self.identity, str(self._count))
        return SpanRecord(trace_id, span_id, parent, name, kind, start_ns)

    def _child(
        self, name: str, kind: str, ns: int, parent: SpanRecord, meta: Any = None
    ) -> SpanRecord:
        """A span under ``parent``, or under a peer's remote span when ``meta`` says so."""
        remote = parse_traceparent(meta)
        if remote is None:
            return self._new_span(name, kind, ns, trace_id=parent.trace_id, parent=parent.span_id)
        span = self._new_span(name, kind, ns, trace_id=remote[0], parent=remote[1])
        span.remote_parent = True
        span.trace_state = remote[2]
        span.links.append((parent.trace_id, parent.span_id))
        return span

    def _end(self, span: SpanRecord, ns: int) -> None:
        span.end_ns = max(ns, span.start_ns)
        self._ended.append(span)

    def _session(
        self, sid: str, ns: int, remote: tuple[int, int, str | None] | None = None
    ) -> SpanRecord:
        """The session's root span (started now if new; under ``remote`` if given)."""
        entry = self._sessions.get(sid)
        if entry is None:
            if remote is None:
                trace_id = derive_id(128, "trace", self.identity, sid)
                span = self._new_span("acp.session", "internal", ns, trace_id=trace_id, parent=None)
            else:
                span = self._new_span(
                    "acp.session", "internal", ns, trace_id=remote[0], parent=remote[1]
                )
                span.remote_parent = True
                span.trace_state = remote[2]
            span.attributes["gen_ai.conversation.id"] = sid
            span.links.append((self._conn_trace, self.connection_span.span_id))
            entry = self._sessions[sid] = _Session(span, ns)
        entry.last_ns = max(entry.last_ns, ns)
        return entry.span

    def _scope(self, sid: str | None, ns: int) -> SpanRecord:
        """Where an event or child of session ``sid`` goes: its turn, its root, or the
        connection."""
        if sid is None:
            return self.connection_span
        turn = self._turns.get(sid)
        return turn[1] if turn is not None else self._session(sid, ns)

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, frame: Frame) -> list[SpanRecord]:
        """Fold one frame; return the spans that ended with it."""
        direction, raw, seq, ts, mono_ns = (
            frame.direction,
            frame.raw,
            frame.seq,
            frame.ts,
            frame.mono_ns,
        )
        if self._first is None:
            self._first = (round(ts * 1e9), mono_ns)
            self.connection_span.start_ns = self._first[0]
        ns = self._first[0] + (mono_ns - self._first[1])
        self.last_ns = max(self.last_ns, ns)
        self.frames += 1
        msg = classify_encodable(raw)
        if msg.kind == "batch":
            for item in msg.items:
                self._message(direction, item, seq, ns)
        else:
            self._message(direction, msg, seq, ns)
        for _key, (early, eseq, ens) in self._exchanges.tick():
            self._orphan(early, eseq, ens)
        out, self._ended = self._ended, []
        return out

    def _message(self, direction: Direction, msg: Message, seq: int, ns: int) -> None:
        if msg.kind == "invalid":
            self.connection_span.add_event(
                SpanEvent(
                    "acp.invalid_frame",
                    ns,
                    {"acp.seq": seq, "acp.direction": direction, "acp.reason": msg.reason or ""},
                )
            )
        elif msg.kind == "request":
            self._request(direction, msg, seq, ns)
        elif msg.kind == "response":
            assert msg.id is not None
            pending = self._exchanges.answer(direction, msg.id)
            if pending is None:
                self._exchanges.hold_early(direction, msg.id, (msg, seq, ns))
            else:
                self._response(pending, msg, seq, ns)
        else:
            self._notification(direction, msg, seq, ns)

    def _request(self, direction: Direction, msg: Message, seq: int, ns: int) -> None:
        assert msg.id is not None and msg.method is not None
        method, params = msg.method, msg.params
        meta = params.get("_meta") if isinstance(params, dict) else None
        sid = session_id_of(params)
        if method == "initialize":
            self.facts.observe_request(params)
            self.tracker.version = self.facts.protocol_version
        if sid is not None and sid not in self._sessions:
            remote = parse_traceparent(meta)
            self._session(sid, ns, remote)
            if remote is not None:
                meta = None  # the session root joined the peer's trace already
        span: SpanRecord
        if sid is not None and method == "session/prompt" and direction == "c2a":
            span = self._prompt(msg.id, sid, seq, ns, meta, params)
        else:
            parent = self._request_parent(direction, method, sid, params, ns)
            span = self._child(method, "client", ns, parent, meta)
        self._rpc_attributes(span, direction, msg.id, method, seq)
        if self.include_content and method != "session/prompt":
            span.attributes["acp.rpc.params"] = json_text(params)
        if sid is not None and replays_history(method, params, self.facts.protocol_version):
            self._replays[sid] = span
        pending = _Request(span, method, sid, direction)
        early = self._exchanges.request(direction, msg.id, pending)
        if early is not None:
            span.attributes["acp.reordered"] = True
            self._response(pending, *early)

    def _request_parent(
        self, direction: Direction, method: str, sid: str | None, params: Any, ns: int
    ) -> SpanRecord:
        if direction == "a2c" and sid is not None and isinstance(params, dict):
            call = params.get("toolCall")
            subject = params.get("subject")
            if call is None and isinstance(subject, dict):
                call = subject.get("toolCall")
            tool_id = call.get("toolCallId") if isinstance(call, dict) else None
            tool = self._tools.get((sid, tool_id)) if isinstance(tool_id, str) else None
            if tool is not None:
                return tool
        if sid is None:
            return self.connection_span
        if direction == "c2a" and method not in ("session/prompt",):
            return self._session(sid, ns)
        return self._scope(sid, ns)

    def _rpc_attributes(
        self, span: SpanRecord, direction: Direction, rpc_id: str, method: str, seq: int
    ) -> None:
        span.attributes.update(
            {
                "rpc.system": "jsonrpc",
                "rpc.method": method,
                "rpc.jsonrpc.version": "2.0",
                "rpc.jsonrpc.request_id": rpc_id,
                "acp.direction": direction,
                "acp.seq": seq,
            }
        )

    def _prompt(
        self, rpc_id: str, sid: str, seq: int, ns: int, meta: Any, params: Any
    ) -> SpanRecord:
        """A prompt: its turn's ``invoke_agent`` span (v1: also the request's span)."""
        self.tracker.prompt(sid, rpc_id, seq, ns)
        turn = self.tracker.open[sid]
        held = self._turns.get(sid)
        if held is not None and held[0] is turn:  # a running state update came first
            turn_span = held[1]
        else:
            if held is not None:  # a new prompt while the last turn never ended
                self._end_turn(sid, held[0], held[1], ns)
            turn_span = self._child("invoke_agent", "client", ns, self._session(sid, ns), meta)
            self._turns[sid] = (turn, turn_span)
            meta = None
        turn_span.attributes["acp.turn.origin"] = "prompt"
        if self.include_content and isinstance(params, dict):
            turn_span.attributes["acp.prompt.text"] = cap(content_text(params.get("prompt")))
        if self.facts.protocol_version == 1 or self.facts.protocol_version is None:
            return turn_span
        rpc = self._child("session/prompt", "client", ns, turn_span, meta)
        self._prompt_rpc[rpc_id] = rpc
        return rpc

    def _response(self, pending: _Request, msg: Message, seq: int, ns: int) -> None:
        span, method = pending.span, pending.method
        payload = msg.payload
        result = payload.get("result") if isinstance(payload, dict) else None
        error = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(error, dict):
            code = error.get("code")
            if isinstance(code, int) and not isinstance(code, bool):
                span.attributes["rpc.jsonrpc.error_code"] = code
                span.attributes["error.type"] = str(code)
            message = error.get("message")
            if isinstance(message, str):
                span.attributes["rpc.jsonrpc.error_message"] = cap(message)
            span.status = "error"
            span.status_message = message if isinstance(message, str) else None
        elif self.include_content:
            span.attributes["acp.rpc.result"] = json_text(result)
        if method == "initialize" and error is None:
            self.facts.observe_result(result)
            self.tracker.version = self.facts.protocol_version
            self._initialize_attributes(span)
        if method == "session/request_permission" and isinstance(result, dict):
            outcome = result.get("outcome")
            if isinstance(outcome, dict):
                if str_or_none(outcome.get("outcome")):
                    span.attributes["acp.permission.outcome"] = outcome["outcome"]
                if str_or_none(outcome.get("optionId")):
                    span.attributes["acp.permission.option_id"] = outcome["optionId"]
        sid = pending.session_id
        if sid is None and (method in SESSION_RESULT_METHODS or isinstance(result, dict)):
            new_sid = session_id_of(result)
            if new_sid is not None and new_sid not in self._sessions:
                # the session starts with the request that created it, which joins its trace
                remote = (
                    (span.trace_id, span.parent_span_id, span.trace_state)
                    if span.remote_parent and span.parent_span_id is not None
                    else None
                )
                root = self._session(new_sid, span.start_ns, remote)
                span.trace_id, span.parent_span_id = root.trace_id, root.span_id
                span.remote_parent, span.trace_state, span.links = False, None, []
                sid = new_sid
        if sid is not None:
            span.attributes["gen_ai.conversation.id"] = sid
            self._session(sid, ns)
            if self._replays.get(sid) is span:
                del self._replays[sid]
        if method == "session/prompt" and pending.direction == "c2a" and sid is not None:
            self._prompt_response(msg.id or "", payload, sid, span, seq, ns)
            return
        self._end(span, ns)

    def _prompt_response(
        self, rpc_id: str, payload: Any, sid: str, span: SpanRecord, seq: int, ns: int
    ) -> None:
        rpc = self._prompt_rpc.pop(rpc_id, None)
        held = self._turns.get(sid)
        turn = self.tracker.prompt_result(rpc_id, payload, seq, ns)
        if rpc is not None:
            self._end(rpc, ns)
        result = payload.get("result") if isinstance(payload, dict) else None
        if held is not None and isinstance(result, dict):
            self._usage(held[1], result.get("usage"))
        if turn is not None and held is not None and held[0] is turn:
            self._end_turn(sid, turn, held[1], ns)
        elif rpc is None and (held is None or held[1] is not span):
            self._end(span, ns)  # a prompt we did not take for a turn (should not happen)

    def _initialize_attributes(self, span: SpanRecord) -> None:
        facts = self.facts
        if facts.protocol_version is not None:
            span.attributes["acp.protocol_version"] = facts.protocol_version
        for prefix, info in (("acp.agent", facts.agent_info), ("acp.client", facts.client_info)):
            if isinstance(info, dict):
                for key in ("name", "version"):
                    if str_or_none(info.get(key)):
                        span.attributes[f"{prefix}.{key}"] = info[key]

    def _agent_attributes(self, span: SpanRecord) -> None:
        info = self.facts.agent_info
        if isinstance(info, dict):
            if str_or_none(info.get("name")):
                span.attributes["gen_ai.agent.name"] = info["name"]
            if str_or_none(info.get("version")):
                span.attributes["gen_ai.agent.version"] = info["version"]
        if self.facts.protocol_version is not None:
            span.attributes["acp.protocol_version"] = self.facts.protocol_version

    def _end_turn(self, sid: str, turn: Turn, span: SpanRecord, ns: int) -> None:
        """The turn is over: its tools end too; the span gets its finish reason."""
        self._turns.pop(sid, None)
        for key in [k for k in self._tools if k[0] == sid]:
            tool = self._tools.pop(key)
            tool.attributes["acp.unfinished"] = True
            self._end(tool, ns)
        attrs = span.attributes
        attrs["gen_ai.operation.name"] = "invoke_agent"
        attrs["gen_ai.conversation.id"] = sid
        self._agent_attributes(span)
        name = attrs.get("gen_ai.agent.name")
        span.name = f"invoke_agent {name}" if isinstance(name, str) else "invoke_agent"
        attrs["acp.turn.origin"] = turn.origin
        stop = turn.stop_reason
        if isinstance(stop, str):
            attrs["gen_ai.response.finish_reasons"] = [stop]
            attrs["acp.stop_reason"] = stop
        if turn.cancelled:
            attrs["acp.turn.cancelled"] = True
        if turn.error is not None:
            span.status = "error"
            err = turn.error
            message = err.get("message") if isinstance(err, dict) else None
            span.status_message = message if isinstance(message, str) else None
            code = err.get("code") if isinstance(err, dict) else None
            attrs["error.type"] = str(code) if isinstance(code, int) else "error"
        if turn.end_ns is None:
            attrs["acp.unfinished"] = True
        self._end(span, ns if turn.end_ns is None else turn.end_ns)

    def _usage(self, span: SpanRecord, usage: Any) -> None:
        """Token counts (``usage`` of a prompt result or an idle update) as GenAI usage."""
        if not isinstance(usage, dict):
            return
        for field_name, attr in (
            ("inputTokens", "gen_ai.usage.input_tokens"),
            ("outputTokens", "gen_ai.usage.output_tokens"),
            ("thoughtTokens", "acp.usage.thought_tokens"),
            ("totalTokens", "acp.usage.total_tokens"),
        ):
            value = usage.get(field_name)
            if isinstance(value, int) and not isinstance(value, bool):
                span.attributes[attr] = value

    def _orphan(self, msg: Message, seq: int, ns: int) -> None:
        self.connection_span.add_event(
            SpanEvent(
                "acp.orphan_response", ns, {"acp.seq": seq, "rpc.jsonrpc.request_id": msg.id or ""}
            )
        )

    # -- notifications ---------------------------------------------------------------------

    def _notification(self, direction: Direction, msg: Message, seq: int, ns: int) -> None:
        params, method = msg.params, msg.method or ""
        sid = session_id_of(params)
        if method == "session/update" and isinstance(params, dict) and sid is not None:
            self._update(sid, params.get("update"), seq, ns)
            return
        attrs: dict[str, AttrValue] = {
            "rpc.method": method,
            "acp.direction": direction,
            "acp.seq": seq,
        }
        if method == "session/cancel" and sid is not None:
            self.tracker.cancel(sid)
            turn = self._turns.get(sid)
            if turn is not None:
                turn[1].attributes["acp.turn.cancelled"] = True
        target = self._scope(sid, ns)
        if method == "$/cancel_request" and isinstance(params, dict):
            rid = params.get("requestId")
            text = json.dumps(rid) if rid is not None else None
            other: Direction = "a2c" if direction == "c2a" else "c2a"
            pending = self._exchanges.pending.get((other, text)) if text else None
            if pending is not None:
                target = pending.span
        if self.include_content:
            attrs["acp.rpc.params"] = json_text(params)
        target.add_event(SpanEvent(method, ns, attrs))

    def _update(self, sid: str, update: Any, seq: int, ns: int) -> None:
        if not isinstance(update, dict):
            return
        variant = update.get("sessionUpdate")
        if not isinstance(variant, str):
            return
        attrs: dict[str, AttrValue] = {"acp.update": variant, "acp.seq": seq}
        replay = self._replays.get(sid)
        if replay is not None:
            attrs["acp.replayed"] = True
            self._session(sid, ns)
            self._event(replay, variant, update, attrs, ns)
            return
        if variant in ("tool_call", "tool_call_update", "tool_call_content_chunk"):
            self._tool(sid, variant, update, attrs, ns)
            return
        if variant == "state_update":
            state = update.get("state")
            if isinstance(state, str):
                attrs["acp.state"] = state
            self._session(sid, ns)
            turn = self._turns.get(sid)
            target = turn[1] if turn is not None else self._scope(sid, ns)
            target.add_event(SpanEvent(variant, ns, attrs))
            ended = self.tracker.state(sid, state, update, seq, ns)
            opened = self.tracker.open.get(sid)
            if ended is not None and turn is not None and turn[0] is ended:
                self._usage(turn[1], update.get("usage"))
                self._end_turn(sid, ended, turn[1], ns)
            elif opened is not None and (turn is None or turn[0] is not opened):
                span = self._child("invoke_agent", "client", ns, self._session(sid, ns))
                span.attributes["acp.turn.origin"] = opened.origin
                self._turns[sid] = (opened, span)
            return
        target = self._scope(sid, ns)
        if variant == "usage_update":
            for key, attr in (
                ("used", "acp.usage.context_used"),
                ("size", "acp.usage.context_size"),
            ):
                value = update.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    attrs[attr] = value
                    target.attributes[attr] = value
            cost = update.get("cost")
            if isinstance(cost, dict) and isinstance(cost.get("amount"), (int, float)):
                attrs["acp.usage.cost"] = float(cost["amount"])
                target.attributes["acp.usage.cost"] = float(cost["amount"])
                if str_or_none(cost.get("currency")):
                    target.attributes["acp.usage.cost_currency"] = cost["currency"]
            self._usage(target, update)
        self._event(target, variant, update, attrs, ns)

    def _event(
        self,
        span: SpanRecord,
        variant: str,
        update: dict[str, Any],
        attrs: dict[str, AttrValue],
        ns: int,
    ) -> None:
        key = entity_key(update)
        chunk = (variant, key[1]) if key is not None and variant.endswith("_chunk") else None
        if chunk is not None and not self.include_content and span.fold_chunk(chunk):
            return  # the common case of a streamed message: nothing more to build
        if key is not None and key[1]:
            attrs[f"acp.{key[0]}.id"] = key[1]
        for name in ("status", "severity", "currentModeId", "title"):
            value = update.get(name)
            if isinstance(value, str) and (name != "title" or self.include_content):
                attrs[f"acp.{name}"] = value
        if self.include_content and "content" in update:
            attrs["acp.content.text"] = cap(content_text(update.get("content")))
        span.add_event(SpanEvent(variant, ns, attrs), chunk)

    def _tool(
        self, sid: str, variant: str, update: dict[str, Any], attrs: dict[str, AttrValue], ns: int
    ) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            self._event(self._scope(sid, ns), variant, update, attrs, ns)
            return
        key = (sid, call_id)
        tool = self._tools.get(key)
        if tool is None:
            if key in self._tools_done:  # an update after the call ended: an event
                attrs["gen_ai.tool.call.id"] = call_id
                self._event(self._scope(sid, ns), variant, update, attrs, ns)
                return
            tool = self._child("execute_tool", "internal", ns, self._scope(sid, ns))
            tool.attributes.update(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.conversation.id": sid,
                }
            )
            self._tools[key] = tool
        kind, name, status = (
            str_or_none(update.get("kind")),
            str_or_none(update.get("name")),
            update.get("status"),
        )
        title = str_or_none(update.get("title"))
        if kind is not None:
            tool.attributes["acp.tool.kind"] = kind
        if name is not None:
            tool.attributes["gen_ai.tool.name"] = name
        if self.include_content and title is not None:
            tool.attributes["acp.tool.title"] = cap(title)
        if self.include_content and "rawInput" in update:
            tool.attributes["gen_ai.tool.call.arguments"] = json_text(update["rawInput"])
        tool_name = tool.attributes.get("gen_ai.tool.name", tool.attributes.get("acp.tool.kind"))
        tool.name = f"execute_tool {tool_name}" if isinstance(tool_name, str) else "execute_tool"
        if isinstance(status, str) and status:
            tool.attributes["acp.tool.status"] = status
        self._event(tool, variant, update, attrs, ns)
        if status in TOOL_END_STATUSES:
            if status == "failed":
                tool.status = "error"
                tool.attributes["error.type"] = "failed"
            del self._tools[key]
            self._tools_done.add(key)
            self._end(tool, ns)

    # -- the end -----------------------------------------------------------------------------

    def finish(self) -> list[SpanRecord]:
        """End of the connection: everything still open ends at the last frame's time."""
        if self.frames == 0:
            return []
        ns = self.last_ns
        for _key, (early, eseq, ens) in self._exchanges.expire_all():
            self._orphan(early, eseq, ens)
        for pending in list(self._exchanges.pending.values()):
            span = pending.span
            span.attributes["acp.unanswered"] = True
            if pending.method == "session/prompt" and pending.direction == "c2a":
                held = self._turns.get(pending.session_id or "")
                if held is not None and held[1] is span:
                    continue  # ended with its turn below
            self._end(span, ns)
        self._exchanges.clear()
        self._prompt_rpc.clear()
        for sid, (turn, span) in list(self._turns.items()):
            self._end_turn(sid, turn, span, ns)
        for key in list(self._tools):
            tool = self._tools.pop(key)
            tool.attributes["acp.unfinished"] = True
            self._end(tool, ns)
        for entry in self._sessions.values():
            self._agent_attributes(entry.span)
            self._end(entry.span, entry.last_ns)
        self._sessions.clear()
        self.connection_span.attributes["acp.frames"] = self.frames
        self._initialize_attributes(self.connection_span)
        self._end(self.connection_span, ns)
        out, self._ended = self._ended, []
        return out
