"""export -> import -> export through the real CLI is byte-exact, on real recordings."""

from __future__ import annotations

import base64
import io
import sqlite3
from pathlib import Path

import orjson

from acp_proxy.formats.jsonl_import import import_export
from acp_proxy.recorder.handle import Recorder
from tests.formats.helpers import cli, frame_rows, record, rows

HUGE = b'{"jsonrpc":"2.0","method":"_big","params":{"blob":"' + b"x" * (3 * 1024 * 1024) + b'"}}\n'

AWKWARD = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"x"}}}\n'
    b'{"jsonrpc":"2.0","id":"s-1","method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\r\n'
    b"not json at all\r\n"
    b"\n"
    b"\xff\xfe invalid utf-8 \xc3\x28\n"
    b'{"jsonrpc":"2.0","id":1.0,"result":{"sessionId":"sess_1"}}\n'
    b'[{"jsonrpc":"2.0","method":"_x/batch"}]\n'
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":'
    b'{"sessionUpdate":"_vendor_x","text":"caf\xc3\xa9 \xe2\x9c\x93 \\u0000 \\ud83d\\ude00"}}}\n'
    b'{"jsonrpc":"2.0","id":12345678901234567890123,"method":"_huge_id"}\n'
    + HUGE
    + b"\t  \n"
    + b"no newline at the end"
)


def _export(db: Path, out: Path, *extra: str) -> bytes:
    done = cli("export", str(db), "--no-redact", "-o", str(out), *extra)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    return out.read_bytes()


def test_round_trip_is_byte_exact(tmp_path: Path) -> None:
    db = tmp_path / "rec.db"
    record(db, AWKWARD)
    record(db, b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":2}}\n')
    first = _export(db, tmp_path / "a.jsonl")

    copy = tmp_path / "copy.db"
    done = cli("import", str(tmp_path / "a.jsonl"), str(copy))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("imported 2 connection(s) (1->1, 2->2)")
    second = _export(copy, tmp_path / "b.jsonl")
    assert first == second

    # The raw bytes, their sizes, timestamps and the derived index columns are identical.
    for cid in (1, 2):
        assert frame_rows(copy, cid) == frame_rows(db, cid)
    stderr_q = "SELECT connection_id, seq, ts, mono_ns, raw FROM stderr_lines ORDER BY id"
    assert rows(copy, stderr_q) == rows(db, stderr_q)
    raws = [r[2] for r in frame_rows(copy, 1) if r[1] == "c2a"]
    assert b"".join(raws) == AWKWARD  # type: ignore[arg-type]

    # Stdout export gives the same bytes as -o.
    to_stdout = cli("export", str(db), "--no-redact")
    assert to_stdout.returncode == 0 and to_stdout.stdout == first


def test_format_shape(tmp_path: Path) -> None:
    db = tmp_path / "rec.db"
    record(db, AWKWARD)
    lines = _export(db, tmp_path / "a.jsonl").split(b"\n")
    assert lines[-1] == b""  # every line ends with \n
    records = [orjson.loads(line) if len(line) < 1000 else None for line in lines[:-1]]
    header = records[0]
    assert header == {
        "type": "header",
        "format": "acp-proxy-recording",
        "version": 1,
        "created_by": "acp-proxy 0.1.0",
        "redacted": False,
    }
    for line in lines[:-1]:  # keys sorted: re-serializing with sorted keys changes nothing
        if len(line) < 1000:
            assert orjson.dumps(orjson.loads(line), option=orjson.OPT_SORT_KEYS) == line
    assert records[1]["type"] == "connection" and records[1]["connection"] == 1
    assert records[1]["transport"] == "stdio" and records[1]["protocol_version"] == 1
    frames = [r for r in records if r and r["type"] == "frame"]
    c2a = [f for f in frames if f["direction"] == "c2a"]
    assert len(frames) == 24  # 26 minus the two 3 MiB lines, not parsed here
    crlf = c2a[2]
    assert crlf["text"].endswith("\r\n")
    bad = c2a[5]
    assert "text" not in bad
    assert base64.b64decode(bad["base64"]) == b"\xff\xfe invalid utf-8 \xc3\x28\n"
    assert not any("binary" in f or "redacted" in f for f in frames)
    end = records[-1]
    assert end is not None and end["type"] == "end" and end["connections"] == 1
    assert end["frames"] == 2 * 13 and end["stderr"] == 1


def test_binary_flag_round_trips(tmp_path: Path) -> None:
    """WebSocket binary messages: recorded with the real writer, flag and bytes survive."""
    db = tmp_path / "ws.db"
    recorder = Recorder(db)
    conn = recorder.connection("websocket", peer="127.0.0.1:5555", headers={"Host": "x"})
    conn.frame("c2a", b'{"jsonrpc":"2.0","id":1,"method":"initialize"}')
    conn.frame("c2a", b"\x00\x01\x02binary\xff", binary=True)
    conn.frame("a2c", b"text that is a binary message", binary=True)
    recorder.close()
    first = _export(db, tmp_path / "a.jsonl")
    records = [orjson.loads(line) for line in first.splitlines()]
    frames = [r for r in records if r["type"] == "frame"]
    assert [f.get("binary", False) for f in frames] == [False, True, True]
    assert base64.b64decode(frames[1]["base64"]) == b"\x00\x01\x02binary\xff"
    assert frames[2]["text"] == "text that is a binary message"
    assert records[1]["headers"] == {"Host": "x"} and records[1]["peer"] == "127.0.0.1:5555"
    copy = tmp_path / "copy.db"
    assert cli("import", str(tmp_path / "a.jsonl"), str(copy)).returncode == 0
    assert _export(copy, tmp_path / "b.jsonl") == first
    assert frame_rows(copy, 1) == frame_rows(db, 1)


def test_import_appends_and_remaps_ids(tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    record(src, b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
    export = tmp_path / "e.jsonl"
    _export(src, export)
    target = tmp_path / "target.db"
    record(target, b"{}\n")
    done = cli("import", str(export), str(target))
    assert done.returncode == 0, done.stderr
    assert "(1->2)" in done.stdout.decode()
    done = cli("import", "-", "--allow-duplicates", str(target), stdin=export.read_bytes())
    assert done.returncode == 0, done.stderr
    assert "(1->3)" in done.stdout.decode()
    assert frame_rows(target, 2) == frame_rows(src, 1) == frame_rows(target, 3)
    # --connection exports one connection, still importable on its own
    one = cli("export", str(target), "--no-redact", "--connection", "3")
    assert one.returncode == 0
    assert one.stdout == export.read_bytes().replace(b'"connection":1', b'"connection":3')


def test_library_import_into_memory(tmp_path: Path) -> None:
    """The API the replay server uses: import_export into an in-memory database."""
    db = tmp_path / "rec.db"
    record(db, AWKWARD)
    data = _export(db, tmp_path / "a.jsonl")
    mem = sqlite3.connect(":memory:")
    summary = import_export(io.BytesIO(data), mem)
    assert summary.connections == {1: 1} and summary.frames == 26 and summary.stderr_lines == 1
    assert summary.created_by == "acp-proxy 0.1.0"
    got = [bytes(r[0]) for r in mem.execute("SELECT raw FROM frames ORDER BY seq")]
    assert got == [r[2] for r in frame_rows(db, 1)]
    methods = {r[0] for r in mem.execute("SELECT method FROM frames WHERE method IS NOT NULL")}
    assert {"initialize", "session/new", "_big"} <= methods
    # also from a path
    summary2 = import_export(tmp_path / "a.jsonl", mem)
    assert summary2.connections == {1: 2}
