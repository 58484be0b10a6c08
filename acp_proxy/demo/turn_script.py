"""The demo agent's one scripted turn, as a generator of action lists.

:func:`turn_script` plays the same realistic turn for every ``session/prompt``: lists of
:data:`Action`, one list a step, receiving the client's replies (a permission answer) and
:class:`Cancelled` thrown in when the session is cancelled or closed.
:class:`~acp_proxy.demo.agent.DemoAgent` drives it and turns the actions into messages.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from acp_proxy.demo.sessions import SessionStore

Json = Any

REQUEST_CANCELLED = -32800
"""The JSON-RPC error a cancelled request is answered with."""

Action = tuple[Any, ...]
"""One thing a turn does: ("update", payload) | ("respond", result) | ("error", code, message)
| ("ask", permission params) | ("done",). A turn yields a list of actions per step."""
Script = Generator[list[Action], Json, None]


class Cancelled(Exception):
    """Thrown into a turn's script when its session was cancelled or closed."""


@dataclass
class Turn:
    """One prompt being played: its script and whether it waits for the client."""

    session_id: str
    request_id: Json
    script: Script | None = None
    started: bool = False
    cancelled: bool = False
    cancel_delivered: bool = False
    waiting_for: str | None = None
    reply: Json = None


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _prompt_text(prompt: list[Json]) -> str:
    for block in prompt:
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))
    return "(no text)"


def turn_script(
    turn: Turn, session: dict[str, Any], prompt: list[Json], *, version: int, store: SessionStore
) -> Script:
    """The scripted turn: lists of actions, one list per step; receives client replies."""
    v2 = version >= 2
    sid = turn.session_id
    n = int(session.get("turns", 1))
    text = _prompt_text(prompt)
    inserted = False
    finished = False
    call: str | None = None
    tool_done = True

    def update(variant: str, /, **fields: Any) -> Action:
        return ("update", {"sessionUpdate": variant, **fields})

    try:
        if v2:
            yield [update("state_update", state="running")]
        user = store.next_id("msg")
        inserted = True
        if v2:
            yield [
                update("user_message", messageId=user, content=prompt),
                ("respond", {"messageId": user}),
            ]
        else:
            yield [update("user_message_chunk", messageId=user, content=block) for block in prompt]
        if not session.get("title"):
            session["title"] = text[:60]
            yield [update("session_info_update", title=session["title"])]
        thought = store.next_id("msg")
        yield [
            update(
                "agent_thought_chunk",
                messageId=thought,
                content=_text(f"The user asks: {text!r}. I should read the README first."),
            )
        ]
        yield [
            update(
                "agent_thought_chunk",
                messageId=thought,
                content=_text(" A short plan, one tool call and a brief answer will do."),
            )
        ]
        steps = ["Read README.md", "Summarise what it says", "Answer the question"]
        plan_id = store.next_id("plan") if v2 else None

        def plan(statuses: list[str]) -> Action:
            entries = [
                {"content": c, "priority": p, "status": s}
                for c, p, s in zip(steps, ["high", "medium", "low"], statuses, strict=True)
            ]
            if v2:
                return update(
                    "plan_update", plan={"type": "items", "planId": plan_id, "entries": entries}
                )
            return update("plan", entries=entries)

        yield [plan(["in_progress", "pending", "pending"])]
        answer = store.next_id("msg")
        yield [
            update(
                "agent_message_chunk",
                messageId=answer,
                content=_text("Let me look at the project README first."),
            )
        ]
        call = store.next_id("call")
        path = session.get("cwd", "/").rstrip("/") + "/README.md"
        tool = {
            "toolCallId": call,
            "title": "Read README.md",
            "kind": "read",
            "status": "pending",
            "locations": [{"path": path}],
            "rawInput": {"path": path},
        }
        tool_done = False
        yield [update("tool_call_update" if v2 else "tool_call", **tool)]
        yield [
            update(
                "notice",
                severity="info",
                title="This is a scripted demo agent",
                description="Every turn plays the same steps; no model is involved.",
            )
        ]
        subject = {k: tool[k] for k in ("toolCallId", "title", "kind", "status")}
        options = [
            {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        ask: dict[str, Any]
        if v2:
            ask = {
                "sessionId": sid,
                "title": f"Allow reading {path}?",
                "subject": {"type": "tool_call", "toolCall": subject},
                "options": options,
            }
            reply = yield [update("state_update", state="requires_action"), ("ask", ask)]
        else:
            ask = {"sessionId": sid, "toolCall": subject, "options": options}
            reply = yield [("ask", ask)]
        result = reply.get("result") if isinstance(reply, dict) else None
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict):
            outcome = {}
        if turn.cancelled or outcome.get("outcome") == "cancelled":
            raise Cancelled()
        allowed = outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow"
        running = [update("state_update", state="running")] if v2 else []
        readme = ["# demo project\n", "A project that exists only in this demo.\n"]
        if allowed:
            yield [*running, update("tool_call_update", toolCallId=call, status="in_progress")]
            if v2:
                for line in readme:
                    yield [
                        update(
                            "tool_call_content_chunk",
                            toolCallId=call,
                            content={"type": "content", "content": _text(line)},
                        )
                    ]
                yield [update("tool_call_update", toolCallId=call, status="completed")]
            else:
                whole = {"type": "content", "content": _text("".join(readme))}
                yield [
                    update("tool_call_update", toolCallId=call, status="completed", content=[whole])
                ]
            tool_done = True
            said = " The README says this is a project that exists only in this demo."
        else:
            yield [
                *running,
                update(
                    "tool_call_update",
                    toolCallId=call,
                    status="failed",
                    content=[{"type": "content", "content": _text("Permission denied.")}],
                ),
            ]
            tool_done = True
            said = " You declined, so I will answer without reading it."
        yield [plan(["completed", "completed", "in_progress"])]
        yield [
            update(
                "_vendor_demo",
                payload={
                    "note": "an unknown update variant; keep it, replay it, forward it",
                    "turn": n,
                    "nested": {"list": [1, 2.5, "three", None, True], "text": "héllo ✓"},
                },
            )
        ]
        yield [update("agent_message_chunk", messageId=answer, content=_text(said))]
        yield [
            update(
                "agent_message_chunk",
                messageId=answer,
                content=_text(" That is all for this demo turn."),
            )
        ]
        yield [plan(["completed", "completed", "completed"])]
        yield [
            update(
                "usage_update",
                used=1500 * n,
                size=200000,
                cost={"amount": round(0.0125 * n, 4), "currency": "USD"},
            )
        ]
        finished = True
        if v2:
            yield [update("state_update", state="idle", stopReason="end_turn"), ("done",)]
        else:
            yield [("respond", {"stopReason": "end_turn"}), ("done",)]
    except Cancelled:
        if finished:
            return
        tail: list[Action] = []
        if not inserted:
            tail.append(("error", REQUEST_CANCELLED, "Request cancelled before insertion"))
        if call is not None and not tool_done:
            tail.append(
                update("tool_call_update", toolCallId=call, status="cancelled" if v2 else "failed")
            )
        if v2:
            tail.append(update("state_update", state="idle", stopReason="cancelled"))
        else:
            tail.append(("respond", {"stopReason": "cancelled"}))
        yield [*tail, ("done",)]
