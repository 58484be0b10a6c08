"""The writer process's progress line, written and read by one module (recorder.ipc)."""

from __future__ import annotations

from acp_proxy.recorder.ipc import (
    Progress,
    measures_line,
    parse_measures,
    parse_progress,
    progress_line,
)
from acp_proxy.recorder.journal import Journal, ProxyJournal, WriterJournal


def test_a_progress_line_reads_back_as_written() -> None:
    sent = Progress(12_000, 7, 0.25, 1.5, 3, 4096, True, 2, True, 4)
    line = progress_line(sent)
    assert line == "p 12000 7 0.250 1.500 3 4096 1 2 1 4\n"  # store away, 4 outages so far
    assert parse_progress(line.encode()) == sent
    assert parse_progress(b"p 12000 7 0.250 1.500 3 4096 1 2\n") is None  # the old, shorter line
    assert parse_progress(b"p 1 2 3\n") is None  # short: not a progress line
    assert parse_progress(b"recording: something else entirely here ok\n") is None


def test_a_measures_line_reads_back_as_written() -> None:
    """The writer's --metrics figures: one line of JSON, never taken for a progress line."""
    sent = {"findings": [["jsonrpc.id", "error", "agent", 2]], "otlp": {"exported": 3}}
    line = measures_line(sent)
    assert line.startswith("m ") and line.endswith("\n") and line.count("\n") == 1
    assert parse_measures(line.encode()) == sent
    assert parse_progress(line.encode()) is None
    assert parse_measures(b"p 1 2 0.0 0.0 0 0 0 0 0 0\n") is None
    assert parse_measures(b"m {not json\n") is None


def test_each_side_of_the_pipe_has_its_own_journal() -> None:
    """The proxy's journal takes what transports forwarded; the writer's is fed batches."""
    assert hasattr(ProxyJournal, "frames") and not hasattr(ProxyJournal, "feed")
    assert hasattr(WriterJournal, "feed") and not hasattr(WriterJournal, "frames")
    assert not hasattr(Journal, "feed") and not hasattr(Journal, "open")
