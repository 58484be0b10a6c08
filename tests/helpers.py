"""Test helpers shared across packages: writing prepared frames into a recording, and more.

:func:`insert_frames` is the one way tests and generators put rows into a recording without
running a proxy; it goes through :mod:`acp_proxy.store.edit`, so the SQL lives in the
package, not in the tests.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from acp_proxy.store.edit import Capture, WritableDatabase, insert_connection, write_transaction
from acp_proxy.store.edit import insert_frames as _insert_frames
from acp_proxy.store.pg import connect_pg, is_pg_url
from acp_proxy.store.schema import connect
from acp_proxy.wire.frame import Direction

__all__ = ["Capture", "insert_frames", "listening_url", "unwritable"]


def insert_frames(
    db: Path | str | WritableDatabase,
    frames: Iterable[Capture | tuple[Direction, bytes]],
    *,
    connection: Mapping[str, Any] | None = None,
    connection_id: int | None = None,
    index: bool = False,
    start_ts: float = 0.0,
    first_seq: int = 1,
) -> int:
    """Write ``frames`` as one connection of the recording ``db``; return the connection id.

    ``db`` is a path or a ``postgresql://`` URL (created or migrated if needed, closed
    after) or an open writable connection (its transaction, if any, is used). A new
    connection row is made from ``connection`` (column values; JSON columns take Python
    values) unless ``connection_id`` names an existing one. ``frames`` are ``(direction,
    raw)`` pairs or :class:`Capture` (times, index columns); ``index=True`` derives missing
    index columns as the recorder does.
    Streams: ``frames`` may be a generator of millions.
    """
    conn: WritableDatabase
    if isinstance(db, str) and is_pg_url(db):
        conn = connect_pg(db, create=True)
    elif isinstance(db, (Path, str)):
        conn = connect(db, create=True)
    else:
        conn = db
    try:
        with write_transaction(conn):
            cid = connection_id
            if cid is None:
                cid = insert_connection(conn, **dict(connection or {}))
            _insert_frames(conn, cid, frames, index=index, start_ts=start_ts, first_seq=first_seq)
        return cid
    finally:
        if conn is not db:
            conn.close()


@contextlib.contextmanager
def unwritable(directory: Path) -> Iterator[None]:
    """Make ``directory`` and its files unwritable, for root too (``chattr +i``)."""
    paths = [*directory.iterdir(), directory]
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    frozen: list[Path] = []
    try:
        if os.geteuid() == 0:
            chattr = shutil.which("chattr")
            if chattr is None:
                pytest.skip("running as root without chattr: cannot make a directory unwritable")
            for p in paths:
                done = subprocess.run([chattr, "+i", str(p)], capture_output=True)
                if done.returncode != 0:
                    pytest.skip(f"chattr +i is not possible here: {done.stderr.decode().strip()}")
                frozen.append(p)
        with pytest.raises(OSError):  # the premise: nobody can create a file here
            (directory / "probe").touch()
        yield
    finally:
        for p in frozen:
            subprocess.run(["chattr", "-i", str(p)], check=True)
        for p in paths:
            p.chmod(0o755 if p.is_dir() else 0o644)


@contextmanager
def listening_process(argv: list[str], pattern: re.Pattern[bytes]) -> Iterator[str]:
    """Run ``argv`` (a server that says ``listening on URL`` on stderr) for the block; its URL."""
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        url, _ = listening_url(proc, pattern)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def listening_url(
    proc: subprocess.Popen[bytes], pattern: re.Pattern[bytes]
) -> tuple[str, list[bytes]]:
    """Read ``proc``'s stderr up to its ``listening on URL`` line; the URL and the lines read.

    Fails the test (with what the server printed) when it exits without one.
    """
    assert proc.stderr is not None
    lines: list[bytes] = []
    for line in iter(proc.stderr.readline, b""):
        lines.append(line)
        match = pattern.search(line)
        if match:
            return match.group(1).decode(), lines
    raise AssertionError(f"{proc.args!r} did not start: {b''.join(lines)!r}")
