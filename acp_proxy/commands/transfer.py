"""``acp-proxy export`` and ``acp-proxy import``: recordings to and from the JSONL format."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import click

from acp_proxy.commands.common import (
    DAMAGED,
    RECORDING_ARG,
    FilePath,
    recording,
    reported,
    single_option,
)
from acp_proxy.commands.otlp import otlp_export_options, run_otlp_export
from acp_proxy.commands.stores import open_destination
from acp_proxy.formats import FORMATS, export_formats
from acp_proxy.formats.jsonl import export_recording
from acp_proxy.formats.jsonl_import import import_export
from acp_proxy.store.engine import Database, check_intact, location_name
from acp_proxy.store.schema import RecordingError, create_private_file
from acp_proxy.web.export_html import DEFAULT_MAX_FRAMES, HtmlSummary, export_html


@click.command("export")
@RECORDING_ARG
@click.option(
    "-o",
    "--output",
    type=FilePath("an export file"),
    help="Write to this file (created 0600) instead of stdout.",
)
@single_option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(export_formats()),
    default="jsonl",
    show_default=True,
    help="Output format (" + "; ".join(f"{n}: {FORMATS[n].help}" for n in export_formats()) + ").",
)
@click.option(
    "--max-frames",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_FRAMES,
    show_default=True,
    help="html: embed at most this many frames' bytes (the page says how many were left out).",
)
@otlp_export_options
@click.option(
    "--redact/--no-redact",
    default=True,
    show_default=True,
    help="Replace secrets (tokens, api keys, env values, auth headers) with [REDACTED] in the "
    "exported copy. --no-redact keeps every frame byte-exact.",
)
def export_command(
    recording_path: Path,
    output: Path | None,
    connection_id: int | None,
    fmt: str,
    redact: bool,
    max_frames: int = DEFAULT_MAX_FRAMES,
    session_id: str | None = None,
    include_content: bool = False,
) -> None:
    """Export a recording as JSONL: a header, then per connection its frames, stderr and events.

    Raw bytes are kept exactly (as text when valid UTF-8, base64 otherwise); with
    --no-redact, export -> import -> export gives identical output. DB is a file or a
    postgresql:// URL.

    \b
    Examples:
      acp-proxy export session.db > session.jsonl
      acp-proxy export session.db --connection 2 -o conn2.jsonl
      acp-proxy export session.db --no-redact | acp-proxy import - copy.db
      acp-proxy export session.db --format otlp -o traces.jsonl
      acp-proxy export session.db --format html -o report.html
    """
    form = FORMATS[fmt]
    if isinstance(recording_path, str) and not form.reads_postgres:
        raise click.ClickException(f"--format {fmt} reads a SQLite file, not a PostgreSQL URL")
    if (session_id is not None or include_content) and not form.selects_sessions:
        takes = " or ".join(f"--format {n}" for n, f in FORMATS.items() if f.selects_sessions)
        raise click.UsageError(f"--session and --include-content need {takes}")
    missing = form.missing()
    if missing is not None:
        raise click.ClickException(missing)
    request = ExportRequest(
        recording_path, output, connection_id, session_id, include_content, redact, max_frames
    )
    _EXPORTERS[fmt](request)


@dataclass(frozen=True)
class ExportRequest:
    """What ``export`` was asked for, whatever the format."""

    recording_path: Path
    output: Path | None
    connection_id: int | None
    session_id: str | None
    include_content: bool
    redact: bool
    max_frames: int


def _export_otlp(request: ExportRequest) -> None:
    r = request
    args = (r.output, r.connection_id, r.session_id, r.include_content, r.redact)
    run_otlp_export(Path(r.recording_path), *args)


def _export_jsonl(request: ExportRequest) -> None:
    _write_export(request, None)


def _export_html(request: ExportRequest) -> None:
    _write_export(request, HtmlOptions(request.connection_id, request.redact, request.max_frames))


def _write_export(request: ExportRequest, html: HtmlOptions | None) -> None:
    """JSONL (``html`` None) or the HTML page, to ``--output`` (created 0600) or stdout."""
    recording_path, output = request.recording_path, request.output
    connection_id, redact = request.connection_id, request.redact
    where = location_name(recording_path)
    with recording(recording_path) as db, reported(where, database=DAMAGED):
        if html is not None and output is None:
            html.write(recording_path, sys.stdout.buffer)
            return
        if output is None:
            check_intact(db)
            _export_to_stdout(db, connection_id, redact)
            return
        tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
        if output.parent and not output.parent.is_dir():
            raise click.ClickException(f"cannot write {output}: no directory {output.parent}")
        try:
            create_private_file(tmp)
            with tmp.open("wb") as out:
                if html is not None:
                    report = html.write(recording_path, out)
                else:
                    summary = export_recording(db, out, connection_id=connection_id, redact=redact)
            os.replace(tmp, output)
        except OSError as exc:
            raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if html is not None:
            cut = f", {report.frames_cut} left out (--max-frames)" if report.frames_cut else ""
            redacted = f", {report.redacted} redacted" if redact else ""
            click.echo(
                f"exported {report.connections} connection(s), {report.frames} frame(s){cut}"
                f"{redacted} to {output}",
                err=True,
            )
            return
        redacted = f", {summary.redacted} redacted" if redact else ""
        click.echo(
            f"exported {summary.connections} connection(s), {summary.frames} frame(s), "
            f"{summary.stderr_lines} stderr line(s), {summary.events} event(s){redacted} "
            f"to {output}",
            err=True,
        )


@dataclass(frozen=True)
class HtmlOptions:
    """``--format html``'s choices: which connection, redaction, how many frames."""

    connection_id: int | None
    redact: bool
    max_frames: int

    def write(self, path: Path, out: IO[bytes]) -> HtmlSummary:
        ids = None if self.connection_id is None else [self.connection_id]
        try:
            return export_html(
                path, out, connection_ids=ids, redact=self.redact, max_frames=self.max_frames
            )
        except BrokenPipeError:
            sys.exit(1)


