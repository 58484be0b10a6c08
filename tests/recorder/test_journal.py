"""The proxy's journal: which items a batch waits for, and which it does not (in process),
and a burst held and then recorded whole through the real executable."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from acp_proxy.recorder import journal as journal_module
from acp_proxy.recorder.ipc import Control, Whole
from acp_proxy.recorder.journal import ProxyJournal
from tests.conftest import frame_count, frames_of, proxy_exe


def test_an_event_lingers_with_the_frames_and_a_change_is_taken_at_once() -> None:
    """A connection event (an HTTP connection records one per request) waits for the
    linger like a frame, instead of costing a batch of its own; the connection's opening,
    changes and end are still taken at once, with what waited before them, in order."""
    journal = ProxyJournal(queue_bytes=1 << 20, batch_bytes=1 << 20, linger=3600, warn=print)
    journal.open("c", {"transport": "http"})
    assert journal.take() == [Control("c", "open", {"transport": "http"})]  # at once
    frame = Whole("c", "c2a", 1.0, 1, b"{}", False)
    journal.frames("c", [frame])
    journal.note("c", "event", {"kind": "http"})
    taken: list[Any] = []
    taker = threading.Thread(target=lambda: taken.append(journal.take()))
    taker.start()
    taker.join(0.3)
    assert taker.is_alive()  # lingering: neither the frame nor the event cut the batch
    journal.control("c", "update", {"pid": 7})
    taker.join(30)
    assert taken == [
        [frame, Control("c", "event", {"kind": "http"}), Control("c", "update", {"pid": 7})]
    ]
    journal.stop()
    assert journal.take() is None


def _burst_journal(monkeypatch: Any, *, end: float, hold: float) -> ProxyJournal:
    """A proxy journal with the burst rule's timings set for a test (1 MiB batches)."""
    monkeypatch.setattr(journal_module, "BURST_END_SECONDS", end)
    monkeypatch.setattr(journal_module, "BURST_HOLD_SECONDS", hold)
    return ProxyJournal(queue_bytes=256 << 20, batch_bytes=1 << 20, linger=0.05, warn=print)


def _produce(journal: ProxyJournal, frames: int, size: int, pause: float) -> list[Whole]:
    """Queue ``frames`` frames of ``size`` bytes, ``pause`` seconds apart (a burst)."""
    sent = []
    for n in range(frames):
        frame = Whole("c", "a2c", float(n), n, b"x" * (size - 1) + b"\n", False)
        journal.frames("c", [frame])
        sent.append(frame)
        time.sleep(pause)
    return sent


def test_a_burst_is_taken_after_it_pauses(monkeypatch: Any) -> None:
    """3 MiB queued 2 ms apart (more than a batch within one linger) is a burst: nothing
    of it is taken until it pauses, then all of it, in order, in batches."""
    journal = _burst_journal(monkeypatch, end=0.5, hold=60)
    journal.open("c", {})
    journal.take()  # the open
    taken: list[Any] = []
    at: list[float] = []
    taker = threading.Thread(
        target=lambda: (taken.append(journal.take()), at.append(time.monotonic()))
    )
    taker.start()
    sent = _produce(journal, 48, 64 * 1024, 0.002)
    paused = time.monotonic()
    taker.join(30)
    when, first = at[0], taken[0]
    assert when >= paused  # held to the end of the burst, not cut at the first 1 MiB
    assert len(first) == 16  # one batch: 1 MiB
    rest: list[Any] = []
    while len(first) + len(rest) < len(sent):
        rest.extend(journal.take() or [])
    assert first + rest == sent
    journal.stop()


