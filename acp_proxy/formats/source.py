"""Opening a recording to replay, whatever its form: a SQLite recording, a PostgreSQL
database (a ``postgresql://`` URL) or a JSONL export.

A SQLite or PostgreSQL recording is read in place (read-only, lazily, through
:class:`~acp_proxy.store.replay_frames.ReplayFrames`); an export file holds no index to seek in, so
it is imported whole into an in-memory database first. Lives apart from the reader because
it needs both the reader and the importer (which itself reads through the reader).
"""

from __future__ import annotations

from pathlib import Path

from acp_proxy.formats.jsonl_import import import_export
from acp_proxy.store.engine import (
    SQLITE,
    SQLITE_MAGIC,
    Database,
    RecordingUrl,
    location_name,
    memory_database,
    open_database,
    parse_location,
)
from acp_proxy.store.replay_frames import ReplayFrames
from acp_proxy.store.schema import RecordingError

_UNREADABLE: tuple[type[BaseException], ...] = (*SQLITE.damaged_errors, OSError, ValueError)
"""What importing a file that is not an export raises."""


def open_replay_frames(path: str | Path) -> ReplayFrames:
    """The recording at ``path`` as replay reads it (see :func:`open_replay_source`)."""
    return ReplayFrames(open_replay_source(path), location_name(path))


def open_replay_source(path: str | Path) -> Database:
    """Open a recording to replay: a SQLite or PostgreSQL database as is, an export file
    imported into an in-memory database (exports are read whole: no index to seek in)."""
    where = parse_location(path)
    if isinstance(where, RecordingUrl):
        return open_database(where)
    path = where
    if not path.exists():
        raise RecordingError(f"no such recording: {path}")
    if path.is_dir():
        raise RecordingError(f"{path} is a directory, not a recording")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise RecordingError(f"cannot read {path}: {exc.strerror}") from None
    if head == SQLITE_MAGIC or not head:
        return open_database(path)
    db = memory_database()
    try:
        import_export(path, db)
    except RecordingError as exc:
        db.close()
        raise RecordingError(f"{path}: {exc}") from None
    except _UNREADABLE as exc:
        db.close()
        raise RecordingError(f"{path} is neither a recording nor an export file: {exc}") from None
    return db
