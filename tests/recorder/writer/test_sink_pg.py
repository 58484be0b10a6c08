"""The PostgreSQL sink in process, on a real server: a ``COMMIT`` without an answer.

When the connection breaks while ``COMMIT`` is on its way, the sink cannot know whether
the batch was stored. It must neither lose it nor store it twice: after reconnecting it
asks the server (``pg_xact_status``) and sends the batch again only if it did not commit.
The break is real: the sink's own connection is killed from the server side
(``pg_terminate_backend``) right after (or right before) the ``COMMIT``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import psycopg
import pytest

from acp_proxy.recorder.ipc import Control, Whole
from acp_proxy.recorder.writer.rows import Op, Rows
from acp_proxy.recorder.writer.sink import SinkFailed
from acp_proxy.recorder.writer.sink_pg import PostgresSink
from acp_proxy.store.pg import FRAME_WRITERS, connect_pg, frames_transaction
from acp_proxy.store.reader import RecordingReader
from tests.helpers import insert_frames


class _LosingSink(PostgresSink):
    """Breaks its connection at its first ``COMMIT``: after it ran, or instead of it."""

    def __init__(self, url: str, *, committed: bool) -> None:
        super().__init__(url)
        self.committed = committed
        self.breaks = 1

    def _commit(self) -> None:
        if self.breaks:
            self.breaks -= 1
            assert self._db is not None
            pid = self._db.conn.info.backend_pid
            if self.committed:
                super()._commit()  # stored; the answer is lost with the connection
                self._committing = True
            else:
                self._committing = True
            with psycopg.connect(self.url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            time.sleep(0.2)
            self._db.execute("SELECT 1")  # the connection is gone: raises
            raise AssertionError("the connection survived")
        super()._commit()


def _batch(rows: Rows, key: object, n: int) -> list[Op]:
    items: list[Any] = [Control(key, "open", {"transport": "stdio", "started_at": 1.0})]
    items += [Whole(key, "c2a", 2.0, 3, b'{"n":%d}\n' % i, False) for i in range(n)]
    return rows.build(items)


def _write_until_stored(sink: PostgresSink, ops: list[Op]) -> int:
    """What the pipeline does on an outage: the same batch again until it is stored."""
    for _ in range(50):
        try:
            return sink.write(ops, lambda: time.monotonic() + 5)
        except SinkFailed as exc:
            assert exc.unavailable, exc
            time.sleep(0.1)
    raise AssertionError("never stored")


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-committed"])
def test_a_batch_whose_commit_got_no_answer_is_stored_exactly_once(
    pg_url: str, committed: bool
) -> None:
    sink = _LosingSink(pg_url, committed=committed)
    sink.open(lambda: time.monotonic() + 5)
    rows = Rows(PostgresSink.null)
    ops = _batch(rows, "conn", 100)
    assert _write_until_stored(sink, ops) == 100
    more = rows.build([Whole("conn", "a2c", 2.0, 3, b'{"more":1}\n', False)])
    assert sink.write(more, lambda: time.monotonic() + 5) == 1
    sink.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM connections").fetchone() == (1,)
        (cid,) = conn.execute("SELECT id FROM connections").fetchone()
        got = conn.execute("SELECT connection_id, seq FROM frames ORDER BY seq").fetchall()
    assert rows.state("conn").db_id == cid
    assert got == [(cid, seq) for seq in range(1, 102)]


def test_missing_index_values_are_null_and_nul_is_escaped(pg_url: str) -> None:
    # The PostgreSQL rows carry None for a missing index value and go to COPY as they
    # are; a frame that may hold a NUL takes the slow way (escaped, never a failed batch).
    sink = PostgresSink(pg_url)
    sink.open(lambda: time.monotonic() + 5)
    rows = Rows(PostgresSink.null)
    raws = [
        b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1"}}\n',
        b'{"n":1}\n',
        b"not json \xff\n",
        b'{"jsonrpc":"2.0","method":"a\\u0000b"}\n',
    ]
    items: list[Any] = [Control("c", "open", {"transport": "stdio", "started_at": 1.0})]
    items += [Whole("c", "c2a", 2.0, 3, raw, False) for raw in raws]
    try:
        assert sink.write(rows.build(items), lambda: time.monotonic() + 5) == len(raws)
    finally:
        sink.close()
    with psycopg.connect(pg_url) as pg:
        got = pg.execute(
            "SELECT raw, kind, rpc_id, method, session_id, update_kind, entity_type, entity_id "
            "FROM frames ORDER BY seq"
        ).fetchall()
    assert [bytes(r[0]) for r in got] == raws
    assert got[0][1:5] == ("request", "7", "session/prompt", "s1")
    assert got[0][5:] == (None, None, None)
    assert got[1][2:] == (None,) * 6
    assert got[2][2:] == (None,) * 6
    assert got[3][3] == "a\\u0000b"


class _WatchedSink(PostgresSink):
    """Notes, from another connection, which frame writers are in progress at its COMMIT."""

    seen: frozenset[str] = frozenset()

    def _commit(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as other:
            self.seen = frozenset(r[0] for r in other.execute(FRAME_WRITERS).fetchall())
        super()._commit()


def test_every_frame_writing_transaction_is_marked_for_live_followers(pg_url: str) -> None:
    # The recorder's batches, an import and a test writer hold the frame-writer lock for
    # their whole transaction, so a live tail waits for them (store/live_tail.py).
    sink = _WatchedSink(pg_url)
    sink.open(lambda: time.monotonic() + 5)
    assert sink.write(_batch(Rows(PostgresSink.null), "c", 3), lambda: time.monotonic() + 5) == 3
    assert len(sink.seen) == 1
    sink.close()
    reader = RecordingReader.open(pg_url)
    assert reader.frame_writers() == frozenset()  # none once committed
    db = connect_pg(pg_url, create=False)
    with frames_transaction(db):
        insert_frames(db, [("c2a", b'{"n":1}\n')])
        (held,) = reader.frame_writers()
        assert held.count("/") == 1  # a virtual transaction id
    assert reader.frame_writers() == frozenset()
    db.close()
    reader.close()


class _SlowCommitSink(PostgresSink):
    """Its first ``COMMIT`` reaches a server process that is frozen (``SIGSTOP``), and the
    connection is then lost: after reconnecting, that transaction is still in progress,
    and commits once the process runs again (here: a second later)."""

    thawed_after = 1.0

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.frozen: int | None = None

    def _commit(self) -> None:
        if self.frozen is not None:
            return super()._commit()
        assert self._db is not None
        self.frozen = pid = self._db.conn.info.backend_pid
        os.kill(pid, signal.SIGSTOP)
        threading.Timer(self.thawed_after, os.kill, (pid, signal.SIGCONT)).start()
        self._committing = True
        self._db.conn.pgconn.send_query(b"COMMIT")  # waits in the frozen process's socket
        self._db.conn.pgconn.flush()
        self._db.conn.close()
        self._db.execute("SELECT 1")  # the connection is gone: raises
        raise AssertionError("the connection survived")


@pytest.mark.skipif(os.geteuid() != 0, reason="freezing the server's process needs root")
def test_a_commit_still_in_progress_after_reconnecting_is_settled_not_sent_twice(
    pg_url: str,
) -> None:
    sink = _SlowCommitSink(pg_url)
    sink.open(lambda: time.monotonic() + 5)
    rows = Rows(PostgresSink.null)
    ops = _batch(rows, "conn", 50)
    assert _write_until_stored(sink, ops) == 50
    sink.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        gone = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
        deadline = time.monotonic() + 30
        while conn.execute(gone, (sink.frozen,)).fetchone() != (0,):  # thawed, and done
            assert time.monotonic() < deadline
            time.sleep(0.1)
        got = conn.execute("SELECT seq FROM frames ORDER BY seq").fetchall()
        assert conn.execute("SELECT count(*) FROM connections").fetchone() == (1,)
    assert got == [(seq,) for seq in range(1, 51)]
