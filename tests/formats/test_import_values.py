"""Import validates every number it stores and stores every text, so readers never crash."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.formats.helpers import INIT, cli, one_line_error, record, rows


@pytest.fixture
def export_lines(tmp_path: Path) -> list[dict[str, object]]:
    db = tmp_path / "src.db"
    record(db, INIT + b"{}\n")
    done = cli("export", str(db), "--no-redact")
    assert done.returncode == 0
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def _file(records: list[dict[str, object]], tmp_path: Path) -> Path:
    path = tmp_path / "edited.jsonl"
    # the stdlib writes what orjson refuses (integers past 64 bits, NaN, lone surrogates)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize(
    ("line", "key", "value", "problem"),
    [
        (2, "started_at", -1e308, "'started_at' as a unix time in seconds"),
        (2, "started_at", 1e308, "'started_at' as a unix time"),
        (2, "ended_at", float("inf"), "'ended_at' as a unix time"),
        (2, "last_seen_at", -5, "'last_seen_at' as a unix time"),
        (2, "pid", 2**70, "'pid' as an integer from 0 to 9223372036854775807"),
        (2, "frames_dropped", -1, "'frames_dropped' as an integer from 0"),
        (2, "exit_status", "x", "'exit_status' as an integer"),
        (2, "connection", 2**64, "'connection' as an integer"),
        (3, "seq", 2**63, "'seq' as an integer from 0 to 9223372036854775807"),
        (3, "ts", float("nan"), "'ts' as a unix time"),
        (3, "mono_ns", -(2**64), "'mono_ns' as an integer"),
    ],
)
def test_out_of_range_numbers_are_one_line_naming_the_line(
    tmp_path: Path,
    export_lines: list[dict[str, object]],
    line: int,
    key: str,
    value: object,
    problem: str,
) -> None:
    export_lines[line - 1][key] = value
    if key == "connection":  # keep the frames pointing at it
        for r in export_lines[2:-1]:
            r["connection"] = value
    target = tmp_path / "t.db"
    error = one_line_error(cli("import", str(_file(export_lines, tmp_path)), str(target)))
    assert f": line {line}: " in error and problem in error, error
    assert not target.exists()  # nothing imported, no file left behind


def test_a_lone_surrogate_in_a_text_field_is_stored_escaped(
    tmp_path: Path, export_lines: list[dict[str, object]]
) -> None:
    conn = export_lines[1]
    conn["cwd"] = "/home/\ud800x"
    conn["label"] = "tab \udfff"
    conn["client_info"] = {"name": "ed\ud83d", "version": "1"}
    conn["agent_command"] = ["agent", "--flag=\udc00"]
    target = tmp_path / "t.db"
    done = cli("import", str(_file(export_lines, tmp_path)), str(target))
    assert done.returncode == 0, done.stderr
    (cwd, label, client, command) = rows(
        target, "SELECT cwd, label, client_info, agent_command FROM connections"
    )[0]
    assert cwd == "/home/\\ud800x" and label == "tab \\udfff"
    assert orjson.loads(str(client)) == {"name": "ed\\ud83d", "version": "1"}
    assert orjson.loads(str(command)) == ["agent", "--flag=\\udc00"]
    for args in (["ls"], ["ls", "--json"], ["export", "--no-redact"]):
        shown = cli(*args, str(target))
        assert shown.returncode == 0 and b"Traceback" not in shown.stderr, shown.stderr
    assert b"/home/\\\\ud800x" in cli("export", "--no-redact", str(target)).stdout


def test_a_frame_whose_json_holds_a_lone_surrogate_escape_imports(tmp_path: Path) -> None:
    """The frame's bytes are valid UTF-8 (the escape is six ASCII characters): kept exactly."""
    raw = '{"jsonrpc":"2.0","id":1,"method":"\\ud800"}\n'
    lines = [
        {"type": "header", "format": "acp-proxy-recording", "version": 1},
        {"type": "connection", "connection": 1, "started_at": 1.0, "transport": "stdio"},
        {"type": "frame", "connection": 1, "seq": 1, "direction": "c2a", "ts": 1.0,
         "mono_ns": 1, "text": raw},
        {"type": "end", "connections": 1, "frames": 1, "stderr": 0, "events": 0},
    ]  # fmt: skip
    target = tmp_path / "t.db"
    done = cli("import", str(_file(lines, tmp_path)), str(target))
    assert done.returncode == 0, done.stderr
    assert rows(target, "SELECT raw, method FROM frames") == [(raw.encode(), "\\ud800")]
