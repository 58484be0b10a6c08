"""History re-emission for ``session/load`` (v1) and ``session/resume`` + ``replayFrom`` (v2).

:func:`history_frames` turns the recorded frames of one session (all connections, in
order) into the ``session/update`` notifications a replaying agent sends *before* it
answers the load/resume, following NOTES.md §4. Pure function, no I/O.

Which recorded updates are history:

- every agent→client ``session/update`` of the session, in recorded order, except those
  recorded *inside* an earlier load/replay window (between a ``session/load`` or a
  ``session/resume`` with ``replayFrom`` and its response), which are re-emissions of
  history already counted. When the recording *starts* with such a window (the original
  conversation is not in the file), that first window's updates are the base history.

What is re-emitted, and how:

- ``notice``: never (live-only, not history).
- ``state_update``: never. A replayed session is idle; replaying ``running``/``idle`` pairs
  would make a client believe work is starting and ending. The agent reports its live state
  after the response.
- ``usage_update``, ``available_commands_update``, ``config_option_update``,
  ``current_mode_update`` (v1): *state, not history*; only the **last** one of each variant
  is re-emitted, raw, at the place of its last occurrence, so the client ends up with the
  current value without flicker through stale ones.
- ``session_info_update``: state too (patches of title/metadata): one, at the place of the
  last, with the fields of all of them merged in order (the last value of each field wins,
  ``null`` included); raw when the session had only one.
- Messages (``user_message``/``agent_message``/``agent_thought`` and their ``*_chunk``):
  every recorded update, raw and in order, ``messageId`` untouched. In v2, when the first
  replayed update of a message is a chunk (or an upsert that does not set ``content``), a
  synthesized whole update with ``content: []`` for the same type and ``messageId`` comes
  first, so a client that already shows the message resets it instead of appending twice.
- User messages the agent never echoed: v1 — rebuilt from the recorded ``session/prompt``
  params as ``user_message_chunk`` updates (one per content block) at the prompt's place;
  v2 — rebuilt as one ``user_message`` with the ``messageId`` returned by the prompt
  response and the prompt's content.
- Terminals (v2 ``terminal_update`` / ``terminal_output_chunk``): one synthesized
  ``terminal_update`` snapshot per terminal at its first place: patched fields merged, the
  ``output`` snapshot replaced/appended as live delivery would and re-encoded in base64.
- Compactions (``compaction_update`` / ``compaction_summary_chunk``): one synthesized
  ``compaction_update`` per compaction in its final form (last ``status``, merged
  ``summary``/``error``/``_meta``) at its first place. A compaction that never finished in
  the recording keeps its last recorded status.
- Tool calls, plans and everything else known: raw, in order.
- Unknown variants (``_vendor_x``, future ones): raw, byte-exact.

Raw frames keep the recorded sessionId; the engine maps it to the live one by splicing.

:func:`load_result` is the response that follows the history: what the session's recorded
``session/new`` (or fork/load/resume) answered about its state (``modes``, ``models``,
``configOptions``), brought up to date by the latest ``current_mode_update`` /
``config_option_update``, as the real agent answers a load.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.updates import ENTITY_OF_UPDATE, LIVE_ONLY_VARIANTS, entity_key
from acp_proxy.acp.updates import MESSAGE_TYPES as _MESSAGES
from acp_proxy.replay.script import Classified
from acp_proxy.wire.frame import A2C, C2A
from acp_proxy.wire.surrogates import json_bytes

MESSAGE_TYPES = {
    variant: etype for variant, (etype, _f) in ENTITY_OF_UPDATE.items() if etype in _MESSAGES
}
"""Message variant -> message entity type (``agent_message_chunk`` -> ``agent_message``)."""
LATEST_ONLY = {
    "usage_update",
    "available_commands_update",
    "config_option_update",
    "current_mode_update",
    "session_info_update",
}
MERGED = "session_info_update"
"""The latest-only variant whose updates are patches: the one re-emitted merges them all."""
STATE_FIELDS = ("modes", "models", "configOptions")
"""What a session/new (fork, load, resume) result says about the session's state."""
SESSION_STARTS = frozenset({"session/new", "session/fork", "session/load", "session/resume"})
_ANSWERS_STATE = SESSION_STARTS | {"session/set_mode", "session/set_config_option"}
NEVER = LIVE_ONLY_VARIANTS | {"state_update"}


