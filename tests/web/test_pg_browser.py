"""The inspector on a PostgreSQL store in a real headless Chromium: many hosts, live frames.

``acp-proxy web postgresql://...`` runs as a user runs it; two "hosts" record into the same
database (rows written through :func:`tests.helpers.insert_frames`, as a proxy's writer
commits them); the page lists both hosts' connections with their host and shows frames
committed after it opened without a reload.
"""

from __future__ import annotations

import time
from typing import Any

from acp_proxy.store.pg import connect_pg, frames_transaction
from tests.helpers import insert_frames
from tests.pg_server import PASSWORD
from tests.web.helpers import web_server
from tests.web.test_browser import Page, pytestmark
from tests.web.test_browser import browser as browser  # the module's Chromium (fixture)
from tests.web.test_browser import page as page  # fixture

__all__ = ["pytestmark"]

INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientInfo":{"name":"zed","version":"0.190"}}}\n'
)


def _update(n: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk '
        + str(n).encode()
        + b'"}}}}\n'
    )


def test_many_hosts_and_live_frames_from_postgresql(page: Page, pg_url: str) -> None:
    now = time.time()
    alpha = insert_frames(
        pg_url,
        [("c2a", INIT)],
        connection={"host": "alpha.internal", "started_at": now, "last_seen_at": now},
        index=True,
    )
    beta = insert_frames(
        pg_url,
        [("c2a", INIT)],
        connection={"host": "beta.internal", "started_at": now, "last_seen_at": now},
        index=True,
    )
    with web_server(pg_url) as url:  # type: ignore[arg-type]
        p = page.page
        p.goto(url)
        page.wait_rows(2)
        metas = p.eval_on_selector_all(
            "#connections .conn .conn-meta", "els => els.map(e => e.textContent)"
        )
        text = " ".join(metas)
        assert "host alpha.internal" in text and "host beta.internal" in text, metas
        assert PASSWORD not in p.content()
        # alpha's proxy keeps recording: its frames appear without a reload.
        insert_frames(pg_url, [("a2c", _update(n)) for n in range(3)], connection_id=alpha,
                      first_seq=2, index=True)  # fmt: skip
        page.wait_rows(5)
        previews: Any = page.column("c-preview")
        assert any("chunk 2" in str(v) for v in previews), previews
        page.shot("pg-01-hosts-live")
        # Two writers: alpha's batch draws its id first, beta's commits first. Alpha's frame
        # still appears, in its place in time (before beta's), without a reload.
        slow = connect_pg(pg_url, create=False)
        with frames_transaction(slow):
            insert_frames(slow, [("a2c", _tool_call("late from alpha"))], connection_id=alpha,
                          first_seq=5, start_ts=time.time(), index=True)  # fmt: skip
            insert_frames(pg_url, [("a2c", _tool_call("early from beta"))], connection_id=beta,
                          first_seq=2, start_ts=time.time() + 1, index=True)  # fmt: skip
            page.wait_rows(6)
            time.sleep(0.5)  # the inspector polls while alpha's batch is in progress
        slow.close()
        page.wait_rows(7)
        previews = page.column("c-preview")
        late = [i for i, v in enumerate(previews) if "late from alpha" in v]
        early = [i for i, v in enumerate(previews) if "early from beta" in v]
        assert late and early and late[0] < early[0], previews
        page.shot("pg-02-late-batch")


def _tool_call(title: str) -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
        b'{"sessionUpdate":"tool_call","toolCallId":"t","title":"' + title.encode() + b'"}}}\n'
    )
