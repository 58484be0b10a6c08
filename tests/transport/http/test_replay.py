"""``acp-proxy replay RECORDING --listen``: a recording served over Streamable HTTP too."""

from __future__ import annotations

import re
from pathlib import Path

from tests.transport.http.helpers import SDK_AGENT, sdk_client_run, serving
from tests.transport.ws.helpers import listening


def test_record_over_http_then_replay_over_http(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    with serving(["--record", str(db), "--", *SDK_AGENT]) as live_server:
        live = sdk_client_run([live_server.url])
    with listening(["replay", str(db), "--listen", "127.0.0.1:0"]) as srv:
        match = re.search(r"Streamable HTTP: (http://\S+)\)", srv.stderr_text)
        assert match, srv.stderr_text
        first = sdk_client_run([match.group(1)])
        second = sdk_client_run([match.group(1)])  # each connection gets a fresh replay
        srv.stop()
    assert first == live and second == live
