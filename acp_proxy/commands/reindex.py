"""``acp-proxy reindex DB``: re-derive every frame's index columns from its raw bytes.

The raw bytes are the one truth; ``kind``, ``rpc_id``, ``method``, ``session_id``,
``update_kind``, ``entity_type``, ``entity_id`` and the connection facts (protocol
version, client and agent info) are derived by :class:`~acp_proxy.acp.index.ConnectionIndexer`.
Run this after upgrading acp-proxy so old recordings benefit from a better model. Frames
are read and rewritten in batches (one transaction each, only changed rows), so memory
stays flat and proxies may keep recording into the same file meanwhile.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import click
import orjson

from acp_proxy.acp.index import INDEX_COLUMNS, ConnectionIndexer
from acp_proxy.commands.common import RECORDING_ARG, recording
from acp_proxy.wire.frame import Direction, other_direction

BATCH = 5000


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


class Progress:
    """Progress lines on stderr for big files (a rewritten line on a terminal)."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total = total
        self.enabled = not quiet and total >= 2 * BATCH
        self.tty = sys.stderr.isatty()
        self.step = max(BATCH, total // 20)
        self.next = self.step

    def update(self, done: int) -> None:
        if not self.enabled or done < self.next:
            return
        self.next = done + self.step
        text = f"acp-proxy reindex: {done}/{self.total} frames ({100 * done // self.total}%)"
        sys.stderr.write(("\r" + text) if self.tty else text + "\n")
        sys.stderr.flush()

    def end(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def reindex_connection(
    db: sqlite3.Connection, connection_id: int, progress: Progress, done: int
) -> tuple[int, int]:
    """Re-derive one connection's frames; return (frames seen, rows changed)."""
    indexer = ConnectionIndexer()
    # responses recorded before their request: (request direction, id) -> frame row id
    early: dict[tuple[Direction, str], int] = {}
    last_seq = 0
    seen = changed = 0
    while True:
        rows = db.execute(
            f"SELECT id, seq, direction, raw, {', '.join(INDEX_COLUMNS)} FROM frames "
            "WHERE connection_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            [connection_id, last_seq, BATCH],
        ).fetchall()
        if not rows:
            break
        updates: list[tuple[Any, ...]] = []
        patches: list[tuple[Any, ...]] = []
        for row in rows:
            frame_id, seq, direction, raw = row[0], row[1], row[2], bytes(row[3])
            cols = indexer.index(direction, raw)
            new = cols.values()
            if new != tuple(row[4:]):
                updates.append((*new, frame_id))
            if cols.kind == "response" and cols.method is None and cols.rpc_id is not None:
                early[(other_direction(direction), cols.rpc_id)] = frame_id
            elif cols.kind == "request" and cols.rpc_id is not None and early:
                answered = early.pop((direction, cols.rpc_id), None)
                if answered is not None:
                    patches.append((cols.method, cols.session_id, answered))
                    indexer.forget_request(direction, cols.rpc_id)
            last_seq = seq
        seen += len(rows)
        db.execute("BEGIN IMMEDIATE")
        try:
            if updates:
                db.executemany(
                    f"UPDATE frames SET {', '.join(c + ' = ?' for c in INDEX_COLUMNS)} "
                    "WHERE id = ?",
                    updates,
                )
            if patches:
                db.executemany(
                    "UPDATE frames SET method = ?, session_id = coalesce(session_id, ?) "
                    "WHERE id = ?",
                    patches,
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        changed += len(updates) + len(patches)
        progress.update(done + seen)
    facts = indexer.facts
    if facts.changed:
        db.execute(
            "UPDATE connections SET protocol_version = ?, client_info = ?, agent_info = ? "
            "WHERE id = ?",
            [
                facts.protocol_version,
                _json(facts.client_info),
                _json(facts.agent_info),
                connection_id,
            ],
        )
    return seen, changed


@click.command("reindex")
@RECORDING_ARG
@click.option("--quiet", "-q", is_flag=True, help="No progress or summary on stderr.")
def reindex_command(recording_path: Path, quiet: bool) -> None:
    """Re-derive the index columns of every frame from its raw bytes.

    The derived columns (kind, id, method, session, update variant, entity) and each
    connection's protocol version and client/agent info are recomputed with this
    version's ACP model. Big files show progress on stderr. Safe to run while proxies
    record into the same file.

    \b
    Example:
      acp-proxy reindex old-session.db
    """
    with recording(recording_path) as db:
        total = int(db.execute("SELECT count(*) FROM frames").fetchone()[0])
        progress = Progress(total, quiet)
        ids = [int(r[0]) for r in db.execute("SELECT id FROM connections ORDER BY id")]
        done = changed = 0
        for cid in ids:
            seen, n = reindex_connection(db, cid, progress, done)
            done += seen
            changed += n
        progress.end()
    if not quiet:
        click.echo(
            f"reindexed {done} frames in {len(ids)} connection(s): {changed} row(s) changed",
            err=True,
        )
