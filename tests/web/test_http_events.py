"""The inspector shows a Streamable HTTP connection's transport events: the JSON API
(``/api/connections/{id}/events``) returns every recorded event in order with the frame it
follows, and the timeline view draws one row per event. Recorded for real: the SDK's HTTP
client through ``acp-proxy serve --record`` to the SDK agent."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.transport.http.helpers import record_sdk_http_run
from tests.web.helpers import rows, web_server
from tests.web.test_browser import CHROMIUM, Page, browser  # noqa: F401


@pytest.fixture(scope="module")
def http_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("web-http") / "http.db"
    record_sdk_http_run(db)
    return db


def _get(url: str, path: str) -> Any:
    with urllib.request.urlopen(url.rstrip("/") + path) as res:
        return json.loads(res.read())


def test_events_api_returns_the_http_events_in_order_with_their_frames(http_db: Path) -> None:
    recorded = [
        (kind, json.loads(detail))
        for kind, detail in rows(http_db, "SELECT kind, detail FROM events ORDER BY id")
    ]
    ids = dict(rows(http_db, "SELECT seq, id FROM frames WHERE connection_id = 1"))
    with web_server(http_db) as url:
        data = _get(url, "/api/connections/1/events")
        with pytest.raises(urllib.error.HTTPError) as missing:
            _get(url, "/api/connections/99/events")
    assert missing.value.code == 404
    events = data["events"]
    assert [(e["kind"], e["detail"]) for e in events] == recorded
    assert {"http", "sse_open", "sse_close", "http_delete"} <= {e["kind"] for e in events}
    for e in events:
        assert e["afterFrameId"] == ids.get(e["afterSeq"])
    post = next(e for e in events if e["detail"].get("rpc") == "session/prompt")
    assert post["text"].startswith("HTTP POST 202 session/prompt #2 · Acp-Connection-Id ")
    assert post["text"].endswith(" · Acp-Session-Id sess_1")
    assert ids[post["afterSeq"]] > ids[1]


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_timeline_view_draws_a_row_per_event(browser: Any, http_db: Path) -> None:  # noqa: F811
    count = rows(http_db, "SELECT count(*) FROM events")[0][0]
    page = Page(browser)
    try:
        with web_server(http_db) as url:
            p = page.page
            p.goto(url + "#view=timeline&c=1")
            p.wait_for_selector("#transport-events tr.tev")
            page.wait_js(
                "n => document.querySelectorAll('#transport-events tr.tev').length === n", count
            )
            kinds = p.eval_on_selector_all(
                "#transport-events tr.tev", "els => els.map(e => e.dataset.kind)"
            )
            assert kinds[0] == "http" and "http_delete" in kinds and "sse_close" in kinds
            text = p.inner_text("#transport-events")
            assert "HTTP POST 202 session/prompt #2" in text
            assert "SSE session stream sess_1 opened" in text
            page.shot("30-http-events")
            # "after frame" links to the frame in the list
            p.click("#transport-events tr.tev >> nth=0 >> td >> nth=1 >> button")
            page.wait_js("() => document.querySelector('#frame-rows .frow.selected') !== null")
    finally:
        page.close()
    assert not page.errors, f"page errors: {page.errors}"
