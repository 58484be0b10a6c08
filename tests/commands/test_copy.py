"""``acp-proxy copy SRC DST``: the real executable between real SQLite files and a real
PostgreSQL server (tests/pg_server.py), byte-exact both ways, without duplicates.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import echo_proxy, echo_through, frame_count, run_proxy
from tests.formats.helpers import INIT, record
from tests.formats.test_roundtrip import AWKWARD
from tests.helpers import Capture, insert_frames, unwritable
from tests.pg_server import PASSWORD, PgServer, free_port

CONNECTION_COLUMNS = (
    "started_at, ended_at, transport, agent_command, cwd, pid, proxy_pid, exit_status, "
    "protocol_version, client_info, agent_info, label, peer, headers, frames_dropped, "
    "bytes_dropped, meta, last_seen_at, end_reason, host"
)
FRAME_COLUMNS = (
    'seq, ts, mono_ns, direction, raw, size, "binary", kind, rpc_id, method, session_id, '
    "update_kind, entity_type, entity_id"
)


def session_frames(session: str, text: str) -> list[Capture]:
    """A small conversation of one session (initialize, session/new, a prompt, a reply)."""
    sid = session.encode()
    return [
        Capture("c2a", INIT, ts=1767225600.0, mono_ns=1),
        Capture(
            "a2c",
            b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}\n',
            ts=1767225600.5,
            mono_ns=2,
        ),
        Capture(
            "c2a",
            b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/"}}\n',
            ts=1767225601.0,
            mono_ns=3,
        ),
        Capture(
            "a2c",
            b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"' + sid + b'"}}\n',
            ts=1767225601.25,
            mono_ns=4,
        ),
        Capture(
            "c2a",
            b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"'
            + sid
            + b'","prompt":[{"type":"text","text":"'
            + text.encode()
            + b'"}]}}\n',
            ts=1767225602.0,
            mono_ns=5,
        ),
        Capture("a2c", b"\x00\xff binary \xc3\x28", ts=1767225602.5, mono_ns=6, binary=True),
    ]


def make_recording(db: Path) -> None:
    """Three connections: two through the real proxy (awkward bytes, stderr, events), one
    of two sessions written directly with a host and a binary frame."""
    record(db, AWKWARD)
    record(db, INIT)
    insert_frames(
        db,
        session_frames("sess_a", "hello alpha"),
        connection={
            "started_at": 1767225600.0,
            "transport": "ws",
            "agent_command": ["agent", "--x"],
            "host": "build-7",
            "peer": "10.0.0.9:4242",
            "label": "third",
        },
        index=True,
    )
    insert_frames(
        db,
        session_frames("sess_b", "hello beta"),
        connection={"started_at": 1767225700.0, "transport": "stdio", "host": "laptop"},
        index=True,
    )


def copy(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_proxy(["copy", *[str(a) for a in args]], timeout=300)


def ok(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 0, done.stderr
    assert PASSWORD.encode() not in done.stdout + done.stderr
    return done.stdout.decode()


def fails(done: subprocess.CompletedProcess[bytes]) -> str:
    """The single ``Error:`` line of a failed copy (exit 1, no traceback, no password)."""
    err = done.stderr.decode()
    assert done.returncode == 1, (done.returncode, done.stdout, err)
    assert "Traceback" not in err and PASSWORD not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    return lines[0]


def query(location: Path | str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` read straight from a SQLite file or a PostgreSQL URL."""
    if isinstance(location, str):
        with psycopg.connect(location) as conn:
            rows = conn.execute(sql.replace("?", "%s"), args).fetchall()
    else:
        con = sqlite3.connect(location)
        try:
            rows = con.execute(sql, args).fetchall()
        finally:
            con.close()
    return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]


def contents(location: Path | str) -> list[dict[str, Any]]:
    """Everything a copy must keep, connection by connection (ids left out)."""
    out = []
    for (cid,) in query(location, "SELECT id FROM connections ORDER BY id"):
        out.append(
            {
                "connection": query(
                    location, f"SELECT {CONNECTION_COLUMNS} FROM connections WHERE id = ?", (cid,)
                ),
                "frames": query(
                    location,
                    f"SELECT {FRAME_COLUMNS} FROM frames WHERE connection_id = ? ORDER BY seq",
                    (cid,),
                ),
                "stderr": query(
                    location,
                    "SELECT seq, ts, mono_ns, raw FROM stderr_lines WHERE connection_id = ? "
                    "ORDER BY seq",
                    (cid,),
                ),
                "events": query(
                    location,
                    "SELECT ts, kind, detail FROM events WHERE connection_id = ? ORDER BY id",
                    (cid,),
                ),
            }
        )
    return out


