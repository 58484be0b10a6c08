"""``acp-proxy stats`` through the real executable on recordings the indexer never saw."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_proxy
from tests.helpers import insert_frames


def test_stats_prints_frames_without_index_columns(tmp_path: Path) -> None:
    """Frames written without their derived columns (an old recording, before ``reindex``)
    have no method: the table says so instead of a traceback."""
    db = tmp_path / "raw.db"
    insert_frames(
        db,
        [
            ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'),
            ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{}}\n'),
        ],
    )
    done = run_proxy(["stats", str(db)])
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert b"(no method)" in done.stdout
