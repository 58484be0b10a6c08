"""The TypeScript SDK's Streamable HTTP client (npm ``@agentclientprotocol/sdk`` 2.4.0,
``createHttpStream``) through ``serve -- AGENT`` and ``serve --upstream`` (the SDK's own
``AcpServer``): it opens a session's stream before it POSTs ``session/load`` for it.

The SDK is installed once per test session with ``npm install`` into a temporary folder;
without ``node`` and ``npm`` the tests are skipped.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import listening_process
from tests.peers import PEERS
from tests.transport.http.helpers import DEMO, URL_RE, rows, serving

SDK = "@agentclientprotocol/sdk@2.4.0"


@dataclass
class TsSdk:
    """A folder with the SDK installed and the test's client and agent scripts beside it."""

    folder: Path
    node: str

    def client(self, url: str, session: str | None = None) -> dict[str, Any]:
        argv = [self.node, str(self.folder / "ts_http_client.mjs"), url]
        done = subprocess.run(
            [*argv, *([session] if session else [])], capture_output=True, timeout=120
        )
        assert done.returncode == 0, done.stderr.decode()
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def agent(self) -> contextlib.AbstractContextManager[str]:
        return listening_process([self.node, str(self.folder / "ts_http_agent.mjs")], URL_RE)


@pytest.fixture(scope="session")
def ts_sdk(tmp_path_factory: pytest.TempPathFactory) -> TsSdk:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the TypeScript SDK's HTTP client")
    folder = tmp_path_factory.mktemp("ts-sdk")
    (folder / "package.json").write_text('{"name": "ts-sdk-test", "private": true}\n')
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", SDK],
        cwd=folder,
        capture_output=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.skip(f"npm install {SDK} failed: {done.stderr.decode()[-500:]}")
    for script in ("ts_http_client.mjs", "ts_http_agent.mjs"):
        shutil.copy(PEERS / script, folder / script)
    return TsSdk(folder, node)


def test_ts_sdk_client_loads_a_session_through_serve_agent(ts_sdk: TsSdk, tmp_path: Path) -> None:
    db = tmp_path / "load.db"
    demo = [*DEMO, "--state", str(tmp_path / "state.json")]
    with serving(["--record", str(db), "--", *demo]) as server:
        seen = ts_sdk.client(server.url)
        refused = ts_sdk.client(server.url, "sess_nope")
    assert seen["errors"] == [] and seen["stopReason"] == "end_turn", seen
    assert seen["loaded"] and "agent_message_chunk" in seen["load"], seen
    # the agent's own refusal reaches the client (not a 404 that closes the connection)
    assert refused["errors"] == ["Resource not found: unknown session sess_nope"], refused
    assert "404" not in server.stderr_text
    # the session GET before the load was held, then served; the refused one ended
    gets = rows(
        db,
        "select connection_id, json_extract(detail, '$.status') from events where kind='http'"
        " and json_extract(detail, '$.method')='GET' and json_extract(detail, '$.session')"
        " is not null",
    )
    assert [status for _, status in gets] == [200, 200, 200], gets
    # the held stream of the refused load ends with the refusal, before the client's DELETE
    refused_conn = gets[-1][0]
    ends = rows(
        db,
        "select kind, json_extract(detail, '$.by') from events where connection_id=?"
        " and kind in ('sse_close', 'http_delete') order by id",
        refused_conn,
    )
    assert ends[0] == ("sse_close", "refused"), ends


def test_ts_sdk_client_loads_a_session_through_serve_upstream(
    ts_sdk: TsSdk, tmp_path: Path
) -> None:
    db = tmp_path / "up.db"
    with ts_sdk.agent() as upstream:
        direct = ts_sdk.client(upstream)
        with serving(["--upstream", upstream, "--record", str(db)]) as server:
            via = ts_sdk.client(server.url)
            refused = ts_sdk.client(server.url, "nope")
    assert direct["errors"] == [] and direct["loaded"], direct
    # (the load's update and its answer come on two streams: which one the SDK reads first
    # varies, directly too, so the updates seen during the load are not compared)
    same = ("errors", "updates", "stopReason", "loadSession", "loaded")
    assert {k: via.get(k) for k in same} == {k: direct.get(k) for k in same}
    assert refused["errors"] == ["unknown session nope"], refused
    sql = "select count(*) from frames where method='session/load' and direction='c2a'"
    loads = rows(db, sql)
    assert loads == [(2,)]