def notification(session_id: str, update: dict[str, Any]) -> bytes:
    """A synthesized ``session/update`` line."""
    return (
        json_bytes(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id, "update": update},
            }
        )
        + b"\n"
    )


@dataclass(slots=True)
class _Terminal:
    """A v2 terminal folded as live delivery would: fields patched, output replaced/appended."""

    fields: dict[str, Any] = field(default_factory=dict)
    output: bytearray | None = None
    output_extra: dict[str, Any] = field(default_factory=dict)

    def fold(self, variant: str, update: dict[str, Any]) -> None:
        if variant == "terminal_output_chunk":
            data = update.get("data")
            if isinstance(data, str):
                if self.output is None:
                    self.output = bytearray()
                self.output += _b64(data)
            return
        _patch(self.fields, update, skip=("sessionUpdate", "terminalId", "output"))
        if "output" in update:
            output = update["output"]
            if output is None:
                self.output = None
                self.output_extra = {}
            elif isinstance(output, dict):
                data = output.get("data")
                self.output = bytearray(_b64(data)) if isinstance(data, str) else bytearray()
                self.output_extra = {k: v for k, v in output.items() if k != "data"}

    def final(self, tid: str) -> dict[str, Any]:
        update: dict[str, Any] = {"sessionUpdate": "terminal_update", "terminalId": tid}
        update.update(self.fields)
        if self.output is not None:
            update["output"] = {
                "data": base64.b64encode(bytes(self.output)).decode("ascii"),
                **self.output_extra,
            }
        return update


@dataclass(slots=True)
class _Compaction:
    """A compaction in its final form: last status, merged summary/error/_meta."""

    fields: dict[str, Any] = field(default_factory=lambda: {"status": "in_progress"})
    summary: list[Any] | None = None

    def fold(self, variant: str, update: dict[str, Any]) -> None:
        if variant == "compaction_summary_chunk":
            content = update.get("content")
            if content is not None:
                if self.summary is None:
                    self.summary = []
                self.summary.append(content)
            return
        _patch(self.fields, update, skip=("sessionUpdate", "compactionId", "summary"))
        if "summary" in update:
            summary = update["summary"]
            self.summary = list(summary) if isinstance(summary, list) and summary else None

    def final(self, cid: str) -> dict[str, Any]:
        update: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": cid}
        update.update(self.fields)
        if self.summary is not None:
            update["summary"] = self.summary
        return update


