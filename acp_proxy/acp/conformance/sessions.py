"""Session checks: turns, cancellation, replay windows and entity ids, per session.

:class:`SessionChecks` follows each session through the client's requests and their answers,
``session/cancel`` and the agent's ``session/update``s: v1 turns end with the prompt's
response, v2 foreground work with an ``idle`` state update; ``session/load`` and
``session/resume`` open replay windows; the ids that name entities must not be reused.
"""

from __future__ import annotations

from typing import Any

from acp_proxy.acp.conformance.capabilities import CapabilityChecks
from acp_proxy.acp.conformance.fields import STATES, STOP_REASONS_V1, STOP_REASONS_V2, TOOL_DONE
from acp_proxy.acp.conformance.state import _dig, _get, _Pending, _Session, _short, _str
from acp_proxy.acp.updates import (
    HISTORY_VARIANTS,
    KNOWN_VARIANTS_V1,
    KNOWN_VARIANTS_V2,
    MESSAGE_VARIANTS,
    V1_TURN_VARIANTS,
)
from acp_proxy.wire.frame import A2C, C2A, Direction, other_direction
from acp_proxy.wire.jsonrpc import Message, id_json_text

SESSION_PATH_METHODS = frozenset(
    {"session/new", "session/load", "session/resume", "session/list", "session/fork"}
)
"""Requests whose ``cwd`` and ``additionalDirectories`` must be absolute paths."""


