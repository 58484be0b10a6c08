"""The out-of-recorder writes in acp_proxy.store.edit: one transaction each, all or nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_proxy.store.edit import insert_connection, insert_frames
from acp_proxy.store.schema import connect
from acp_proxy.wire.frame import Direction


def _count(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT count(*) FROM frames").fetchone()[0])
    finally:
        db.close()


def test_insert_frames_rolls_back_when_the_frames_fail(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    db = connect(path, create=True)
    cid = insert_connection(db)

    def frames() -> Iterator[tuple[Direction, bytes]]:
        yield ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"initialize"}')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        insert_frames(db, cid, frames())
    assert not db.in_transaction
    db.close()
    assert _count(path) == 0


def test_insert_frames_commits_and_joins_a_callers_transaction(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    db = connect(path, create=True)
    cid = insert_connection(db)
    assert insert_frames(db, cid, [("c2a", b"{}"), ("a2c", b"{}")]) == 2
    assert not db.in_transaction
    assert _count(path) == 2
    db.execute("BEGIN IMMEDIATE")
    insert_frames(db, cid, [("c2a", b"{}")], first_seq=3)
    assert db.in_transaction  # the caller's transaction: not committed for them
    db.execute("ROLLBACK")
    db.close()
    assert _count(path) == 2
