"""The conformance engine behind ``acp-proxy check``: :class:`ConnectionChecker`, findings."""

from acp_proxy.acp.conformance.checker import (
    MAX_LINE_BYTES,
    ConnectionChecker,
    DamagedFrame,
    Finding,
    FrameTimes,
    frames_text,
)

__all__ = [
    "MAX_LINE_BYTES",
    "ConnectionChecker",
    "DamagedFrame",
    "Finding",
    "FrameTimes",
    "frames_text",
]