def counts(location: Path | str) -> tuple[int, ...]:
    return query(
        location,
        "SELECT (SELECT count(*) FROM connections), (SELECT count(*) FROM frames), "
        "(SELECT count(*) FROM stderr_lines), (SELECT count(*) FROM events)",
    )[0]


def test_file_to_pg_to_file_is_byte_exact(tmp_path: Path, pg_url: str) -> None:
    db = tmp_path / "session.db"
    make_recording(db)
    original = contents(db)
    assert len(original) == 4 and original[0]["stderr"] and original[0]["events"]

    out = ok(copy(db, pg_url))
    assert out.startswith("copied 4 connections (")
    assert "postgresql://acp@127.0.0.1:" in out  # the URL, without its password
    assert contents(pg_url) == original
    # Raw bytes are bytea, kept exactly, awkward bytes and all.
    raws = query(pg_url, "SELECT raw FROM frames WHERE connection_id = 1 AND direction = 'c2a'")
    assert b"".join(r[0] for r in raws) == AWKWARD
    # The password is stored nowhere.
    for table in ("connections", "events"):
        for row in query(pg_url, f"SELECT * FROM {table}"):
            assert PASSWORD not in repr(row)

    back = tmp_path / "back.db"
    out = ok(copy(pg_url, back))
    assert out.startswith("copied 4 connections (")
    assert contents(back) == original
    # The export of the copy is the export of the original, byte for byte.
    exports = [run_proxy(["export", str(p), "--no-redact"]).stdout for p in (db, pg_url, back)]
    assert exports[0] and exports[0] == exports[1] == exports[2]


def test_copying_twice_does_not_duplicate(tmp_path: Path, pg_url: str) -> None:
    db = tmp_path / "session.db"
    make_recording(db)
    ok(copy(db, pg_url))
    before = counts(pg_url)
    out = ok(copy(db, pg_url))
    assert out.startswith("copied 0 connections (0 frames, 0 stderr lines, 0 events)")
    assert "skipped 4 already present" in out
    assert counts(pg_url) == before
    # A new connection in SRC is the only one copied the next time.
    record(db, INIT)
    out = ok(copy(db, pg_url))
    assert out.startswith("copied 1 connection (") and "skipped 4 already present" in out
    assert counts(pg_url)[0] == before[0] + 1
    # And back into a file holding part of it already.
    part = tmp_path / "part.db"
    ok(copy(db, part, "--connection", "3"))
    out = ok(copy(pg_url, part))
    assert out.startswith("copied 4 connections (") and "skipped 1 already present" in out
    assert counts(part)[0] == 5


def test_session_and_connection_pick_a_part(tmp_path: Path, pg_url: str) -> None:
    db = tmp_path / "session.db"
    make_recording(db)
    ok(copy(db, pg_url))
    original = contents(db)

    one = tmp_path / "one.db"
    out = ok(copy(pg_url, one, "--session", "sess_b"))
    assert out.startswith("copied 1 connection (6 frames")
    assert contents(one) == [original[3]]

    two = tmp_path / "two.db"
    out = ok(copy(pg_url, two, "-c", "1", "--connection", "3"))
    assert out.startswith("copied 2 connections (")
    assert contents(two) == [original[0], original[2]]

    both = tmp_path / "both.db"
    ok(copy(pg_url, both, "-c", "3", "-c", "4", "--session", "sess_a"))
    assert contents(both) == [original[2]]


def test_url_to_url_across_two_databases(tmp_path: Path, pg_server: PgServer) -> None:
    first, second = pg_server.database(), pg_server.database()
    db = tmp_path / "session.db"
    make_recording(db)
    ok(copy(db, first))
    out = ok(copy(first, second))
    assert out.startswith("copied 4 connections (")
    assert contents(second) == contents(db)
    assert "skipped 4 already present" in ok(copy(first, second))


