"""``acp-proxy show`` of a Streamable HTTP recording: the HTTP-level events (each request's
method, status and ACP headers, SSE streams opened and closed with their event ids, DELETE)
printed among the frames in the order recorded, in text, ``--raw`` and ``--json``.

The recording is made for real: the SDK's HTTP client through ``acp-proxy serve --record``
to the SDK agent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_proxy
from tests.transport.http.helpers import record_sdk_http_run, rows


@pytest.fixture(scope="module")
def http_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("show-http") / "http.db"
    record_sdk_http_run(db)
    return db


def _show(db: Path, *flags: str) -> str:
    done = run_proxy(["show", str(db), *flags], env={"NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    return done.stdout.decode()


def _events(db: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (kind, json.loads(detail) if detail else {})
        for kind, detail in rows(db, "SELECT kind, detail FROM events ORDER BY id")
    ]


def _connection_id(db: Path) -> str:
    return next(d["connection"] for k, d in _events(db) if k == "http" and "connection" in d)


def _index(lines: list[str], text: str, start: int = 0) -> int:
    for n in range(start, len(lines)):
        if text in lines[n]:
            return n
    raise AssertionError(f"{text!r} not printed after line {start}:\n" + "\n".join(lines))


def test_show_prints_each_http_event_beside_its_frames(http_db: Path) -> None:
    cid = _connection_id(http_db)
    lines = _show(http_db).splitlines()
    conn = f"Acp-Connection-Id {cid}"
    order = [
        "-> initialize #0",
        f"· HTTP POST 200 initialize #0 · {conn}",
        f"· HTTP GET 200 · {conn}",
        "· SSE connection stream opened",
        "-> session/new #1",
        f"· HTTP POST 202 session/new #1 · {conn}",
        "-- session sess_1",
        "-> session/prompt #2",
        f"· HTTP POST 202 session/prompt #2 · {conn} · Acp-Session-Id sess_1",
        "<- session/request_permission #0",
        f"· HTTP POST 202 #0 · {conn}",  # the client's answer, with the request it answers
        f"· HTTP DELETE 202 · {conn}",
        f"· HTTP DELETE: the connection ends · {conn}",
    ]
    at = 0
    for text in order:
        at = _index(lines, text, at) + 1
    # The client opens the session's stream beside its first prompt, not necessarily first:
    # both come under the session's heading, the stream's events in their own order.
    opened = _index(lines, "-- session sess_1")
    opened = _index(lines, f"· HTTP GET 200 · {conn} · Acp-Session-Id sess_1", opened) + 1
    _index(lines, "· SSE session stream sess_1 opened", opened)
    closes = [d for k, d in _events(http_db) if k == "sse_close"]
    session_close = next(d for d in closes if d["session"] == "sess_1")
    first, last = session_close["first_id"], session_close["last_id"]
    count = session_close["events"]
    assert count >= 4 and last - first + 1 == count
    closed = f"· SSE session stream sess_1 closed by proxy: {count} events, ids {first}-{last}"
    _index(lines, closed)
    _index(lines, "· SSE connection stream closed by proxy")


_FRAME_LINE = re.compile(r"^\s+(\d+)\s+\d+\.\d+s (?:->|<-) ")
_EVENT_LINE = re.compile(r"^\s+\d+\.\d+s ·  (.+)$")


def test_show_raw_puts_every_event_between_the_frames_recorded_around_it(http_db: Path) -> None:
    printed: list[tuple[str, Any]] = []
    texts: list[str] = []
    for line in _show(http_db, "--raw").splitlines():
        if m := _FRAME_LINE.match(line):
            printed.append(("frame", int(m.group(1))))
        elif m := _EVENT_LINE.match(line):
            printed.append(("event", len(texts)))
            texts.append(m.group(1))
    # the order of the wall clocks the recorder wrote (a frame before an event of its time)
    stamped = [(ts, 0, seq) for seq, ts in rows(http_db, "SELECT seq, ts FROM frames")]
    stamped += [(ts, 1, eid) for eid, ts in rows(http_db, "SELECT id, ts FROM events")]
    expected: list[tuple[str, Any]] = []
    n = 0
    for _ts, is_event, key in sorted(stamped):
        expected.append(("event", n) if is_event else ("frame", key))
        n += is_event
    assert printed == expected
    assert len(texts) == len(_events(http_db)) >= 10
    assert any(t.startswith("HTTP POST 202 session/prompt #2") for t in texts)


def test_show_json_has_the_events_in_order_and_in_the_timelines(http_db: Path) -> None:
    data = json.loads(_show(http_db, "--json"))
    conn = data["connections"][0]
    recorded = _events(http_db)
    assert [(e["kind"], e["detail"]) for e in conn["transportEvents"]] == recorded
    places = [e["afterSeq"] for e in conn["transportEvents"]]
    assert places == sorted(places) and places[-1] == conn["frames"]
    # in the session's timeline: the POST of the prompt right after the prompt itself
    items = conn["sessions"][0]["items"]
    prompt = next(n for n, i in enumerate(items) if i.get("method") == "session/prompt")
    post = items[prompt + 1]
    assert post["kind"] == "transport" and post["variant"] == "http"
    assert post["payload"]["rpc"] == "session/prompt" and post["payload"]["status"] == 202
    assert post["payload"]["session"] == "sess_1"
    assert post["afterSeq"] >= items[prompt]["seq"]
    kinds = [i.get("variant") for i in conn["items"] if i.get("kind") == "transport"]
    assert kinds[:3] == ["http", "http", "sse_open"]  # initialize POST, the GET, its stream
    assert "http_delete" in kinds
