"""docs/fleet.md's retention query, run as written on a real PostgreSQL recording, and
``acp-proxy prune`` beside it: one rule."""

from __future__ import annotations

import re
import time
from pathlib import Path

import orjson

from acp_proxy.store.pg import connect_pg
from tests.conftest import echo_proxy, echo_through, run_proxy
from tests.pg_server import PgServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "fleet.md"
DAY = 86400.0


def dbname_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


def retention_sql() -> str:
    text = DOC.read_text().split("## Retention", 1)[1]
    (block,) = [b for b in re.findall(r"```sql\n(.*?)```", text, re.S) if "DELETE" in b]
    return block


def vacuum_command() -> str:
    text = DOC.read_text().split("## Retention", 1)[1]
    match = re.search(r"-c '(VACUUM[^']*)'", text)
    assert match is not None
    return match.group(1)


def old_and_new_connections(url: str, now: float) -> dict[str, int]:
    """Connections of every kind a retention rule must tell apart, with rows in every table."""
    db = connect_pg(url, create=True)
    ids = {}
    for name, started, ended, seen in [
        ("old", now - 40 * DAY, now - 40 * DAY + 60, now - 40 * DAY + 60),
        ("old-killed", now - 40 * DAY, None, now - 39 * DAY),  # its proxy died: stale heartbeat
        ("old-still-open", now - 40 * DAY, None, now - 5),  # a long session, still recording
        ("old-ended-lately", now - 40 * DAY, now - 10 * DAY, now - 10 * DAY),  # started long ago
        ("recent", now - 2 * DAY, now - 2 * DAY + 60, now - 2 * DAY + 60),
    ]:
        ids[name] = db.execute(
            "INSERT INTO connections (started_at, ended_at, last_seen_at, transport, label) "
            "VALUES (?, ?, ?, 'stdio', ?) RETURNING id",
            (started, ended, seen, name),
        ).fetchone()[0]
        for seq in (1, 2):
            db.execute(
                "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, size, raw) "
                "VALUES (?, ?, ?, 0, 'c2a', 3, ?)",
                (ids[name], seq, started, b"{}\n"),
            )
        db.execute(
            "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) "
            "VALUES (?, 1, ?, 0, ?)",
            (ids[name], started, b"log\n"),
        )
        db.execute(
            "INSERT INTO events (connection_id, ts, kind) VALUES (?, ?, 'client_eof')",
            (ids[name], started),
        )
    db.close()
    return ids


def kept_rows(url: str) -> dict[str, set[int]]:
    db = connect_pg(url, create=False)
    kept = {}
    for table, column in [
        ("connections", "id"),
        ("frames", "connection_id"),
        ("stderr_lines", "connection_id"),
        ("events", "connection_id"),
    ]:
        rows = db.execute(f"SELECT DISTINCT {column} FROM {table}").fetchall()
        kept[table] = {r[0] for r in rows}
    db.close()
    return kept


def test_the_retention_query_and_prune_delete_the_same_connections_with_all_their_rows(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    now = time.time()
    ids = old_and_new_connections(pg_url, now)
    twin = pg_server.database()
    assert old_and_new_connections(twin, now) == ids
    # beside the server's data (readable by its user; pytest's own tmp root is 0700)
    script = pg_server.base / f"retention-{dbname_of(pg_url)}.sql"
    script.write_text(retention_sql())
    script.chmod(0o644)
    dbname = dbname_of(pg_url)
    psql = str(pg_server.bindir / "psql")
    common = ["-h", str(pg_server.data), "-p", str(pg_server.port), "-U", "acp", "-d", dbname]
    pg_server._run(psql, *common, "-v", "ON_ERROR_STOP=1", "-f", str(script))
    pg_server._run(psql, *common, "-c", vacuum_command())
    kept = {ids["old-still-open"], ids["old-ended-lately"], ids["recent"]}
    assert kept_rows(pg_url) == dict.fromkeys(
        ("connections", "frames", "stderr_lines", "events"), kept
    )
    done = run_proxy(["prune", twin, "--older-than", "30d"])
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.startswith(b"pruned 2 connection(s) that ended before "), done.stdout
    assert kept_rows(twin) == kept_rows(pg_url)


def recorded_connection(url: str, word: str) -> None:
    """One connection recorded through the real proxy: a request carrying ``word``, echoed."""
    proc = echo_proxy(url)
    line = orjson.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "x/note", "params": {"text": f"{word} here"}}
    )
    echo_through(proc, line + b"\n")
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else b""


def searched_connections(url: str, word: str) -> set[int]:
    done = run_proxy(["search", url, word, "--json"])
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return {hit["connection"] for hit in orjson.loads(done.stdout)["hits"]}


def test_the_retention_query_deletes_what_search_indexed_of_them(
    pg_server: PgServer, pg_url: str
) -> None:
    now = time.time()
    recorded_connection(pg_url, "zebracorn")
    recorded_connection(pg_url, "zebracorn")
    db = connect_pg(pg_url, create=False)
    (old, new) = [r[0] for r in db.execute("SELECT id FROM connections ORDER BY id").fetchall()]
    db.execute(
        "UPDATE connections SET started_at = ?, ended_at = ? WHERE id = ?",
        (now - 40 * DAY, now - 40 * DAY + 60, old),
    )
    assert searched_connections(pg_url, "zebracorn") == {old, new}  # the index, in the database
    assert db.execute(
        "SELECT count(*) FROM search_docs WHERE connection_id = ?", (old,)
    ).fetchone()[0]
    script = pg_server.base / f"retention-search-{dbname_of(pg_url)}.sql"
    script.write_text(retention_sql())
    script.chmod(0o644)
    psql = str(pg_server.bindir / "psql")
    common = ["-h", str(pg_server.data), "-p", str(pg_server.port), "-U", "acp"]
    pg_server._run(
        psql, *common, "-d", dbname_of(pg_url), "-v", "ON_ERROR_STOP=1", "-f", str(script)
    )
    assert db.execute("SELECT DISTINCT connection_id FROM search_docs").fetchall() == [(new,)]
    assert searched_connections(pg_url, "zebracorn") == {new}
    db.close()
