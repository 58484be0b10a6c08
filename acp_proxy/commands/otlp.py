"""``acp-proxy export --format otlp``: a recording as OpenTelemetry spans (OTLP JSON).

The options and the writing: the lines themselves (one OTLP ``ExportTraceServiceRequest``
per connection) come from :mod:`acp_proxy.report.otlp`. The live ``--otlp-*`` options of
the recording commands are in :mod:`acp_proxy.commands.otlp_live`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import click

from acp_proxy.commands.common import recording
from acp_proxy.formats.redact import RedactRules
from acp_proxy.report.otlp import otlp_lines
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


def run_otlp_export(
    recording_path: Path,
    output: Path | None,
    connection_id: int | None,
    session_id: str | None,
    include_content: bool,
    redact: RedactRules | None,
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
