"""The recorder queue's on-disk overflow: appended once, read back exactly (recorder/spool.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_proxy.recorder.spool import Spool


def test_pieces_read_back_exactly_in_any_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    pieces = [b"", b"x", b'{"jsonrpc":"2.0"}\n', os.urandom(300_000)]
    refs = [spool.append(piece) for piece in pieces]
    assert [len(ref) for ref in refs] == [len(piece) for piece in pieces]
    assert spool.size == sum(map(len, pieces))
    for ref, piece in reversed(list(zip(refs, pieces, strict=True))):
        assert ref.read() == piece
    spool.close()


def test_the_file_is_anonymous_and_beside_the_recording(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(b"secret bytes")
    # Nothing with a name is left in the folder: the space goes back when it is closed.
    assert list(tmp_path.iterdir()) == []
    spool.close()


def test_a_reference_past_the_end_is_an_error(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    ref = spool.append(b"abcdef")
    ref.length = 10
    with pytest.raises(OSError, match="ended early"):
        ref.read()
    spool.close()


def test_a_run_of_reads_reads_back_as_the_reads_with_their_streams_and_times(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path)
    reads = [("c2a", 1.5, 10, b'{"a":1}\n', 8), ("a2c", 2.5, 20, b'{"b":2}\n{"c"', 8)]
    reads.append(("stderr", 3.5, 30, b"", 0))
    run = spool.append_piece(*reads[0])
    assert all(spool.extend_run(run, *read) for read in reads[1:])
    assert (len(run), run.pieces) == (sum(len(r[3]) for r in reads), 3)
    assert list(spool.pieces(run)) == reads
    # only a run that ends the file grows: anything appended after it starts a new item
    spool.append(b"a whole frame")
    assert not spool.extend_run(run, "c2a", 4.5, 40, b"more\n", 5)
    assert list(spool.pieces(run)) == reads
    spool.close()
