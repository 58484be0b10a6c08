"""Replay reads the recording lazily: memory flat in its size, steps read as asked (issue 12)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_proxy.replay.engine import ReplayEngine, Send
from acp_proxy.replay.script import (
    Classified,
    ConnectionInfo,
    MemoryFrames,
    Script,
    classified_bytes,
)
from tests.acp.generate import SID, frames, frames_per_turn, generate
from tests.conftest import proxy_exe

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}\n'
NEW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n'


def prompt(turn: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"%s",'
        b'"prompt":[{"type":"text","text":"question %d"}]}}\n' % (turn + 2, SID.encode(), turn)
    )


class CountingFrames(MemoryFrames):
    """A memory store that counts the frames it handed out."""

    read = 0

    def connection_frames(self, connection_id: int, **kwargs: Any) -> Iterator[Classified]:
        for frame in super().connection_frames(connection_id, **kwargs):
            self.read += 1
            yield frame


def test_the_engine_reads_only_the_steps_it_serves() -> None:
    turns, chunks = 300, 20
    recorded = [
        classified_bytes(1, seq, seq, d, raw)  # type: ignore[arg-type]
        for seq, (d, raw) in enumerate(frames(turns, chunks), 1)
    ]
    store = CountingFrames(recorded, {1: ConnectionInfo(1, 2).protocol_version})
    engine = ReplayEngine(Script(store))
    out = engine.receive(INIT) + engine.receive(NEW) + engine.receive(prompt(0))
    sent = [o.data for o in out if isinstance(o, Send)]
    assert sent[0] == recorded[1].raw and sent[1] == recorded[3].raw
    assert len(sent) == 2 + frames_per_turn(chunks) - 1
    # Three steps served: a few turns' worth of frames read, not the recording's 8,100.
    assert store.read < 3 * frames_per_turn(chunks)
    # A request for the last turn: the client frames are looked through once, then the
    # steps up to it are read (they stay candidates: loose mode may go back for them).
    before = store.read
    out = engine.receive(prompt(turns - 1))
    assert sum(isinstance(o, Send) for o in out) == frames_per_turn(chunks) - 1
    assert store.read - before < len(recorded) + 2 * turns
    # The rest is still there to serve (loose mode goes back for it).
    out = engine.receive(prompt(1))
    assert sum(isinstance(o, Send) for o in out) == frames_per_turn(chunks) - 1


def peak_rss_mb(db: Path) -> float:
    """Replay ``db`` for one prompt turn through the real executable; its peak RSS."""
    proc = subprocess.Popen(
        [*proxy_exe(), "replay", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT + NEW + prompt(0))
    proc.stdin.close()
    got = proc.stdout.read().splitlines()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    assert got[0].startswith(b'{"jsonrpc":"2.0","id":0,"result"')
    assert len(got) == 2 + frames_per_turn(93) - 1
    return usage.ru_maxrss / 1024


@pytest.mark.slow
def test_replay_memory_is_flat_in_the_recording_size(tmp_path: Path) -> None:
    small, big = tmp_path / "small.db", tmp_path / "big.db"
    generate(small, 20)  # 2,000 frames
    generate(big, 2000)  # 200,000 frames (loading it whole took ~440 MB)
    rss_small, rss_big = peak_rss_mb(small), peak_rss_mb(big)
    assert rss_big < rss_small * 1.5 + 20, (rss_small, rss_big)


def test_damage_met_while_serving_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "damaged.db"
    generate(db, 100)  # 10,000 frames
    size = db.stat().st_size
    with db.open("r+b") as fh:  # the second half of the file: frames read lazily later
        fh.seek(size // 2)
        fh.write(b"\xff" * (size // 4))
    proc = subprocess.run(
        [*proxy_exe(), "replay", str(db)],
        input=INIT + NEW + prompt(99),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 1  # at the start or once met, one line, no traceback
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and "the recording is damaged" in err, err
