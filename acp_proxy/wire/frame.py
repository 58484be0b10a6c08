"""Frame directions: which way a frame crossed (``c2a`` client to agent, ``a2c`` agent to client).

A recorded frame is a row of the recording (``frames``: connection, seq, direction, raw
bytes...); there is no frame class: every layer passes ``(direction, raw)`` with what it
needs beside it.
"""

from __future__ import annotations

from typing import Literal

Direction = Literal["c2a", "a2c"]
"""``c2a``: client to agent; ``a2c``: agent to client."""

C2A: Direction = "c2a"
A2C: Direction = "a2c"


def other_direction(direction: Direction) -> Direction:
    """The direction a response travels for a request sent in ``direction``."""
    return A2C if direction == C2A else C2A
