"""The inspector's JSON endpoints (pytest-aiohttp) on recordings made through the real proxy."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import sqlite3
import subprocess
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient

from acp_proxy.store.schema import connect
from acp_proxy.web import store, views
from acp_proxy.web.guard import CSP
from acp_proxy.web.server import make_app
from tests.conftest import proxy_exe
from tests.helpers import insert_frames
from tests.web.conftest import PROMPTS
from tests.web.helpers import SESSION_ID, record_session, rows


@pytest.fixture
async def client(aiohttp_client: Any, recording: Path) -> TestClient:
    return await aiohttp_client(make_app(recording, poll_interval=0.05))


async def get_json(
    client: TestClient, path: str, status: int = 200, ok: tuple[int, ...] = ()
) -> Any:
    resp = await client.get(path)
    assert resp.status in (ok or (status,)), await resp.text()
    assert resp.headers["Content-Type"].startswith("application/json")
    return await resp.json()


async def test_connections_list_agent_client_version_sessions(
    client: TestClient, recording: Path
) -> None:
    data = await get_json(client, "/api/connections")
    conns = data["connections"]
    db_rows = rows(recording, "SELECT id, started_at, ended_at FROM connections ORDER BY id")
    assert [c["id"] for c in conns] == [r[0] for r in db_rows]
    first = conns[0]
    assert first["agent"] == "scripted-agent 1.0"
    assert first["client"] == "web-test-client 0.1"
    assert first["protocol_version"] == 2
    assert first["started_at"] == db_rows[0][1]
    assert first["duration"] == pytest.approx(db_rows[0][2] - db_rows[0][1])
    (count,) = rows(recording, "SELECT count(*) FROM frames WHERE connection_id = 1")[0]
    assert first["frame_count"] == count
    (session,) = first["sessions"]
    assert session["session_id"] == SESSION_ID
    (scount,) = rows(
        recording,
        "SELECT count(*) FROM frames WHERE connection_id = 1 AND session_id = ?",
        (SESSION_ID,),
    )[0]
    assert session["frame_count"] == scount


async def test_keyset_pagination_forwards_and_backwards_covers_every_frame(
    client: TestClient, recording: Path
) -> None:
    all_ids = [r[0] for r in rows(recording, "SELECT id FROM frames ORDER BY id")]
    seen: list[int] = []
    after = 0
    while True:
        page = await get_json(client, f"/api/frames?after_id={after}&limit=7")
        assert len(page["frames"]) <= 7
        seen += [f["id"] for f in page["frames"]]
        if not page["has_more_after"]:
            break
        after = page["frames"][-1]["id"]
    assert seen == all_ids
    back: list[int] = []
    before = 10**12
    while True:
        page = await get_json(client, f"/api/frames?before_id={before}&limit=9")
        back = [f["id"] for f in page["frames"]] + back
        if not page["has_more_before"]:
            break
        before = page["frames"][0]["id"]
    assert back == all_ids
    first = await get_json(client, "/api/frames?limit=5")
    assert first["has_more_before"] is False and first["has_more_after"] is True


@pytest.mark.parametrize(
    ("query", "where", "args"),
    [
        ("direction=a2c", "direction = ?", ("a2c",)),
        ("method=session/prompt", "method = ?", ("session/prompt",)),
        ("update=notice", "update_kind = ?", ("notice",)),
        (
            f"session={SESSION_ID}&direction=c2a",
            "session_id = ? AND direction = ?",
            (SESSION_ID, "c2a"),
        ),
        ("connection=2", "connection_id = ?", (2,)),
    ],
)
async def test_filters_match_the_index_columns(
    client: TestClient, recording: Path, query: str, where: str, args: tuple[Any, ...]
) -> None:
    page = await get_json(client, f"/api/frames?{query}&limit=1000")
    expected = [
        r[0] for r in rows(recording, f"SELECT id FROM frames WHERE {where} ORDER BY id", args)
    ]
    assert expected, "the filter should select something in this recording"
    assert [f["id"] for f in page["frames"]] == expected


async def test_text_filter_searches_the_raw_bytes(client: TestClient, recording: Path) -> None:
    page = await get_json(client, "/api/frames?q=%3Cscript%3E&limit=1000")
    expected = [
        fid
        for fid, raw in rows(recording, "SELECT id, raw FROM frames ORDER BY id")
        if b"<script>" in raw
    ]
    assert expected
    assert [f["id"] for f in page["frames"]] == expected
    none = await get_json(client, "/api/frames?q=definitely-not-in-any-frame")
    assert none["frames"] == []


async def test_request_response_pairing_and_latency(client: TestClient, recording: Path) -> None:
    page = await get_json(client, "/api/frames?connection=1&method=session/prompt&limit=1000")
    requests = [f for f in page["frames"] if f["kind"] == "request"]
    responses = {f["id"]: f for f in page["frames"] if f["kind"] == "response"}
    assert len(requests) == len(PROMPTS) == len(responses)
    for req in requests:
        pair = req["pair"]
        assert pair["role"] == "request"
        resp = responses[pair["id"]]
        assert resp["rpc_id"] == req["rpc_id"] and resp["direction"] == "a2c"
        assert resp["pair"]["id"] == req["id"]
        (req_ns,), (resp_ns,) = (
            rows(recording, "SELECT mono_ns FROM frames WHERE id = ?", (req["id"],))[0],
            rows(recording, "SELECT mono_ns FROM frames WHERE id = ?", (resp["id"],))[0],
        )
        assert pair["latency_ms"] == pytest.approx((resp_ns - req_ns) / 1e6)


async def test_frame_detail_is_the_exact_text(client: TestClient, recording: Path) -> None:
    fid, raw = rows(recording, "SELECT id, raw FROM frames WHERE instr(raw, '<script>') > 0")[0]
    detail = await get_json(client, f"/api/frames/{fid}")
    assert detail["utf8"] is True
    assert detail["text"].encode() == raw
    assert detail["base64"] is None
    resp = await client.get(f"/api/frames/{fid}/raw")
    assert resp.status == 200
    assert await resp.read() == raw
    assert resp.headers["Content-Type"] == "application/octet-stream"


async def test_invalid_utf8_frame_comes_back_as_hex_and_base64(
    client: TestClient, recording: Path
) -> None:
    matches = [(i, r) for i, r in rows(recording, "SELECT id, raw FROM frames") if b"\xff\xfe" in r]
    assert matches, "the scripted agent writes one invalid UTF-8 line per connection that asks"
    fid, raw = matches[0]
    detail = await get_json(client, f"/api/frames/{fid}")
    assert detail["utf8"] is False and detail["text"] is None
    assert base64.b64decode(detail["base64"]) == raw
    assert bytes.fromhex(detail["hex"].replace(" ", "")) == raw
    page = await get_json(client, f"/api/frames?after_id={fid - 1}&limit=1")
    assert page["frames"][0]["preview"].startswith('{"jsonrpc"')
    assert "\\xff\\xfe" in page["frames"][0]["preview"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/frames/999999", 404),
        ("/api/frames/abc", 404),
        ("/api/frames/999999/raw", 404),
        ("/api/connections/99/findings", 404),
        ("/api/connections/99/sessions/x", 404),
        ("/api/connections/1/sessions/no-such-session", 404),
        ("/api/frames?connection=99", 404),
        ("/api/nope", 404),
        ("/static/nope.js", 404),
        ("/static/..%2Fserver.py", 404),
        ("/api/frames?limit=0", 400),
        ("/api/frames?after_id=x", 400),
        ("/api/frames?direction=sideways", 400),
        ("/api/frames?connection=one", 400),
    ],
)
async def test_bad_requests_get_json_errors(client: TestClient, path: str, status: int) -> None:
    data = await get_json(client, path, status)
    assert isinstance(data["error"], str) and "\n" not in data["error"]


HUGE = str(2**64)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        (f"/api/frames?after_id={HUGE}", 400),
        (f"/api/frames?before_id={HUGE}", 400),
        (f"/api/frames?before_id=-{HUGE}", 400),
        (f"/api/frames?connection={HUGE}", 400),
        (f"/api/frames?limit={HUGE}", 400),
        (f"/api/frames/{HUGE}", 404),
        (f"/api/frames/{HUGE}/raw", 404),
        (f"/api/connections/{HUGE}/findings", 404),
        (f"/api/connections/1/sessions/{SESSION_ID}?offset={HUGE}", 400),
        (f"/api/connections/1/sessions/{SESSION_ID}?limit={HUGE}", 400),
    ],
)
async def test_integers_past_64_bits_get_the_json_error(
    client: TestClient, path: str, status: int
) -> None:
    data = await get_json(client, path, status)
    assert "out of range" in data["error"] or data["error"].startswith("no such")


async def test_live_subscription_past_64_bits_is_a_bad_subscription(client: TestClient) -> None:
    ws = await client.ws_connect("/api/live")
    await ws.send_str(f'{{"follow": true, "after_id": {HUGE}, "filter": {{}}}}')
    while True:
        data = orjson.loads((await ws.receive(timeout=30)).data)
        if data["type"] == "error":
            break
    assert data["message"] == "bad subscription"
    await ws.send_str(f'{{"follow": true, "after_id": 0, "filter": {{"connection": "{HUGE}"}}}}')
    while True:
        data = orjson.loads((await ws.receive(timeout=30)).data)
        if data["type"] == "error":
            break
    assert data["message"] == "bad subscription"
    await ws.close()


async def test_a_recording_that_becomes_unreadable_is_an_error_not_empty(
    aiohttp_client: Any, tmp_path: Path, recording: Path
) -> None:
    db = tmp_path / "copy.db"
    db.write_bytes(recording.read_bytes())
    client = await aiohttp_client(make_app(db, poll_interval=0.05))
    assert len((await get_json(client, "/api/connections"))["connections"]) == 2
    ws = await client.ws_connect("/api/live")
    await ws.send_str('{"follow": false, "filter": {}}')
    assert orjson.loads((await ws.receive(timeout=30)).data)["type"] == "state"
    db.write_bytes(b"\x00garbage" * 4096)
    for path in ("/api/connections", "/api/frames", "/api/info"):
        data = await get_json(client, path, 503)
        assert "not a usable acp-proxy recording" in data["error"]
    while True:  # the live socket says so too
        msg = orjson.loads((await ws.receive(timeout=30)).data)
        if msg["type"] == "error":
            break
    assert "not a usable acp-proxy recording" in msg["message"]
    await ws.close()


async def test_live_means_a_fresh_heartbeat(aiohttp_client: Any, tmp_path: Path) -> None:
    """A connection whose recorder is gone reads as ended (unknown end), not live."""
    db = tmp_path / "states.db"
    now = time.time()
    for columns in (
        {"ended_at": None, "last_seen_at": None},
        {"ended_at": None, "last_seen_at": now - 600},
        {"ended_at": None, "last_seen_at": now + 60},  # fresh for the whole test
        {"ended_at": now, "exit_status": 0},
    ):
        insert_frames(db, [("c2a", b"{}\n")], connection={"started_at": now - 900, **columns})
    client = await aiohttp_client(make_app(db))
    listed = (await get_json(client, "/api/connections"))["connections"]
    assert [c["live"] for c in listed] == [False, False, True, False]
    assert [c["state"] for c in listed] == ["unknown-end", "unknown-end", "running", "ended"]
    assert listed[1]["duration"] == pytest.approx(300)
    # The end-of-connection rules ran for the gone ones, wait for the live one.
    assert (await get_json(client, "/api/connections/1/findings"))["complete"] is True
    assert (await get_json(client, "/api/connections/3/findings"))["complete"] is False


async def test_read_only_post_is_refused_and_file_untouched(
    client: TestClient, recording: Path
) -> None:
    before = hashlib.sha256(recording.read_bytes()).hexdigest()
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        resp = await client.request(method, "/api/frames")
        assert resp.status == 405
    for path in ("/api/connections", "/api/frames", "/api/connections/1/findings"):
        assert (await client.get(path)).status == 200
    assert hashlib.sha256(recording.read_bytes()).hexdigest() == before


async def test_page_and_assets_have_strict_csp_and_no_inline_script(client: TestClient) -> None:
    resp = await client.get("/")
    assert resp.status == 200
    assert resp.headers["Content-Security-Policy"] == CSP
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
    html = await resp.text()
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all(
        'src="/static/' in attrs and body.strip() == "" for attrs, body in scripts
    )
    assert not re.search(r"\son[a-z]+=", html), "inline event handlers would need unsafe-inline"
    for asset in ["app.css", *STATIC_SCRIPTS]:
        resp = await client.get(f"/static/{asset}")
        assert resp.status == 200
        text = await resp.text()
        assert "http://" not in text and "https://" not in text, "nothing from a CDN"
        if asset.endswith(".js"):
            assert "innerHTML" not in text.replace("Nothing here assigns innerHTML", ""), asset
            assert "insertAdjacentHTML" not in text and "outerHTML" not in text, asset
    api = await client.get("/api/info")
    assert api.headers["Content-Security-Policy"] == CSP
    assert api.headers["X-Content-Type-Options"] == "nosniff"


STATIC = Path(views.__file__).parent / "static"
STATIC_SCRIPTS = sorted(p.name for p in STATIC.glob("*.js"))
# The page's ES modules; report.js, a classic script, is inlined by `export --format html`.
STATIC_MODULES = [
    name
    for name in STATIC_SCRIPTS
    if re.search(r"^(import|export) ", (STATIC / name).read_text(encoding="utf-8"), re.M)
]
IMPORT_RE = re.compile(r'^import [^;]*? from "\./([^"]+)";$', re.M | re.S)


async def test_the_front_end_is_es_modules_every_one_reached_from_app_js(
    client: TestClient,
) -> None:
    """The page loads app.js as a module; its imports, followed through the server as the
    browser follows them, reach every .js file shipped in static/, each served as JavaScript
    under the same policy (a module the page never loads would be dead code)."""
    html = await (await client.get("/")).text()
    assert '<script type="module" src="/static/app.js"></script>' in html
    assert len(STATIC_MODULES) > 10, STATIC_MODULES  # one module per view, not one file
    reached: set[str] = set()
    todo = ["app.js"]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        resp = await client.get(f"/static/{name}")
        assert resp.status == 200, name
        assert resp.headers["Content-Type"] == "text/javascript; charset=utf-8", name
        assert resp.headers["Content-Security-Policy"] == CSP
        reached.add(name)
        todo.extend(IMPORT_RE.findall(await resp.text()))
    assert sorted(reached) == STATIC_MODULES


async def test_session_view_reconstructs_the_conversation(
    client: TestClient, recording: Path
) -> None:
    data = await get_json(client, f"/api/connections/1/sessions/{SESSION_ID}")
    items = data["session"]["items"]
    users = [i["text"] for i in items if i.get("type") == "user_message"]
    assert users == PROMPTS
    agent = [i for i in items if i.get("type") == "agent_message"]
    assert any("<script>" in i["text"] for i in agent)
    notices = [i for i in items if i.get("kind") == "notice"]
    assert notices and all(n["liveOnly"] for n in notices)
    unknown = [i for i in items if i.get("kind") == "unknown"]
    assert unknown and unknown[0]["payload"]["sessionUpdate"] == "_vendor_telemetry"
    tools = [i for i in items if i.get("type") == "tool_call"]
    assert tools and all(t["fields"]["status"] == "completed" for t in tools)
    seq_to_id = {
        str(seq): fid
        for seq, fid in rows(recording, "SELECT seq, id FROM frames WHERE connection_id = 1")
    }
    for item in items:
        seq = item.get("firstSeq", item.get("seq"))
        if seq is not None:
            assert data["seqToId"][str(seq)] == seq_to_id[str(seq)]


async def test_findings_point_at_real_frames(client: TestClient, recording: Path) -> None:
    data = await get_json(client, "/api/connections/1/findings")
    assert data["complete"] is True
    bad = [f for f in data["findings"] if f["rule"] == "framing.utf8"]
    assert bad, data["findings"]
    (fid,) = bad[0]["frame_ids"]
    (raw,) = rows(recording, "SELECT raw FROM frames WHERE id = ?", (fid,))[0]
    assert b"\xff\xfe" in raw
    assert data["summary"]["error"] >= 1
    listed = await get_json(client, "/api/connections")
    assert listed["connections"][0]["findings"] == {**data["summary"], "stale": False}


async def test_token_is_required_on_every_request(aiohttp_client: Any, recording: Path) -> None:
    client = await aiohttp_client(make_app(recording, token="s3cret-token"))
    for path in ("/", "/static/app.js", "/api/info", "/api/frames", "/api/live"):
        resp = await client.get(path)
        assert resp.status == 401, path
    assert (await client.get("/api/info", headers={"Authorization": "Bearer wrong"})).status == 401
    assert (await client.get("/api/info?token=s3cret-tokeX")).status == 401
    ok = await client.get("/api/info", headers={"Authorization": "Bearer s3cret-token"})
    assert ok.status == 200
    page = await client.get("/?token=s3cret-token")
    assert page.status == 200
    assert (
        "HttpOnly" in page.headers["Set-Cookie"] and "SameSite=Strict" in page.headers["Set-Cookie"]
    )
    # The browser now sends the cookie: the page's own requests work without the query.
    assert (await client.get("/api/frames")).status == 200


async def test_without_token_the_host_header_must_be_loopback(client: TestClient) -> None:
    resp = await client.get("/api/info", headers={"Host": "evil.example:8080"})
    assert resp.status == 403
    assert (await client.get("/api/info", headers={"Host": "localhost:8080"})).status == 200


async def test_bad_database_is_a_clean_error(aiohttp_client: Any, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    client = await aiohttp_client(make_app(junk))
    data = await get_json(client, "/api/connections", 503)
    assert "not a usable acp-proxy recording" in data["error"]
    missing = await aiohttp_client(make_app(tmp_path / "missing.db"))
    data = await get_json(missing, "/api/frames", 503)
    assert data["error"].startswith("no such recording")
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    client = await aiohttp_client(make_app(other))
    data = await get_json(client, "/api/info", 503)
    assert "none of acp-proxy's" in data["error"]


async def test_live_websocket_pushes_frames_written_by_another_connection(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    db = tmp_path / "live.db"
    record_session(db, ["first"])
    client = await aiohttp_client(make_app(db, poll_interval=0.05))
    (max_id,) = rows(db, "SELECT max(id) FROM frames")[0]
    ws = await client.ws_connect("/api/live")
    await ws.send_str(orjson.dumps({"follow": True, "after_id": max_id, "filter": {}}).decode())
    state = orjson.loads((await ws.receive(timeout=30)).data)
    assert state["type"] == "state" and state["max_id"] == max_id
    # Another process appends (here: a second recorded connection through the real proxy).
    record_session(db, ["second"])
    (new_max,) = rows(db, "SELECT max(id) FROM frames")[0]
    got: list[int] = []
    while not got or got[-1] < new_max:
        msg = await ws.receive(timeout=30)
        assert msg.type == WSMsgType.TEXT
        data = orjson.loads(msg.data)
        if data["type"] == "frames":
            got += [f["id"] for f in data["frames"]]
    assert got == list(range(max_id + 1, new_max + 1))
    # A filtered subscription only gets matching frames.
    await ws.send_str(
        orjson.dumps({"follow": True, "after_id": new_max, "filter": {"direction": "c2a"}}).decode()
    )
    record_session(db, ["third"])
    expected = [
        r[0]
        for r in rows(db, "SELECT id FROM frames WHERE id > ? AND direction = 'c2a'", (new_max,))
    ]
    got = []
    while len(got) < len(expected):
        data = orjson.loads((await ws.receive(timeout=30)).data)
        if data["type"] == "frames":
            got += [f["id"] for f in data["frames"]]
            assert all(f["direction"] == "c2a" for f in data["frames"])
    assert got == expected
    await ws.close()


async def test_live_websocket_refuses_other_origins(client: TestClient) -> None:
    resp = await client.get(
        "/api/live",
        headers={
            "Origin": "http://evil.example",
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    assert resp.status == 403


async def test_100k_frames_pages_from_both_ends(aiohttp_client: Any, big_db: Path) -> None:
    client = await aiohttp_client(make_app(big_db))
    first = await get_json(client, "/api/frames?limit=200")
    assert [f["id"] for f in first["frames"]] == list(range(1, 201))
    last = await get_json(client, f"/api/frames?before_id={10**12}&limit=200")
    assert [f["id"] for f in last["frames"]] == list(range(99_801, 100_001))
    assert last["has_more_before"] and not last["has_more_after"]
    middle = await get_json(client, "/api/frames?after_id=50000&limit=3&direction=a2c&connection=2")
    assert all(f["direction"] == "a2c" and f["connection_id"] == 2 for f in middle["frames"])
    assert middle["frames"][0]["pair"]["latency_ms"] is not None
    conns = await get_json(client, "/api/connections")
    assert [c["frame_count"] for c in conns["connections"]] == [50_000, 50_000]


def test_a_page_never_holds_the_recording_in_memory(big_db: Path) -> None:
    """Peak Python memory for a page of 200 (and a text search over all 100k frames)."""
    size = big_db.stat().st_size
    with store.read_connection(big_db) as conn:
        tracemalloc.start()
        store.list_frames(conn, store.FrameFilter(), before_id=10**12, limit=200)
        store.list_frames(conn, store.FrameFilter(text="no such text"), limit=200)
        views.connections(big_db, conn)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert size > 20 * 1024 * 1024
    assert peak < 2 * 1024 * 1024, f"peak {peak} bytes for a {size}-byte recording"


def test_reader_sees_commits_of_a_writer_that_stays_open(tmp_path: Path) -> None:
    """WAL: fresh read-only connections see what an open writer committed, never block it."""
    db = tmp_path / "wal.db"
    writer = connect(db, create=True)
    cid = insert_frames(writer, [], connection={"started_at": 1, "transport": "stdio"})
    writer.execute("BEGIN IMMEDIATE")  # the writer holds the write lock...
    insert_frames(writer, [("c2a", b"{}\n")], connection_id=cid)
    with store.read_connection(db) as conn:  # ...and readers still work (last commit)
        assert store.db_state(conn)[0] == 0
        assert [c["id"] for c in views.connections(db, conn)] == [1]
    writer.execute("COMMIT")
    with store.read_connection(db) as conn:
        assert store.db_state(conn)[0] == 1
    writer.close()


async def test_session_items_come_in_pages(client: TestClient) -> None:
    path = f"/api/connections/1/sessions/{SESSION_ID}"
    full = await get_json(client, path)
    total = full["totalItems"]
    assert total == len(full["session"]["items"]) > 10
    first = await get_json(client, path + "?limit=5")
    second = await get_json(client, path + "?offset=5&limit=5")
    assert first["totalItems"] == second["totalItems"] == total
    assert first["session"]["items"] + second["session"]["items"] == full["session"]["items"][:10]
    assert full["turnCount"] == len(PROMPTS)


async def test_session_view_clips_huge_strings(aiohttp_client: Any, tmp_path: Path) -> None:
    """A multi-megabyte message would stall the browser; the raw frame keeps every byte."""
    from acp_proxy.web.views import SESSION_TEXT_MAX

    db = tmp_path / "huge.db"
    huge = "Z" * (SESSION_TEXT_MAX * 3)
    record_session(db, [huge])
    client = await aiohttp_client(make_app(db, poll_interval=0.05))
    data = await get_json(client, f"/api/connections/1/sessions/{SESSION_ID}")
    text = orjson.dumps(data["session"]["items"]).decode()
    assert huge not in text
    clipped = "Z" * SESSION_TEXT_MAX + f"\u2026 [{SESSION_TEXT_MAX * 2} more characters"
    assert clipped in text
    (fid,) = rows(db, "SELECT id FROM frames WHERE instr(raw, ?) > 0", (huge,))[0]
    raw = await client.get(f"/api/frames/{fid}/raw")
    assert huge.encode() in await raw.read()


async def test_findings_follow_a_growing_connection(aiohttp_client: Any, tmp_path: Path) -> None:
    """The checker is fed only new frames; the result equals a check of the whole file."""
    from tests.web.helpers import LiveProxy, opening, prompt, touch_heartbeat

    db = tmp_path / "grow.db"
    client = await aiohttp_client(make_app(db))
    proxy = LiveProxy(db)
    try:
        proxy.send(opening())
        proxy.wait_output(lambda out: b'"id":2' in out)
        proxy.send(prompt(3, "bad-utf8 please"))
        proxy.wait_output(lambda out: b"end_turn" in out)
        # The recorder commits a turn's frames up to LINGER_SECONDS later: ask for the
        # findings (which catch up) until some frames are recorded and the listing agrees
        # the findings cover everything recorded so far.
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            if rows(db, "SELECT 1 FROM connections WHERE id = 1"):
                touch_heartbeat(db)  # running, also where the recorder writes no heartbeat
            first = await get_json(client, "/api/connections/1/findings", ok=(200, 404))
            if first.get("checked_to_seq", 0) > 0:
                listed = (await get_json(client, "/api/connections"))["connections"][0]
                if not listed["findings"]["stale"]:
                    break
            assert asyncio.get_running_loop().time() < deadline, "findings never caught up"
            await asyncio.sleep(0.05)
        assert first["checked_to_seq"] > 0
        assert first["complete"] is False
        proxy.send(prompt(4, "bad-utf8 again"))
        proxy.wait_output(lambda out: out.count(b"end_turn") == 2)
    finally:
        assert proxy.close() == 0
    listed = (await get_json(client, "/api/connections"))["connections"][0]["findings"]
    assert listed["stale"] is True  # the file grew and the connection ended since
    final = await get_json(client, "/api/connections/1/findings")
    assert final["complete"] is True
    utf8 = [f for f in final["findings"] if f["rule"] == "framing.utf8"]
    assert len(utf8) == 2 and len(utf8) > len(
        [f for f in first["findings"] if f["rule"] == "framing.utf8"]
    )
    # Same as checking the finished recording from scratch with the checker itself.
    from acp_proxy.acp.conformance import ConnectionChecker
    from acp_proxy.wire.frame import Frame

    checker = ConnectionChecker(1, transport="stdio")
    whole = []
    for seq, direction, raw, mono_ns in rows(
        db, "SELECT seq, direction, raw, mono_ns FROM frames WHERE connection_id = 1 ORDER BY seq"
    ):
        whole += checker.feed(Frame.wire(direction, bytes(raw), seq, mono_ns))
    whole += checker.finish()
    assert [(f["rule"], f["seqs"]) for f in final["findings"]] == [
        (f.rule, list(f.seqs)) for f in whole
    ]


async def test_findings_are_what_check_reports(client: TestClient, recording: Path) -> None:
    """The inspector and ``acp-proxy check`` compute findings with the same code."""
    done = subprocess.run(
        [*proxy_exe(), "check", "--json", "--max-per-rule", "100", str(recording)],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode in (0, 1), done.stderr
    report = orjson.loads(done.stdout)
    for connection in report["connections"]:
        page = await get_json(client, f"/api/connections/{connection['id']}/findings")
        assert page["complete"] is True
        assert [
            {k: v for k, v in f.items() if k not in ("frame_ids",)} for f in page["findings"]
        ] == connection["findings"]
        assert page["summary"] == {t: connection["counts"][t] for t in page["summary"]}


async def test_frames_carry_a_preview_and_all_frames_are_in_time_order(
    aiohttp_client: Any, rich_db: Path
) -> None:
    client = await aiohttp_client(make_app(rich_db))
    data = await get_json(client, "/api/frames?limit=1000")
    ids = [f["id"] for f in data["frames"]]
    assert ids == [r[0] for r in rows(rich_db, "SELECT id FROM frames ORDER BY ts, id")]
    assert ids != sorted(ids)
    # keyset pages in time order: page by page gives the same order, nothing twice
    paged: list[int] = []
    after = 0
    while True:
        page = await get_json(client, f"/api/frames?limit=7&after_id={after}")
        paged += [f["id"] for f in page["frames"]]
        if not page["has_more_after"]:
            break
        after = page["frames"][-1]["id"]
    assert paged == ids
    back = await get_json(client, f"/api/frames?limit=7&before_id={ids[10]}")
    assert [f["id"] for f in back["frames"]] == ids[3:10]
    assert back["has_more_before"] and back["has_more_after"]
    one = await get_json(client, "/api/frames?connection=1&limit=1000")
    labels = {f["label"] for f in one["frames"]}
    assert "error -32603 Internal error" in labels
    assert 'session/prompt "Can you fix the failing test?"' in labels
    chunk = next(f for f in one["frames"] if f["update_kind"] == "agent_message_chunk")
    assert (chunk["text"], chunk["message_id"]) == ("Echo: looking ", "a1")


async def test_export_jsonl_is_the_filtered_frames_with_exact_text(
    aiohttp_client: Any, recording: Path
) -> None:
    client = await aiohttp_client(make_app(recording))
    resp = await client.get("/api/export.jsonl?connection=1&direction=a2c")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/x-ndjson")
    assert resp.headers["Content-Security-Policy"] == CSP
    lines = (await resp.read()).splitlines()
    expected = rows(
        recording,
        "SELECT id, seq, raw FROM frames WHERE connection_id = 1 AND direction = 'a2c' ORDER BY id",
    )
    assert len(lines) == len(expected)
    for line, (fid, seq, raw) in zip(lines, expected, strict=True):
        rec = orjson.loads(line)
        assert (rec["type"], rec["id"], rec["seq"], rec["connection"]) == ("frame", fid, seq, 1)
        if "text" in rec:
            assert rec["text"].encode() == raw
        else:
            assert base64.b64decode(rec["base64"]) == raw
    resp = await client.get("/api/export.jsonl?connection=99")
    assert resp.status == 404


async def test_export_jsonl_streams_more_than_a_page(aiohttp_client: Any, big_db: Path) -> None:
    client = await aiohttp_client(make_app(big_db))
    resp = await client.get("/api/export.jsonl?connection=1&kind=request")
    lines = (await resp.read()).splitlines()
    assert len(lines) == 25_000 > store.EXPORT_PAGE
    assert [orjson.loads(x)["seq"] for x in lines[:3]] == [1, 3, 5]


async def test_timeline_endpoint(aiohttp_client: Any, rich_db: Path) -> None:
    client = await aiohttp_client(make_app(rich_db))
    data = await get_json(client, "/api/connections/1/timeline")
    assert len(data["turns"]) == 3 and data["spanMs"] == 410.0
    for turn in data["turns"]:
        assert str(turn["startSeq"]) in data["seqToId"]
    await get_json(client, "/api/connections/99/timeline", status=404)
    await get_json(client, "/api/connections/x/timeline", status=404)


async def test_diff_and_search_endpoints(aiohttp_client: Any, rich_db: Path) -> None:
    before = rich_db.read_bytes()
    client = await aiohttp_client(make_app(rich_db))
    data = await get_json(client, "/api/diff?a=1&b=2")
    assert data["summary"]["removed"] == 22 and data["rowsTotal"] == 26
    assert [r["tag"] for r in data["rows"][:4]] == ["equal"] * 4
    await get_json(client, "/api/diff?a=1", status=400)
    await get_json(client, "/api/diff?a=1&b=9", status=404)
    found = await get_json(client, "/api/search?q=failing+test&connection=1")
    assert found["hits"] and all(h["connection"] == 1 for h in found["hits"])
    assert all(h["summary"]["id"] == h["frame"] for h in found["hits"])
    again = await get_json(client, "/api/search?q=failing+test&connection=1")
    assert again["hits"] == found["hits"]  # the held index answers the same
    await get_json(client, "/api/search?q=", status=400)
    await get_json(client, "/api/search?q=x&connection=9", status=404)
    assert rich_db.read_bytes() == before  # no index written into the recording
