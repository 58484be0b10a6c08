"""Following new frames as they are committed, with several writers at once (pure logic).

Frame ids come from one sequence, but with several writers (a fleet recording into one
PostgreSQL database) they are not committed in id order: a writer's batch may still be in
progress, holding ids below one that another writer has already committed. A tail that
polled "ids above the last one seen" would skip that batch for good. :class:`LiveTail`
keeps a *horizon* instead: every frame at or below it has been delivered (or does not
match the filter), and only ids above it are asked for, less the frames already delivered.

How the horizon moves: every writer of frames holds a shared advisory lock for the whole
transaction and takes it before its first id (:data:`~acp_proxy.store.pg.FRAMES_WRITER_LOCK`).
Each poll notes the highest visible id, *then* which writer transactions are in progress
(:meth:`~acp_proxy.store.reader.RecordingReader.frame_writers`). Any transaction holding an
id up to that mark took its lock before the mark was read, so it is one of those noted, or
has ended. Once none of them is in progress any more, everything up to the mark is visible
and has been delivered: the horizon moves there. SQLite has one writer at a time, whose
ids are committed in order: no writer is ever noted, and the horizon follows the mark at once.

A writer that stays in progress longer than :data:`SETTLE_SECONDS` (a client cut off
mid-batch, whose server session waits for it) stops holding the horizon back; frames it
commits later with ids below the horizon are not pushed live (a reload shows them).

Deduplication: one connection's frames are written by one writer, batch after batch, so
its ids rise with its sequence numbers and commit in that order. A frame is new if its
sequence number is above the last one delivered for its connection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

SETTLE_SECONDS = 10.0
"""How long a writer transaction in progress may hold the horizon back."""


@dataclass
class _Mark:
    at: float  # monotonic time of the poll
    max_id: int  # the highest frame id visible then
    writers: frozenset[str]  # frame-writer transactions in progress then


@dataclass
class LiveTail:
    """One follower's position: the horizon, and what was delivered above it."""

    horizon: int
    delivered: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Per connection id: (last sequence number delivered, its frame id)."""
    _marks: deque[_Mark] = field(default_factory=deque)

    def seen_above(self) -> dict[int, int]:
        """Per connection, the last sequence number delivered, for those with frames above
        the horizon (the frames the next query must leave out)."""
        return {cid: seq for cid, (seq, fid) in self.delivered.items() if fid > self.horizon}

    def noted(self, now: float, max_id: int, writers: Iterable[str]) -> None:
        """A poll began: the highest visible id, then the writers in progress (in that order)."""
        self._marks.append(_Mark(now, max_id, frozenset(writers)))

    def fetched(self, frames: Iterable[tuple[int, int, int]], *, complete: bool) -> None:
        """The poll's frames above the horizon, as (id, connection id, seq) in id order.

        ``complete``: the query returned every such frame (no limit cut it short).
        """
        last_id = self.horizon
        for fid, cid, seq in frames:
            if seq > self.delivered.get(cid, (-1, 0))[0]:
                self.delivered[cid] = (seq, fid)
            last_id = fid
        now_writers = self._marks[-1].writers if self._marks else frozenset()
        now = self._marks[-1].at if self._marks else 0.0
        settled = self.horizon
        while self._marks:
            mark = self._marks[0]
            if mark.writers & now_writers and now - mark.at < SETTLE_SECONDS:
                break
            settled = max(settled, mark.max_id)
            self._marks.popleft()
        if not complete:
            settled = min(settled, last_id)
        self.horizon = max(self.horizon, settled)
        if len(self.delivered) > 4096:  # connections long below the horizon need no entry
            self.delivered = {c: v for c, v in self.delivered.items() if v[1] > self.horizon}
