"""The inspector's search after connections were deleted (a retention purge, or by hand).

The real ``acp-proxy web`` over a SQLite file and over PostgreSQL: the index it holds in
memory still has the deleted connection's documents, and those must not come back as hits.
"""

from __future__ import annotations

import sqlite3
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import psycopg

from tests.commands.test_search import two_connections
from tests.conftest import run_proxy
from tests.web.helpers import web_server

PURGE = [
    "DELETE FROM frames WHERE connection_id = 1",
    "DELETE FROM stderr_lines WHERE connection_id = 1",
    "DELETE FROM events WHERE connection_id = 1",
    "DELETE FROM connections WHERE id = 1",
]


def searched(base: str, words: str) -> list[dict[str, Any]]:
    url = base.rstrip("/") + "/api/search?q=" + urllib.request.quote(words)
    with urllib.request.urlopen(url, timeout=30) as resp:
        hits: list[dict[str, Any]] = orjson.loads(resp.read())["hits"]
    return hits


def test_a_deleted_connection_is_not_a_hit_of_the_held_index_on_a_file(tmp_path: Path) -> None:
    db = two_connections(tmp_path)
    with web_server(db) as base:
        assert {h["connection"] for h in searched(base, "world")} == {1, 2}
        with sqlite3.connect(db) as con:
            for statement in PURGE:
                con.execute(statement)
        hits = searched(base, "world")
        assert [h["connection"] for h in hits] == [2]
        assert hits[0]["summary"]["connection_id"] == 2


def test_a_deleted_connection_is_not_a_hit_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    done = run_proxy(["copy", str(two_connections(tmp_path)), pg_url])
    assert done.returncode == 0, done.stderr.decode()
    with web_server(pg_url) as base:  # type: ignore[arg-type]
        assert {h["connection"] for h in searched(base, "world")} == {1, 2}
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for statement in PURGE:
                conn.execute(statement)
        assert [h["connection"] for h in searched(base, "world")] == [2]
