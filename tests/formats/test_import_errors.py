"""Bad export files: one clear line, exit 1, and nothing imported (one transaction)."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import orjson
import pytest

from acp_proxy.formats.jsonl import ExportFormatError
from acp_proxy.formats.jsonl_import import import_export
from acp_proxy.store.schema import connect
from tests.formats.helpers import INIT, cli, one_line_error, record, table_counts


@pytest.fixture
def good_export(tmp_path: Path) -> bytes:
    db = tmp_path / "src.db"
    record(db, INIT + b"not json\n" + b"\xff\n")
    done = cli("export", str(db), "--no-redact")
    assert done.returncode == 0
    return done.stdout


def _more_frames(end: bytes) -> bytes:
    record = orjson.loads(end)
    record["frames"] += 1
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"


def _bad_files(good: bytes) -> dict[str, tuple[bytes, str]]:
    lines = good.splitlines(keepends=True)
    header, conn, frames, end = lines[0], lines[1], lines[2:-1], lines[-1]
    return {
        "not an export": (b"hello world\n", "not an acp-proxy export"),
        "empty": (b"", "the file is empty"),
        "newer version": (
            header.replace(b'"version":1', b'"version":2') + b"".join(lines[1:]),
            "export format version 2 is newer than this acp-proxy understands (1)",
        ),
        "truncated mid-line": (
            good[: len(good) - len(end) - 20],
            "cut short (the file is truncated)",
        ),
        "truncated at a line end": (b"".join(lines[:-1]), "without its end line (it is truncated)"),
        "frame before its connection": (
            header + frames[0] + conn + b"".join(frames[1:]) + end,
            "line 2: connection 1 has no connection line before it",
        ),
        "bad base64": (
            header
            + conn
            + b'{"base64":"!!!","connection":1,"direction":"c2a","mono_ns":1,"seq":99,'
            b'"ts":1.0,"type":"frame"}\n' + b"".join(frames) + end,
            '"base64" is not valid base64',
        ),
        "bad direction": (
            header + conn + b'{"text":"x","connection":1,"direction":"up","mono_ns":1,"seq":99,'
            b'"ts":1.0,"type":"frame"}\n' + b"".join(frames) + end,
            '"direction" must be "c2a" or "a2c"',
        ),
        "duplicate seq": (
            header + conn + frames[0] + b"".join(frames) + _more_frames(end),
            "seq 1 appears twice",
        ),
        "count mismatch": (
            header + conn + b"".join(frames[1:]) + end,
            "the end line counts",
        ),
        "unknown record": (
            header + conn + b'{"type":"mystery"}\n' + b"".join(frames) + end,
            "unknown record type 'mystery'",
        ),
        "data after end": (good + b"{}\n", "data after the end line"),
    }


def test_bad_files_import_nothing(tmp_path: Path, good_export: bytes) -> None:
    """Every kind of bad file, through the library on a real recording file."""
    target = tmp_path / "target.db"
    record(target, b"{}\n")
    before = table_counts(target)
    db = connect(target, create=True)
    try:
        for name, (data, message) in _bad_files(good_export).items():
            with pytest.raises(ExportFormatError) as info:
                import_export(io.BytesIO(data), db)
            assert message in str(info.value), (name, str(info.value))
            assert "\n" not in str(info.value)
            assert table_counts(target) == before, name
        import_export(io.BytesIO(good_export), db)  # the good file still imports
    finally:
        db.close()
    assert table_counts(target) != before


@pytest.mark.parametrize("case", ["not an export", "truncated mid-line"])
def test_cli_reports_bad_files_in_one_line(tmp_path: Path, good_export: bytes, case: str) -> None:
    target = tmp_path / "target.db"
    record(target, b"{}\n")
    before = table_counts(target)
    data, message = _bad_files(good_export)[case]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    line = one_line_error(cli("import", str(bad), str(target)))
    assert line.startswith(f"Error: {bad}: ") and message in line
    assert table_counts(target) == before


def test_failed_import_does_not_leave_a_new_database(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"nope\n")
    target = tmp_path / "new.db"
    one_line_error(cli("import", str(bad), str(target)))
    assert not target.exists()


def test_swapped_arguments_and_missing_files(tmp_path: Path) -> None:
    db = tmp_path / "rec.db"
    record(db, INIT)
    line = one_line_error(cli("import", str(db), str(tmp_path / "other.db")))
    assert "SQLite recording, not an export file" in line
    line = one_line_error(cli("import", str(tmp_path / "missing.jsonl"), str(db)))
    assert "no such file" in line
    line = one_line_error(cli("export", str(tmp_path / "missing.db")))
    assert "no such recording" in line
    line = one_line_error(cli("export", str(db), "--connection", "42"))
    assert "no connection 42" in line
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"garbage" * 500)
    assert "not a usable" in one_line_error(cli("import", "-", str(corrupt), stdin=b"x\n"))


def test_library_rolls_back_inside_an_open_transaction(good_export: bytes) -> None:
    """A caller's own transaction survives a failed import (a savepoint is used)."""
    mem = sqlite3.connect(":memory:")
    import_export(io.BytesIO(good_export), mem)
    mem.execute("BEGIN")
    mem.execute("INSERT INTO events (ts, kind) VALUES (1, 'mine')")
    with pytest.raises(ExportFormatError, match="truncated"):
        import_export(io.BytesIO(good_export[:-5]), mem)
    assert mem.in_transaction
    mem.execute("COMMIT")
    assert mem.execute("SELECT count(*) FROM connections").fetchone()[0] == 1
    assert mem.execute("SELECT count(*) FROM events WHERE kind = 'mine'").fetchone()[0] == 1
