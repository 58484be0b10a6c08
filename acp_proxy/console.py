"""The one place that writes acp-proxy's own lines to stderr: warnings and notes.

Every layer reports incidents (a recorder drop, a replay note, a server fault) as one line
``acp-proxy: MESSAGE`` on stderr through :func:`warn`; nothing else writes stderr directly,
so the format is the same everywhere and a closed stderr never raises.
"""

from __future__ import annotations

import sys


def warn(message: str) -> None:
    """Write ``acp-proxy: MESSAGE`` as one line on stderr (silently if stderr is gone)."""
    try:
        sys.stderr.write(f"acp-proxy: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
