"""Importing the same connections twice: skipped by content digest, unless --allow-duplicates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from acp_proxy.formats.jsonl import connection_digest
from tests.formats.helpers import INIT, cli, record, rows, table_counts


def _export(db: Path, out: Path, *flags: str) -> Path:
    done = cli("export", str(db), "--no-redact", "-o", str(out), *flags)
    assert done.returncode == 0, done.stderr
    return out


def test_the_same_export_imported_twice_is_skipped_with_a_note(tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    record(src, INIT + b'{"jsonrpc":"2.0","method":"_a"}\n')
    record(src, INIT + b'{"jsonrpc":"2.0","method":"_b"}\n')
    export = _export(src, tmp_path / "e.jsonl")
    target = tmp_path / "t.db"
    first = cli("import", str(export), str(target))
    assert first.returncode == 0 and first.stderr == b"", first.stderr
    once = table_counts(target)
    again = cli("import", str(export), str(target))
    assert again.returncode == 0, again.stderr
    notes = again.stderr.decode().splitlines()
    assert notes == [
        f"acp-proxy: skipped connection {n} of {export}: already in {target} as connection {n} "
        "(--allow-duplicates imports it again)"
        for n in (1, 2)
    ]
    assert "imported 0 connection(s) (none), 2 skipped (duplicates), 0 frame(s)" in (
        again.stdout.decode()
    )
    assert table_counts(target) == once  # nothing duplicated
    forced = cli("import", "--allow-duplicates", str(export), str(target))
    assert forced.returncode == 0 and forced.stderr == b""
    assert "(1->3, 2->4)" in forced.stdout.decode()
    assert table_counts(target)[0] == 4


def test_a_connection_recorded_here_is_recognised_in_its_own_export(tmp_path: Path) -> None:
    """Rows the recorder wrote carry no digest: import computes it for the candidates."""
    db = tmp_path / "rec.db"
    record(db, INIT)
    record(db, INIT + b"{}\n")
    assert rows(db, "SELECT digest FROM connections") == [(None,), (None,)]
    export = _export(db, tmp_path / "one.jsonl", "--connection", "2")
    done = cli("import", str(export), str(db))
    assert done.returncode == 0, done.stderr
    assert b"already in" in done.stderr and b"as connection 2" in done.stderr
    assert table_counts(db)[0] == 2
    stored = rows(db, "SELECT id, digest FROM connections ORDER BY id")
    conn = sqlite3.connect(db)
    try:
        assert stored[1] == (2, connection_digest(conn, 2))  # computed once, kept
    finally:
        conn.close()
    assert stored[0] == (1, None)  # not a candidate (other frames): never read


def test_different_content_is_not_a_duplicate(tmp_path: Path) -> None:
    a = tmp_path / "a.db"
    record(a, INIT + b'{"jsonrpc":"2.0","method":"_a"}\n')
    export = tmp_path / "a.jsonl"
    _export(a, export)
    # the same connection with one frame's bytes changed (same length, same seq)
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(export.read_bytes().replace(b'"method\\":\\"_a', b'"method\\":\\"_b'))
    assert changed.read_bytes() != export.read_bytes()
    target = tmp_path / "t.db"
    assert cli("import", str(export), str(target)).returncode == 0
    done = cli("import", str(changed), str(target))
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert table_counts(target)[0] == 2
    digests = rows(target, "SELECT digest FROM connections ORDER BY id")
    assert digests[0] != digests[1] and all(d[0] for d in digests)
