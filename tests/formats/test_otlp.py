"""``acp-proxy export --format otlp`` on a real demo recording (issue 16)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from acp_proxy.formats.otlp import parse_json_line


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("otlp") / "demo.db"
    run = subprocess.run(
        ["acp-proxy", "demo", "--db", str(db), "--quiet"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return db


def export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["acp-proxy", "export", *args], capture_output=True, text=True)


def test_otlp_json_lines_are_official_requests_and_reproducible(demo_db: Path) -> None:
    first = export(str(demo_db), "--format", "otlp")
    assert first.returncode == 0, first.stderr
    again = export(str(demo_db), "--format", "otlp")
    assert first.stdout == again.stdout  # deterministic ids, times and resource
    lines = first.stdout.splitlines()
    assert len(lines) == 4  # one request per connection
    raw = json.loads(lines[0])
    span = raw["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and int(span["traceId"], 16)  # OTLP/JSON: hex ids
    assert len(span["spanId"]) == 16 and isinstance(span["kind"], int)  # integer enums
    names = [
        s.name
        for line in lines
        for rs in parse_json_line(line).resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    assert names.count("invoke_agent acp-proxy-demo") == 6
    assert names.count("execute_tool read") == 6


def test_session_and_connection_narrow_it(demo_db: Path, tmp_path: Path) -> None:
    one = export(str(demo_db), "--format", "otlp", "--connection", "3")
    assert one.returncode == 0 and len(one.stdout.splitlines()) == 1
    sess = export(str(demo_db), "--format", "otlp", "-c", "3", "--session", "sess_1")
    spans = [
        s for rs in parse_json_line(sess.stdout).resource_spans for s in rs.scope_spans[0].spans
    ]
    assert spans and "acp.connection" not in {s.name for s in spans}
    assert "initialize" not in {s.name for s in spans}
    none = export(str(demo_db), "--format", "otlp", "--session", "nope")
    assert none.returncode == 0 and none.stdout == ""
    out = tmp_path / "t.jsonl"
    wrote = export(str(demo_db), "--format", "otlp", "-o", str(out))
    assert wrote.returncode == 0 and "span(s)" in wrote.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    assert out.read_text() == export(str(demo_db), "--format", "otlp").stdout


def test_content_is_opt_in(demo_db: Path) -> None:
    plain = export(str(demo_db), "--format", "otlp", "-c", "1").stdout
    rich = export(str(demo_db), "--format", "otlp", "-c", "1", "--include-content").stdout
    assert "acp.prompt.text" not in plain and "acp.prompt.text" in rich
    assert "exists only in this demo" in rich and "exists only in this demo" not in plain


def test_errors_are_one_line(demo_db: Path, tmp_path: Path) -> None:
    for args in (
        [str(demo_db), "--session", "x"],  # otlp-only option without --format otlp
        [str(demo_db), "--format", "otlp", "-c", "99"],
        [str(tmp_path / "missing.db"), "--format", "otlp"],
    ):
        run = export(*args)
        # a usage mistake reads "acp-proxy export: ..." (exit 2), a failure "Error: ..." (1)
        said = run.stderr.startswith(("Error: ", "acp-proxy export: "))
        assert run.returncode != 0 and said and run.stderr.count("\n") == 1, run.stderr
