"""A batch holding several connections' rows, stored by each engine's sink in one go."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from acp_proxy.recorder.ipc import STDERR, Control, Whole
from acp_proxy.recorder.writer.rows import Rows
from acp_proxy.recorder.writer.sink import Sink, SqliteSink
from acp_proxy.recorder.writer.sink_pg import PostgresSink


def _deadline() -> float:
    return time.monotonic() + 5


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_rows_of_many_connections_in_one_batch_keep_their_connection_and_order(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where: Any = tmp_path / "r.db"
    sink: Sink = SqliteSink(where)
    if engine == "postgresql":
        where = request.getfixturevalue("pg_url")
        sink = PostgresSink(where)
    sink.open(_deadline)
    rows = Rows(sink.null)
    keys = ["a", "b", "c"]
    items: list[Any] = [Control(k, "open", {"transport": "ws", "started_at": 1.0}) for k in keys]
    sink.write(rows.build(items), _deadline)
    # Interleaved: a1 b1 c1 a2 b2 c2 ..., stderr lines between, and a close in the middle.
    items = []
    for n in range(1, 5):
        for k in keys:
            items.append(Whole(k, "a2c", 2.0, n, b'{"k":"%s","n":%d}\n' % (k.encode(), n), False))
            if n == 2:
                items.append(Whole(k, STDERR, 2.0, n, b"%s warns\n" % k.encode(), False))
        if n == 3:
            items.append(Control("b", "close", {"ended_at": 3.0, "end_reason": "client"}))
    assert sink.write(rows.build(items), _deadline) == 12
    sink.close()
    ids = {k: rows.state(k).db_id for k in keys}
    query = (
        "SELECT connection_id, seq, raw FROM frames ORDER BY id",
        "SELECT connection_id, seq, raw FROM stderr_lines ORDER BY id",
        "SELECT id, end_reason FROM connections ORDER BY id",
    )
    if engine == "postgresql":
        with psycopg.connect(where) as pg:
            got = [[tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                    for r in pg.execute(q).fetchall()] for q in query]  # fmt: skip
    else:
        con = sqlite3.connect(where)
        got = [con.execute(q).fetchall() for q in query]
        con.close()
    frames, stderr, connections = got
    for k in keys:
        mine = [(seq, raw) for cid, seq, raw in frames if cid == ids[k]]
        assert mine == [(n, b'{"k":"%s","n":%d}\n' % (k.encode(), n)) for n in range(1, 5)]
        assert [raw for cid, _, raw in stderr if cid == ids[k]] == [b"%s warns\n" % k.encode()]
    assert connections == [(ids["a"], None), (ids["b"], "client"), (ids["c"], None)]
