"""OpenTelemetry for the commands: ``export --format otlp`` and the live ``--otlp-*`` options.

``export --format otlp`` writes one OTLP ``ExportTraceServiceRequest`` per connection as
a line of JSON (the collector's file exporter format). The live options of the recording
commands (``--otlp-endpoint``, ``--otlp-header``) are handed to the recorder's writer
process through the environment (:mod:`acp_proxy.record.otlp_live` reads them there), so
spans are exported from the writer side, never from the forwarding process.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import click

from acp_proxy.acp.spans import SpanRecord
from acp_proxy.commands.common import Decorator, recording
from acp_proxy.record.otlp_live import ENDPOINT_ENV, HEADERS_ENV
from acp_proxy.record.reader import iter_frames, list_connections
from acp_proxy.record.redact import redact_frame
from acp_proxy.record.schema import RecordingError, create_private_file

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
    db: sqlite3.Connection,
    *,
    connection_id: int | None = None,
    session_id: str | None = None,
    include_content: bool = False,
    redact: bool = True,
) -> Iterator[tuple[str, int]]:
    """(OTLP JSON line, span count) per connection with spans, oldest connection first."""
    from acp_proxy.record.otlp import (  # the OpenTelemetry packages: only when asked for
        connection_attributes,
        connection_identity,
        export_request,
        frames_to_spans,
        json_line,
        resource,
    )

    res = resource()
    connections = list_connections(db)
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
            for f in iter_frames(db, connection_id=conn.id)
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
    fmt: str,
    recording_path: Path,
    output: Path | None,
    connection_id: int | None,
    session_id: str | None,
    include_content: bool,
    redact: bool,
) -> bool:
    """``export --format otlp``; False (nothing done) for the other formats."""
    if fmt != "otlp":
        if session_id is not None or include_content:
            raise click.UsageError("--session and --include-content need --format otlp")
        return False
    try:
        import acp_proxy.record.otlp  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "--format otlp needs the OpenTelemetry packages: pip install 'acp-proxy[otlp]'"
        ) from None
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
                return True
            _write_file(lines, output)
        except RecordingError as exc:
            raise click.ClickException(str(exc)) from None
    return True


def _write(lines: Iterator[tuple[str, int]], out: IO[str]) -> tuple[int, int]:
    requests = spans = 0
    try:
        for line, count in lines:
            out.write(line + "\n")
            requests += 1
            spans += count
        out.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
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


# -- live export options ---------------------------------------------------------------------


def _endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"{value!r} is not an http:// or https:// URL")
    return value


def _headers(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in value:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
        out[key.strip()] = val
    return out


def otlp_live_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--otlp-endpoint`` and ``--otlp-header``, applied before the command runs.

    The command function does not see them: their callbacks hand them to the writer
    process (see :func:`configure_live_export`).
    """

    def endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        configure_live_export(_endpoint(ctx, param, value), None)

    def headers(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> None:
        configure_live_export(None, _headers(ctx, param, value))

    decorate: Decorator = click.option(
        "--otlp-endpoint",
        metavar="URL",
        callback=endpoint,
        expose_value=False,
        help="Export spans live while recording to this OTLP/HTTP collector (protobuf; "
        "/v1/traces is added unless the URL has a path). Best-effort: a slow or dead "
        "collector never slows forwarding or recording; what is not sent is counted. "
        "The standard OTEL_EXPORTER_OTLP_* variables are read too (docs/otlp.md).",
    )
    command = decorate(command)
    return click.option(
        "--otlp-header",
        metavar="KEY=VALUE",
        multiple=True,
        callback=headers,
        expose_value=False,
        help="A header for the OTLP collector (repeatable), e.g. an API key.",
    )(command)


def configure_live_export(endpoint: str | None, headers: dict[str, str] | None) -> None:
    """Hand live-export settings to the writer process (it inherits the environment)."""
    if endpoint is not None:
        os.environ[ENDPOINT_ENV] = endpoint
    if headers:
        known: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            known = json.loads(os.environ.get(HEADERS_ENV, "{}"))
        os.environ[HEADERS_ENV] = json.dumps({**known, **headers})
