"""``acp-proxy mcp STORE`` through the real executable and the official MCP SDK's client.

The client starts ``acp-proxy mcp`` over stdio (and, for ``--listen``, connects over
Streamable HTTP), lists the tools with their schemas and annotations, and calls each on a
recording made by ``acp-proxy demo`` and on a hand-made recording that breaks rules; the
answers are checked against what ``ls``/``show``/``check``/``search``/``stats``/``diff``
print as JSON for the same store, and against the stored bytes. The same calls on a
PostgreSQL copy of the store (``tests/pg_server.py``) must give the same text.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from acp_proxy.mcp.tools import ToolFailure, parse_since
from tests.conftest import echo_proxy, echo_through, frame_count, frames_of, proxy_exe, run_proxy

TOOLS = {
    "list_connections",
    "connection_summary",
    "messages",
    "message",
    "search",
    "findings",
    "stats",
    "diff",
    "timeline",
}
HUGE = 3 * 1024 * 1024
"""A frame bigger than ``message`` reads whole (the inspector's 2 MiB)."""
NOT_UTF8 = b'{"jsonrpc":"2.0","method":"x","params":"\xff\xfe"}\n'


def _broken_jsonl(path: Path) -> Path:
    """One connection that breaks four rules, with a 20 kB prompt (cut by ``message``)."""
    conn = {
        "type": "connection",
        "connection": 1,
        "agent_command": ["agent"],
        "agent_info": None,
        "client_info": None,
        "bytes_dropped": 0,
        "frames_dropped": 0,
        "cwd": "/",
        "started_at": 1767225600.0,
        "ended_at": 1767225601.0,
        "exit_status": 0,
        "headers": None,
        "label": "broken",
        "meta": None,
        "peer": None,
        "pid": None,
        "proxy_pid": None,
        "protocol_version": 1,
        "transport": "stdio",
    }
    big = "x" * 20000
    frames = [
        ("c2a", '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'),
        ("a2c", '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}'),
        ("c2a", '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/"}}'),
        ("a2c", '{"jsonrpc":"2.0","id":99,"result":{}}'),
        ("a2c", "this is not json"),
        (
            "c2a",
            '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1",'
            f'"prompt":[{{"type":"text","text":"{big}"}}]}}}}',
        ),
        ("c2a", '{"jsonrpc":"2.0","method":"_huge","params":{"t":"' + "y" * HUGE + '"}}'),
    ]
    records: list[dict[str, Any]] = [
        {"type": "header", "format": "acp-proxy-recording", "version": 1, "created_by": "t"},
        conn,
    ]
    for seq, (direction, text) in enumerate(frames, 1):
        records.append(
            {
                "type": "frame",
                "connection": 1,
                "seq": seq,
                "direction": direction,
                "mono_ns": seq * 1_000_000,
                "ts": 1767225600.0 + seq / 100,
                "text": text + "\n",
            }
        )
    records.append(  # a frame that is not UTF-8: shown as base64
        {
            "type": "frame",
            "connection": 1,
            "seq": len(frames) + 1,
            "direction": "a2c",
            "mono_ns": 99_000_000,
            "ts": 1767225600.9,
            "base64": base64.b64encode(NOT_UTF8).decode(),
        }
    )
    records.append(
        {"type": "end", "connections": 1, "frames": len(frames) + 1, "events": 0, "stderr": 0}
    )
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("mcp") / "demo.db"
    done = run_proxy(["demo", "--db", str(db)], timeout=180)
    assert done.returncode == 0, done.stderr
    return db


@pytest.fixture(scope="module")
def broken_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mcp-broken")
    db = base / "broken.db"
    done = run_proxy(["import", str(_broken_jsonl(base / "broken.jsonl")), str(db)])
    assert done.returncode == 0, done.stderr
    return db


def _server(store: Path | str, *extra: str) -> StdioServerParameters:
    exe = proxy_exe()
    return StdioServerParameters(
        command=exe[0], args=[*exe[1:], "mcp", str(store), *extra], env=dict(os.environ)
    )


@contextlib.asynccontextmanager
async def _client(store: Path | str) -> AsyncIterator[Client]:
    async with Client(_server(store), read_timeout_seconds=120) as client:
        yield client


async def _call(client: Client, name: str, **args: Any) -> str:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def _error(client: Client, name: str, **args: Any) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    assert "\n" not in text.strip() and "Traceback" not in text, text
    return text


def _json(args: list[str]) -> Any:
    done = run_proxy(args)
    assert done.returncode in (0, 1), done.stderr
    return orjson.loads(done.stdout)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_tools_listed_with_schemas_annotations_and_instructions(demo_store: Path) -> None:
    async with _client(demo_store) as client:
        assert client.instructions and "list_connections" in client.instructions
        listed = (await client.list_tools()).tools
        assert {t.name for t in listed} == TOOLS
        for tool in listed:
            assert tool.description, tool.name
            assert tool.input_schema["type"] == "object"
            hints = tool.annotations
            assert hints is not None, tool.name
            assert hints.read_only_hint is True
            assert hints.idempotent_hint is True
            assert hints.open_world_hint is False
            assert hints.destructive_hint is False
        by_name = {t.name: t for t in listed}
        assert set(by_name["message"].input_schema["required"]) == {"connection", "seq"}
        assert by_name["messages"].input_schema["properties"]["limit"]["maximum"] == 200


async def test_each_tool_answers_as_the_cli_does(demo_store: Path) -> None:
    ls = [
        orjson.loads(line)
        for line in run_proxy(["ls", str(demo_store), "--json"]).stdout.splitlines()
    ]
    before = _digest(demo_store)  # (after ls, which keeps the connections' totals in the file)
    async with _client(demo_store) as client:
        listed = await _call(client, "list_connections")
        ids = [int(m) for m in re.findall(r"^connection (\d+),", listed, re.M)]
        assert ids == sorted((c["id"] for c in ls), reverse=True)  # newest first
        only_v2 = await _call(client, "list_connections", label="v2", state="ended")
        assert re.findall(r"^connection (\d+),", only_v2, re.M) == ["4", "3"]
        none = await _call(client, "list_connections", since="2000-01-01", agent="nobody")
        assert none.startswith("0 of 4")
        assert (await _call(client, "list_connections", since="1h", host=ls[0]["host"])).startswith(
            "4 of 4"
        )
        assert (await _call(client, "list_connections", host="elsewhere")).startswith("0 of 4")

        summary = await _call(client, "connection_summary", connection=1)
        frames_1 = frames_of(demo_store, 1)
        assert f"totals: {len(frames_1)} frames" in summary
        assert "findings: 0 error, 0 warning, 0 info" in summary
        assert "how it ended: ended (exit 0)" in summary
        assert re.search(r"^  session/prompt c2a 2 err=0 p50=\S+ms", summary, re.M)

        seqs: list[int] = []
        after: int | None = None
        while True:
            page = await _call(
                client, "messages", connection=1, limit=7, **({"after": after} if after else {})
            )
            seqs += [int(s) for s in re.findall(r"^connection 1 #(\d+) ", page, re.M)]
            more = re.search(r"call again with after=(\d+)", page)
            if more is None:
                break
            after = int(more.group(1))
        assert seqs == list(range(1, len(frames_1) + 1))
        everything: list[tuple[str, str]] = []
        after = None
        while True:  # all connections: pages in time order, each frame once
            page = await _call(client, "messages", limit=40, **({"after": after} if after else {}))
            everything += re.findall(r"^connection (\d+) #(\d+) ", page, re.M)
            more = re.search(r"call again with after=(\d+)", page)
            if more is None:
                break
            after = int(more.group(1))
        assert len(everything) == len(set(everything)) == sum(c["frame_count"] for c in ls)
        prompts = await _call(client, "messages", method="session/prompt", direction="c2a")
        assert all(" c2a request session/prompt " in line for line in prompts.splitlines())

        one = await _call(client, "message", connection=1, seq=3)
        direction, raw = frames_1[2]
        assert raw.decode().rstrip("\n") in one.splitlines()
        assert one.splitlines()[0].startswith(f"connection 1 #3 {direction} request session/new")
        assert re.search(r"^pair \(\S+ms\): connection 1 #4 a2c response session/new", one, re.M)
        assert '"method": "session/new"' in one  # the parsed form

        newest = await _call(client, "findings", last=2)
        assert newest.startswith("2 connection(s) (the newest 2): 0 error")
        stats = await _call(client, "stats")
        found = await _call(client, "search", query="héllo")
        diff = await _call(client, "diff", a=1, b=2)
        timeline = await _call(client, "timeline", connection=3, session="sess_1")
        assert _digest(demo_store) == before  # nothing writes

    one_stats = _json(["stats", str(demo_store), "-c", "1", "--json"])
    for m in one_stats["methods"]:
        if m["requests"]:
            assert f"  {m['method']} {m['direction']} {m['requests']} err=" in summary
    cli_stats = _json(["stats", str(demo_store), "--json"])
    assert stats.startswith(f"{cli_stats['connections']} connection(s), ")
    assert f"{cli_stats['frames']} frames, {cli_stats['bytes']} bytes" in stats
    for m in cli_stats["methods"]:
        assert f"  {m['method']} {m['direction']} req={m['requests']} " in stats

    cli_search = _json(["search", str(demo_store), "héllo", "--json"])
    hits = re.findall(r"^connection (\d+) #(\d+)", found, re.M)
    assert [(int(c), int(s)) for c, s in hits] == [
        (h["connection"], h["seq"]) for h in cli_search["hits"]
    ]
    assert hits

    cli_diff = _json(["diff", str(demo_store), str(demo_store), "-c", "1", "-c", "2", "--json"])
    s = cli_diff["summary"]
    assert (
        f"{s['added']} added, {s['removed']} removed, {s['changed']} changed, {s['slower']} slower"
    ) in diff
    assert len(re.findall(r"^- removed #", diff, re.M)) == s["removed"]

    shown = _json(["show", str(demo_store), "--json", "-c", "3"])["connections"][0]
    turns = [t for t in shown["turns"] if t["sessionId"] == "sess_1"]
    assert timeline.startswith(f"connection 3: {len(turns)} turn(s) of session sess_1")
    assert len(re.findall(r"^turn \d+ session sess_1 ", timeline, re.M)) == len(turns)


async def test_findings_match_check_json_with_rule_text_and_side(broken_store: Path) -> None:
    report = _json(["check", str(broken_store), "--json"])
    expected = report["connections"][0]["findings"]
    assert len(expected) == 5
    async with _client(broken_store) as client:
        text = await _call(client, "findings")
        summary = await _call(client, "connection_summary", connection=1)
        errors_only = await _call(client, "findings", connection=1, min_tier="error", limit=1)
    assert text.startswith("1 connection(s) (the newest 1): 5 error, 0 warning, 0 info")
    for f in expected:
        where = ",".join(f"#{s}" for s in f["seqs"])
        assert f"error {f['rule']} side={f['side']} {where}" in text
        assert f"  rule: {f['rule_text']}" in text
    assert "findings: 5 error, 0 warning, 0 info" in summary
    assert "... 4 more finding(s)" in errors_only


async def test_results_are_bounded_and_cut_with_a_marker(broken_store: Path) -> None:
    async with _client(broken_store) as client:
        big = await _call(client, "message", connection=1, seq=6)
        huge = await _call(client, "message", connection=1, seq=7)
        binary = await _call(client, "message", connection=1, seq=8)
        listing = await _call(client, "messages", connection=1)
    assert f"[truncated: 4000 characters of {len(frames_of(broken_store, 1)[5][1])} bytes" in big
    assert f"[truncated: 4000 characters of {len(frames_of(broken_store, 1)[6][1])} bytes" in huge
    assert huge.endswith("parsed: not shown (the frame is too big to read whole here)")
    assert len(huge) < 5000
    assert binary.splitlines()[-2:] == [
        "raw (not UTF-8, base64):",
        base64.b64encode(NOT_UTF8).decode(),
    ]
    assert len(big) < 12000  # the 20 kB prompt twice (raw and parsed) would be over 40 kB
    assert max(len(line) for line in listing.splitlines()) < 300


async def test_missing_things_are_one_line_tool_errors(tmp_path: Path, demo_store: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(demo_store, copy)
    async with _client(copy) as client:
        assert "no connection 9" in await _error(client, "connection_summary", connection=9)
        assert "no frame #999" in await _error(client, "message", connection=1, seq=999)
        assert "since" in await _error(client, "list_connections", since="yesterday-ish")
        assert "direction" in await _error(client, "messages", direction="up")
        copy.write_bytes(b"not a database at all" * 100)  # damaged while served
        damaged = await _error(client, "list_connections")
        copy.unlink()  # and then gone
        missing = await _error(client, "stats")
        assert (await client.list_tools()).tools  # the server is still up
    assert "copy.db" in damaged
    assert "copy.db" in missing


@pytest.mark.parametrize("content", [None, b"garbage" * 50], ids=["missing", "garbage"])
def test_a_bad_store_at_startup_is_one_line_and_exit_1(
    tmp_path: Path, content: bytes | None
) -> None:
    store = tmp_path / "bad.db"
    if content is not None:
        store.write_bytes(content)
    done = run_proxy(["mcp", str(store)], timeout=60)
    assert done.returncode == 1
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "bad.db" in lines[0]
    assert not done.stdout


def test_listen_beyond_loopback_needs_a_token(demo_store: Path) -> None:
    done = run_proxy(["mcp", str(demo_store), "--listen", "0.0.0.0:0"], timeout=60)
    assert done.returncode == 2
    assert b"needs --token" in done.stderr and b"Traceback" not in done.stderr


@contextlib.contextmanager
def _http_server(store: Path | str, *extra: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [*proxy_exe(), "mcp", str(store), "--listen", "127.0.0.1:0", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        found = re.search(r"on (http://127\.0\.0\.1:\d+/mcp) ", line)
        assert found, line
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_streamable_http_with_and_without_token(demo_store: Path) -> None:
    with _http_server(demo_store) as url:
        async with Client(url, read_timeout_seconds=120) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            assert (await _call(client, "list_connections")).startswith("4 of 4")
        async with httpx2.AsyncClient() as http:  # another site's Host: refused
            refused = await http.post(url, headers={"Host": "evil.example"}, json={})
        assert refused.status_code in (403, 421)
    with _http_server(demo_store, "--token", "s3cret") as url:
        async with httpx2.AsyncClient() as http:
            denied = await http.post(url, json={})
        assert denied.status_code == 401
        auth = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
        transport = streamable_http_client(url, http_client=auth)
        async with auth, Client(transport, read_timeout_seconds=120) as client:
            assert (await _call(client, "stats")).startswith("4 connection(s)")


async def test_the_same_answers_on_postgresql(demo_store: Path, pg_url: str) -> None:
    from tests.pg_mirror import mirror_to_pg

    mirror_to_pg(demo_store, pg_url)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_connections", {}),
        ("connection_summary", {"connection": 2}),
        ("messages", {"connection": 3, "limit": 10}),
        ("message", {"connection": 1, "seq": 5}),
        ("search", {"query": "héllo"}),
        ("findings", {}),
        ("stats", {}),
        ("diff", {"a": 1, "b": 2}),
        ("timeline", {"connection": 4}),
    ]
    answers: dict[str, list[str]] = {}
    for where in (str(demo_store), pg_url):
        async with _client(where) as client:
            answers[where] = [await _call(client, name, **args) for name, args in calls]
    for (name, _), on_file, on_pg in zip(
        calls, answers[str(demo_store)], answers[pg_url], strict=True
    ):
        assert on_pg == on_file, name


async def test_a_live_store_is_read_as_it_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    proxy = echo_proxy(db)
    try:
        first = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
        echo_through(proxy, first)
        _wait_for_frames(db, 2)  # the request and its echo, committed by the writer
        async with _client(db) as client:
            running = await _call(client, "list_connections", state="running")
            assert re.findall(r"^connection (\d+), running", running, re.M) == ["1"]
            assert len(re.findall(r"^connection 1 #", await _call(client, "messages"), re.M)) == 2
            echo_through(proxy, b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}\n')
            _wait_for_frames(db, 4)
            later = await _call(client, "messages", method="session/cancel")
            assert len(re.findall(r"^connection 1 #\d+ ", later, re.M)) == 2  # each call reads anew
            assert proxy.stdin is not None
            proxy.stdin.close()
            assert proxy.wait(timeout=60) == 0
            ended = await _call(client, "connection_summary", connection=1)
            assert "how it ended: ended" in ended
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait(timeout=30)


def _wait_for_frames(db: Path, n: int) -> None:
    """Until the recording holds ``n`` frames (bounded: the recorder commits within ~1 s)."""
    for _ in range(600):
        if db.exists() and frame_count(db) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"{db} never reached {n} frames")


def test_without_the_sdk_one_line_says_what_to_install(tmp_path: Path, demo_store: Path) -> None:
    fake = tmp_path / "site" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'mcp'\")\n")
    path = os.pathsep.join(p for p in (str(fake.parent), os.environ.get("PYTHONPATH")) if p)
    done = run_proxy(["mcp", str(demo_store)], env={"PYTHONPATH": path}, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "pip install 'acp-proxy[mcp]'" in lines[0], done.stderr


def test_ctrl_c_on_stdio_exits_0_without_a_traceback(demo_store: Path) -> None:
    proc = subprocess.Popen(
        [*proxy_exe(), "mcp", str(demo_store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    proc.stdin.write(orjson.dumps(hello) + b"\n")
    proc.stdin.flush()
    answer = orjson.loads(proc.stdout.readline())
    assert answer["id"] == 1 and "list_connections" in answer["result"]["instructions"]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err


def test_since_reads_iso_unix_seconds_and_ages() -> None:
    now = 1_800_000_000.0
    assert parse_since("2h", now=now) == now - 7200
    assert parse_since("1.5d", now=now) == now - 1.5 * 86400
    assert parse_since("1767225600") == 1767225600.0
    assert parse_since("2026-01-01") == 1767225600.0  # UTC unless it says
    assert parse_since("2026-01-01T01:00:00+01:00") == 1767225600.0
    with pytest.raises(ToolFailure, match="cannot read since"):
        parse_since("last tuesday")


def test_an_address_in_use_is_one_line_and_exit_1(demo_store: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_proxy(["mcp", str(demo_store), "--listen", f"127.0.0.1:{port}"], timeout=60)
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines() == [
        f"Error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
