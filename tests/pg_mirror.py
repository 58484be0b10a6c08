"""The same recording in SQLite and in PostgreSQL: a SQLite file copied row for row.

Every stored column is kept (ids, times, derived index columns, the ``binary`` flag,
connection facts, stderr lines, events), so a reader gives the same answers on both stores.
Writes go through :mod:`acp_proxy.store.edit` (no SQL in the tests).
"""

from __future__ import annotations

from pathlib import Path

from acp_proxy.acp.index import IndexColumns
from acp_proxy.store.edit import (
    Capture,
    insert_connection,
    insert_event,
    insert_frames,
    insert_stderr_lines,
    write_transaction,
)
from acp_proxy.store.pg import connect_pg
from acp_proxy.store.reader import RecordingReader

_WRITABLE = {
    "id", "started_at", "ended_at", "transport", "agent_command", "cwd", "pid", "proxy_pid",
    "exit_status", "protocol_version", "client_info", "agent_info", "label", "peer", "headers",
    "frames_dropped", "bytes_dropped", "meta", "last_seen_at", "end_reason", "host", "digest",
}  # fmt: skip


def mirror_to_pg(src: Path, url: str) -> None:
    """Copy every row of the SQLite recording ``src`` into the (new, empty) database ``url``."""
    db = connect_pg(url, create=True)
    try:
        with RecordingReader.open(src) as reader, write_transaction(db):
            for record in reader.connection_records():
                cid = insert_connection(db, **{k: v for k, v in record.items() if k in _WRITABLE})
                frames = [
                    Capture(
                        f.direction,
                        f.raw,
                        f.ts,
                        f.mono_ns,
                        None
                        if f.kind is None
                        else IndexColumns(
                            f.kind,  # type: ignore[arg-type]
                            f.rpc_id,
                            f.method,
                            f.session_id,
                            f.update_kind,
                            f.entity_type,
                            f.entity_id,
                        ),
                        f.binary,
                    )
                    for f in reader.frames(connection_id=cid)
                ]
                first = min((f.seq for f in reader.frames(connection_id=cid)), default=1)
                insert_frames(db, cid, frames, first_seq=first)
                insert_stderr_lines(
                    db,
                    cid,
                    [(s.seq, s.ts, s.mono_ns, s.raw) for s in reader.stderr_lines(cid)],
                )
                for e in reader.events(cid):
                    insert_event(db, cid, e.ts, e.kind, e.detail)
            for e in reader.events(None):
                insert_event(db, None, e.ts, e.kind, e.detail)
    finally:
        db.close()
