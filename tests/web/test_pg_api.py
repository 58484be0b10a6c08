"""The inspector on a PostgreSQL store: the same JSON as on SQLite, live updates, keyset pages.

The recordings made through the real proxy (``tests/web/conftest.py``) are copied row for
row into a real PostgreSQL database (:func:`tests.pg_mirror.mirror_to_pg`); every endpoint
must answer the same on both. Frames written into the database while a live WebSocket
watches must be pushed; pages must be keyset index scans (never ``OFFSET``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient

from acp_proxy.store.pg import PgDatabase, connect_pg, frames_transaction
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import FrameFilter
from acp_proxy.web import store
from acp_proxy.web.server import make_app
from tests.helpers import insert_frames
from tests.pg_mirror import mirror_to_pg
from tests.pg_server import PASSWORD, PgServer
from tests.web.helpers import SESSION_ID, _big_frame

PG_POLL = 0.05


@pytest.fixture(scope="module")
def pg_recording(recording: Path, pg_server: PgServer) -> str:
    """The web tests' real recording (two connections, three turns), in PostgreSQL."""
    url = pg_server.database()
    mirror_to_pg(recording, url)
    return url


ENDPOINTS = [
    # findings first: the connection list carries a summary of the findings computed so far
    "/api/connections/1/findings",
    "/api/connections/2/findings",
    "/api/connections",
    "/api/values",
    "/api/frames?limit=5",
    "/api/frames?limit=4&after_id=3",
    "/api/frames?before_id=1000000&limit=4",
    "/api/frames?limit=50&direction=a2c&connection=1",
    "/api/frames?limit=50&method=session/prompt",
    "/api/frames?limit=50&update=agent_message_chunk",
    "/api/frames?limit=50&q=review",
    "/api/frames?limit=7&by_time=1",
    "/api/frames?limit=7&by_time=1&after_id=4",
    "/api/frames/3",
    "/api/frames/4",
    "/api/connections/1/timeline",
    f"/api/connections/1/sessions/{SESSION_ID}",
    "/api/diff?a=1&b=2",
    "/api/search?q=review",
    "/api/search?q=main.py&connection=1",
]


async def _get(client: TestClient, path: str, status: int = 200) -> Any:
    resp = await client.get(path)
    assert resp.status == status, await resp.text()
    return await resp.json()


async def test_every_endpoint_answers_as_on_sqlite(
    aiohttp_client: Any, recording: Path, pg_recording: str
) -> None:
    on_file = await aiohttp_client(make_app(recording))
    on_pg = await aiohttp_client(make_app(pg_recording))
    shown = pg_recording.replace(f":{PASSWORD}", "")
    for path in ENDPOINTS:
        expected = await _get(on_file, path)
        got = orjson.dumps(await _get(on_pg, path)).replace(shown.encode(), str(recording).encode())
        assert orjson.loads(got) == expected, path
        assert expected, path  # the comparison is of something
    assert (await _get(on_pg, "/api/search?q=review"))["hits"]
    info = await _get(on_pg, "/api/info")
    assert info["path"] == info["name"] == shown
    on_file_info = await _get(on_file, "/api/info")
    assert (info["max_id"], info["connections"]) == (on_file_info["max_id"], 2)
    # the page places live frames in the order the server pages "All frames" in
    assert (info["pages_by_time"], on_file_info["pages_by_time"]) == (False, True)
    raw_file = await (await on_file.get("/api/frames/5/raw")).read()
    raw_pg = await (await on_pg.get("/api/frames/5/raw")).read()
    assert raw_pg == raw_file and raw_pg
    export_file = await (await on_file.get("/api/export.jsonl?connection=1")).read()
    export_pg = await (await on_pg.get("/api/export.jsonl?connection=1")).read()
    assert export_pg == export_file and export_pg.count(b"\n") > 10
    for missing in ("/api/frames/99999", "/api/connections/9/findings"):
        assert await _get(on_pg, missing, 404) == await _get(on_file, missing, 404)