def history_frames(
    session_id: str, frames: list[Classified], protocol_version: int | None
) -> list[bytes]:
    """The history of ``session_id`` to re-emit before a load/resume response: one line each
    (recorded raw bytes, or synthesized)."""
    v2 = (protocol_version or 1) >= 2
    # Pass 1: choose the updates that count as history.
    chosen: list[tuple[Classified, dict[str, Any] | None, str | None]] = []
    prompts: list[tuple[int, Classified]] = []  # (position in chosen, prompt request)
    prompt_results: dict[tuple[int, str], Any] = {}
    echoed_v1: set[tuple[int, str]] = set()
    current_prompt: dict[int, tuple[int, str]] = {}
    open_windows: dict[int, tuple[int, str]] = {}  # connection -> window (load request)
    base_window: tuple[int, str] | None = None
    for f in frames:
        if f.direction == C2A:
            if f.kind == "request" and f.rpc_id is not None:
                key = (f.connection_id, f.rpc_id)
                if f.method == "session/prompt":
                    prompts.append((len(chosen), f))
                    current_prompt[f.connection_id] = key
                elif _is_replay_request(f):
                    open_windows[f.connection_id] = key
                    if not chosen and base_window is None:
                        base_window = key  # the recording starts with a replayed history
            continue
        if f.direction != A2C:
            continue
        if f.kind == "response" and f.rpc_id is not None:
            key = (f.connection_id, f.rpc_id)
            prompt_results[key] = f.msg.result
            if open_windows.get(f.connection_id) == key:
                del open_windows[f.connection_id]
            continue
        if f.method != "session/update":
            continue
        window = open_windows.get(f.connection_id)
        if window is not None and window != base_window:
            continue  # a re-emission of history already counted
        params = f.msg.params
        update = params.get("update") if isinstance(params, dict) else None
        variant = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not isinstance(update, dict):
            update = None
        if not isinstance(variant, str):
            variant = None
        if variant in ("user_message", "user_message_chunk"):
            owner = current_prompt.get(f.connection_id)
            if owner is not None:
                echoed_v1.add(owner)
        chosen.append((f, update, variant))

    # Which v2 user messages were echoed (by messageId)?
    echoed_ids = {
        u.get("messageId")
        for _, u, v in chosen
        if u is not None and v in ("user_message", "user_message_chunk")
    }
    last_of: dict[str, int] = {}
    merged: dict[str, Any] = {}  # the session_info_update patches, merged in order
    merges = 0
    for pos, (_, update, variant) in enumerate(chosen):
        if variant in LATEST_ONLY:
            last_of[variant] = pos
        if variant == MERGED and update is not None:
            merged.update(update)
            merges += 1

    # Terminals (v2) and compactions fold into one synthesized update at their first place.
    folded: dict[tuple[str, str], _Terminal | _Compaction] = {}
    for _, update, variant in chosen:
        ekey = _folded_key(update, v2)
        if ekey is None or update is None or variant is None:
            continue
        entity = folded.get(ekey)
        if entity is None:
            entity = folded[ekey] = _Terminal() if ekey[0] == "terminal" else _Compaction()
        entity.fold(variant, update)

    out: list[bytes] = []
    seen_messages: set[tuple[str, str]] = set()
    placed: set[tuple[str, str]] = set()  # folded entities already emitted
    prompt_iter = iter(prompts)
    next_prompt = next(prompt_iter, None)

    def emit_prompts_before(position: int) -> None:
        nonlocal next_prompt
        while next_prompt is not None and next_prompt[0] <= position:
            _rebuild_user_message(
                session_id, next_prompt[1], v2, prompt_results, echoed_v1, echoed_ids, out
            )
            next_prompt = next(prompt_iter, None)

    for pos, (f, update, variant) in enumerate(chosen):
        emit_prompts_before(pos)
        if variant in NEVER:
            continue
        if variant in LATEST_ONLY and last_of.get(variant) != pos:
            continue
        if variant == MERGED and merges > 1:
            out.append(notification(session_id, merged))
            continue
        ekey = _folded_key(update, v2)
        if ekey is not None:
            if ekey not in placed:
                placed.add(ekey)
                final = folded[ekey].final(ekey[1])
                out.append(notification(session_id, final))
            continue
        if update is not None and v2 and variant in MESSAGE_TYPES:
            mid = update.get("messageId")
            etype = MESSAGE_TYPES[variant]
            if isinstance(mid, str) and (etype, mid) not in seen_messages:
                seen_messages.add((etype, mid))
                whole_with_content = variant == etype and "content" in update
                if not whole_with_content:
                    reset = {"sessionUpdate": etype, "messageId": mid, "content": []}
                    out.append(notification(session_id, reset))
        out.append(_terminated(f.raw))
    emit_prompts_before(len(chosen) + 1)
    return out


