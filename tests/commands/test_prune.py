"""``acp-proxy prune`` through the real executable, on a SQLite file and on PostgreSQL.

Connections are recorded by the real proxy in front of the echo agent (which says hello on
stderr), then made old by an UPDATE through the test's own connection; one stays recording
throughout. On PostgreSQL the old frames land in daily partitions (a later writer moves
them out of the default partition) and prune drops the days whose every row goes.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from acp_proxy.store.pg import PG_MIGRATIONS, PgDatabase
from acp_proxy.store.pg_partitions import DAY, day_start, partition_name
from tests.conftest import echo_proxy, echo_through, run_proxy

NOW = time.time()


def sql(store: str, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the store (``?`` placeholders on both engines; never migrates)."""
    db: Any
    if store.startswith("postgresql://"):
        db = PgDatabase(psycopg.connect(store, autocommit=True), store)
    else:
        db = sqlite3.connect(store, isolation_level=None, timeout=30)
    try:
        cur = db.execute(statement, args)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []
    finally:
        db.close()


def note(word: str, n: int = 1) -> bytes:
    line = {"jsonrpc": "2.0", "id": n, "method": "x/note", "params": {"text": f"{word} here"}}
    return orjson.dumps(line) + b"\n"


def record(store: str, word: str) -> None:
    """One connection through the real proxy: a request carrying ``word``, echoed back."""
    proc = echo_proxy(store)
    echo_through(proc, note(word))
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else b""


def wait_for(store: str, query: str, expected: Any) -> None:
    deadline = time.monotonic() + 60
    while sql(store, query) != expected:
        assert time.monotonic() < deadline, (
            query,
            sql(store, query),
            sql(store, "SELECT id, connection_id, seq FROM frames"),
            sql(store, "SELECT * FROM connections"),
        )
        time.sleep(0.1)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "fleet.db")
    url = request.getfixturevalue("pg_url")
    assert isinstance(url, str)
    return url


@pytest.fixture
def live(store: str) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Starts a connection that stays recording while the test prunes (closed at the end)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        procs.append(echo_proxy(store))
        return procs[-1]

    yield start
    for proc in procs:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        proc.wait(timeout=60)
        print(proc.stderr.read().decode())  # shown when the test failed


def prune(store: str, *args: str) -> str:
    done = run_proxy(["prune", store, *args])
    assert done.returncode == 0 and not done.stderr, done.stderr.decode()
    return done.stdout.decode()


def searched(store: str, word: str) -> set[int]:
    done = run_proxy(["search", store, word, "--json"])
    assert done.returncode in (0, 1) and not done.stderr, done.stderr.decode()  # 1: no hit
    return {hit["connection"] for hit in orjson.loads(done.stdout)["hits"]}


def rows_by_connection(store: str, table: str) -> dict[int, int]:
    return dict(sql(store, f"SELECT connection_id, count(*) FROM {table} GROUP BY connection_id"))


def partitions(store: str) -> set[str]:
    rows = sql(
        store,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent IN ('frames'::regclass, 'stderr_lines'::regclass)",
    )
    return {r[0] for r in rows}


