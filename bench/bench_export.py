"""Benchmark: ``acp-proxy export`` / ``import`` throughput on a generated recording.

The recording (default 1M frames) is one v2 connection of realistic traffic written straight
into SQLite: session/update chunks of ~300 bytes of text, tool call updates, prompts and
responses. One frame in 50 is a prompt carrying a token in ``_meta`` (so redaction has work
to do), answered by the next frame; one in 1000 is not valid UTF-8. The benchmark runs the
real CLI - ``export --no-redact``, ``export`` (redacting) and ``import`` - and reports wall
time, frames/s, MB/s of raw frames and each command's peak RSS (memory should not grow with
the recording).

Usage::

    python bench/bench_export.py [--frames 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from acp_proxy.store.schema import connect

SID = "sess_bench"
TEXT = "The quick brown fox jumps over the lazy dog; " * 6


def frames(total: int) -> Iterator[tuple[str, bytes]]:
    """``total`` frames of v2 traffic, in (direction, raw) pairs."""
    for n in range(total):
        if n % 1000 == 999:
            yield "a2c", b"\xff\xfe not utf-8 log line " + str(n).encode() + b"\n"
            continue
        if n % 50 == 48:
            params = {"sessionId": SID, "_meta": {"authToken": f"tok-{n}"}, "prompt": [TEXT]}
            msg: dict[str, object] = {"jsonrpc": "2.0", "id": n, "method": "session/prompt"}
            msg["params"] = params
            yield "c2a", orjson.dumps(msg) + b"\n"
            continue
        if n % 50 == 49:  # every request is answered, as in real traffic
            result = {"jsonrpc": "2.0", "id": n - 1, "result": {"messageId": f"msg_{n}"}}
            yield "a2c", orjson.dumps(result) + b"\n"
            continue
        update: dict[str, object]
        if n % 10 == 0:
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": f"call_{n // 10}",
                "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": TEXT}}],
            }
        else:
            update = {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"msg_{n // 20}",
                "content": {"type": "text", "text": TEXT},
            }
        note = {"jsonrpc": "2.0", "method": "session/update"}
        line = orjson.dumps({**note, "params": {"sessionId": SID, "update": update}})
        yield "a2c", line + b"\n"


def generate(path: Path, total: int) -> int:
    db = connect(path, create=True)
    size = 0
    try:
        db.execute("BEGIN")
        db.execute(
            "INSERT INTO connections (id, started_at, transport, protocol_version) "
            "VALUES (1, 1767225600.0, 'stdio', 2)"
        )

        def rows() -> Iterator[tuple[object, ...]]:
            nonlocal size
            for seq, (direction, raw) in enumerate(frames(total), start=1):
                size += len(raw)
                yield (1, seq, 1767225600.0 + seq / 1e4, seq * 100_000, direction, raw, len(raw))

        db.executemany(
            "INSERT INTO frames (connection_id, seq, ts, mono_ns, direction, raw, size) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows(),
        )
        db.execute("COMMIT")
    finally:
        db.close()
    return size


MEASURE = """
import resource, subprocess, sys, time
out = open(sys.argv[1], "wb") if sys.argv[1] != "-" else subprocess.DEVNULL
start = time.perf_counter()
done = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE)
elapsed = time.perf_counter() - start
sys.stderr.buffer.write(done.stderr)
print(done.returncode, elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run(label: str, out: str, args: list[str], frames_n: int, size: int) -> None:
    exe = shutil.which("acp-proxy")
    assert exe, "acp-proxy is not installed"
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, out, exe, *args], capture_output=True, check=False
    )
    code, elapsed, peak = done.stdout.split()
    if code != b"0":
        sys.exit(f"{label} failed: {done.stderr.decode()}")
    seconds = float(elapsed)
    print(
        f"{label:<22} {seconds:8.1f} s  {frames_n / seconds:10,.0f} frames/s  "
        f"{size / seconds / 1e6:7.1f} MB/s  peak RSS {int(peak) / 1024:6.1f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="keep the files in this directory")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-export-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        db = tmp / "bench.db"
        start = time.perf_counter()
        size = generate(db, args.frames)
        print(
            f"generated {args.frames:,} frames, {size / 1e6:.1f} MB of raw frames "
            f"in {time.perf_counter() - start:.1f} s"
        )
        plain, redacted = tmp / "plain.jsonl", tmp / "redacted.jsonl"
        run("export --no-redact", str(plain), ["export", str(db), "--no-redact"], args.frames, size)
        run("export (redacting)", str(redacted), ["export", str(db)], args.frames, size)
        run("import", "-", ["import", str(plain), str(tmp / "copy.db")], args.frames, size)
        print(
            f"export size {plain.stat().st_size / 1e6:.1f} MB; "
            f"self peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
