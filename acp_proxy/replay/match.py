"""Matching a live message against recorded ones: ignore paths, sessionId mapping, diffs.

Pure functions and one small stateful class (:class:`SessionMap`); no I/O. A live request
matches a recorded one when the methods are equal and the params are equal after removing
the *ignore paths* (``params.cwd`` by default) and ``params.sessionId``; the sessionIds
must instead be *consistent* with the mapping between recorded and live sessionIds that the
replay has learnt so far (an unmapped pair is accepted and then bound). ``initialize`` is
matched on ``protocolVersion`` alone: client info and capabilities legitimately vary.

Ignore paths are dotted paths from the message root (``params.cwd``,
``params.prompt.*.text``); ``*`` matches any key or array index, and a path that does not
start with ``params``/``result``/``error`` is taken relative to ``params`` (``cwd`` means
``params.cwd``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.jsonpaths import Difference, diff_values, remove_paths

DEFAULT_IGNORES: tuple[str, ...] = ("params.cwd",)
SESSION_PATH: tuple[str, ...] = ("params", "sessionId")


@dataclass(slots=True)
class SessionMap:
    """The bijection between recorded sessionIds and live ones, learnt as the replay runs."""

    rec_to_live: dict[str, str] = field(default_factory=dict)
    live_to_rec: dict[str, str] = field(default_factory=dict)

    def consistent(self, recorded: str, live: str) -> bool:
        known = self.rec_to_live.get(recorded)
        if known is not None:
            return known == live
        back = self.live_to_rec.get(live)
        return back is None or back == recorded

    def bind(self, recorded: str, live: str) -> None:
        if recorded not in self.rec_to_live and live not in self.live_to_rec:
            self.rec_to_live[recorded] = live
            self.live_to_rec[live] = recorded

    def to_live(self, recorded: str) -> str:
        return self.rec_to_live.get(recorded, recorded)

    def to_recorded(self, live: str) -> str:
        return self.live_to_rec.get(live, live)


def session_of(message: Any) -> str | None:
    """``params.sessionId`` of a message dict, if it is a string."""
    if isinstance(message, dict):
        params = message.get("params")
        if isinstance(params, dict):
            sid = params.get("sessionId")
            if isinstance(sid, str):
                return sid
    return None


def _version_only(params: Any) -> Any:
    if isinstance(params, dict):
        return {k: v for k, v in params.items() if k == "protocolVersion"}
    return params


def compare_call(
    recorded: Any,
    live: Any,
    ignores: list[tuple[str, ...]],
    sessions: SessionMap,
) -> list[Difference]:
    """Differences between a recorded and a live request/notification (``[]``: they match).

    JSON-RPC ids are never compared; ``params.sessionId`` is checked against ``sessions``.
    """
    if not isinstance(recorded, dict) or not isinstance(live, dict):
        return [Difference("(message)", recorded, live)]
    diffs: list[Difference] = []
    if recorded.get("method") != live.get("method"):
        diffs.append(Difference("method", recorded.get("method"), live.get("method")))
        return diffs
    rec_sid, live_sid = session_of(recorded), session_of(live)
    if rec_sid is not None and live_sid is not None:
        if not sessions.consistent(rec_sid, live_sid):
            expected = sessions.rec_to_live.get(rec_sid)
            note = f" (live session {expected})" if expected else ""
            diffs.append(Difference("params.sessionId", rec_sid + note, live_sid))
    elif rec_sid != live_sid:
        diffs.append(
            Difference(
                "params.sessionId",
                rec_sid,
                live_sid,
                "live" if live_sid is None else "recorded",
            )
        )
    paths = [*ignores, SESSION_PATH]
    rec_params = remove_paths({"params": recorded.get("params")}, paths).get("params")
    live_params = remove_paths({"params": live.get("params")}, paths).get("params")
    if recorded.get("method") == "initialize":
        rec_params, live_params = _version_only(rec_params), _version_only(live_params)
    diffs.extend(diff_values(rec_params, live_params, "params"))
    return diffs