def test_prune_deletes_what_ended_before_the_cut_and_never_the_live_connection(
    store: str, live: Callable[[], subprocess.Popen[bytes]]
) -> None:
    pg = store.startswith("postgresql://")
    for word in ("alpha", "bravo", "charlie"):  # connections 1, 2, 3
        record(store, word)
    running = live()  # connection 4, still recording
    echo_through(running, note("echoed"))
    wait_for(store, "SELECT count(*) FROM frames WHERE connection_id = 4", [(2,)])
    # The past. 1 ended 40 days ago on host h1; 2 ended 41 days ago on h2; 3 is a killed
    # proxy's row (never closed, its last heartbeat 41 days ago) on h2; 4, live, started
    # 41 days ago and its frames are as old as 2's and 3's (their day is not all prunable).
    day40, day41 = NOW - 40 * DAY, NOW - 41 * DAY
    for cid, started, ended, seen, host in [
        (1, day40 - 60, day40, day40, "h1"),
        (2, day41 - 60, day41, day41, "h2"),
        (3, day41 - 60, None, day41, "h2"),
    ]:
        sql(
            store,
            "UPDATE connections SET started_at = ?, ended_at = ?, last_seen_at = ?, host = ? "
            "WHERE id = ?",
            (started, ended, seen, host, cid),
        )
    sql(store, "UPDATE connections SET started_at = ?, host = 'h1' WHERE id = 4", (day41,))
    for table in ("frames", "stderr_lines"):
        for cid, when in [(1, day40), (2, day41), (3, day41), (4, day41)]:
            sql(store, f"UPDATE {table} SET ts = ? WHERE connection_id = ?", (when, cid))
    # a later recording (connection 5, recent): its writer moves the old rows out of the
    # default partition into partitions of their days
    record(store, "delta")
    sql(store, "UPDATE connections SET ended_at = ? WHERE id = 5", (NOW - 2 * DAY,))
    assert searched(store, "here") == {1, 2, 3, 4, 5}  # the search index is built
    assert run_proxy(["ls", store]).returncode == 0  # ls keeps the ended ones' totals
    assert {1, 2} <= set(rows_by_connection(store, "connection_aggregates"))
    frames_before = rows_by_connection(store, "frames")
    assert set(rows_by_connection(store, "stderr_lines")) == {1, 2, 3, 4, 5}
    for cid in (1, 2, 3, 4, 5):  # (not every connection has an event of its own)
        sql(store, "INSERT INTO events (connection_id, ts, kind) VALUES (?, ?, 'x')", (cid, NOW))
    old = {
        partition_name(t, day_start(d)) for t in ("frames", "stderr_lines") for d in (day40, day41)
    }
    if pg:  # the writers made today's partitions and the next two days' ahead
        ahead = {partition_name("frames", day_start(NOW) + n * DAY) for n in range(3)}
        assert old | ahead <= partitions(store)

    dry = prune(store, "--older-than", "30d", "--dry-run")
    assert dry.startswith("would prune 3 connection(s) that ended before "), dry
    assert f"{sum(frames_before[c] for c in (1, 2, 3))} frame(s)" in dry
    assert "3 stderr line(s)" in dry
    assert rows_by_connection(store, "frames") == frames_before
    if pg:
        assert "2 partition(s) would be dropped" in dry, dry
        assert old <= partitions(store)

    one = prune(store, "--older-than", "30d", "--host", "h1")
    assert one.startswith("pruned 1 connection(s) of host h1 that ended before "), one
    assert set(rows_by_connection(store, "frames")) == {2, 3, 4, 5}
    if pg:  # day 40 held only connection 1: dropped whole
        day = day_start(day40)
        dropped = {partition_name("frames", day), partition_name("stderr_lines", day)}
        assert f"2 partition(s) dropped: {', '.join(sorted(dropped))}" in one, one
        assert not dropped & partitions(store)

    rest = prune(store, "--older-than", "30d")
    assert rest.startswith("pruned 2 connection(s) that ended before "), rest
    if pg:  # day 41 also holds the live connection's frames: kept, its other rows deleted
        assert "partition" not in rest, rest
        assert partition_name("frames", day_start(day41)) in partitions(store)
    kept = {4, 5}
    assert [r[0] for r in sql(store, "SELECT id FROM connections ORDER BY id")] == [4, 5]
    for table in ("frames", "stderr_lines", "events", "search_docs", "connection_aggregates"):
        assert set(rows_by_connection(store, table)) <= kept, table
    assert rows_by_connection(store, "frames") == {c: frames_before[c] for c in kept}
    assert searched(store, "alpha") == set()
    assert searched(store, "here") == kept

    # the live connection records on, and is still running
    echo_through(running, note("again", 2))
    wait_for(store, "SELECT count(*) FROM frames WHERE connection_id = 4", [(4,)])
    listed = run_proxy(["ls", store])
    assert b"running" in listed.stdout, listed.stdout
    assert prune(store, "--older-than", "30d").startswith("nothing to prune: no connection ")


