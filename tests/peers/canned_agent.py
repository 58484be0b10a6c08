"""A canned ACP agent for check tests: plays its side of a scripted transcript.

``python canned_agent.py SCRIPT.json DB``: the script is a list of ``[side, line]`` with side
``c`` (a line the client sends: read one line from stdin) or ``a`` (write ``line`` to stdout;
``hex:...`` for raw bytes). Before writing entry ``i`` it waits until the recording ``DB`` holds
``i`` frames (when entry ``i - 1`` was the client's; a side's own lines keep their order), so
the recorded order is exactly the script's order whatever the scheduling.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time


def recorded(db: str) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute("SELECT count(*) FROM frames").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def wait_for(db: str, n: int) -> None:
    deadline = time.monotonic() + 60
    while recorded(db) < n:
        if time.monotonic() > deadline:
            sys.exit(f"canned agent: the recording never reached {n} frames")
        time.sleep(0.005)


def raw_of(text: str) -> bytes:
    return bytes.fromhex(text[4:]) if text.startswith("hex:") else text.encode()


def main() -> None:
    with open(sys.argv[1]) as f:
        script = json.load(f)
    db = sys.argv[2]
    for index, (side, text) in enumerate(script):
        if side == "c":
            if not sys.stdin.buffer.readline():
                return
        else:
            if index and script[index - 1][0] == "c":
                wait_for(db, index)  # the client's lines so far are recorded
            sys.stdout.buffer.write(raw_of(text))
            sys.stdout.buffer.flush()
    while sys.stdin.buffer.readline():
        pass


if __name__ == "__main__":
    main()
