"""Comparing two recorded connections: ``acp-proxy diff`` and the inspector's diff view.

The I/O half of :mod:`acp_proxy.acp.diff`: each connection is streamed twice, never held
(once for the signatures and latencies the alignment needs, once to compare the aligned
frames' JSON pair by pair), so memory is bounded by the alignment's limit, not by the
frames' bytes. :meth:`Comparison.to_json` is the one JSON shape of a diff.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.acp.diff import (
    LCS_CELLS,
    Change,
    ConnectionAlignment,
    ConnectionSketch,
    Signatures,
    SlowerLimit,
    TimingRegression,
    align_connections,
    compare_aligned,
    describe_signature,
    timing_regressions,
)
from acp_proxy.acp.jsonpaths import Difference
from acp_proxy.store.engine import Database
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError
from acp_proxy.wire.frame import Frame

SeqRange = tuple[int, int]
"""Frames ``first``..``last`` (sequence numbers, both included) of one connection: a turn."""


def _frames(db: Database, connection_id: int, seqs: SeqRange | None = None) -> Iterator[Frame]:
    """The one place this module reads frames for their messages: one connection (or
    ``seqs`` of it), in order, streamed (``ts`` is 0)."""
    if seqs is None:
        yield from RecordingReader(db).message_frames(connection_id)
        return
    first, last = seqs
    for f in RecordingReader(db).message_frames(connection_id, after_seq=first - 1):
        if f.seq > last:
            return
        yield f


def _raws(db: Database, connection_id: int, seqs: SeqRange | None = None) -> Iterator[bytes]:
    """The raw bytes of the frames :func:`_frames` reads, and only those columns (the second
    pass compares bytes only)."""
    first, last = seqs if seqs is not None else (1, None)
    for f in RecordingReader(db).wire_frames(connection_id, after_seq=first - 1):
        if last is not None and f.seq > last:
            return
        yield f.raw


def pick_connection(db: Database, wanted: int | None) -> int:
    """``wanted`` if the recording has it, else its first connection (:class:`RecordingError`)."""
    if wanted is not None:
        return RecordingReader(db).connection(wanted).id
    connections = RecordingReader(db).connections()
    if not connections:
        raise RecordingError("no connections recorded")
    return connections[0].id


def sketch_connection(
    db: Database,
    connection_id: int,
    table: Signatures,
    ignores: Sequence[tuple[str, ...]] = (),
    seqs: SeqRange | None = None,
) -> ConnectionSketch:
    """One connection's (or its ``seqs``') signatures, content keys, frame numbers and
    latencies (streamed)."""
    sketch = ConnectionSketch(table, ignores)
    for f in _frames(db, connection_id, seqs):
        sketch.add(f)
    sketch.finish()
    return sketch


def member_json(d: Difference) -> dict[str, Any]:
    """``{"path", "old", "new"}``; ``old`` or ``new`` left out where the member is missing."""
    return d.to_json(recorded_key="old", live_key="new")


@dataclass(slots=True)
class Comparison:
    """Two connections aligned: what was added, removed, changed and got slower."""

    a_connection: int
    b_connection: int
    a: ConnectionSketch
    b: ConnectionSketch
    alignment: ConnectionAlignment
    changes: list[Change] = field(default_factory=list)
    slower: list[TimingRegression] = field(default_factory=list)

    @property
    def removed(self) -> list[int]:
        """Frame indexes of A that B does not have."""
        return self.alignment.removed

    @property
    def added(self) -> list[int]:
        """Frame indexes of B that A does not have."""
        return self.alignment.added

    @property
    def failing_slower(self) -> list[TimingRegression]:
        """The slower exchanges and turns past the ``--fail-slower`` limit."""
        return [t for t in self.slower if t.fails]

    @property
    def differ(self) -> bool:
        """Anything added, removed or changed, or slower past the limit (timing alone,
        without a limit, is reported but is not a difference)."""
        return bool(self.changes or self.failing_slower or self.removed or self.added)

    def frame_json(self, side: ConnectionSketch, index: int) -> dict[str, Any]:
        return {
            "seq": side.seqs[index],
            "frame": side.frame_ids[index],
            "what": describe_signature(side.signature(index)),
        }

    def to_json(self, a_recording: str, b_recording: str) -> dict[str, Any]:
        """The diff as one JSON document (``acp-proxy diff --json``)."""
        a, b = self.a, self.b
        removed, added = self.removed, self.added
        return {
            "a": {"recording": a_recording, "connection": self.a_connection, "frames": len(a)},
            "b": {"recording": b_recording, "connection": self.b_connection, "frames": len(b)},
            "alignment": {
                "exact": self.alignment.exact,
                "lcs_cells_limit": LCS_CELLS,
                "note": self.alignment.note,
            },
            "removed": [self.frame_json(a, i) for i in removed],
            "added": [self.frame_json(b, j) for j in added],
            "changed": [
                {
                    "a": self.frame_json(a, c.a),
                    "b": self.frame_json(b, c.b),
                    "members": [member_json(d) for d in c.members],
                }
                for c in self.changes
            ],
            "timing": [
                {
                    "what": t.what,
                    "method": t.method,
                    "a": self.frame_json(a, t.a),
                    "b": self.frame_json(b, t.b),
                    "a_ms": t.a_ns / 1e6,
                    "b_ms": t.b_ns / 1e6,
                    "fails": t.fails,
                }
                for t in self.slower
            ],
            "summary": {
                "removed": len(removed),
                "added": len(added),
                "changed": len(self.changes),
                "slower": len(self.slower),
                "slower_failing": len(self.failing_slower),
                "equal": not self.differ,
            },
        }


def compare_connections(
    db_a: Database,
    a_connection: int,
    db_b: Database,
    b_connection: int,
    *,
    ignores: Sequence[tuple[str, ...]] = (),
    threshold_ns: int = 1_000_000_000,
    fail_slower: SlowerLimit | None = None,
    a_seqs: SeqRange | None = None,
    b_seqs: SeqRange | None = None,
) -> Comparison:
    """Align connection ``a_connection`` of ``db_a`` with ``b_connection`` of ``db_b`` (or
    only frames ``a_seqs`` of one with ``b_seqs`` of the other: one turn with another).

    Exchanges and turns slower by more than ``threshold_ns`` are reported; only those past
    ``fail_slower`` make the connections differ."""
    table = Signatures()
    a = sketch_connection(db_a, a_connection, table, ignores, a_seqs)
    b = sketch_connection(db_b, b_connection, table, ignores, b_seqs)
    alignment = align_connections(a, b)
    changes = list(
        compare_aligned(
            alignment,
            _raws(db_a, a_connection, a_seqs),
            _raws(db_b, b_connection, b_seqs),
            ignores,
        )
    )
    slower = timing_regressions(alignment, a, b, threshold_ns, fail_slower)
    return Comparison(a_connection, b_connection, a, b, alignment, changes, slower)
