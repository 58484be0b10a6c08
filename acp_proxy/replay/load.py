"""Reading a recording (SQLite file or JSONL export) into a :class:`~.script.Script`.

This is the only I/O of the replay package besides the transport adapters. Errors are
:class:`~acp_proxy.record.schema.RecordingError` with one user-facing line: a missing or
corrupt file, an unknown ``--connection`` or ``--session``, a recording without client
requests.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from acp_proxy.record.reader import iter_frames, list_connections, open_recording
from acp_proxy.record.schema import RecordingError
from acp_proxy.replay.script import ConnectionInfo, RecFrame, Script, build_script, rec_frame

_SQLITE_MAGIC = b"SQLite format 3\x00"


def open_any(path: Path) -> sqlite3.Connection:
    """Open a recording file: a SQLite database as is, an export file imported in memory."""
    if not path.exists():
        raise RecordingError(f"no such recording: {path}")
    if path.is_dir():
        raise RecordingError(f"{path} is a directory, not a recording")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {exc.strerror}") from None
    if head == _SQLITE_MAGIC or not head:
        return open_recording(path)
    try:
        from acp_proxy.record.export import import_export
    except ImportError:  # pragma: no cover - export support not installed
        raise RecordingError(f"{path} is not a SQLite recording") from None
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    try:
        import_export(path, db)
    except RecordingError as exc:
        db.close()
        raise RecordingError(f"{path}: {exc}") from None
    except (sqlite3.DatabaseError, OSError, ValueError) as exc:
        db.close()
        raise RecordingError(f"{path} is neither a recording nor an export file: {exc}") from None
    return db


def load_script(
    path: Path | str,
    *,
    connection_id: int | None = None,
    session_id: str | None = None,
) -> Script:
    """Load the replay script of ``path``; steps from one connection, one session, or all."""
    path = Path(path)
    db = open_any(path)
    try:
        return script_from_db(
            db, connection_id=connection_id, session_id=session_id, source=str(path)
        )
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"{path}: the recording is damaged: {exc}") from None
    finally:
        db.close()


def script_from_db(
    db: sqlite3.Connection,
    *,
    connection_id: int | None = None,
    session_id: str | None = None,
    source: str = "",
) -> Script:
    """Build the script from an open recording."""
    rows = list_connections(db)
    connections = {r.id: ConnectionInfo(r.id, r.protocol_version) for r in rows}
    if not rows:
        raise RecordingError(f"{source or 'the recording'}: no connections recorded")
    chosen: set[int] | None = None
    if connection_id is not None:
        if connection_id not in connections:
            known = ", ".join(str(r.id) for r in rows)
            raise RecordingError(f"no connection {connection_id} in this recording (has: {known})")
        chosen = {connection_id}
    if session_id is not None:
        found = {
            int(c)
            for (c,) in db.execute(
                "SELECT DISTINCT connection_id FROM frames WHERE session_id = ?", (session_id,)
            )
        }
        if not found:
            raise RecordingError(f"unknown session {session_id}: it is not in this recording")
        chosen = found if chosen is None else chosen & found
        if not chosen:
            raise RecordingError(
                f"session {session_id} does not appear in connection {connection_id}"
            )
    frames: list[RecFrame] = [
        rec_frame(f.connection_id, f.seq, f.mono_ns, f.direction, f.raw, f.session_id)
        for f in iter_frames(db)
    ]
    script = build_script(frames, connections, step_connections=chosen, source=source)
    if not any(s.trigger.is_request for s in script.steps):
        raise RecordingError(
            f"{source or 'the recording'}: no client requests recorded, nothing to replay"
        )
    return script
