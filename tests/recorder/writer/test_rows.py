"""The writer's rows stage (recorder.writer.rows), in process: frames cut from chunks keep
their exact bytes and index columns, and travel in the form the SQLite sink binds without
adaptation."""

from __future__ import annotations

from typing import Any

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.recorder.ipc import Chunk, Control, End
from acp_proxy.recorder.writer.rows import INDEX_START, Rows, RowsOp, RowState, _feed

LINES = [
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
    b'"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}\n',
    b'{"jsonrpc":"2.0","id":1,"result":{}}\r\n',
    b"{not json\n",
    b"\n",
    b'{"jsonrpc":"2.0","method":"x"}',  # no terminator: the stream's end stores it
]


def _frames(chunks: list[Any]) -> list[tuple[Any, ...]]:
    rows = Rows(0)
    items: list[Any] = [Control(1, "open", {})]
    items += [Chunk(1, "a2c", 1.0, 2, chunk, 0) for chunk in chunks]
    items.append(End(1, "a2c", 3.0, 4, True))
    ops = rows.build(items)
    return [row for op in ops if isinstance(op, RowsOp) for row in op.frames]


def test_frames_cut_from_chunks_keep_their_bytes_and_are_bound_as_bytearray() -> None:
    data = b"".join(LINES)
    # every split: whole, byte by byte, and across each line's end
    for chunks in ([data], [data[i : i + 1] for i in range(len(data))], [data[:7], data[7:]]):
        frames = _frames(chunks)
        assert [bytes(r[5]) for r in frames] == LINES
        assert [r[1] for r in frames] == list(range(1, len(LINES) + 1))
        assert [r[6] for r in frames] == [len(line) for line in LINES]
        # bytearray: Python's sqlite3 binds it directly (bytes go through adaptation)
        assert {type(r[5]) for r in frames} == {bytearray}
        assert frames[0][INDEX_START] == "notification"


def test_a_bytes_chunk_is_framed_once_into_bytearray_lines() -> None:
    """One copy of the chunk, not one per frame: the framer's lines are bytearrays already,
    so the row binds them as they are."""
    data = b"".join(LINES[:3])
    lines = _feed(RowState(), "a2c", data)
    assert lines == LINES[:3]
    assert {type(line) for line in lines} == {bytearray}


def test_a_bytearray_chunk_is_not_changed_by_framing() -> None:
    data = bytearray(b"".join(LINES[:3]))
    frames = _frames([data])
    assert data == b"".join(LINES[:3])
    assert [bytes(r[5]) for r in frames] == LINES[:3]


TRICKY = [
    b'{"jsonrpc":"2.0","id":-0,"method":"session/new","params":{}}\n',
    b'{"jsonrpc":"2.0","id":-0,"result":{"sessionId":"s"}}\n',
    b'{"jsonrpc":"2.0","id":1.50,"method":"session/prompt","params":{"sessionId":"s"}}\n',
    b'{"jsonrpc":"2.0","id":1.50,"result":{"stopReason":"end_turn"}}\n',
    b'{"jsonrpc":"2.0","id":"a\\u0062","method":"m","params":{"sessionId":"\\ud800"}}\n',
    b'{"jsonrpc":"2.0","id":"a\\u0062","result":{}}\n',
    b'[{"jsonrpc":"2.0","id":2,"method":"x","params":{}},{"jsonrpc":"2.0","method":"n"}]\n',
    b'{"jsonrpc":"2.0","method":"x","params":{"a":"\\u0000"}}\n',
    b'"text"\n',
]


def test_index_columns_are_those_of_the_frames_bytes() -> None:
    indexer = ConnectionIndexer()
    expected = [indexer.values("a2c", line, 0) for line in TRICKY]
    frames = _frames([b"".join(TRICKY)])
    assert [r[INDEX_START:] for r in frames] == expected
