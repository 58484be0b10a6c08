"""The demo agent's sessions and id counters, optionally kept in a ``--state`` JSON file.

A second agent process (a new connection) reads the file again to load or resume a session
the first one created; writes are atomic (a temporary file, then a rename).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

STATE_FORMAT = "acp-proxy-demo-state/1"


class StateError(Exception):
    """The ``--state`` file cannot be read or written."""


class SessionStore:
    """Sessions and id counters, in memory and optionally mirrored to a JSON file."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.counters: dict[str, int] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.dirty = False
        self.reload()

    def reload(self) -> None:
        """Read the state file again (another agent process may have written it)."""
        if not self.path or not os.path.exists(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            raise StateError(f"cannot read state file {self.path}: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            raise StateError(f"{self.path} is not a demo agent state file")
        counters, sessions = data.get("counters"), data.get("sessions")
        if not isinstance(counters, dict) or not isinstance(sessions, dict):
            raise StateError(f"{self.path} is not a demo agent state file")
        for key, value in counters.items():
            if isinstance(value, int):
                self.counters[key] = max(value, self.counters.get(key, 0))
        for sid, session in sessions.items():
            if isinstance(session, dict) and isinstance(session.get("history"), list):
                self.sessions.setdefault(sid, session)

    def next_id(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        self.dirty = True
        return f"{prefix}_{n}"

    def save(self) -> None:
        """Write the file if anything changed (atomically: temp file, then rename)."""
        if not self.dirty:
            return
        self.dirty = False
        if not self.path:
            return
        data = {"format": STATE_FORMAT, "counters": self.counters, "sessions": self.sessions}
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, tmp = tempfile.mkstemp(prefix=".demo-state-", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False, indent=1)
            os.replace(tmp, self.path)
        except OSError as exc:
            raise StateError(f"cannot write state file {self.path}: {exc}") from None
