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