@pytest.mark.parametrize(
    "age, why",
    [("30", "is not a duration"), ("3w", "is not a duration"), ("0m", "too short"), ("", "")],
)
def test_a_bad_age_is_one_line_and_exit_2(tmp_path: Path, age: str, why: str) -> None:
    db = tmp_path / "r.db"
    record(str(db), "x")
    done = run_proxy(["prune", str(db), "--older-than", age])
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acp-proxy prune: "), lines
    assert why in lines[0]
    assert rows_by_connection(str(db), "frames") == {1: 2}


def test_a_missing_recording_is_one_line(tmp_path: Path) -> None:
    done = run_proxy(["prune", str(tmp_path / "nope.db"), "--older-than", "1d"])
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "nope.db").exists()


def old_layout(url: str) -> None:
    """A store at the schema before partitions: the migrations, run by hand."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE acp_proxy_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO acp_proxy_schema VALUES (%s)", (len(PG_MIGRATIONS),))
        for migration in PG_MIGRATIONS:
            conn.execute(migration)
        for ended in (NOW - 40 * DAY, NOW - DAY):
            (cid,) = conn.execute(
                "INSERT INTO connections (started_at, ended_at, transport, label) "
                "VALUES (%s, %s, 'stdio', 'old') RETURNING id",
                (ended - 60, ended),
            ).fetchone() or (0,)
            for seq in (1, 2):
                conn.execute(
                    "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
                    "VALUES (%s, %s, %s, %s, 'c2a', 3, %s)",
                    (cid, seq, ended - 30, seq, b"{}\n"),
                )
            conn.execute(
                "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) "
                "VALUES (%s, 1, %s, 0, %s)",
                (cid, ended - 30, b"log\n"),
            )
        conn.execute("SELECT setval('frames_id_seq', 100)")  # as if frames up to 100 were deleted
        assert conn.execute("SELECT relkind FROM pg_class WHERE relname = 'frames'").fetchone() == (
            "r",
        )


def test_the_first_open_converts_an_old_store_to_partitions(pg_url: str) -> None:
    old_layout(pg_url)
    listed = run_proxy(["ls", pg_url])  # a reader reads the old layout as it is
    assert listed.returncode == 0 and listed.stdout.count(b" old ") == 2, listed.stdout
    assert sql(pg_url, "SELECT relkind FROM pg_class WHERE relname = 'frames'") == [("r",)]

    done = prune(pg_url, "--older-than", "30d")  # opens for writing: migrates, then prunes
    assert done.startswith("pruned 1 connection(s)"), done
    assert "2 frame(s)" in done and "1 stderr line(s)" in done
    for table in ("frames", "stderr_lines"):
        kind = sql(pg_url, "SELECT relkind FROM pg_class WHERE relname = ?", (table,))
        assert kind == [("p",)], table
    today = day_start(NOW)
    expected = {"frames_legacy", "frames_default", "stderr_lines_legacy", "stderr_lines_default"}
    expected |= {partition_name("frames", today + n * DAY) for n in (1, 2)}
    expected |= {partition_name("stderr_lines", today + n * DAY) for n in (1, 2)}
    assert partitions(pg_url) == expected
    # the old rows stay in the old table, now the partition of everything up to tomorrow
    assert sql(pg_url, "SELECT connection_id, seq, tableoid::regclass::text FROM frames") == [
        (2, 1, "frames_legacy"),
        (2, 2, "frames_legacy"),
    ]
    # recording goes on: ids continue past the old ones, readers see both
    record(pg_url, "after")
    rows = sql(pg_url, "SELECT id, connection_id FROM frames ORDER BY id")
    assert [c for _, c in rows] == [2, 2, 3, 3] and len({i for i, _ in rows}) == 4
    assert min(i for i, c in rows if c == 3) > 100  # no id handed out before is reused
    shown = run_proxy(["dump", pg_url])
    assert shown.returncode == 0 and b"after here" in shown.stdout, shown.stderr
    # the constraints the old schema had still refuse a frame written twice
    with pytest.raises(psycopg.errors.UniqueViolation):
        sql(
            pg_url,
            "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
            "SELECT connection_id, seq, ts, mono_ns, direction, size, raw FROM frames LIMIT 1",
        )


def test_many_writers_opening_an_old_store_at_once_convert_it_once(pg_url: str) -> None:
    old_layout(pg_url)
    procs = [
        subprocess.Popen(
            ["acp-proxy", "prune", pg_url, "--older-than", "30d", "--dry-run"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.startswith(b"would prune 1 connection(s)"), out
    assert sql(pg_url, "SELECT count(*) FROM frames_legacy") == [(4,)]


def test_sqlite_prunes_in_slices_each_connection_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: a SQLite prune's deletes go in short transactions (the recorders' writer
    waits on each), never splitting a connection."""
    from acp_proxy.store import retention
    from acp_proxy.store.schema import connect

    db = connect(tmp_path / "r.db", create=True)
    for cid, frames in [(1, 5), (2, 1), (3, 1), (4, 2), (5, 3)]:
        db.execute(
            "INSERT INTO connections (id, started_at, ended_at, transport) "
            "VALUES (?, ?, ?, 'stdio')",
            (cid, NOW - 2 * DAY, NOW - DAY if cid != 5 else None),
        )
        for seq in range(1, frames + 1):
            db.execute(
                "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
                "VALUES (?, ?, ?, 0, 'c2a', 3, ?)",
                (cid, seq, NOW - 2 * DAY, b"{}\n"),
            )
    db.execute("UPDATE connections SET last_seen_at = ? WHERE id = 5", (NOW + 3600,))
    monkeypatch.setattr(retention, "SLICE_FRAMES", 2)
    deletes: list[list[str]] = []

    def trace(statement: str) -> None:
        if statement.startswith("BEGIN"):
            deletes.append([])
        elif statement.startswith("DELETE FROM frames") and deletes:
            deletes[-1].append(statement)

    db.set_trace_callback(trace)
    done = retention.prune(db, NOW - 60)
    db.set_trace_callback(None)
    assert (done.connections, done.frames) == (4, 9)
    # the count's transaction, then [1] (5 frames, alone), [2, 3], [4]
    assert [len(d) for d in deletes] == [0, 1, 1, 1]
    assert db.execute("SELECT id FROM connections").fetchall() == [(5,)]
    assert db.execute("SELECT DISTINCT connection_id FROM frames").fetchall() == [(5,)]
    db.close()


def test_prune_moves_the_default_partitions_rows_into_their_days(pg_url: str) -> None:
    record(pg_url, "stray")
    long_ago = NOW - 50 * DAY  # no partition holds that day: the rows go to the default one
    for table in ("frames", "stderr_lines"):
        sql(pg_url, f"UPDATE {table} SET ts = ?", (long_ago,))
    assert sql(pg_url, "SELECT count(*) FROM frames_default") == [(2,)]
    done = prune(pg_url, "--older-than", "1000d")
    assert done.startswith("nothing to prune"), done
    assert sql(pg_url, "SELECT count(*) FROM frames_default") == [(0,)]
    day = day_start(long_ago)
    where = sql(pg_url, "SELECT DISTINCT tableoid::regclass::text FROM frames")
    assert where == [(partition_name("frames", day),)]
    assert partition_name("stderr_lines", day) in partitions(pg_url)
    shown = run_proxy(["dump", pg_url])
    assert shown.returncode == 0 and b"stray here" in shown.stdout, shown.stderr
