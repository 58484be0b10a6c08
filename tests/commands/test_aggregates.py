"""``stats`` and ``ls`` from the per-connection aggregates print what counting every frame does.

Through the real executable, on a SQLite file and on a real PostgreSQL database: the demo
recordings (sessions continued across connections, so the lineage merge is exercised), read
twice (the first run derives and stores the ended connections' aggregates, the second reads
them), against ``--recount``; then while a proxy is still recording (its connection is
counted afresh each time), and after ``reindex`` (which forgets what it rewrote).
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from acp_proxy.store.pg import connect_pg
from tests.conftest import ECHO_AGENT, proxy_exe, run_proxy
from tests.pg_mirror import mirror_to_pg
from tests.pg_server import PgServer

RECORDINGS = Path(__file__).parents[2] / "recordings"

READS = (
    ["stats", "{db}"],
    ["stats", "{db}", "--json"],
    ["stats", "{db}", "-c", "3", "--json"],
    ["ls", "{db}", "--json"],
)


def _out(args: list[str], db: str) -> bytes:
    done = run_proxy([a.replace("{db}", db) for a in args])
    assert done.returncode == 0, done.stderr
    return done.stdout


def _stored(location: str) -> int:
    """Rows in the recording's aggregate table (0 when there is none)."""
    if location.startswith("postgresql://"):
        db = connect_pg(location, create=False)
        try:
            if db.execute("SELECT to_regclass('connection_aggregates')").fetchone() == (None,):
                return 0
            return int(db.execute("SELECT count(*) FROM connection_aggregates").fetchone()[0])
        finally:
            db.close()
    with sqlite3.connect(location) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "connection_aggregates" not in names:
            return 0
        return int(conn.execute("SELECT count(*) FROM connection_aggregates").fetchone()[0])


@pytest.fixture(params=["sqlite", "pg"])
def demo(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The two demo recordings (4 ended connections) in a file or a database."""
    db = tmp_path / "demo.db"
    for name in ("v1-load.jsonl", "v2-resume-replay.jsonl"):
        done = run_proxy(["import", str(RECORDINGS / name), str(db)])
        assert done.returncode == 0, done.stderr
    if request.param == "sqlite":
        return str(db)
    server: PgServer = request.getfixturevalue("pg_server")
    url = server.database()
    mirror_to_pg(db, url)
    return url


def test_reads_from_aggregates_print_what_counting_every_frame_prints(demo: str) -> None:
    recounted = [_out([*args, "--recount"], demo) for args in READS]
    assert _stored(demo) == 0
    first = [_out(args, demo) for args in READS]
    assert _stored(demo) == 4  # every ended connection's aggregate, kept in the recording
    second = [_out(args, demo) for args in READS]
    assert first == recounted
    assert second == recounted
    assert b"4 connection(s)" in _out(["stats", "{db}"], demo)


def test_reindex_forgets_the_aggregates_of_what_it_rewrote(demo: str) -> None:
    _out(["stats", "{db}"], demo)
    assert _stored(demo) == 4
    if demo.startswith("postgresql://"):
        db = connect_pg(demo, create=False)
        db.execute("UPDATE frames SET method = 'renamed/method' WHERE connection_id = 1")
        db.close()
    else:
        with sqlite3.connect(demo) as conn:
            conn.execute("UPDATE frames SET method = 'renamed/method' WHERE connection_id = 1")
    done = run_proxy(["reindex", demo])
    assert done.returncode == 0, done.stderr
    assert _stored(demo) < 4  # connection 1's at least
    for args in READS:
        assert _out(args, demo) == _out([*args, "--recount"], demo)


def _frames_recorded(db: str) -> int:
    return sum(
        orjson.loads(line)["frame_count"] for line in _out(["ls", db, "--json"], db).splitlines()
    )


@pytest.mark.parametrize("engine", ["sqlite", "pg"])
def test_while_a_connection_records_its_frames_are_counted_each_time(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An ended connection (kept) and a live one (counted afresh) together, as frames arrive
    and after the live one ends."""
    if engine == "sqlite":
        db = str(tmp_path / "live.db")
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        db = server.database()
    line = b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s%d"}}\n'
    done = run_proxy(["--record", db, "--", *ECHO_AGENT], stdin=line % (1, 1))
    assert done.returncode == 0, done.stderr
    proxy = subprocess.Popen(
        [*proxy_exe(), "--record", db, "--", *ECHO_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proxy.stdin is not None
    try:
        for batch in range(3):
            for n in range(5):
                proxy.stdin.write(line % (10 * batch + n, batch))
            proxy.stdin.flush()
            want = 2 + 10 * (batch + 1)  # the ended connection's 2, then request and echo
            deadline = time.monotonic() + 30
            while _frames_recorded(db) < want:
                assert time.monotonic() < deadline, "the frames were not recorded"
                time.sleep(0.1)
            for args in READS[:2]:
                assert _out(args, db) == _out([*args, "--recount"], db)
            listed = [orjson.loads(x) for x in _out(["ls", "{db}", "--json"], db).splitlines()]
            assert [c["frame_count"] for c in listed] == [2, 10 * (batch + 1)]
            assert [c["state"] for c in listed] == ["ended", "running"]
    finally:
        proxy.stdin.close()
        assert proxy.wait(timeout=30) == 0, proxy.stderr.read() if proxy.stderr else ""
        if proxy.stderr is not None:
            proxy.stderr.close()
    assert _stored(db) == 1  # the live connection's were never kept
    for args in READS[:2]:
        assert _out(args, db) == _out([*args, "--recount"], db)
    assert _stored(db) == 2
    assert b"32 frames" in _out(["stats", "{db}"], db)


def test_an_ended_connection_is_read_from_its_kept_totals_not_recounted(tmp_path: Path) -> None:
    """A kept total is what ``ls`` prints (so the aggregates are used, not merely stored);
    ``--recount`` reads the frames."""
    db = tmp_path / "demo.db"
    assert run_proxy(["import", str(RECORDINGS / "v1-load.jsonl"), str(db)]).returncode == 0

    def frame_counts(*extra: str) -> list[int]:
        lines = _out(["ls", "{db}", "--json", *extra], str(db)).splitlines()
        return [orjson.loads(line)["frame_count"] for line in lines]

    counted = frame_counts()
    assert _stored(str(db)) == 2
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE connection_aggregates SET frames = frames + 1000 WHERE connection_id = 1"
        )
    assert frame_counts() == [counted[0] + 1000, *counted[1:]]
    assert frame_counts("--recount") == counted