async def test_the_live_socket_pushes_frames_committed_by_another_connection(
    aiohttp_client: Any, pg_url: str
) -> None:
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    cid = insert_frames(pg_url, [("c2a", init)], connection={"host": "alpha"}, index=True)
    client = await aiohttp_client(make_app(pg_url, poll_interval=PG_POLL))
    ws = await client.ws_connect("/api/live")
    await ws.send_str(orjson.dumps({"follow": True, "after_id": 1, "filter": {}}).decode())
    state = orjson.loads((await ws.receive(timeout=30)).data)
    assert state["type"] == "state" and state["max_id"] == 1
    delays: list[float] = []
    expected_id = 1
    for n in range(5):
        line = f'{{"jsonrpc":"2.0","method":"session/update","params":{{"n":{n}}}}}\n'.encode()
        committed = time.monotonic()
        await asyncio.to_thread(
            insert_frames, pg_url, [("a2c", line)], connection_id=cid, first_seq=n + 2
        )
        expected_id += 1
        while True:
            msg = await ws.receive(timeout=30)
            assert msg.type == WSMsgType.TEXT
            data = orjson.loads(msg.data)
            if data["type"] == "frames":
                assert [f["id"] for f in data["frames"]] == [expected_id]
                assert data["frames"][0]["preview"] == line.decode().rstrip("\n")
                delays.append(time.monotonic() - committed)
                break
    # A frame of another host's connection arrives on the same socket.
    other = insert_frames(pg_url, [("c2a", init)], connection={"host": "beta"}, index=True)
    while True:
        data = orjson.loads((await ws.receive(timeout=30)).data)
        if data["type"] == "frames":
            assert [f["connection_id"] for f in data["frames"]] == [other]
            break
    await ws.close()
    listed = (await _get(client, "/api/connections"))["connections"]
    assert [c["host"] for c in listed] == ["alpha", "beta"]
    print(f"live delay on PostgreSQL (poll {PG_POLL}s): max {max(delays) * 1000:.0f} ms")


async def test_a_batch_committed_after_higher_ids_is_still_pushed(
    aiohttp_client: Any, pg_url: str
) -> None:
    """Two writers: A draws an id, B draws the next and commits first, then A commits.

    A tail that moved past B's id would never push A's frame."""
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    alpha = insert_frames(pg_url, [("c2a", init)], connection={"host": "alpha"}, index=True)
    beta = insert_frames(pg_url, [("c2a", init)], connection={"host": "beta"}, index=True)
    client = await aiohttp_client(make_app(pg_url, poll_interval=PG_POLL))
    ws = await client.ws_connect("/api/live")
    await ws.send_str(orjson.dumps({"follow": True, "after_id": 2, "filter": {}}).decode())

    async def pushed() -> list[tuple[int, int]]:
        while True:
            data = orjson.loads((await ws.receive(timeout=15)).data)
            if data["type"] == "frames":
                return [(f["connection_id"], f["seq"]) for f in data["frames"]]

    line = b'{"jsonrpc":"2.0","method":"session/update","params":{}}\n'
    slow = connect_pg(pg_url, create=False)
    with contextlib.ExitStack() as open_batch:
        open_batch.enter_context(frames_transaction(slow))
        await asyncio.to_thread(
            insert_frames, slow, [("a2c", line)], connection_id=alpha, first_seq=2
        )
        await asyncio.to_thread(
            insert_frames, pg_url, [("a2c", line)], connection_id=beta, first_seq=2
        )
        assert await pushed() == [(beta, 2)]
        await asyncio.sleep(PG_POLL * 4)  # polls while A is still in progress
    # A committed (its id is below B's): it is pushed all the same, once.
    assert await pushed() == [(alpha, 2)]
    await asyncio.to_thread(insert_frames, pg_url, [("a2c", line)], connection_id=beta, first_seq=3)
    assert await pushed() == [(beta, 3)]
    slow.close()
    await ws.close()
    ids = [f["id"] for f in (await _get(client, "/api/frames?limit=10"))["frames"]]
    assert ids == [1, 2, 3, 4, 5]  # A's frame has id 3, below B's 4


@pytest.fixture(scope="module")
def pg_big(pg_server: PgServer) -> Iterator[str]:
    """20,000 frames in two connections, in PostgreSQL."""
    url = pg_server.database()
    now = time.time()
    for c, (first, last) in enumerate(((0, 10_000), (10_000, 20_000)), 1):
        insert_frames(
            url,
            (_big_frame(c, i - first + 1, now, i) for i in range(first, last)),
            connection={"id": c, "started_at": now, "ended_at": now + 60, "protocol_version": 2},
        )
    db = connect_pg(url, create=False)
    db.execute("ANALYZE")
    db.close()
    yield url