def test_errors_are_one_line(tmp_path: Path, pg_server: PgServer, pg_url: str) -> None:
    db = tmp_path / "session.db"
    make_recording(db)

    dead = f"postgresql://acp:{PASSWORD}@127.0.0.1:{free_port()}/nothing"
    assert "cannot connect to postgresql://acp@127.0.0.1:" in fails(copy(db, dead))
    assert "cannot connect" in fails(copy(dead, tmp_path / "x.db"))
    assert not (tmp_path / "x.db").exists()

    wrong = pg_url.replace(PASSWORD, "not-the-pw")
    line = fails(copy(db, wrong))
    assert "password authentication failed" in line and "not-the-pw" not in line

    assert "no session 'nope'" in fails(copy(db, tmp_path / "y.db", "--session", "nope"))
    assert "no connection 9" in fails(copy(db, pg_url, "-c", "9"))
    assert query(pg_url, "SELECT to_regclass('connections')") == [(None,)]  # not touched
    assert not (tmp_path / "y.db").exists()

    assert "no such recording" in fails(copy(tmp_path / "missing.db", pg_url))
    assert "holds no acp-proxy recording" in fails(copy(pg_server.database(), db))
    assert "the same recording" in fails(copy(db, db))

    frozen = tmp_path / "frozen"
    frozen.mkdir()
    target = frozen / "target.db"
    record(target, INIT)
    with unwritable(frozen):
        line = fails(copy(db, target))
    assert line == f"Error: cannot write {target}: it (or its directory) is read-only"
    assert counts(target)[0] == 1  # untouched, still readable


def test_progress_on_stderr_for_a_long_copy(tmp_path: Path, pg_url: str) -> None:
    db = tmp_path / "big.db"
    frames = (
        Capture("a2c", b'{"jsonrpc":"2.0","method":"_n","params":{"i":%d}}\n' % i, ts=1.0 + i)
        for i in range(12_000)
    )
    insert_frames(db, frames, connection={"started_at": 1767225600.0}, index=True)
    done = copy(db, pg_url)
    ok(done)
    lines = done.stderr.decode().splitlines()
    found = [re.fullmatch(r"acp-proxy copy: (\d+)/12000 frames \(\d+%\)", line) for line in lines]
    assert len(lines) >= 2 and all(found), lines
    done_counts = [int(m.group(1)) for m in found if m]
    assert done_counts == sorted(done_counts) and done_counts[0] >= 5000
    assert "12,000 frames" in done.stdout.decode()
    quiet = copy(db, tmp_path / "q.db", "-q")
    assert ok(quiet) and quiet.stderr == b""


@pytest.mark.parametrize("direction", ["export", "import"])
def test_export_and_import_take_a_url(tmp_path: Path, pg_url: str, direction: str) -> None:
    db = tmp_path / "session.db"
    make_recording(db)
    jsonl = tmp_path / "s.jsonl"
    done = run_proxy(["export", str(db), "--no-redact", "-o", str(jsonl)])
    assert done.returncode == 0, done.stderr
    if direction == "import":
        out = ok(run_proxy(["import", str(jsonl), pg_url]))
        assert out.startswith("imported 4 connection(s) (1->1, 2->2, 3->3, 4->4)")
        assert "skipped (duplicates)" in ok(run_proxy(["import", str(jsonl), pg_url]))
    else:
        ok(copy(db, pg_url))
    assert contents(pg_url) == contents(db)
    from_pg = run_proxy(["export", pg_url, "--no-redact"])
    assert from_pg.returncode == 0, from_pg.stderr
    assert from_pg.stdout == jsonl.read_bytes()
    part = run_proxy(["export", pg_url, "--no-redact", "-c", "3"])
    assert part.returncode == 0 and b'"host":"build-7"' in part.stdout
    # Redaction and the file output work the same on a URL.
    out = tmp_path / "pg.jsonl"
    done = run_proxy(["export", pg_url, "-o", str(out)])
    assert done.returncode == 0 and out.exists() and PASSWORD.encode() not in done.stderr
    assert b"exported 4 connection(s)" in done.stderr


