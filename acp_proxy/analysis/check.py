"""The conformance check of one recorded connection, for ``acp-proxy check``, the inspector and MCP.

:class:`ConnectionCheck` feeds :class:`~acp_proxy.acp.conformance.ConnectionChecker` the rows
:meth:`~acp_proxy.store.reader.RecordingReader.wire_rows` streams (``acp-proxy check`` runs it
to the end at once; the inspector keeps one per connection and feeds it the frames recorded
since), which names the times of the few frames a finding needs them for
(:meth:`~acp_proxy.store.reader.RecordingReader.mono_times`). Apart from
:mod:`acp_proxy.analysis.connection` so that ``check`` imports nothing of stats, aggregates or
reindexing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from acp_proxy.acp.conformance import ConnectionChecker, DamagedFrame, Finding
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import ConnectionRow
from acp_proxy.store.schema import RecordingError


@dataclass(slots=True)
class ConnectionReport:
    """The findings of one connection plus its counts (including findings beyond the cap)."""

    connection_id: int
    transport: str
    protocol_version: int | None
    frames: int
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    suppressed: dict[str, int] = field(default_factory=dict)
    complete: bool = True
    """Whether the end-of-connection rules ran (the connection has ended)."""
    checked_to_seq: int = 0


class ConnectionCheck:
    """A conformance check of one connection that can be advanced as the connection grows.

    :meth:`advance` feeds the frames recorded since the last call; :meth:`finish` runs the
    end-of-connection rules (a request never answered...), which only make sense once the
    connection has ended (:attr:`ConnectionRow.state` is not ``running``).
    """

    def __init__(self, row: ConnectionRow, *, max_per_rule: int = 100) -> None:
        self.connection_id = row.id
        self.transport = row.transport
        self.checker = ConnectionChecker(
            row.id,
            transport=row.transport,
            frames_dropped=int(row.frames_dropped or 0),
            max_per_rule=max_per_rule,
        )
        self.findings: list[Finding] = self.checker.drain()
        self.last_seq = 0
        self.finished = False

    def advance(self, reader: RecordingReader) -> list[Finding]:
        """Feed the connection's frames after the last one fed; return the new findings."""
        self.checker.frame_times = partial(reader.mono_times, self.connection_id)
        rows = reader.wire_rows(self.connection_id, after_seq=self.last_seq)
        try:
            new = self.checker.feed_rows(rows)
        except DamagedFrame as exc:
            raise RecordingError(
                f"the recording is damaged: connection {self.connection_id}, {exc}"
            ) from None
        self.last_seq = self.checker.last_seq
        self.findings.extend(new)
        return new

    def settle(self) -> list[Finding]:
        """What is known now, for a live view: findings held back in case they repeat are
        given up (a run that goes on after this starts a finding of its own)."""
        new = self.checker.drain()
        self.findings.extend(new)
        return new

    def finish(self) -> list[Finding]:
        """Run the end-of-connection rules (once); return their findings."""
        if self.finished:
            return []
        self.finished = True
        new = self.checker.finish()
        self.findings.extend(new)
        return new

    def report(self) -> ConnectionReport:
        return ConnectionReport(
            self.connection_id,
            self.transport or "-",
            self.checker.negotiated_version,
            self.checker.frames,
            list(self.findings),
            dict(self.checker.counts),
            dict(self.checker.suppressed),
            self.finished,
            self.last_seq,
        )


def check_connection(
    reader: RecordingReader, row: ConnectionRow, *, max_per_rule: int = 100
) -> ConnectionReport:
    """Check one connection to its end (as recorded so far): ``acp-proxy check``."""
    check = ConnectionCheck(row, max_per_rule=max_per_rule)
    check.advance(reader)
    check.finish()
    return check.report()