async def test_pages_from_both_ends_of_a_big_store(aiohttp_client: Any, pg_big: str) -> None:
    client = await aiohttp_client(make_app(pg_big))
    first = await _get(client, "/api/frames?limit=200")
    assert [f["id"] for f in first["frames"]] == list(range(1, 201))
    assert first["has_more_after"]
    last = await _get(client, f"/api/frames?before_id={10**12}&limit=200")
    assert [f["id"] for f in last["frames"]] == list(range(19_801, 20_001))
    assert last["has_more_before"] and not last["has_more_after"]
    seen: list[int] = []
    after = 9_990
    while len(seen) < 30:  # walking forward across the connection boundary
        page = await _get(client, f"/api/frames?after_id={after}&limit=7")
        seen += [f["id"] for f in page["frames"]]
        after = seen[-1]
    assert seen == list(range(9_991, 9_991 + len(seen)))
    middle = await _get(client, "/api/frames?after_id=15000&limit=3&direction=a2c&connection=2")
    assert all(f["direction"] == "a2c" and f["connection_id"] == 2 for f in middle["frames"])
    assert middle["frames"][0]["pair"]["latency_ms"] is not None
    conns = await _get(client, "/api/connections")
    assert [c["frame_count"] for c in conns["connections"]] == [10_000, 10_000]


SORT_NODE = re.compile(r"(^|->)\s*(Incremental )?Sort\s+\(", re.M)
"""A sort of the rows in a plan (the frames' partitions' ``Merge Append`` has a ``Sort Key:``
line: it merges index scans that are each in order, sorting nothing)."""


class _Spy(PgDatabase):
    """A PgDatabase that keeps the SQL it ran (to EXPLAIN what a page asks the server)."""

    ran: list[tuple[str, tuple[Any, ...]]]

    def execute(self, sql: str, params: Any = None) -> Any:
        self.ran.append((sql, tuple(params or ())))
        return super().execute(sql, params)


@pytest.mark.parametrize(
    "page",
    [
        {"after_id": 15_000, "before_id": None},
        {"after_id": 0, "before_id": 19_000},
    ],
)
def test_a_page_is_an_index_scan_not_an_offset(pg_big: str, page: dict[str, Any]) -> None:
    """(Pages in time order, ``by_time``, sort the filtered rows on both engines: neither
    schema has an index on ``ts``.)"""
    db = connect_pg(pg_big, create=False, readonly=True)
    spy = _Spy(db.conn, db.url)
    spy.ran = []
    reader = RecordingReader(spy)
    frames, more = reader.frame_page(FrameFilter(connection_id=2), limit=50, preview=100, **page)
    assert len(frames) == 50 and more
    (sql, args) = spy.ran[-1]
    assert "OFFSET" not in sql.upper()
    plan = "\n".join(r[0] for r in spy.execute("EXPLAIN " + sql, args).fetchall())
    spy.close()
    assert "Index" in plan, plan
    assert "Seq Scan on frames" not in plan, plan
    assert not SORT_NODE.search(plan), plan  # the primary key's order: no sort of the rows


@pytest.mark.parametrize("page", [{"after_id": 15_000}, {"before_id": 19_000}, {}])
def test_all_frames_pages_are_index_scans_too(pg_big: str, page: dict[str, Any]) -> None:
    """ "All frames" (no connection chosen) pages by the primary key on PostgreSQL: in time
    order each page sorted the whole table (3M frames: 1.3 s a page)."""
    db = connect_pg(pg_big, create=False, readonly=True)
    spy = _Spy(db.conn, db.url)
    spy.ran = []
    reader = RecordingReader(spy)
    assert not reader.pages_by_time
    listed = store.list_frames(reader, FrameFilter(), limit=50, **page)
    ids = [f["id"] for f in listed["frames"]]
    assert len(ids) == 50 and ids == sorted(ids)
    pages = [  # the page, and the look for one more in the other direction
        (sql, args)
        for sql, args in spy.ran
        if "substr(raw" in sql or sql.startswith("SELECT 1 FROM frames WHERE")
    ]
    assert len(pages) == 2, spy.ran
    for sql, args in pages:  # (the look for one more may scan: its first row answers)
        plan = "\n".join(r[0] for r in spy.execute("EXPLAIN " + sql, args).fetchall())
        assert not SORT_NODE.search(plan), plan
        if "substr(raw" in sql:
            assert "Index" in plan and "Seq Scan on frames" not in plan, plan
    spy.close()


