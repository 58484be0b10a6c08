"""A recording of what the conversation views must not hide (issue 21, "What the views hide").

A v1 agent that does not echo ``user_message_chunk`` and sends extension notifications
mid-turn; a client that answers four of them with ``{"id": null, "error": -32602}`` 2-8 ms
after each, while it parses the ``session/update`` chunks around them fine. ``initialize``
takes 3.6 s, the two turns 20 and 130 ms, and the second one is cancelled.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.acp.conformance.helpers import SID, A, C, Frame, er, nt, ok, rq, up, v1_prelude
from tests.helpers import Capture, insert_frames

PROMPTS = ("fix the failing test", "now the docs please")
REJECTED = ("_acme/a", "_acme/b", "_acme/c", "_acme/d")
"""The agent's extension notifications the client answers, in order."""


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def stray_frames() -> list[tuple[float, Frame]]:
    """``(ms, frame)``: sequence numbers are the list positions + 1 (see the comments)."""
    init, init_ok, new, new_ok = v1_prelude()
    chunk = A(up("agent_message_chunk", content=_text("ok ")))
    return [
        (0, init),  # 1
        (3600, init_ok),  # 2: initialize took 3.6 s
        (3601, new),  # 3
        (3603, new_ok),  # 4
        (3610, C(rq(2, "session/prompt", sessionId=SID, prompt=[_text(PROMPTS[0])]))),  # 5
        (3612, chunk),  # 6
        (3613, A(nt(REJECTED[0], n=1))),  # 7
        (3615, C(er(None, -32602, "Invalid params"))),  # 8: 2 ms after #7
        (3616, chunk),  # 9
        (3617, A(nt(REJECTED[1], n=2))),  # 10
        (3625, C(er(None, -32602, "Invalid params"))),  # 11: 8 ms after #10
        (3630, A(ok(2, stopReason="end_turn"))),  # 12: turn 1 took 20 ms
        (3700, C(rq(3, "session/prompt", sessionId=SID, prompt=[_text(PROMPTS[1])]))),  # 13
        (3705, chunk),  # 14
        (3706, A(nt(REJECTED[2], n=3))),  # 15
        (3709, C(er(None, -32602, "Invalid params"))),  # 16: 3 ms after #15
        (3710, chunk),  # 17
        (3711, A(nt(REJECTED[3], n=4))),  # 18
        (3715, C(er(None, -32602, "Invalid params"))),  # 19: 4 ms after #18
        (3790, C(nt("session/cancel", sessionId=SID))),  # 20
        (3830, A(ok(3, stopReason="cancelled"))),  # 21: turn 2 took 130 ms
    ]


def make_stray_db(path: Path) -> None:
    """:func:`stray_frames` as one ended stdio connection, indexed as the recorder does."""
    now = time.time()
    insert_frames(
        path,
        [
            Capture(d, raw, ts=now + ms / 1000, mono_ns=int(ms * 1_000_000))
            for ms, (d, raw) in stray_frames()
        ],
        connection={
            "started_at": now,
            "ended_at": now + 4,
            "transport": "stdio",
            "protocol_version": 1,
        },
        index=True,
    )
