"""The writer process's progress line, written and read by one module (recorder.ipc)."""

from __future__ import annotations

from acp_proxy.recorder.ipc import Progress, parse_progress, progress_line
from acp_proxy.recorder.journal import Journal, ProxyJournal, WriterJournal


def test_a_progress_line_reads_back_as_written() -> None:
    sent = Progress(12_000, 7, 0.25, 1.5, 3, 4096, True, 2)
    line = progress_line(sent)
    assert line == "p 12000 7 0.250 1.500 3 4096 1 2\n"  # the bytes the proxy has always read
    assert parse_progress(line.encode()) == sent
    assert parse_progress(b"p 1 2 3\n") is None  # short: not a progress line
    assert parse_progress(b"recording: something else entirely here ok\n") is None


def test_each_side_of_the_pipe_has_its_own_journal() -> None:
    """The proxy's journal takes what transports forwarded; the writer's is fed batches."""
    assert hasattr(ProxyJournal, "frames") and not hasattr(ProxyJournal, "feed")
    assert hasattr(WriterJournal, "feed") and not hasattr(WriterJournal, "frames")
    assert not hasattr(Journal, "feed") and not hasattr(Journal, "open")
