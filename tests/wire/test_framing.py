"""LineFramer: however a stream is chopped into chunks, the lines come out the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.wire.framing import LineFramer

STREAM = st.lists(
    st.one_of(
        st.binary(max_size=50),
        st.sampled_from([b"\n", b"\r\n", b"\r", b"\xff\xfe", b"{}", b"\n\n"]),
    ),
    max_size=60,
).map(b"".join)


def reference_lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def feed_in_chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    framer = LineFramer()
    out: list[bytes] = []
    start = 0
    for cut in [*sorted(set(c % (len(data) + 1) for c in cuts)), len(data)]:
        out.extend(framer.feed(data[start:cut]))
        start = cut
    last = framer.close()
    if last is not None:
        out.append(last)
    assert framer.pending == 0
    return out


@settings(max_examples=400)
@given(data=STREAM, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_chunking_never_changes_the_lines(data: bytes, cuts: list[int]) -> None:
    lines = feed_in_chunks(data, cuts)
    assert lines == reference_lines(data)
    assert b"".join(lines) == data
    for line in lines[:-1]:
        assert line.endswith(b"\n") and line.count(b"\n") == 1


@given(data=STREAM)
def test_byte_by_byte(data: bytes) -> None:
    assert feed_in_chunks(data, list(range(len(data)))) == reference_lines(data)


def test_pending_counts_the_partial_line() -> None:
    framer = LineFramer()
    assert framer.feed(b"abc") == []
    assert framer.pending == 3
    assert framer.feed(b"d\r\nef") == [b"abcd\r\n"]
    assert framer.pending == 2
    assert framer.close() == b"ef"
    assert framer.close() is None


def test_a_long_line_in_many_chunks_is_one_frame() -> None:
    framer = LineFramer()
    chunk = b"x" * 65536
    for _ in range(64):
        assert framer.feed(chunk) == []
    (line,) = framer.feed(b"y\nz")
    assert len(line) == 64 * 65536 + 2 and line.endswith(b"y\n")
    assert framer.close() == b"z"
