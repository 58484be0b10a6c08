"""Field checks: enum values, required fields and absolute paths of ``session/update``s.

:meth:`FieldChecks._fields` checks one update's fields by variant (notices, compactions, tool
calls, terminals) and keeps the entity ids that must not be reused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_proxy.acp.conformance.state import CheckerState, _get, _Session, _short
from acp_proxy.acp.updates import entity_of


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP_REASONS_V1 = _words("end_turn max_tokens max_turn_requests refusal cancelled")
STOP_REASONS_V2 = STOP_REASONS_V1 | {"error"}
STATES = frozenset({"running", "idle", "requires_action"})
SEVERITIES = frozenset({"info", "warning", "error"})
COMPACTION_STATUSES = frozenset({"in_progress", "completed", "failed", "cancelled"})
COMPACTION_DONE = frozenset({"completed", "failed", "cancelled"})
TOOL_STATUSES_V1 = frozenset({"pending", "in_progress", "completed", "failed"})
TOOL_STATUSES_V2 = TOOL_STATUSES_V1 | {"cancelled"}
TOOL_DONE = frozenset({"completed", "failed", "cancelled"})
TOOL_KINDS = _words("read edit delete move search execute think fetch switch_mode other")


class FieldChecks(CheckerState):
    """Checks of field values: enums, required fields, paths."""

    def _entity_key(self, variant: str, update: dict[str, Any]) -> tuple[str, str] | None:
        if variant in ("plan", "plan_removed"):
            return None  # a v1 plan is one per session; a removal creates nothing
        return entity_of(variant, update)

    def _fields(self, seq: int, s: _Session, variant: str, update: dict[str, Any]) -> None:
        """The field checks of ``variant``'s updates (most variants have none)."""
        check = _FIELD_CHECKS.get(variant)
        if check is not None:
            check(self, seq, s, variant, update)

    def _notice_fields(self, seq: int, s: _Session, variant: str, update: dict[str, Any]) -> None:
        sid = s.sid
        title = update.get("title")
        severity = update.get("severity")
        if not isinstance(title, str) or not title.strip():
            self._report("notice.fields", (seq,), f"notice title is {_short(title)}", sid)
        if not isinstance(severity, str):
            self._report("notice.fields", (seq,), f"notice severity is {_short(severity)}", sid)
        else:
            self._enum(seq, sid, "severity", severity, SEVERITIES)

    def _compaction_fields(
        self, seq: int, s: _Session, variant: str, update: dict[str, Any]
    ) -> None:
        sid = s.sid
        cid = update.get("compactionId")
        status = update.get("status")
        if not isinstance(cid, str) or not cid or not isinstance(status, str):
            self._report(
                "compaction.fields",
                (seq,),
                f"compaction_update with compactionId {_short(cid)}, status {_short(status)}",
                sid,
            )
            return
        self._enum(seq, sid, "compaction status", status, COMPACTION_STATUSES)
        if status == "in_progress":
            if cid in s.compactions_done:
                self._report(
                    "entity.id-reuse",
                    (seq,),
                    f"compactionId {cid!r} restarts after it ended: IDs MUST NOT be reused "
                    "for another compaction",
                    sid,
                )
                s.compactions_done.discard(cid)
            s.compactions_open.setdefault(cid, seq)
        elif status in COMPACTION_DONE:
            s.compactions_open.pop(cid, None)
            s.compactions_done.add(cid)
        elif cid not in s.compactions_done:
            s.compactions_open.setdefault(cid, seq)

    def _compaction_chunk_fields(
        self, seq: int, s: _Session, variant: str, update: dict[str, Any]
    ) -> None:
        cid = update.get("compactionId")
        if not isinstance(cid, str) or not cid or update.get("content") is None:
            self._report(
                "compaction.fields",
                (seq,),
                f"compaction_summary_chunk with compactionId {_short(cid)} and content "
                f"{_short(update.get('content'))}",
                s.sid,
            )
        elif cid not in s.compactions_done:
            s.compactions_open.setdefault(cid, seq)

    def _tool_call_fields(
        self, seq: int, s: _Session, variant: str, update: dict[str, Any]
    ) -> None:
        sid = s.sid
        tid = update.get("toolCallId")
        status = update.get("status")
        if status is not None:
            self._enum(
                seq,
                sid,
                "tool call status",
                status,
                TOOL_STATUSES_V2 if self.effective_version >= 2 else TOOL_STATUSES_V1,
            )
        kind = update.get("kind")
        if kind is not None:
            self._enum(seq, sid, "tool kind", kind, TOOL_KINDS)
        locations = update.get("locations")
        if isinstance(locations, list):
            self._paths(seq, sid, *(("locations[].path", _get(loc, "path")) for loc in locations))
        if variant == "tool_call" and isinstance(tid, str):
            if tid in s.v1_tool_calls:
                self._report(
                    "entity.id-reuse",
                    (seq,),
                    f"a second tool_call creates toolCallId {tid!r} again (updates use "
                    "tool_call_update)",
                    sid,
                )
            s.v1_tool_calls.add(tid)

    def _terminal_fields(self, seq: int, s: _Session, variant: str, update: dict[str, Any]) -> None:
        self._paths(seq, s.sid, ("cwd", update.get("cwd")))

    def _enum(
        self, seq: int, sid: str | None, name: str, value: Any, known: frozenset[str]
    ) -> None:
        if isinstance(value, str) and value not in known and not value.startswith("_"):
            self._report(
                "enum.reserved",
                (seq,),
                f"{name} {value!r} is neither a known value nor a _-prefixed extension "
                "(reserved for future ACP versions)",
                sid,
            )

    def _paths(self, seq: int, sid: str | None, *named: tuple[str, Any]) -> None:
        for name, value in named:
            if isinstance(value, str) and not _is_absolute(value):
                self._report(
                    "lifecycle.absolute-path", (seq,), f"{name} {value!r} is not absolute", sid
                )


def _is_absolute(path: str) -> bool:
    if path.startswith("/") or path.startswith("\\\\"):
        return True
    return len(path) >= 3 and path[0].isalpha() and path[1] == ":" and path[2] in "\\/"


_FIELD_CHECKS: dict[str, Callable[[FieldChecks, int, _Session, str, dict[str, Any]], None]] = {
    "notice": FieldChecks._notice_fields,
    "compaction_update": FieldChecks._compaction_fields,
    "compaction_summary_chunk": FieldChecks._compaction_chunk_fields,
    "tool_call": FieldChecks._tool_call_fields,
    "tool_call_update": FieldChecks._tool_call_fields,
    "terminal_update": FieldChecks._terminal_fields,
}
"""The variants whose fields :meth:`FieldChecks._fields` checks, and how."""
