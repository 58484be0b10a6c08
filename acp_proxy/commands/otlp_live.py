"""``--otlp-endpoint`` and ``--otlp-header`` for every recording command (live spans).

The settings reach the recorder's writer process through its environment
(:mod:`acp_proxy.recorder.writer.otlp_live` reads them there), so spans are built and sent on the
writer side, never in the forwarding process. Kept light: the proxy imports this at start.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import click

from acp_proxy.recorder.writer.switches import CONTENT_ENV, ENDPOINT_ENV, HEADERS_ENV


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


@dataclass(frozen=True, slots=True)
class LiveExport:
    """``--otlp-endpoint``/``--otlp-header`` of one command run."""

    endpoint: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content: bool = False

    @contextmanager
    def for_writer(self) -> Iterator[None]:
        """Around starting the recorder: its writer process inherits these settings.

        They are taken out of the environment again afterwards, so the agent (started
        later) does not see the collector's headers (often an API key).
        """
        saved = {name: os.environ.get(name) for name in (ENDPOINT_ENV, HEADERS_ENV, CONTENT_ENV)}
        if self.content:
            os.environ[CONTENT_ENV] = "1"
        if self.endpoint is not None:
            os.environ[ENDPOINT_ENV] = self.endpoint
        if self.headers:
            import json  # (only then: the proxy imports this module at start)

            os.environ[HEADERS_ENV] = json.dumps(self.headers)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def otlp_live_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--otlp-endpoint``, ``--otlp-header`` and ``--otlp-content``: the command receives
    them as ``otlp`` (a :class:`LiveExport`), to wrap its ``Recorder(...)`` in
    ``otlp.for_writer()``."""

    @functools.wraps(command)
    def run(
        *args: Any,
        otlp_endpoint: str | None,
        otlp_headers: dict[str, str],
        otlp_content: bool,
        **kw: Any,
    ) -> None:
        command(*args, otlp=LiveExport(otlp_endpoint, otlp_headers, otlp_content), **kw)

    endpoint = click.option(
        "--otlp-endpoint",
        metavar="URL",
        callback=_endpoint,
        help="Export spans live while recording to this OTLP/HTTP collector (protobuf; "
        "/v1/traces is added unless the URL has a path). Best-effort: a slow or dead "
        "collector never slows forwarding or recording; what is not sent is counted. "
        "The standard OTEL_EXPORTER_OTLP_* variables work too (docs/otlp.md).",
    )
    headers = click.option(
        "--otlp-header",
        "otlp_headers",
        metavar="KEY=VALUE",
        multiple=True,
        callback=_headers,
        help="A header for the OTLP collector (repeatable), e.g. an API key.",
    )
    content = click.option(
        "--otlp-content",
        is_flag=True,
        help="Put content into the live spans (prompt text, message text, tool output). "
        "Off by default: spans then carry structure, ids, timings and counts only.",
    )
    return endpoint(headers(content(run)))
