"""wire.frame: directions and the :class:`Frame` value built from what crossed the wire."""

from __future__ import annotations

from acp_proxy.store.columns import FRAME_COLUMN_NAMES
from acp_proxy.wire.frame import A2C, C2A, Frame, other_direction


def test_other_direction_swaps_the_two_directions() -> None:
    assert other_direction(C2A) == A2C
    assert other_direction(A2C) == C2A


def test_wire_frame_takes_its_size_from_the_bytes_and_leaves_index_columns_empty() -> None:
    f = Frame.wire(A2C, b'{"id":1}', seq=4, mono_ns=99, binary=True, connection_id=7)
    assert (f.id, f.connection_id, f.seq, f.ts, f.mono_ns) == (0, 7, 4, 0.0, 99)
    assert (f.direction, f.raw, f.size, f.binary) == (A2C, b'{"id":1}', 8, True)
    assert (f.kind, f.rpc_id, f.method, f.session_id) == (None, None, None, None)


def test_frame_fields_are_the_frame_table_columns_after_the_row_id() -> None:
    assert Frame._fields == ("id", *FRAME_COLUMN_NAMES)
