"""The recorder in process: streams cut into frames, spooling and exact drop accounting.

The writer is stalled for real: another connection holds the database's write lock while
the stream is pushed, so the in-memory queue overflows into the spool file (or, with no
spool or a full one, frames are dropped); then the lock goes and everything flushes.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_proxy.recorder.handle import Recorder

LINE = st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"") + b"\n"),
    st.integers(min_value=1000, max_value=9000).map(lambda n: b"L" * n + b"\n"),
)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


def _record(
    db: Path, chunks: list[bytes], *, queue: int, stall: bool, spool: int = 0
) -> tuple[list[bytes], int, int, list[str]]:
    db.unlink(missing_ok=True)
    warnings: list[str] = []
    rec = Recorder(
        db,
        queue_bytes=queue,
        spool_bytes=spool,
        batch_bytes=512,
        warn=warnings.append,
        lock_retry=60,
    )
    conn = rec.connection("stdio")
    holder = None
    if stall:
        # wait until the writer created the schema, then take the write lock
        conn.update(label="x")
        while rec.batches_committed == 0:
            time.sleep(0.01)
        holder = sqlite3.connect(db, isolation_level=None, timeout=30)
        holder.execute("BEGIN EXCLUSIVE")
    for chunk in chunks:
        conn.stream("a2c", chunk)
    conn.stream_end("a2c")
    if holder is not None:
        holder.execute("COMMIT")
        holder.close()
    rec.close()
    con = sqlite3.connect(db)
    try:
        frames = [bytes(r) for (r,) in con.execute("SELECT raw FROM frames ORDER BY seq")]
        dropped, bytes_dropped = con.execute(
            "SELECT frames_dropped, bytes_dropped FROM connections"
        ).fetchone()
    finally:
        con.close()
    return frames, dropped, bytes_dropped, warnings


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    lines=st.lists(LINE, min_size=1, max_size=80),
    tail=st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")),
    cuts=st.lists(st.integers(min_value=0, max_value=10**6), max_size=40),
    spool=st.sampled_from([0, 3000, 1 << 30]),
)
def test_drops_are_whole_frames_and_counted_exactly(
    tmp_path: Path, lines: list[bytes], tail: bytes, cuts: list[int], spool: int
) -> None:
    data = b"".join(lines) + tail
    expected = [*lines, tail] if tail else lines
    frames, dropped, bytes_dropped, warnings = _record(
        tmp_path / "w.db", _chunks(data, cuts), queue=2048, stall=True, spool=spool
    )
    if spool == 1 << 30:  # the spool holds everything the memory budget cannot
        assert (frames, dropped, bytes_dropped, warnings) == (expected, 0, 0, [])
    # every recorded frame is a whole original frame, in order (a subsequence)
    it = iter(expected)
    assert all(any(f == e for e in it) for f in frames)
    assert len(frames) + dropped == len(expected)
    assert sum(map(len, frames)) + bytes_dropped == len(data)
    if dropped:
        assert len([w for w in warnings if "dropping frames" in w]) == 1


def test_a_frame_bigger_than_the_queue_budget_is_kept_whole(tmp_path: Path) -> None:
    big = b"B" * 300_000 + b"\n"
    data = b"a\n" + big + b"z\n"
    chunks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    frames, dropped, _, warnings = _record(tmp_path / "b.db", chunks, queue=8192, stall=True)
    # an unfinished line does not count against the budget: nothing is backlog here
    assert frames == [b"a\n", big, b"z\n"]
    assert dropped == 0 and not warnings


def test_backlog_beyond_the_budget_is_dropped_but_the_open_line_finished(tmp_path: Path) -> None:
    small = b"".join(b"s%05d\n" % i for i in range(3000))  # 21 KB of complete frames
    big = b"B" * 100_000 + b"\n"
    data = small + big + small
    chunks = [data[i : i + 1000] for i in range(0, len(data), 1000)]
    frames, dropped, bytes_dropped, warnings = _record(
        tmp_path / "c.db", chunks, queue=4096, stall=True
    )
    assert dropped > 0 and len(frames) + dropped == 6001
    assert sum(map(len, frames)) + bytes_dropped == len(data)
    assert len([w for w in warnings if "dropping frames" in w]) == 1


def test_no_pressure_no_loss(tmp_path: Path) -> None:
    data = b"".join(b"line %d\n" % i for i in range(5000)) + b"end"
    frames, dropped, bytes_dropped, warnings = _record(
        tmp_path / "n.db", _chunks(data, list(range(0, len(data), 777))), queue=1 << 20, stall=False
    )
    assert b"".join(frames) == data and len(frames) == 5001
    assert (dropped, bytes_dropped, warnings) == (0, 0, [])


def test_the_spool_takes_the_overflow_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """A stalled writer with a 4 KiB memory budget: 2 MB of frames go through the spool file,
    every one is recorded in order, nothing is dropped or warned, and no file is left."""
    data = b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"p" * (i % 300)) for i in range(12_000))
    chunks = _chunks(data, list(range(0, len(data), 4093)))
    frames, dropped, bytes_dropped, warnings = _record(
        tmp_path / "s.db", chunks, queue=4096, stall=True, spool=1 << 30
    )
    assert b"".join(frames) == data and len(frames) == 12_000
    assert (dropped, bytes_dropped, warnings) == (0, 0, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


def test_many_small_reads_both_ways_fill_the_spool_not_its_item_bound(tmp_path: Path) -> None:
    """A stalled writer and a client and agent exchanging one line per read, the two
    directions interleaved: 6,000 reads, far more than the spooled items the memory budget
    allows references for (1,024), all recorded, in their order, each with its own time.

    (Each read was one spooled queue item: past the item bound, frames were dropped with
    most of the spool still free, seen as an outage's backlog losing frames.)"""
    db = tmp_path / "r.db"
    rec = Recorder(db, queue_bytes=4096, spool_bytes=1 << 30, lock_retry=60)
    conn = rec.connection("stdio")
    conn.update(label="x")
    while rec.batches_committed == 0:
        time.sleep(0.01)
    holder = sqlite3.connect(db, isolation_level=None, timeout=30)
    holder.execute("BEGIN EXCLUSIVE")
    sent: list[tuple[str, bytes]] = []
    for i in range(3000):
        for direction in ("c2a", "a2c"):
            line = b'{"jsonrpc":"2.0","id":%d,"pad":"%s"}\n' % (i, b"p" * 200)
            conn.stream(direction, line)
            sent.append((direction, line))
    for direction in ("c2a", "a2c"):
        conn.stream_end(direction)
    holder.execute("COMMIT")
    holder.close()
    rec.close()
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT direction, raw, mono_ns FROM frames ORDER BY seq").fetchall()
        dropped = con.execute("SELECT frames_dropped FROM connections").fetchone()[0]
    finally:
        con.close()
    assert dropped == 0
    assert [(d, bytes(r)) for d, r, _ in rows] == sent
    times = [t for _, _, t in rows]
    assert times == sorted(times) and len(set(times)) > len(times) // 2  # their own times


def test_a_full_spool_drops_and_counts(tmp_path: Path) -> None:
    data = b"".join(b"frame %06d\n" % i for i in range(20_000))  # 260 KB
    chunks = _chunks(data, list(range(0, len(data), 1000)))
    frames, dropped, bytes_dropped, warnings = _record(
        tmp_path / "f.db", chunks, queue=4096, stall=True, spool=64 * 1024
    )
    assert dropped > 0 and len(frames) + dropped == 20_000
    assert sum(map(len, frames)) + bytes_dropped == len(data)
    assert len(frames) >= 64 * 1024 // 13  # a spool's worth kept (memory alone: ~315)
    assert len([w for w in warnings if "dropping frames" in w]) == 1


def test_whole_messages_spool_too(tmp_path: Path) -> None:
    """WebSocket messages (one queue item each) overflow into the spool like stream chunks."""
    db = tmp_path / "m.db"
    rec = Recorder(db, queue_bytes=100_000, spool_bytes=1 << 30, lock_retry=60)
    conn = rec.connection("websocket")
    conn.update(label="x")
    while rec.batches_committed == 0:
        time.sleep(0.01)
    holder = sqlite3.connect(db, isolation_level=None, timeout=30)
    holder.execute("BEGIN EXCLUSIVE")
    # Messages until some are spooled: how many the queue, the pipe and the writer
    # process's own queue take first depends on how far the writer got before the lock
    # stopped it. Then as many again as the queue holds, all spooled.
    sent: list[bytes] = []
    extra = None
    while extra is None or len(sent) < extra:
        i = len(sent)
        sent.append(b'{"jsonrpc":"2.0","method":"m","params":{"i":%d}}' % i)
        conn.frame("c2a" if i % 2 else "a2c", sent[-1], binary=i % 7 == 0)
        if extra is None and rec.spool_peak_bytes > 0:
            extra = len(sent) + 500
        assert len(sent) < 20_000, "nothing was spooled"
    count = len(sent)
    holder.execute("COMMIT")
    holder.close()
    rec.close()
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT raw, binary FROM frames ORDER BY seq").fetchall()
        dropped = con.execute("SELECT frames_dropped FROM connections").fetchone()[0]
    finally:
        con.close()
    assert [bytes(r) for r, _ in rows] == sent
    assert [b for _, b in rows] == [int(i % 7 == 0) for i in range(count)]
    assert dropped == 0
