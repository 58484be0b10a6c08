"""``acp-proxy reindex DB``: re-derive every frame's index columns from its raw bytes.

The raw bytes are the one truth; ``kind``, ``rpc_id``, ``method``, ``session_id``,
``update_kind``, ``entity_type``, ``entity_id`` and the connection facts (protocol
version, client and agent info) are derived by :class:`~acp_proxy.acp.index.ConnectionIndexer`.
Run this after upgrading acp-proxy so old recordings benefit from a better model. Frames
are read and rewritten in batches (one transaction each, only changed rows), so memory
stays flat and proxies may keep recording into the same file meanwhile. The work is
:func:`acp_proxy.record.analyze.reindex_connection`; this is the only command that opens a
recording for writing (and migrates an old one).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from acp_proxy.commands.common import RECORDING_ARG, recording
from acp_proxy.record.analyze import REINDEX_BATCH, reindex_connection
from acp_proxy.record.reader import RecordingReader

BATCH = REINDEX_BATCH


class Progress:
    """Progress lines on stderr for big files (a rewritten line on a terminal)."""

    def __init__(self, total: int, quiet: bool, name: str = "reindex") -> None:
        self.name = name
        self.total = total
        self.enabled = not quiet and total >= 2 * BATCH
        self.tty = sys.stderr.isatty()
        self.step = max(BATCH, total // 20)
        self.next = self.step

    def update(self, done: int) -> None:
        if not self.enabled or done < self.next:
            return
        self.next = done + self.step
        text = f"acp-proxy {self.name}: {done}/{self.total} frames ({100 * done // self.total}%)"
        sys.stderr.write(("\r" + text) if self.tty else text + "\n")
        sys.stderr.flush()

    def after(self, done: int) -> Callable[[int], None]:
        """A progress callback for a part that starts after ``done`` frames."""
        return lambda seen: self.update(done + seen)

    def end(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


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
    with recording(recording_path, writable=True) as db:
        reader = RecordingReader(db)  # reads and writes share the one writable connection
        total = reader.frame_count()
        progress = Progress(total, quiet)
        ids = reader.connection_ids()
        done = changed = 0
        for cid in ids:
            seen, n = reindex_connection(reader, db, cid, progress.after(done))
            done += seen
            changed += n
        progress.end()
    if not quiet:
        click.echo(
            f"reindexed {done} frames in {len(ids)} connection(s): {changed} row(s) changed",
            err=True,
        )
