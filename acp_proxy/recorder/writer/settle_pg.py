"""Puts the true losses on PostgreSQL connection rows once a server that hung at exit answers.

The writer gives up on a server that stops answering during the exit drain (``kill -STOP``,
a hung host): the proxy must exit, and nothing can be written then, not even the rows'
loss counts and ends. So the writer starts this small process, detached, with what it knows
(:func:`start`): each row's losses, the frames of a batch whose ``COMMIT`` got no answer, the
end it could not write. It tries the server again for up to :data:`SETTLE_SECONDS`; once it
answers, the doubtful transaction is settled (its server process ended if it still runs,
as after a reconnect), and each row gets ``frames_dropped``/``bytes_dropped`` (the doubtful
frames count only if that transaction did not commit) and, where it has none, its end.

Run as ``python -P -m acp_proxy.recorder.writer.settle_pg`` with the URL in the environment
(:data:`~acp_proxy.recorder.ipc.LOCATION_ENV`) and a JSON document on stdin.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any

SETTLE_SECONDS = 600.0
"""How long the server is tried again before the rows are left as they are."""

RETRY_SECONDS = 2.0
CONNECT_SECONDS = 5.0
XACT_SETTLE_SECONDS = 10.0
"""How long a doubtful transaction may stay in progress once its server process was ended."""


def start(url: str, location_env: str, plan: dict[str, Any]) -> None:
    """Start the settling process for ``plan`` (rows, doubt), detached; never raises."""
    with contextlib.suppress(OSError, ValueError):
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "acp_proxy.recorder.writer.settle_pg"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, location_env: url},
            start_new_session=True,  # outlives the proxy and its terminal
        )
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.write(json.dumps(plan).encode())
            proc.stdin.close()


def _xact_committed(db: Any, doubt: dict[str, Any] | None) -> bool:
    """Whether the doubtful transaction committed (settled first, as after a reconnect)."""
    if not doubt:
        return False
    deadline = time.monotonic() + XACT_SETTLE_SECONDS
    status = db.execute("SELECT pg_xact_status(?::xid8)", (doubt["xid"],)).fetchone()[0]
    if status == "in progress":
        db.execute("SELECT pg_terminate_backend(?)", (doubt["pid"],))
    while status == "in progress" and time.monotonic() < deadline:
        time.sleep(0.1)
        status = db.execute("SELECT pg_xact_status(?::xid8)", (doubt["xid"],)).fetchone()[0]
    return bool(status == "committed")


def settle(url: str, plan: dict[str, Any], *, give_up_after: float = SETTLE_SECONDS) -> bool:
    """Write ``plan`` onto the rows once the server answers; False if it never did."""
    from acp_proxy.store.pg import connect_pg
    from acp_proxy.store.schema import RecordingError

    deadline = time.monotonic() + give_up_after
    while True:
        try:
            db = connect_pg(url, create=False, timeout=CONNECT_SECONDS)
            break
        except RecordingError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(RETRY_SECONDS)
    try:
        committed = _xact_committed(db, plan.get("doubt"))
        for row in plan["rows"]:
            frames, nbytes = row["frames"], row["bytes"]
            if not committed:
                frames, nbytes = frames + row["doubt_frames"], nbytes + row["doubt_bytes"]
            end = row.get("end") or {}
            sets = "".join(f", {k} = coalesce({k}, ?)" for k in end)
            db.execute(
                f"UPDATE connections SET frames_dropped = ?, bytes_dropped = ?{sets} WHERE id = ?",
                (frames, nbytes, *end.values(), row["id"]),
            )
    finally:
        db.close()
    return True


def main() -> int:
    from acp_proxy.recorder.ipc import LOCATION_ENV

    url = os.environ.pop(LOCATION_ENV, "")
    try:
        plan = json.loads(sys.stdin.buffer.read() or b"{}")
    except ValueError:
        return 2
    if not url or not plan.get("rows"):
        return 0
    try:
        return 0 if settle(url, plan) else 1
    except Exception:  # nothing to tell: stderr is closed; the rows stay as they were
        return 1


if __name__ == "__main__":
    sys.exit(main())