class SessionChecks(CapabilityChecks):
    """Checks that follow each session's work through requests, answers and updates."""

    def _client_request(self, seq: int, method: str, params: Any, req: _Pending) -> None:
        v2 = self.effective_version >= 2
        sid = req.session_id
        if method == "initialize":
            self.facts.observe_request(params)
            self._observed()
            return
        if method in SESSION_PATH_METHODS:
            self._paths(seq, sid, ("cwd", _get(params, "cwd")))
            dirs = _get(params, "additionalDirectories")
            if isinstance(dirs, list):
                self._paths(seq, sid, *(("additionalDirectories[]", d) for d in dirs))
        self._capabilities("client", seq, method, sid)
        if method == "session/load":
            if sid is not None:
                req.replay = "load"
                self._open_window(sid, "load", seq)
        elif method == "session/resume":
            replay_from = _get(params, "replayFrom")
            kind = "replay" if v2 and replay_from is not None else "plain"
            if sid is not None:
                req.replay = kind
                self._open_window(sid, kind, seq)
        elif method == "session/prompt" and sid is not None:
            self._prompt_content(seq, sid, _get(params, "prompt"))
            self._turns.prompt(sid, str(seq), seq, 0)  # (turns' times: not read here)
            s = self._session(sid)
            s.prompts_pending += 1
            s.after = None
            s.turn_ended_seq = None
            if s.activity_seq is None:
                s.activity_seq = seq
                s.activity_prompt = True

    def _agent_request(self, seq: int, method: str, params: Any) -> None:
        sid = _str(params, "sessionId")
        self._capabilities("agent", seq, method, sid)
        if method.startswith("fs/"):
            self._paths(seq, sid, ("path", _get(params, "path")))
        elif method == "terminal/create":
            self._paths(seq, sid, ("cwd", _get(params, "cwd")))

    def _client_request_answered(self, seq: int, req: _Pending, msg: Message) -> None:
        result = msg.result
        ok = not msg.is_error_response
        sid = req.session_id
        if req.method == "initialize":
            if ok:
                self.facts.observe_result(result)
                self._observed()
            return
        if req.method in ("session/new", "session/fork") and ok:
            new_sid = _str(result, "sessionId")
            if new_sid is not None:
                fresh = self._session(new_sid)
                if fresh.state is None:
                    fresh.state = "idle"  # a new session has no foreground work yet
            return
        if req.replay is not None and sid is not None:
            s = self._session(sid)
            s.window = None
            if ok:
                s.after = req.replay
                s.after_seq = seq
            return
        if req.method == "session/prompt" and sid is not None:
            self._prompt_answered(seq, req.seq, sid, ok, result)

    def _prompt_answered(self, seq: int, req_seq: int, sid: str, ok: bool, result: Any) -> None:
        s = self._session(sid)
        s.prompts_pending = max(0, s.prompts_pending - 1)
        self._turns.version = self.effective_version
        response = {"result": result} if ok else {"error": "an error response"}
        self._turns.prompt_result(str(req_seq), response, seq, 0)
        if self.effective_version < 2:
            stop = _get(result, "stopReason") if ok else None
            if ok:
                self._enum(seq, sid, "stopReason", stop, STOP_REASONS_V1)
            if s.v1_cancel_seq is not None and stop != "cancelled":
                got = f"stopReason {stop!r}" if ok else "an error response"
                self._report(
                    "v1.cancel-stop-reason",
                    (s.v1_cancel_seq, seq),
                    f"prompt answered with {got} after session/cancel #{s.v1_cancel_seq}",
                    sid,
                )
            if sid not in self._turns.open:  # the turn machine ended the session's turn
                s.turn_ended_seq = seq
                s.v1_cancel_seq = None
            return
        if not ok:
            if s.activity_seq == req_seq and s.state not in ("running", "requires_action"):
                s.activity_seq = None  # rejected before insertion: no work started
                s.activity_prompt = False
            return
        mid = _get(result, "messageId")
        if not isinstance(mid, str) or not mid:
            self._report(
                "v2.prompt-message-id",
                (seq,),
                f"session/prompt result has no messageId string (got {_short(result)})",
                sid,
            )
            return
        first = s.prompt_message_ids.get(mid)
        if first is not None:
            self._report(
                "entity.id-reuse",
                (first, seq),
                f"two session/prompt responses returned the same messageId {mid!r}",
                sid,
            )
            return
        s.prompt_message_ids[mid] = seq
        if mid in s.user_ids_seen:
            # read no more: a later response returning mid is a reuse (prompt_message_ids)
            s.user_ids_seen.discard(mid)
        else:
            s.awaiting_user[mid] = seq

    def _agent_request_answered(self, seq: int, req: _Pending, msg: Message) -> None:
        if req.method == "session/request_permission" and req.must_cancel_seq is not None:
            outcome = _dig(msg.result, "outcome", "outcome")
            if outcome != "cancelled":
                got = f"outcome {outcome!r}" if not msg.is_error_response else "an error"
                self._report(
                    "turn.permission-cancelled",
                    (req.must_cancel_seq, seq),
                    f"permission request answered with {got} after session/cancel "
                    f"#{req.must_cancel_seq}",
                    req.session_id,
                )

    def _notified(self, seq: int, direction: Direction, label: str) -> None:
        """A notification came: the latest a response with id null may answer."""
        self._notifications[direction].append((seq, label, self.frames))
        self._null_runs[other_direction(direction)].clear()

    def _notification(self, seq: int, direction: Direction, method: str, params: Any) -> None:
        label = method
        variant = None
        if method == "session/update":
            variant = _get(_get(params, "update"), "sessionUpdate")
            if isinstance(variant, str):
                label = variant
        self._notified(seq, direction, label)
        if method == "$/cancel_request":
            rid = _get(params, "requestId")
            if rid is not None:
                req = self._pending.get((direction, id_json_text(rid, None)))
                if req is not None:
                    req.cancel_seq = seq
            return
        if direction == C2A and method == "session/cancel":
            sid = _str(params, "sessionId")
            if sid is None:
                return
            s = self._session(sid)
            if self.effective_version < 2:
                if sid in self._turns.open:
                    s.v1_cancel_seq = seq
            elif s.state in ("running", "requires_action"):
                s.cancel_seq = seq
            for (d, _rid), req in self._pending.items():
                if (
                    d == A2C
                    and req.method == "session/request_permission"
                    and (req.session_id == sid)
                ):
                    req.must_cancel_seq = seq
            return
        if direction == A2C and method == "session/update":
            sid = _str(params, "sessionId")
            update = _get(params, "update")
            if sid is not None and isinstance(update, dict) and isinstance(variant, str):
                self._update(seq, self._session(sid), variant, update)

    # -- session/update --------------------------------------------------------------------

    def _update(self, seq: int, s: _Session, variant: str, update: dict[str, Any]) -> None:
        """One ``session/update`` of the agent's (``variant``: its ``sessionUpdate``)."""
        v2 = self.effective_version >= 2
        sid = s.sid
        self._enum(
            seq, sid, "sessionUpdate", variant, KNOWN_VARIANTS_V2 if v2 else KNOWN_VARIANTS_V1
        )
        entity = self._entity_key(variant, update)
        if v2 and variant in MESSAGE_VARIANTS:
            mid = update.get("messageId")
            if not isinstance(mid, str) or not mid:
                self._report("v2.message-id", (seq,), f"{variant} without a messageId", sid)
        if variant in ("user_message", "user_message_chunk"):
            mid = update.get("messageId")
            if isinstance(mid, str):
                if mid not in s.prompt_message_ids:  # (else the turn has it: not kept)
                    s.user_ids_seen.add(mid)
                s.awaiting_user.pop(mid, None)
        self._fields(seq, s, variant, update)
        # replay windows
        replaying = False
        if s.window is not None:
            replaying = s.window != "plain"
            if variant == "notice" and replaying:
                self._report(
                    "replay.no-notice",
                    (s.window_seq, seq),
                    f"notice inside the replay window of request #{s.window_seq}",
                    sid,
                )
            elif s.window == "plain" and variant in HISTORY_VARIANTS:
                self._report(
                    "replay.plain-resume",
                    (s.window_seq, seq),
                    f"{variant} replayed during a session/resume without replayFrom",
                    sid,
                )
            if replaying:
                return
        elif s.after is not None and self._late_history(variant, s):
            if s.after == "plain":
                self._report(
                    "replay.plain-resume",
                    (s.after_seq, seq),
                    f"{variant} after the session/resume response #{s.after_seq} and before any "
                    "new work: resume without replayFrom must not replay",
                    sid,
                )
            else:
                self._report(
                    "replay.before-response",
                    (s.after_seq, seq),
                    f"{variant} arrives after the replay response #{s.after_seq}, before any new "
                    "prompt",
                    sid,
                )
            return
        if not v2:
            if (
                variant in V1_TURN_VARIANTS
                and sid not in self._turns.open
                and (s.turn_ended_seq is not None)
            ):
                self._report(
                    "v1.updates-after-turn",
                    (s.turn_ended_seq, seq),
                    f"{variant} after the prompt response #{s.turn_ended_seq} ended the turn",
                    sid,
                )
            return
        self._v2_work(seq, s, variant, update, entity)

    def _late_history(self, variant: str, s: _Session) -> bool:
        if self.effective_version >= 2:
            # v2 work may go on across a resume (live agent output after the response) and
            # background tool activity may run while idle; a user message with no prompt
            # pending can only be history.
            return variant in ("user_message", "user_message_chunk") and s.prompts_pending == 0
        return variant in V1_TURN_VARIANTS or variant in MESSAGE_VARIANTS

    def _v2_work(
        self,
        seq: int,
        s: _Session,
        variant: str,
        update: dict[str, Any],
        entity: tuple[str, str] | None,
    ) -> None:
        sid = s.sid
        if variant == "state_update":
            state = update.get("state")
            if not isinstance(state, str):
                return
            self._enum(seq, sid, "state", state, STATES)
            if state == "running":
                s.state = "running"
                s.after = None
                s.cancelled_entities = set()
                if s.activity_seq is None:
                    s.activity_seq = seq
            elif state == "requires_action":
                s.state = state
            elif state == "idle":
                self._idle(seq, s, update)
            return
        if entity is not None and entity in s.cancelled_entities:
            self._report(
                "v2.nothing-after-cancel",
                (s.cancelled_idle_seq, seq),
                f"{variant} for {entity[0]} {entity[1]!r} of the cancelled work arrives after "
                f"the idle #{s.cancelled_idle_seq} that reported cancellation",
                sid,
            )
        if entity is not None:
            if s.activity_seq is None and entity[0] in ("agent_message", "agent_thought"):
                s.activity_seq = seq
            if s.state in ("running", "requires_action") and entity is not None:
                s.work_entities.add(entity)
                if variant == "tool_call_update":
                    status = update.get("status")
                    previous = s.tool_status.get(entity[1])
                    if isinstance(status, str) or previous is None:
                        s.tool_status[entity[1]] = (
                            status if isinstance(status, str) else None,
                            seq,
                        )

    def _idle(self, seq: int, s: _Session, update: dict[str, Any]) -> None:
        sid = s.sid
        stop = update.get("stopReason")
        was_working = s.state in ("running", "requires_action")
        # Work on a session taken over from another connection (state unknown) may have
        # started before this recording; only a prompt sent here proves it started here.
        if (
            not was_working
            and s.activity_seq is not None
            and (s.state == "idle" or s.activity_prompt)
        ):
            self._report(
                "v2.running-before-idle",
                (s.activity_seq, seq),
                f"idle ends work (from #{s.activity_seq}) that never reported running",
                sid,
            )
        if was_working or s.activity_seq is not None:
            if stop is None:
                self._report("v2.stop-reason", (seq,), "idle without a stopReason", sid)
            elif not isinstance(stop, str):
                self._report("v2.stop-reason", (seq,), f"stopReason is {_short(stop)}", sid)
            else:
                self._enum(seq, sid, "stopReason", stop, STOP_REASONS_V2)
        if s.cancel_seq is not None:
            if stop != "cancelled":
                self._report(
                    "v2.cancel-idle",
                    (s.cancel_seq, seq),
                    f"idle after session/cancel #{s.cancel_seq} has stopReason {_short(stop)}",
                    sid,
                )
            s.cancelled_entities = set(s.work_entities)
            s.cancelled_idle_seq = seq
            s.cancel_seq = None
        elif stop == "cancelled":
            s.cancelled_entities = set(s.work_entities)
            s.cancelled_idle_seq = seq
        if stop == "error":
            unfinished = [
                (tid, st, tseq) for tid, (st, tseq) in s.tool_status.items() if st not in TOOL_DONE
            ]
            if unfinished:
                names = ", ".join(f"{tid!r} ({st or 'no status'})" for tid, st, _ in unfinished)
                self._report(
                    "v2.error-idle-tools",
                    (*(t for _, _, t in unfinished), seq),
                    f"error idle leaves tool call(s) unfinished: {names}",
                    sid,
                )
        s.state = "idle"
        s.activity_seq = None
        s.activity_prompt = False
        s.work_entities = set()
        s.tool_status = {}

    def _open_window(self, sid: str, kind: str, seq: int) -> None:
        s = self._session(sid)
        s.window = kind
        s.window_seq = seq
        s.after = None
        s.turn_ended_seq = None

    def _finish_sessions(self) -> None:
        """End of the connection: report each session's work that never completed."""
        for s in self._sessions.values():
            for mid, seq in s.awaiting_user.items():
                self._report(
                    "v2.prompt-user-message",
                    (seq,),
                    f"no user_message/user_message_chunk with messageId {mid!r} (returned by "
                    "session/prompt)",
                    s.sid,
                )
            if s.cancel_seq is not None:
                self._report(
                    "v2.cancel-idle",
                    (s.cancel_seq,),
                    "session/cancel was never followed by an idle state_update",
                    s.sid,
                )
            elif s.state in ("running", "requires_action"):
                self._report(
                    "v2.work-left-running",
                    (s.activity_seq,) if s.activity_seq else (),
                    f"session still {s.state} when the recording ended",
                    s.sid,
                )
            for cid, seq in s.compactions_open.items():
                self._report(
                    "compaction.terminal-status",
                    (seq,),
                    f"compaction {cid!r} never reached completed/failed/cancelled",
                    s.sid,
                )