async def test_a_database_restart_is_an_error_then_reads_again(
    aiohttp_client: Any, pg_server: PgServer, pg_recording: str
) -> None:
    client = await aiohttp_client(make_app(pg_recording))
    before = await _get(client, "/api/frames?limit=3")
    found = await _get(client, "/api/search?q=review")  # an index held on its own connection
    await asyncio.to_thread(pg_server.stop)
    try:
        failed = await _get(client, "/api/frames?limit=3", 503)
        assert "cannot connect" in failed["error"] or "terminat" in failed["error"].lower()
        assert PASSWORD not in failed["error"]
    finally:
        await asyncio.to_thread(pg_server.start)
    # The pooled connections the server dropped are not reused: the next request reads.
    for _ in range(store.PG_POOL.MAX_IDLE + 1):
        assert await _get(client, "/api/frames?limit=3") == before
    # Several connections idle in the pool, a restart while nobody asks: every request after
    # it reads (none gets a connection the server closed).
    pages = [client.get(f"/api/frames?limit=3&after_id={n}") for n in range(6)]
    assert all(r.status == 200 for r in await asyncio.gather(*pages))
    await asyncio.to_thread(pg_server.restart)
    for _ in range(store.PG_POOL.MAX_IDLE + 1):
        assert await _get(client, "/api/frames?limit=3") == before
    assert await _get(client, "/api/search?q=review") == found


def _peak(work: Any) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_stream_holds_a_batch_not_the_store(pg_big: str) -> None:
    """Frames stream from a server-side cursor: peak memory is a batch, not 20,000 frames,
    and other queries run on the same connection between two rows (replay does that)."""
    with RecordingReader.open(pg_big) as reader:
        count = 0

        def walk() -> None:
            nonlocal count
            for f in reader.frames():
                count += 1
                if count in (1, 15_000):
                    assert reader.max_seq(f.connection_id) == 10_000  # a query mid-stream

        streamed = _peak(walk)
        held = _peak(lambda: list(reader.frames()))  # what holding every frame costs
    assert count == 20_000
    assert streamed < held / 4, (streamed, held)


def _update(session: str, text: str) -> bytes:
    params = {
        "sessionId": session,
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
        },
    }
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}) + b"\n"


async def test_the_list_counts_an_ended_connection_once(
    aiohttp_client: Any, pg_server: PgServer
) -> None:
    """The connection list and the filters' counts, refreshed while frames arrive, count
    only the connections still recorded: an ended one's frames are counted once."""
    url = pg_server.database()
    now = time.time()
    ended = insert_frames(
        url, [("a2c", _update("s-old", "x"))] * 3, connection={"ended_at": now}, index=True
    )
    running = insert_frames(
        url, [("a2c", _update("s-new", "y"))], connection={"last_seen_at": now}, index=True
    )
    client = await aiohttp_client(make_app(url))
    first = await _get(client, "/api/connections")
    assert [(c["id"], c["frame_count"]) for c in first["connections"]] == [(ended, 3), (running, 1)]
    assert [s["session_id"] for s in first["connections"][0]["sessions"]] == ["s-old"]
    ran: list[tuple[str, tuple[Any, ...]]] = []
    traced = PgDatabase.execute

    def spy(self: PgDatabase, sql: str, params: Any = None) -> Any:
        ran.append((sql, tuple(params or ())))
        return traced(self, sql, params)

    insert_frames(
        url, [("a2c", _update("s-new", "z"))] * 2, connection_id=running, index=True, first_seq=2
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PgDatabase, "execute", spy)
        again = await _get(client, "/api/connections")
        values = await _get(client, "/api/values")
    assert [(c["id"], c["frame_count"]) for c in again["connections"]] == [(ended, 3), (running, 3)]
    assert values["updates"] == [{"value": "agent_message_chunk", "count": 6}]
    counted = [(sql, args) for sql, args in ran if "count(*)" in sql]
    one = ("connection_id IN (?)", "connection_id = ?")
    assert counted and all(any(w in sql for w in one) for sql, _ in counted), counted
    assert {args for _, args in counted} == {(running,)}  # never the ended connection again
    with psycopg.connect(url, autocommit=True) as conn:  # a purge
        conn.execute("DELETE FROM frames WHERE connection_id = %s", [ended])
        conn.execute("DELETE FROM connections WHERE id = %s", [ended])
    after = await _get(client, "/api/connections")
    assert [c["id"] for c in after["connections"]] == [running]
    assert (await _get(client, "/api/values"))["updates"] == [
        {"value": "agent_message_chunk", "count": 3}
    ]
