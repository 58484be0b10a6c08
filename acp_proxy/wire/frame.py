"""The unit everything else is built on: one frame exactly as it crossed the wire."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Direction = Literal["c2a", "a2c"]
"""``c2a``: client to agent; ``a2c``: agent to client."""

C2A: Direction = "c2a"
A2C: Direction = "a2c"


def other_direction(direction: Direction) -> Direction:
    """The direction a response travels for a request sent in ``direction``."""
    return A2C if direction == C2A else C2A


@dataclass(frozen=True, slots=True)
class Frame:
    """One recorded frame: a stdio line (terminator included) or one WebSocket message.

    ``raw`` holds exactly the bytes that crossed; concatenating the ``raw`` of a stdio
    connection's frames in one direction gives back that direction's byte stream.
    """

    connection_id: int
    seq: int
    direction: Direction
    ts: float
    mono_ns: int
    raw: bytes
