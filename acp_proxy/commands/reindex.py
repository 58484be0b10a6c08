"""``acp-proxy reindex DB``: re-derive every frame's index columns from its raw bytes.

The raw bytes are the one truth; ``kind``, ``rpc_id``, ``method``, ``session_id``,
``update_kind``, ``entity_type``, ``entity_id`` and the connection facts (protocol
version, client and agent info) are derived by :class:`~acp_proxy.acp.index.ConnectionIndexer`.
Run this after upgrading acp-proxy so old recordings benefit from a better model. Frames
are read and rewritten in batches (one transaction each, only changed rows), so memory
stays flat and proxies may keep recording into the same file meanwhile. The work is
:func:`acp_proxy.analysis.connection.reindex_connection`; this is the only command that opens a
recording for writing (and migrates an old one).
"""

from __future__ import annotations

from pathlib import Path

import click

from acp_proxy.analysis.connection import reindex_connection
from acp_proxy.commands.common import RECORDING_ARG, Progress, recording
from acp_proxy.store.reader import RecordingReader


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
