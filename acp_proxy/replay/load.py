"""Choosing what to replay from a recording: all connections, one, or one session's (pure).

:func:`select_script` checks the choice against the recording, read through a
:class:`~acp_proxy.replay.script.FrameStore` (the SQLite one, which opens files, is
:class:`acp_proxy.store.replay_frames.ReplayFrames`), and returns the lazy
:class:`~acp_proxy.replay.script.Script`. A bad choice is a :class:`ScriptError` with one
user-facing line: an unknown ``--connection`` or ``--session``, a recording without
connections or without client requests.
"""

from __future__ import annotations

from acp_proxy.replay.script import FrameStore, Script


class ScriptError(ValueError):
    """The recording holds nothing to replay for this choice (one user-facing line)."""


def select_script(
    store: FrameStore,
    *,
    connection_id: int | None = None,
    session_id: str | None = None,
    source: str = "",
) -> Script:
    """The replay script of ``store``: steps from one connection, one session, or all."""
    versions = store.protocol_versions()
    if not versions:
        raise ScriptError(f"{source or 'the recording'}: no connections recorded")
    chosen: set[int] | None = None
    if connection_id is not None:
        if connection_id not in versions:
            known = ", ".join(str(c) for c in versions)
            raise ScriptError(f"no connection {connection_id} in this recording (has: {known})")
        chosen = {connection_id}
    if session_id is not None:
        found = set(store.session_connections(session_id))
        if not found:
            raise ScriptError(f"unknown session {session_id}: it is not in this recording")
        chosen = found if chosen is None else chosen & found
        if not chosen:
            raise ScriptError(f"session {session_id} does not appear in connection {connection_id}")
    script = Script(store, step_connections=chosen, source=source)
    if not script.has_client_requests():
        raise ScriptError(
            f"{source or 'the recording'}: no client requests recorded, nothing to replay"
        )
    return script
