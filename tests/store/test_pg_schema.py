"""The PostgreSQL schema on a real server: migrations, versions, URLs shown without passwords."""

from __future__ import annotations

import threading

import pytest

from acp_proxy.store.pg import connect_pg, safe_url, translate
from acp_proxy.store.schema import SCHEMA_VERSION, RecordingError


def test_a_new_database_is_migrated_once_by_many_writers_at_once(pg_url: str) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            connect_pg(pg_url, create=True).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    db = connect_pg(pg_url, create=False, readonly=True)
    assert db.execute("SELECT version FROM acp_proxy_schema").fetchall() == [(SCHEMA_VERSION,)]
    row = db.execute("SELECT instr(?::bytea, ?::bytea), instr('abc', 'c')", (b"xyz", b"z"))
    assert row.fetchone() == (3, 3)
    db.close()


def test_a_reader_refuses_an_empty_database_and_a_newer_schema(pg_url: str) -> None:
    with pytest.raises(RecordingError, match="holds no acp-proxy recording"):
        connect_pg(pg_url, create=False, readonly=True)
    connect_pg(pg_url, create=True).close()
    db = connect_pg(pg_url, create=True)
    db.execute("UPDATE acp_proxy_schema SET version = ?", (SCHEMA_VERSION + 1,))
    db.close()
    for create in (True, False):
        with pytest.raises(RecordingError, match="upgrade acp-proxy") as info:
            connect_pg(pg_url, create=create, readonly=not create)
        assert "s3cret" not in str(info.value)


def test_a_read_only_connection_cannot_write(pg_url: str) -> None:
    connect_pg(pg_url, create=True).close()
    db = connect_pg(pg_url, create=False, readonly=True)
    with pytest.raises(Exception, match="read-only"):
        db.execute("DELETE FROM frames")
    db.close()


def test_unreachable_server_is_one_line_without_the_password() -> None:
    with pytest.raises(RecordingError) as info:
        connect_pg("postgresql://u:topsecret@127.0.0.1:1/x", create=True, timeout=2)
    text = str(info.value)
    assert "topsecret" not in text and "\n" not in text
    assert text.startswith("cannot connect to postgresql://u@127.0.0.1:1/x")


def test_safe_url_and_placeholders() -> None:
    assert safe_url("postgresql://a:b@h:5/d?password=x&sslmode=require") == (
        "postgresql://a@h:5/d?sslmode=require"
    )
    assert translate("SELECT '?%', x FROM t WHERE a = ? AND b LIKE 'a%'") == (
        "SELECT '?%%', x FROM t WHERE a = %s AND b LIKE 'a%%'"
    )