def test_a_burst_is_held_no_longer_than_its_bound_then_taken_as_it_comes(
    monkeypatch: Any,
) -> None:
    """A burst that goes on is taken after BURST_HOLD_SECONDS, and from then on as it
    comes (not held again) until it pauses."""
    journal = _burst_journal(monkeypatch, end=5.0, hold=1.0)
    monkeypatch.setattr(journal_module, "BURST_HOLD_BYTES", 1 << 30)
    journal.open("c", {})
    journal.take()
    took: list[float] = []

    def taker() -> None:
        while (batch := journal.take()) is not None:
            took.extend(time.monotonic() for _ in batch)

    thread = threading.Thread(target=taker)
    thread.start()
    start = time.monotonic()
    _produce(journal, 1200, 32 * 1024, 0.002)  # 37.5 MiB over 2.4 s or more
    done = time.monotonic()
    journal.stop()
    thread.join(30)
    assert len(took) == 1200
    assert start + 1.0 <= took[0] < done  # held for the bound, not to the end
    during = sorted({t for t in took if t < done})
    assert len(during) > 5  # then taken while it went on ...
    assert max(b - a for a, b in itertools.pairwise(during)) < 0.6  # ... not held again


def test_a_control_item_ends_a_burst_hold_at_once(monkeypatch: Any) -> None:
    """A connection's change (e.g. its end) is written at once, burst or not."""
    journal = _burst_journal(monkeypatch, end=3600, hold=3600)
    journal.open("c", {})
    journal.take()
    sent = _produce(journal, 24, 64 * 1024, 0)
    taken: list[Any] = []
    taker = threading.Thread(target=lambda: taken.append(journal.take()))
    taker.start()
    taker.join(0.5)
    assert taker.is_alive()  # held: the burst has not paused for an hour
    journal.control("c", "close", {"end_reason": "eof"})
    taker.join(30)
    assert not taker.is_alive() and taken[0] == sent[:16]


BURST_AGENT = """
import sys
sys.stdin.readline()
line = b'{"jsonrpc":"2.0","method":"session/update","params":{"n":%d,"pad":"%s"}}\\n'
sys.stdout.buffer.write(b"".join(line % (n, b"x" * 150) for n in range(20000)))
sys.stdout.buffer.flush()
sys.stdin.read()  # the connection stays open until the client ends it
"""


def test_a_burst_is_recorded_whole_while_its_connection_stays_open(tmp_path: Path) -> None:
    """Through ``acp-proxy --record``: an agent's 4 MB burst (a burst to the journal) reaches
    the client, and once it pauses all of it is recorded, byte for byte and in order,
    while the agent is still running (the hold ends with the burst, not the connection)."""
    db = tmp_path / "burst.db"
    proc = subprocess.Popen(
        [*proxy_exe(), "--record", str(db), "--", sys.executable, "-c", BURST_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    request = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}\n'
    proc.stdin.write(request)
    proc.stdin.flush()
    received = [proc.stdout.readline() for _ in range(20000)]
    deadline = time.monotonic() + 60
    while frame_count(db) < 20001 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None  # still connected
    recorded = frames_of(db)
    proc.stdin.close()
    assert proc.wait(60) == 0
    assert proc.stderr is not None and proc.stderr.read() == b""
    assert recorded[0] == ("c2a", request)
    assert recorded[1:] == [("a2c", line) for line in received]
    assert len(received) == 20000 and received[-1].startswith(b'{"jsonrpc":"2.0","method"')


def test_a_burst_is_held_for_at_most_its_bytes(monkeypatch: Any) -> None:
    """A burst that reaches BURST_HOLD_BYTES is taken then, pause or not (memory bound)."""
    journal = _burst_journal(monkeypatch, end=3600, hold=3600)
    monkeypatch.setattr(journal_module, "BURST_HOLD_BYTES", 2 << 20)
    journal.open("c", {})
    journal.take()
    sent = _produce(journal, 48, 64 * 1024, 0)  # 3 MiB, more than the 2 MiB held at most
    taken: list[Any] = []
    taker = threading.Thread(target=lambda: taken.append(journal.take()))
    taker.start()
    taker.join(30)
    assert not taker.is_alive() and taken[0] == sent[:16]
    journal.stop()
