"""``acp-proxy copy SRC DST``: move recordings between stores (SQLite files, PostgreSQL URLs).

A thin layer over :func:`acp_proxy.formats.copy.copy_recording` (an unredacted export
streamed into an import, in-process): byte-exact, either direction, all of SRC or some
connections or one session, without duplicating what DST already has.
"""

from __future__ import annotations

from pathlib import Path

import click

from acp_proxy.commands.common import RECORDING_PATH, Progress, recording, reported
from acp_proxy.commands.stores import open_destination, same_store
from acp_proxy.formats.copy import copy_recording, count_frames, select_connections
from acp_proxy.store.engine import location_name


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


@click.command("copy")
@click.argument("source", type=RECORDING_PATH, metavar="SRC")
@click.argument("destination", type=RECORDING_PATH, metavar="DST")
@click.option(
    "--connection",
    "-c",
    "connection_ids",
    type=int,
    multiple=True,
    help="Only this connection of SRC (repeatable).",
)
@click.option(
    "--session",
    "-s",
    "session_id",
    help="Only the connection(s) that carry this sessionId (whole, so the copy replays).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
def copy_command(
    source: Path,
    destination: Path,
    connection_ids: tuple[int, ...],
    session_id: str | None,
    quiet: bool,
) -> None:
    """Copy recordings from SRC to DST, byte-exact; each is a file or a postgresql:// URL.

    \b
    Every frame's raw bytes, seq, times and direction, the stderr lines, the events and
    the connection columns (host included) are copied; the connections get NEW ids in DST
    (the summary shows which), seqs are kept. A connection DST already holds (the same
    content digest, e.g. copied before) is skipped, so copying twice does not duplicate; one
    DST holds the first frames of (copied while it was still recording) gets only what is new.
    A missing DST file is created; an empty DST database gets acp-proxy's schema. The
    copy is one transaction in DST: on any error nothing is copied.
    Credentials come from the URL, PG* variables or ~/.pgpass; passwords are never shown.

    \b
    Examples:
      acp-proxy copy session.db postgresql://me@db.internal/acp
      acp-proxy copy postgresql://ci@db/acp --session sess_42 local.db
      acp-proxy copy postgresql://db-a/acp postgresql://db-b/acp --connection 7
    """
    if same_store(source, destination):
        raise click.ClickException(f"SRC and DST are the same recording ({location_name(source)})")
    with recording(source) as src:
        with reported(location_name(source)):
            chosen = select_connections(src, connection_ids, session_id)
            total = count_frames(src, chosen)
        progress = Progress(total, quiet, "copy")
        with open_destination(destination) as dst, reported("cannot copy"):
            try:
                summary = copy_recording(src, dst, connection_ids=chosen, progress=progress.update)
            finally:
                progress.end()
    mapping = ", ".join(f"{old}->{new}" for old, new in summary.connections.items())
    text = f"copied {_plural(len(summary.connections), 'connection')}"
    text += f" ({_plural(summary.frames, 'frame')}, {_plural(summary.stderr_lines, 'stderr line')}"
    text += f", {_plural(summary.events, 'event')}{'; ids ' + mapping if mapping else ''})"
    if summary.grown:
        grown = ", ".join(f"{old}->{new} +{added:,}" for old, (new, added) in summary.grown.items())
        text += f", grew {_plural(len(summary.grown), 'connection')} copied before ({grown})"
    if summary.skipped:
        text += f", skipped {len(summary.skipped):,} already present"
    click.echo(f"{text} from {location_name(source)} to {location_name(destination)}")
