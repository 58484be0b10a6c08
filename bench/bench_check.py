"""Benchmark: ``acp-proxy check`` throughput on a generated recording (default 1M frames).

The recording is one v2 connection of realistic turns (prompt, running, user_message,
response, thought and message chunks of ~300 bytes, tool call updates, idle), written
straight into SQLite. The benchmark then runs the real ``acp-proxy check --json`` on it and
reports wall time, frames/s, MB/s and the command's peak RSS (its memory should not grow
with the recording), against the baseline of merely reading every frame's raw bytes and
parsing each once with orjson (same run, a fresh interpreter each: the ratio is printed),
plus the engine alone in process (no SQLite) for comparison.

Usage::

    python bench/bench_check.py [--frames 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from acp_proxy.acp.conformance import ConnectionChecker
from acp_proxy.wire.frame import Frame

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.acp.conformance.helpers import write_generated  # noqa: E402

SID = "sess_bench"

BASELINE = """
import sqlite3, sys, orjson
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
for (raw,) in conn.execute("SELECT raw FROM frames ORDER BY connection_id, seq"):
    orjson.loads(raw)
"""


def _line(obj: object) -> bytes:
    return orjson.dumps(obj) + b"\n"


def _update(update: dict[str, object]) -> bytes:
    return _line(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": SID, "update": update},
        }
    )


def frames(total: int) -> Iterator[tuple[str, bytes]]:
    """``total`` frames (or a few more, to finish the last turn) of clean v2 traffic."""
    yield (
        "c2a",
        _line(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": 2, "capabilities": {}},
            }
        ),
    )
    yield (
        "a2c",
        _line(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {"protocolVersion": 2, "capabilities": {"session": {}}},
            }
        ),
    )
    yield (
        "c2a",
        _line(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/new",
                "params": {"cwd": "/work", "mcpServers": []},
            }
        ),
    )
    yield "a2c", _line({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}})
    n = 4
    rid = 2
    text = {"type": "text", "text": "lorem ipsum dolor sit amet " * 10}
    while n < total:
        mid, aid, tid = f"u{rid}", f"m{rid}", f"t{rid}"
        turn = [
            (
                "c2a",
                _line(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "method": "session/prompt",
                        "params": {"sessionId": SID, "prompt": [text]},
                    }
                ),
            ),
            ("a2c", _update({"sessionUpdate": "state_update", "state": "running"})),
            (
                "a2c",
                _update({"sessionUpdate": "user_message", "messageId": mid, "content": [text]}),
            ),
            ("a2c", _line({"jsonrpc": "2.0", "id": rid, "result": {"messageId": mid}})),
        ]
        thought = _update(
            {"sessionUpdate": "agent_thought_chunk", "messageId": aid, "content": text}
        )
        chunk = _update({"sessionUpdate": "agent_message_chunk", "messageId": aid, "content": text})
        turn += [("a2c", thought)] * 10 + [("a2c", chunk)] * 30
        turn += [
            (
                "a2c",
                _update(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": tid,
                        "status": "in_progress",
                        "kind": "read",
                    }
                ),
            ),
            (
                "a2c",
                _update(
                    {"sessionUpdate": "tool_call_update", "toolCallId": tid, "status": "completed"}
                ),
            ),
            (
                "a2c",
                _update(
                    {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
                ),
            ),
        ]
        yield from turn
        n += len(turn)
        rid += 1


def write(path: Path, total: int) -> tuple[int, int]:
    """Write the recording; return its frame count and raw size in bytes."""
    size = 0

    def sized() -> Iterator[tuple[str, bytes]]:
        nonlocal size
        for direction, raw in frames(total):
            size += len(raw)
            yield direction, raw

    count = write_generated(path, sized())  # type: ignore[arg-type]
    return count, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="Write the recording here and keep it.")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acp-bench-check-"))
    path = (args.keep or tmp) / "bench-check.db"
    try:
        t0 = time.perf_counter()
        count, size = write(path, args.frames)
        print(
            f"recording: {count} frames, {size / 2**20:.1f} MiB raw, "
            f"written in {time.perf_counter() - t0:.1f}s"
        )

        # The baseline: read every frame's raw bytes in order and parse each once with orjson
        # (a fresh interpreter, as check's); the target is check <= 2x its time.
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", BASELINE, str(path)], check=True)
        base = time.perf_counter() - t0
        print(f"read + orjson.loads every frame: {base:.1f}s, {count / base:,.0f} frames/s")

        exe = shutil.which("acp-proxy") or "acp-proxy"
        t0 = time.perf_counter()
        done = subprocess.run([exe, "check", str(path), "--json"], capture_output=True)
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        summary = orjson.loads(done.stdout)["summary"]
        print(
            f"acp-proxy check: {wall:.1f}s, {count / wall:,.0f} frames/s, "
            f"{size / 2**20 / wall:.1f} MiB/s, peak RSS {rss:.0f} MiB, exit {done.returncode}, "
            f"errors {summary['error']} warnings {summary['warning']}"
        )
        print(f"check / (read + parse) = {wall / base:.2f} (target <= 2)")

        checker = ConnectionChecker(1, transport="stdio")
        t0 = time.perf_counter()
        for seq, (direction, raw) in enumerate(frames(args.frames), 1):
            checker.feed(Frame.wire(direction, raw, seq))  # type: ignore[arg-type]
        checker.finish()
        engine = time.perf_counter() - t0
        print(f"engine alone (frames generated in process): {count / engine:,.0f} frames/s")
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
