"""Durability of the recording through the real executable: kill -9, a 64 MiB frame and
two proxies writing one database at once."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from tests.conftest import ECHO_AGENT, frame_count, frames_of, incident_lines, proxy_exe, run_proxy
from tests.recorder.writer.test_main import writer_pid
from tests.transport.process.test_lifecycle import AGENTS, wait_dead

TIMEOUT = 120.0


def test_kill_9_mid_stream_leaves_a_clean_database_and_no_orphan(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    proc = subprocess.Popen(
        [*proxy_exe(), "--record", str(db), "--", *AGENTS, "flood"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    received = bytearray()

    def reader() -> None:
        assert proc.stdout is not None
        while data := os.read(proc.stdout.fileno(), 1 << 20):
            received.extend(data)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    deadline = time.monotonic() + TIMEOUT
    seen = 0
    while seen < 5000 and time.monotonic() < deadline:
        seen = frame_count(db)
        time.sleep(0.05)
    assert seen >= 5000, "the recording never got going"
    con = sqlite3.connect(db)
    agent_pid = con.execute("SELECT pid FROM connections").fetchone()[0]
    con.close()
    writer = writer_pid(proc.pid)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(TIMEOUT) == -signal.SIGKILL
    t.join(TIMEOUT)
    # PR_SET_PDEATHSIG: the agent goes with the proxy
    assert wait_dead(agent_pid)
    # the writer process writes what it was sent, then exits too
    assert wait_dead(writer)
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        count = con.execute("SELECT count(*) FROM frames").fetchone()[0]
        row = con.execute(
            "SELECT ended_at IS NOT NULL, exit_status, end_reason FROM connections"
        ).fetchone()
    finally:
        con.close()
    assert count >= seen  # everything committed before the kill is still there
    # the proxy never got to close the connection: its writer closed it for it
    assert row == (1, None, "proxy-lost")
    recorded = b"".join(raw for d, raw in frames_of(db) if d == "a2c")
    assert recorded and bytes(received).startswith(recorded)
    # the readers cope with the unfinished connection
    ls = run_proxy(["ls", str(db)])
    assert ls.returncode == 0 and b"ended (unknown end)" in ls.stdout  # the one name
    show = run_proxy(["show", str(db)])
    assert show.returncode == 0 and b"ended (unknown end)" in show.stdout.splitlines()[0]
    help_text = b" ".join(run_proxy(["ls", "--help"]).stdout.split())
    assert b"ended (unknown end)" in help_text and b"proxy-lost" in help_text
    dump = run_proxy(["dump", str(db)])
    assert dump.returncode == 0 and b"agent_message_chunk" in dump.stdout


MEASURE = textwrap.dedent(
    """
    import json, resource, subprocess, sys
    exe, db, src, dst, *agent = sys.argv[1:]
    with open(src, "rb") as i, open(dst, "wb") as o:
        code = subprocess.run([exe, "--record", db, "--", *agent], stdin=i, stdout=o).returncode
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"code": code, "peak": peak}))
    """
)


def test_a_64_mib_frame_is_forwarded_and_recorded_exactly(tmp_path: Path) -> None:
    size = 64 * 1024 * 1024
    head = b'{"jsonrpc":"2.0","method":"_big","params":{"data":"'
    tail = b'"}}\n'
    line = head + b"A" * (size - len(head) - len(tail)) + tail
    assert len(line) == size
    small = b'{"jsonrpc":"2.0","id":1,"method":"after"}\n'
    src = tmp_path / "in.bin"
    src.write_bytes(line + small)
    dst = tmp_path / "out.bin"
    db = tmp_path / "big.db"
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, proxy_exe()[0], str(db), str(src), str(dst), *ECHO_AGENT],
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["code"] == 0
    want = hashlib.sha256(line + small).hexdigest()
    assert hashlib.sha256(dst.read_bytes()).hexdigest() == want
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT direction, size, kind, method, raw FROM frames ORDER BY seq"
        ).fetchall()
        assert con.execute("SELECT frames_dropped FROM connections").fetchone() == (0,)
    finally:
        con.close()
    by_dir = {d: [r for r in rows if r[0] == d] for d in ("c2a", "a2c")}
    for d, frames in by_dir.items():
        assert [(r[1], r[2], r[3]) for r in frames] == [
            (size, "notification", "_big"),
            (len(small), "request", "after"),
        ], d
        assert hashlib.sha256(bytes(frames[0][4])).hexdigest() == hashlib.sha256(line).hexdigest()
    # Memory: a small multiple of the frames in flight. The echo puts two 64 MiB frames in
    # flight at once; each may be held about three times (the line, its parsed text while
    # indexing, SQLite's copy while inserting), plus the recorder's queue budget (64 MiB).
    peak_mib = result["peak"] / 2**20
    assert result["peak"] < 8 * size, f"peak RSS {peak_mib:.0f} MiB"


def test_two_proxies_record_into_one_database_completely(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    streams = []
    procs = []
    for n in range(2):
        data = b"".join(
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s%d",'
            b'"update":{"sessionUpdate":"agent_message_chunk","n":%d}}}\n' % (n, i)
            for i in range(20000)
        )
        src = tmp_path / f"in{n}.bin"
        src.write_bytes(data)
        streams.append(data)
    for n in range(2):
        with open(tmp_path / f"in{n}.bin", "rb") as i, open(tmp_path / f"out{n}.bin", "wb") as o:
            procs.append(
                subprocess.Popen(
                    [
                        *proxy_exe(),
                        "--record",
                        str(db),
                        "--label",
                        f"window {n}",
                        "--",
                        *ECHO_AGENT,
                    ],
                    stdin=i,
                    stdout=o,
                    stderr=subprocess.PIPE,
                )
            )
    for n, p in enumerate(procs):
        assert p.wait(TIMEOUT) == 0
        assert p.stderr is not None
        assert incident_lines(p.stderr.read()) == []
        assert (tmp_path / f"out{n}.bin").read_bytes() == streams[n]
    con = sqlite3.connect(db)
    try:
        conns = con.execute(
            "SELECT id, label, frames_dropped, exit_status FROM connections ORDER BY label"
        ).fetchall()
    finally:
        con.close()
    assert [(c[1], c[2], c[3]) for c in conns] == [("window 0", 0, 0), ("window 1", 0, 0)]
    for n, (cid, *_rest) in enumerate(conns):
        frames = frames_of(db, cid)
        assert b"".join(r for d, r in frames if d == "c2a") == streams[n]
        assert b"".join(r for d, r in frames if d == "a2c") == streams[n]
