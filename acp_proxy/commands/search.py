"""``acp-proxy search DB TEXT``: find text in every connection and session of a recording.

A thin layer over :mod:`acp_proxy.store.search` (the FTS5 index, kept in the recording and
brought up to date before each search; in memory for a read-only file).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import click
import orjson

from acp_proxy.commands.common import RECORDING_ARG, Progress, single_option, terminal_options
from acp_proxy.console import Terminal, cells, ellipsize, warn
from acp_proxy.store.engine import location_name
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError
from acp_proxy.store.search import SearchIndex, open_search_index
from acp_proxy.store.search_text import QueryError, query_phrases


@click.command("search")
@RECORDING_ARG
@click.argument("text")
@single_option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@single_option("--session", "-s", "session_id", help="Only this sessionId.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Show at most this many hits.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document for scripts.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr while indexing.")
@terminal_options()
def search_command(
    recording_path: Path,
    text: str,
    connection_id: int | None,
    session_id: str | None,
    limit: int,
    as_json: bool,
    quiet: bool,
    terminal: Terminal,
) -> None:
    """Search message text, prompts, tool output, methods and errors; exit 1 if nothing matches.

    \b
    Every word of TEXT must occur (whole words, case-insensitive; no query syntax).
    Consecutive chunks of one message are searched as one text. Each hit is one line: the
    matching text (the words [in brackets]), then its connection, frame (#seq as in
    `acp-proxy dump`, and the frame id) and session. On a terminal the line fits its width
    (--wide: whole).
    The index is kept in the recording (tables search_docs*, derived and rebuilt when
    needed); a read-only recording is indexed in memory for the search instead. The first
    search of a big recording indexes all of it, with progress on stderr.
    DB may be a postgresql:// URL: PostgreSQL's own full-text search (a tsvector column
    under a GIN index in table search_docs), the same hits.
    Examples:
      acp-proxy search session.db "README"
      acp-proxy search session.db "Internal error" --connection 2 --json
      acp-proxy search postgresql://me@db.internal/acp "permission denied"
    """
    try:
        text.encode()
    except UnicodeEncodeError:  # bytes that are not UTF-8 on the command line
        raise click.BadParameter("is not valid UTF-8", param_hint="TEXT") from None
    try:
        query_phrases(text)
    except QueryError as exc:
        raise click.BadParameter(str(exc), param_hint="TEXT") from None
    shown: list[Progress] = []

    def progress(total: int) -> Callable[[int], None]:
        shown.append(Progress(total, quiet, "search", verb="indexed"))
        return shown[-1].update

    try:
        index = open_search_index(recording_path, progress)
    except RecordingError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        for bar in shown:
            bar.end()
    where = location_name(recording_path)
    in_database = isinstance(recording_path, str)
    try:
        if not index.in_file:
            warn(f"{where} is read-only: indexed in memory for this search (not saved)")
        _require_filters(index, connection_id, session_id)
        hits = index.search(text, connection_id=connection_id, session_id=session_id, limit=limit)
    except RecordingError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        index.close()
    if as_json:
        doc = {
            "recording": where,
            "query": text,
            "index": ("database" if in_database else "file") if index.in_file else "memory",
            "hits": [h.to_json() for h in hits],
        }
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        for h in hits:
            where = f"#{h.seq}" if h.frames == 1 else f"#{h.seq}-#{h.last_seq} ({h.frames} frames)"
            what = " ".join(x for x in (h.method, f"[{h.variant}]" if h.variant else None) if x)
            session = f" [{h.session_id}]" if h.session_id else ""
            place = f"connection {h.connection_id} {where} frame {h.frame_id}{session} {h.field}"
            click.echo(hit_line(terminal, " ".join(h.snippet.split()), f"{place} {what}"))
        click.echo(f"{len(hits)} hit(s){' (limit reached)' if len(hits) == limit else ''}")
    if not hits:
        raise SystemExit(1)


PLACE_ROOM = 36
"""The fewest columns where a hit is keeps on a narrow terminal (its matching text the rest)."""


def hit_line(terminal: Terminal, snippet: str, place: str) -> str:
    """One hit: the matching text first (its words [in brackets], coloured on a terminal),
    then `` · `` and where it is; in the terminal's width (both cut when they must)."""
    if terminal.width is not None:
        room = min(cells(place), max(PLACE_ROOM, terminal.width - cells(snippet) - 3))
        place = ellipsize(place, room)
        room = max(10, terminal.width - room - 3)
        first = snippet.find("[")
        if cells(snippet) > room and first > room // 3:  # keep the first match in sight
            snippet = "…" + snippet[first - room // 3 :].lstrip("…")
        snippet = ellipsize(snippet, room)
    if terminal.colour:
        snippet = re.sub(
            r"\[([^\[\]]*)\]", lambda m: terminal.style(m[0], "red", bold=True), snippet
        )
        place = terminal.style(place, dim=True)
    return terminal.fit(f"{snippet} · {place}")


def _require_filters(index: SearchIndex, connection_id: int | None, session_id: str | None) -> None:
    """A ``--connection`` or ``--session`` the recording does not have is an error (as in
    ``show``), not "0 hit(s)"."""
    reader = RecordingReader(index.source)
    if connection_id is not None and not reader.has_connection(connection_id):
        raise RecordingError(f"no connection {connection_id} in this recording")
    if session_id is not None:
        wanted = reader.session_connections(session_id)
        if not wanted:
            raise RecordingError(f"no session {session_id!r} in this recording")
        if connection_id is not None and connection_id not in wanted:
            raise RecordingError(f"session {session_id!r} is not in connection {connection_id}")
