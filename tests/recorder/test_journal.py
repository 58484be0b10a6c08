"""The proxy's journal (in process): which items a batch waits for, and which it does not."""

from __future__ import annotations

import threading
from typing import Any

from acp_proxy.recorder.ipc import Control, Whole
from acp_proxy.recorder.journal import ProxyJournal


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
