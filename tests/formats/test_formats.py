"""The formats registry (acp_proxy.formats.FORMATS) is what ``export`` asks, as a user runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from acp_proxy.formats import FORMATS, Format, export_formats
from tests.conftest import proxy_exe


def _export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*proxy_exe(), "export", *args], capture_output=True, text=True, timeout=120
    )


def test_export_offers_every_exporting_format_and_its_help() -> None:
    assert export_formats() == ["jsonl", "otlp", "html"]
    done = _export("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # click wraps the help
    assert "[jsonl|otlp|html]" in text
    for name in export_formats():
        assert " ".join(f"{name}: {FORMATS[name].help}".split()) in text


def test_capabilities_decide_what_a_format_refuses(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    jsonl = _export(str(db), "--session", "x")  # jsonl does not select sessions
    assert jsonl.returncode == 2 and "Traceback" not in jsonl.stderr
    assert "--session and --include-content need --format otlp" in jsonl.stderr
    url = _export("postgresql://nobody@127.0.0.1:1/none", "--format", "otlp")
    assert url.returncode == 1 and "Traceback" not in url.stderr
    assert "Error: --format otlp reads a SQLite file, not a PostgreSQL URL" in url.stderr


def test_a_format_whose_packages_are_missing_says_which_extra() -> None:
    absent = Format(
        "pdf",
        "pages",
        exports=True,
        module="acp_proxy_no_such_module",
        extra="pdf",
        needs="a PDF library",
    )
    assert absent.missing() == "--format pdf needs a PDF library: pip install 'acp-proxy[pdf]'"
    assert FORMATS["jsonl"].missing() is None