_EXPORTERS: dict[str, Callable[[ExportRequest], None]] = {
    "jsonl": _export_jsonl,
    "otlp": _export_otlp,
    "html": _export_html,
}
"""What writes each format of :data:`~acp_proxy.formats.FORMATS` that exports."""


def _export_to_stdout(db: Database, connection_id: int | None, redact: bool) -> None:
    out = sys.stdout.buffer  # a reader gone away (| head): the cli stops quietly
    export_recording(db, out, connection_id=connection_id, redact=redact)
    out.flush()


@click.command("import")
@click.argument("source", type=FilePath("an export file", allow_dash=True), metavar="FILE")
@RECORDING_ARG
@click.option(
    "--allow-duplicates",
    is_flag=True,
    help="Import connections that are already in DB (same content digest) again.",
)
def import_command(source: Path, recording_path: Path, allow_duplicates: bool) -> None:
    """Import an export FILE (- for stdin) into the recording DB (created if missing).

    DB is a file or a postgresql:// URL (an empty database gets acp-proxy's schema).
    Connections get new ids in DB; frames get their index columns derived again. The whole
    import is one transaction: a bad or truncated file imports nothing.

    A connection already in DB (the same digest over its identity facts and every frame's
    direction and bytes, e.g. the same export imported twice) is skipped with a note on
    stderr, unless --allow-duplicates.

    \b
    Examples:
      acp-proxy import session.jsonl session.db
      acp-proxy export old.db --no-redact | acp-proxy import - merged.db
      acp-proxy import session.jsonl postgresql://me@db.internal/acp
    """
    where = location_name(recording_path)
    with open_destination(recording_path) as db:
        stream: Path | IO[bytes] = sys.stdin.buffer if str(source) == "-" else source
        try:
            with reported(f"{where}: cannot import"):
                try:
                    summary = import_export(stream, db, skip_duplicates=not allow_duplicates)
                except RecordingError as exc:  # the export file's fault: name it
                    raise click.ClickException(f"{source}: {exc}") from None
        except OSError as exc:
            raise click.ClickException(f"cannot read {source}: {exc.strerror or exc}") from None
    for old, same in summary.skipped.items():
        click.echo(
            f"acp-proxy: skipped connection {old} of {source}: already in {where} as "
            f"connection {same} (--allow-duplicates imports it again)",
            err=True,
        )
    for old, (same, added) in summary.grown.items():
        click.echo(
            f"acp-proxy: connection {old} of {source} continues connection {same} of {where} "
            f"(imported before, while it was recording): added its {added} new frame(s) to it",
            err=True,
        )
    mapping = ", ".join(f"{old}->{new}" for old, new in summary.connections.items())
    skipped = f", {len(summary.skipped)} skipped (duplicates)" if summary.skipped else ""
    click.echo(
        f"imported {len(summary.connections)} connection(s) ({mapping or 'none'}){skipped}, "
        f"{summary.frames} frame(s), {summary.stderr_lines} stderr line(s), "
        f"{summary.events} event(s) into {where}"
    )