def load_result(frames: list[Classified]) -> dict[str, Any]:
    """The result of a synthesized load/resume answer for the session of ``frames``.

    The state fields (:data:`STATE_FIELDS`) of the last recorded answer to a request that
    started or resumed the session, with ``modes.currentModeId`` and ``configOptions`` set
    by what came after it (``current_mode_update`` / ``config_option_update``, answered
    ``session/set_mode`` / ``session/set_config_option``); ``{}`` when the recording holds
    none.
    """
    starts: dict[tuple[int, str], Classified] = {}
    result: dict[str, Any] = {}
    for f in frames:
        if f.rpc_id is None:
            if f.direction == A2C and f.method == "session/update":
                params = f.msg.params
                update = params.get("update") if isinstance(params, dict) else None
                _track_state(result, update)
            continue
        key = (f.connection_id, f.rpc_id)
        if f.direction == C2A and f.kind == "request" and f.method in _ANSWERS_STATE:
            starts[key] = f
            continue
        if f.direction != A2C or f.kind != "response":
            continue
        request = starts.pop(key, None)
        answered = f.msg.result
        if not isinstance(answered, dict):
            continue
        # a session/new (fork) request carries no sessionId: only its answer is the session's
        method = request.method if request is not None else None
        if method is None and "sessionId" in answered:
            method = "session/new"
        if method in SESSION_STARTS:
            if any(k in answered for k in STATE_FIELDS):
                result = {k: answered[k] for k in STATE_FIELDS if k in answered}
        elif request is not None and method == "session/set_mode":
            params = request.msg.params
            mode = params.get("modeId") if isinstance(params, dict) else None
            _track_state(result, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        elif method == "session/set_config_option":  # answers the options as they now are
            _track_state(result, {"sessionUpdate": "config_option_update", **answered})
    return result


def _track_state(result: dict[str, Any], update: Any) -> None:
    """Bring a load result's state fields up to date with one recorded update."""
    if not isinstance(update, dict):
        return
    variant = update.get("sessionUpdate")
    modes = result.get("modes")
    if variant == "current_mode_update" and isinstance(modes, dict):
        mode = update.get("currentModeId")
        if isinstance(mode, str):
            result["modes"] = {**modes, "currentModeId": mode}
    elif (
        variant == "config_option_update"
        and "configOptions" in result
        and isinstance(update.get("configOptions"), list)
    ):
        result["configOptions"] = update["configOptions"]


def _folded_key(update: dict[str, Any] | None, v2: bool) -> tuple[str, str] | None:
    """(type, id) of a terminal (v2 only) or compaction update, folded into one snapshot."""
    key = entity_key(update)
    if key is None or key[0] not in ("terminal", "compaction"):
        return None
    return key if v2 or key[0] == "compaction" else None


def _is_replay_request(f: Classified) -> bool:
    params = f.msg.params
    if f.method == "session/load":
        return True
    return (
        f.method == "session/resume"
        and isinstance(params, dict)
        and params.get("replayFrom") is not None
    )


def _terminated(raw: bytes) -> bytes:
    return raw if raw.endswith(b"\n") else raw + b"\n"


def _rebuild_user_message(
    session_id: str,
    prompt: Classified,
    v2: bool,
    results: dict[tuple[int, str], Any],
    echoed_v1: set[tuple[int, str]],
    echoed_ids: set[Any],
    out: list[bytes],
) -> None:
    params = prompt.msg.params
    blocks = params.get("prompt") if isinstance(params, dict) else None
    if not isinstance(blocks, list) or prompt.rpc_id is None:
        return
    key = (prompt.connection_id, prompt.rpc_id)
    if key not in results:
        return  # never accepted (no response recorded): not part of the history
    result = results[key]
    if v2:
        mid = result.get("messageId") if isinstance(result, dict) else None
        if not isinstance(mid, str) or mid in echoed_ids:
            return
        update = {"sessionUpdate": "user_message", "messageId": mid, "content": blocks}
        out.append(notification(session_id, update))
        return
    if key in echoed_v1 or result is None:
        return
    for block in blocks:
        update = {"sessionUpdate": "user_message_chunk", "content": block}
        out.append(notification(session_id, update))


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except ValueError:
        return b""


def _patch(target: dict[str, Any], update: dict[str, Any], skip: tuple[str, ...]) -> None:
    """Patch semantics: ``null`` removes the field, a value replaces it."""
    for key, value in update.items():
        if key in skip:
            continue
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
