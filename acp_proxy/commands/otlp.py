"""``acp-proxy export --format otlp``: a recording as OpenTelemetry spans (OTLP JSON).

One OTLP ``ExportTraceServiceRequest`` per connection, as a line of JSON (the collector's
file exporter format); the mapping is :mod:`acp_proxy.acp.spans` (docs/otlp.md). The live
``--otlp-*`` options of the recording commands are in :mod:`acp_proxy.commands.otlp_live`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import click

from acp_proxy.acp.spans import SpanRecord
from acp_proxy.commands.common import recording
from acp_proxy.formats.redact import redact_frame
from acp_proxy.store.engine import Database
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError, create_private_file

# -- export --------------------------------------------------------------------------------


def otlp_export_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options ``export`` has for ``--format otlp`` only."""
    command = click.option(
        "--include-content",
        is_flag=True,
        help="(otlp) Put prompt text, message and tool output, request params and results "
        "into span attributes (left out by default; redacted unless --no-redact).",
    )(command)
    return click.option(
        "--session", "-s", "session_id", help="(otlp) Only the spans of this sessionId."
    )(command)


def select_session(spans: list[SpanRecord], session_id: str) -> list[SpanRecord]:
    """The spans of one session: those naming it, and everything under them."""
    kept: set[int] = set()
    by_id = {s.span_id: s for s in spans}
    out: list[SpanRecord] = []

    def keep(span: SpanRecord, seen: int = 0) -> bool:
        if span.span_id in kept or span.attributes.get("gen_ai.conversation.id") == session_id:
            return True
        parent = by_id.get(span.parent_span_id) if span.parent_span_id is not None else None
        return parent is not None and seen < 64 and keep(parent, seen + 1)

    for span in spans:
        if keep(span):
            kept.add(span.span_id)
            out.append(span)
    return out


def otlp_lines(
    db: Database,
    *,
    connection_id: int | None = None,
    session_id: str | None = None,
    include_content: bool = False,
    redact: bool = True,
) -> Iterator[tuple[str, int]]:
    """(OTLP JSON line, span count) per connection with spans, oldest connection first."""
    from acp_proxy.formats.otlp import (  # the OpenTelemetry packages: only when asked for
        connection_attributes,
        connection_identity,
        export_request,
        frames_to_spans,
        json_line,
        resource,
    )

    res = resource()
    connections = RecordingReader(db).connections()
    if connection_id is not None:
        connections = [c for c in connections if c.id == connection_id]
        if not connections:
            raise RecordingError(f"no connection {connection_id} in this recording")
    for conn in connections:
        frames = (
            (
                f.direction,
                redact_frame(f.raw, binary=f.binary) if include_content and redact else f.raw,
                f.seq,
                f.ts,
                f.mono_ns,
            )
            for f in RecordingReader(db).frames(connection_id=conn.id)
        )
        spans = frames_to_spans(
            connection_identity(conn.started_at),
            frames,
            include_content=include_content,
            attributes=connection_attributes(conn.transport),
        )
        if session_id is not None:
            spans = select_session(spans, session_id)
        if spans:
            yield json_line(export_request(spans, res)), len(spans)


def run_otlp_export(
    recording_path: Path,
    output: Path | None,
    connection_id: int | None,
    session_id: str | None,
    include_content: bool,
    redact: bool,
) -> None:
    """``export --format otlp`` (its packages installed: see :meth:`Format.missing`)."""
    with recording(recording_path) as db:
        lines = otlp_lines(
            db,
            connection_id=connection_id,
            session_id=session_id,
            include_content=include_content,
            redact=redact,
        )
        try:
            if output is None:
                _write(lines, sys.stdout)
                return
            _write_file(lines, output)
        except RecordingError as exc:
            raise click.ClickException(str(exc)) from None


def _write(lines: Iterator[tuple[str, int]], out: IO[str]) -> tuple[int, int]:
    requests = spans = 0  # stdout's reader gone away (| head): the cli stops quietly
    for line, count in lines:
        out.write(line + "\n")
        requests += 1
        spans += count
    out.flush()
    return requests, spans


def _write_file(lines: Iterator[tuple[str, int]], output: Path) -> None:
    if output.parent and not output.parent.is_dir():
        raise click.ClickException(f"cannot write {output}: no directory {output.parent}")
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    try:
        create_private_file(tmp)
        with tmp.open("w", encoding="utf-8") as out:
            requests, spans = _write(lines, out)
        os.replace(tmp, output)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    click.echo(f"exported {spans} span(s) in {requests} OTLP request(s) to {output}", err=True)
