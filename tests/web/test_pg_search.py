"""``acp-proxy web URL``'s text filter searches PostgreSQL's own full-text index.

Through the real executable on a real PostgreSQL: the first search brings the database's
index (what ``acp-proxy search`` keeps: ``search_docs`` under a GIN index) up to date instead
of building a copy of the whole store in memory, and frames recorded after it (on a live
connection and on a new one) are found by the next search.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from acp_proxy.store.pg import connect_pg
from tests.helpers import insert_frames
from tests.web.helpers import web_server


def _update(session: str, text: str) -> bytes:
    params = {
        "sessionId": session,
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
        },
    }
    return orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}) + b"\n"


CANCEL = (
    b'{"jsonrpc":"2.0","id":7,"method":"session/cancel","params":'
    b'{"sessionId":"s2","note":"charlie"}}\n'
)


def _search(base: str, text: str) -> list[dict[str, Any]]:
    parts = urlsplit(base)
    url = f"{parts.scheme}://{parts.netloc}/api/search?q={quote(text)}"
    if parts.query:
        url += f"&{parts.query}"
    with urllib.request.urlopen(url, timeout=60) as resp:
        hits: list[dict[str, Any]] = json.loads(resp.read())["hits"]
    return hits


def _indexed(url: str) -> int:
    """Documents in the database's own index (-1: it has none)."""
    db = connect_pg(url, create=False)
    try:
        if db.execute("SELECT to_regclass('search_docs')").fetchone() == (None,):
            return -1
        return int(db.execute("SELECT count(*) FROM search_docs").fetchone()[0])
    finally:
        db.close()


def test_the_inspector_searches_the_databases_index_and_finds_later_frames(pg_url: str) -> None:
    now = time.time()
    insert_frames(
        pg_url,
        [("a2c", _update("s1", "alpha one")), ("a2c", _update("s1", " and more"))],
        connection={"ended_at": now},
        index=True,
    )
    live = insert_frames(
        pg_url, [("a2c", _update("s2", "bravo"))], connection={"last_seen_at": now}, index=True
    )
    assert _indexed(pg_url) == -1
    with web_server(pg_url) as base:  # type: ignore[arg-type]
        first = _search(base, "alpha")
        assert [(h["connection"], h["session"]) for h in first] == [(1, "s1")]
        assert _indexed(pg_url) == 2  # the chunks of each session joined: one document each
        assert _search(base, "charlie") == []
        # recorded after the first search: on the live connection, then on a new one
        insert_frames(
            pg_url,
            [("c2a", CANCEL)],
            connection_id=live,
            index=True,
            first_seq=2,
        )
        insert_frames(pg_url, [("a2c", _update("s3", "charlie delta"))], index=True)
        found = _search(base, "charlie")
        assert sorted(h["connection"] for h in found) == [live, live + 1]
        assert _indexed(pg_url) == 4
        assert [h["connection"] for h in _search(base, "alpha")] == [1]
