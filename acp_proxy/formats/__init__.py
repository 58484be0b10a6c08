"""Formats a recording is exported to or imported from, in one registry: :data:`FORMATS`.

As mitmproxy's ``formats`` dict: a name maps to a :class:`Format` that says what it can do
(export, import, read a PostgreSQL store, take ``--session``/``--include-content``) and what it
needs installed, so a command asks the registry instead of branching on the name. The code of
each format is its module: :mod:`.jsonl` (export and reading; with :mod:`.jsonl_import`,
:mod:`.copy` and :mod:`.redact`), :mod:`.otlp`, and the HTML page
:mod:`acp_proxy.web.export_html` (it renders with the inspector's views); :mod:`.source`
opens whatever a replay is given.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    """One format and its capabilities."""

    name: str
    help: str
    """What ``--format NAME`` writes, for a command's help."""
    exports: bool = False
    imports: bool = False
    reads_postgres: bool = True
    """Exports from a ``postgresql://`` store as well as from a SQLite file."""
    selects_sessions: bool = False
    """Takes ``--session`` and ``--include-content``."""
    module: str = ""
    """The module its code is in (imported only when the format is used)."""
    extra: str | None = None
    """The ``acp-proxy[...]`` extra that installs what it needs, when not installed always."""
    needs: str = ""
    """What that extra installs, as the missing-package message names it."""

    def missing(self) -> str | None:
        """What is not installed for this format, as one line (None: it can be used)."""
        if self.extra is None:
            return None
        try:
            importlib.import_module(self.module)
        except ImportError:
            return f"--format {self.name} needs {self.needs}: pip install 'acp-proxy[{self.extra}]'"
        return None


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "jsonl",
            "one JSON object per line; see docs/export.md",
            exports=True,
            imports=True,
            module="acp_proxy.formats.jsonl",
        ),
        Format(
            "otlp",
            "OpenTelemetry spans, one OTLP JSON request per line, see docs/otlp.md",
            exports=True,
            reads_postgres=False,
            selects_sessions=True,
            module="acp_proxy.formats.otlp",
            extra="otlp",
            needs="the OpenTelemetry packages",
        ),
        Format(
            "html",
            "one self-contained page for a bug report, see docs/export.md",
            exports=True,
            module="acp_proxy.web.export_html",
        ),
    )
}
"""Every format by name."""


def export_formats() -> list[str]:
    """The names ``export --format`` accepts, in registry order."""
    return [name for name, f in FORMATS.items() if f.exports]