def test_a_bad_export_imports_nothing_into_a_url(tmp_path: Path, pg_url: str) -> None:
    db = tmp_path / "session.db"
    make_recording(db)
    good = run_proxy(["export", str(db), "--no-redact"]).stdout
    lines = good.splitlines(keepends=True)
    frame = next(i for i, line in enumerate(lines) if b'"type":"frame"' in line)
    duplicate = tmp_path / "dup.jsonl"
    duplicate.write_bytes(b"".join([*lines[: frame + 1], lines[frame], *lines[frame + 1 :]]))
    truncated = tmp_path / "cut.jsonl"
    truncated.write_bytes(b"".join(lines[:-3]))
    for bad, message in ((duplicate, "appears twice"), (truncated, "truncated")):
        done = run_proxy(["import", str(bad), pg_url])
        assert message in fails(done)
        assert counts(pg_url) == (0, 0, 0, 0)


def _wait_for_frames(db: Path, n: int) -> None:
    """Until the proxy's recorder has stored ``n`` frames (bounded: 60 s)."""
    deadline = time.monotonic() + 60
    while frame_count(db) < n:
        assert time.monotonic() < deadline, f"{frame_count(db)} of {n} frames recorded"
        time.sleep(0.05)


@pytest.mark.parametrize("store", ["file", "url"])
def test_copying_a_connection_while_it_records_then_again_stores_it_once(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    """The second copy adds only what the connection recorded since the first (issue 22:
    two rows, 3,008 frames for 1,999)."""
    src = tmp_path / "live.db"
    dst: Path | str = tmp_path / "copy.db" if store == "file" else request.getfixturevalue("pg_url")
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"_ping"}\n' % i for i in range(1, 41)]
    proc = echo_proxy(src)
    try:
        echo_through(proc, b"".join(lines[:15]))
        _wait_for_frames(src, 30)  # each line both ways
        out = ok(copy(src, dst))
        assert out.startswith("copied 1 connection (30 frames"), out
        echo_through(proc, b"".join(lines[15:]))
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    assert frame_count(src) == 80
    out = ok(copy(src, dst))
    assert "copied 0 connections (50 frames" in out, out
    assert "grew 1 connection copied before (1->1 +50)" in out, out
    assert contents(dst) == contents(src)  # one row, every frame once, the end state
    out = ok(copy(src, dst))
    assert "skipped 1 already present" in out and "grew" not in out, out
    assert contents(dst) == contents(src)


def test_a_failed_copy_is_its_one_line_only(tmp_path: Path) -> None:
    """A copy that fails while frames stream (DST refuses a row) prints nothing after its
    error line: no "Exception ignored in: <generator object stream_rows>"."""
    src = tmp_path / "src.db"
    make_recording(src)
    dst = tmp_path / "dst.db"
    ok(copy(tmp_path / "src.db", dst))
    con = sqlite3.connect(dst)
    con.execute("DELETE FROM connections")
    con.execute("DELETE FROM frames")
    con.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON frames WHEN NEW.seq = 3 "
        "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
    )
    con.commit()
    con.close()
    line = fails(copy(src, dst))
    assert line.startswith("Error: cannot copy: "), line


def test_importing_a_connection_exported_while_it_recorded_then_whole_stores_it_once(
    tmp_path: Path,
) -> None:
    full = tmp_path / "full.db"
    record(full, AWKWARD)
    partial = tmp_path / "partial.db"
    partial.write_bytes(full.read_bytes())
    con = sqlite3.connect(partial)  # the connection as it was midway: no end, fewer frames
    con.execute("DELETE FROM frames WHERE seq > 3")
    con.execute("UPDATE connections SET ended_at = NULL, exit_status = NULL, end_reason = NULL")
    con.commit()
    con.close()
    dst = tmp_path / "dst.db"
    for source in (partial, full):
        jsonl = tmp_path / f"{source.stem}.jsonl"
        ok(run_proxy(["export", str(source), "--no-redact", "-o", str(jsonl)]))
        done = run_proxy(["import", str(jsonl), str(dst)])
        assert done.returncode == 0, done.stderr
    (total,) = query(full, "SELECT count(*) FROM frames")[0]
    assert done.stderr.decode().splitlines() == [
        f"acp-proxy: connection 1 of {tmp_path / 'full.jsonl'} continues connection 1 of {dst} "
        f"(imported before, while it was recording): added its {total - 3} new frame(s) to it"
    ]
    assert contents(dst) == contents(full)
