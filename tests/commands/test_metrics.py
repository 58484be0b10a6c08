"""``--metrics HOST:PORT``: /metrics, /healthz and /readyz of the real executable.

Every figure is scraped over a real socket and read with prometheus_client's own text
parser, then compared with what the recording holds.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from acp_proxy.recorder.writer.timings import SPEC_METHODS
from tests.conftest import echo_proxy, echo_through, own_pg_server, run_proxy
from tests.transport.test_tls import Pki, pki  # noqa: F401  (the test CA fixture)
from tests.transport.ws.helpers import ws_server

METRICS_RE = re.compile(rb"metrics on (https?://\S+)")
WAIT_SECONDS = 60.0  # the longest a figure may take to show up on a loaded machine


def metrics_url(lines: list[bytes]) -> str:
    """The URL the command printed (``acp-proxy: metrics on URL``)."""
    for line in lines:
        match = METRICS_RE.search(line)
        if match:
            return match.group(1).decode()
    raise AssertionError(f"no metrics URL in {b''.join(lines)!r}")


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    """``GET url`` -> (status, body), an error status included."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def scrape(url: str, token: str | None = None) -> dict[str, float]:
    """Every sample of /metrics as ``name{label=value,...}`` -> value (Prometheus parser)."""
    status, body = get(url, token)
    assert status == 200, body
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def wait_for(
    url: str, ready: Callable[[dict[str, float]], bool], token: str | None = None
) -> dict[str, float]:
    """Scrape until ``ready(samples)``; fail with the last scrape after WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        samples = scrape(url, token)
        if ready(samples) or time.monotonic() > deadline:
            assert ready(samples), samples
            return samples
        time.sleep(0.1)


def store_counts(db: Path) -> tuple[int, dict[str, int], int]:
    """(frames, frames by direction, frames_dropped on the rows) that the SQLite file holds."""
    con = sqlite3.connect(db)
    try:
        by = dict(con.execute("SELECT direction, count(*) FROM frames GROUP BY direction"))
        dropped = con.execute("SELECT coalesce(sum(frames_dropped), 0) FROM connections")
        return sum(by.values()), by, int(dropped.fetchone()[0])
    finally:
        con.close()


def lines_of(n: int, method: str = "session/prompt") -> bytes:
    return b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": {}}).encode() + b"\n"
        for i in range(n)
    )


@pytest.fixture
def stdio_proxy(db_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, list[bytes]]]:
    """``acp-proxy --record DB --metrics 127.0.0.1:0 -- echo_agent``, its metrics URL."""
    proc = echo_proxy(db_path, "--metrics", "127.0.0.1:0")
    assert proc.stderr is not None
    lines = [proc.stderr.readline()]
    drain = threading.Thread(
        target=lambda: lines.extend(iter(proc.stderr.readline, b"")),  # type: ignore[union-attr]
        daemon=True,
    )
    drain.start()
    try:
        yield proc, metrics_url(lines), lines
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(60)


def test_stdio_proxy_metrics_during_and_after_a_run_equal_the_store(
    db_path: Path, stdio_proxy: tuple[subprocess.Popen[bytes], str, list[bytes]]
) -> None:
    proc, url, _ = stdio_proxy
    data = lines_of(200)
    echo_through(proc, data)
    # during the run: forwarded counted at once, recorded once the writer committed
    samples = wait_for(url, lambda s: s["acp_proxy_frames_recorded_total"] >= 400)
    assert samples["acp_proxy_frames_forwarded_total{direction=c2a}"] == 200
    assert samples["acp_proxy_frames_forwarded_total{direction=a2c}"] == 200
    assert samples["acp_proxy_bytes_forwarded_total{direction=c2a}"] == len(data)
    assert samples["acp_proxy_bytes_forwarded_total{direction=a2c}"] == len(data)
    assert samples["acp_proxy_connections_open{transport=stdio}"] == 1
    assert samples["acp_proxy_connections_total{transport=stdio}"] == 1
    assert samples["acp_proxy_store_up"] == 1
    assert samples["acp_proxy_frames_dropped_total"] == 0
    total, by, dropped = store_counts(db_path)
    assert samples["acp_proxy_frames_recorded_total"] == total == 400
    assert by == {"c2a": 200, "a2c": 200}
    assert dropped == 0
    assert get(url.replace("/metrics", "/healthz")) == (200, b"ok\n")
    status, body = get(url.replace("/metrics", "/readyz"))
    assert (status, body) == (200, f"ready: recording to {db_path}\n".encode())
    # after the run (the client is done, the proxy still up): the same, and still the store's
    more = lines_of(50)
    echo_through(proc, more)
    samples = wait_for(  # recorded, and the backlog the writer reports in the same line gone
        url,
        lambda s: (
            s["acp_proxy_frames_recorded_total"] >= 500 and s["acp_proxy_recorder_queue_bytes"] == 0
        ),
    )
    assert samples["acp_proxy_frames_forwarded_total{direction=c2a}"] == 250
    assert samples["acp_proxy_frames_recorded_total"] == store_counts(db_path)[0] == 500
    assert samples["acp_proxy_recorder_queue_bytes"] == 0
    assert samples["acp_proxy_recorder_lag_seconds"] == 0
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(60) == 0


def test_metrics_off_loopback_needs_a_token(db_path: Path, echo_agent: list[str]) -> None:
    result = run_proxy(["--metrics", "0.0.0.0:0", "--record", str(db_path), "--", *echo_agent])
    assert result.returncode == 2
    assert b"needs --metrics-token" in result.stderr
    assert b"Traceback" not in result.stderr
    assert not db_path.exists()  # refused before anything started


def test_metrics_token_is_required_when_given(db_path: Path) -> None:
    proc = echo_proxy(db_path, "--metrics", "127.0.0.1:0", env={"ACP_PROXY_METRICS_TOKEN": "s3"})
    try:
        assert proc.stderr is not None
        url = metrics_url([proc.stderr.readline()])
        for path in ("/metrics", "/healthz", "/readyz"):
            status, body = get(url.replace("/metrics", path))
            assert status == 401, path
            assert body.count(b"\n") == 1
            assert get(url.replace("/metrics", path), token="wrong")[0] == 401
        assert get(url.replace("/metrics", "/healthz"), token="s3") == (200, b"ok\n")
        assert get(f"{url}?token=s3")[0] == 200
        assert "acp_proxy_frames_recorded_total" in scrape(url, token="s3")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(60)


def test_ws_metrics_count_connections_and_frames_as_the_store(tmp_path: Path) -> None:
    import asyncio

    import websockets

    db = tmp_path / "ws.db"
    from tests.conftest import ECHO_AGENT

    with ws_server(["--record", str(db), "--metrics", "127.0.0.1:0", "--", *ECHO_AGENT]) as server:
        url = metrics_url(server.stderr)
        assert scrape(url)["acp_proxy_frames_forwarded_total{direction=c2a}"] == 0
        messages = [lines_of(1).rstrip(b"\n") for _ in range(30)]

        async def talk() -> None:
            for _ in range(2):
                async with websockets.connect(server.url) as ws:
                    for raw in messages:
                        await ws.send(raw.decode())
                        await ws.recv()
                    open_now = scrape(url)["acp_proxy_connections_open{transport=websocket}"]
                    assert open_now == 1

        asyncio.run(talk())
        samples = wait_for(
            url,
            lambda s: (
                s["acp_proxy_frames_recorded_total"] >= 120
                and s["acp_proxy_connections_open{transport=websocket}"] == 0
            ),
        )
        assert samples["acp_proxy_connections_total{transport=websocket}"] == 2
        assert samples["acp_proxy_frames_forwarded_total{direction=c2a}"] == 60
        assert samples["acp_proxy_frames_forwarded_total{direction=a2c}"] == 60
        sent = sum(map(len, messages)) * 2
        assert samples["acp_proxy_bytes_forwarded_total{direction=c2a}"] == sent
        total, by, dropped = store_counts(db)
        assert samples["acp_proxy_frames_recorded_total"] == total == 120
        assert samples["acp_proxy_frames_dropped_total"] == dropped == 0
        assert by == {"c2a": 60, "a2c": 60}


@pytest.fixture
def private_pg() -> Iterator[object]:
    """A PostgreSQL server of this test's own (it is stopped and started again)."""
    yield from own_pg_server("acp-metrics-pg-")


def test_readyz_is_503_with_a_reason_while_postgresql_is_down_and_200_when_back(
    private_pg: object,
) -> None:
    from tests.pg_server import PASSWORD, PgServer

    assert isinstance(private_pg, PgServer)
    pg_url = private_pg.database()
    proc = echo_proxy(pg_url, "--metrics", "127.0.0.1:0")
    try:
        assert proc.stderr is not None
        url = metrics_url([proc.stderr.readline()])
        readyz = url.replace("/metrics", "/readyz")
        echo_through(proc, lines_of(5))
        wait_for(url, lambda s: s["acp_proxy_frames_recorded_total"] >= 10)
        assert get(readyz)[0] == 200
        private_pg.stop("immediate")
        echo_through(proc, lines_of(5))  # forwarding goes on; the writer meets the outage
        samples = wait_for(url, lambda s: s["acp_proxy_store_up"] == 0)
        assert samples["acp_proxy_store_outages_total"] == 1
        status, body = get(readyz)
        assert status == 503
        assert body.startswith(b"not ready: the store postgresql://") and body.count(b"\n") == 1
        assert b"unreachable" in body
        assert PASSWORD.encode() not in body
        private_pg.start()
        samples = wait_for(
            url,
            lambda s: s["acp_proxy_store_up"] == 1 and s["acp_proxy_frames_recorded_total"] >= 20,
        )
        assert samples["acp_proxy_store_outages_total"] == 1
        assert get(readyz)[0] == 200
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(120)


def test_the_image_healthcheck_uses_healthz_with_the_metrics_token(tmp_path: Path) -> None:
    import os
    import sys

    from tests.conftest import ECHO_AGENT

    script = Path(__file__).parents[2] / "docker" / "healthcheck.py"
    env = {"ACP_PROXY_METRICS_TOKEN": "t0k"}
    args = ["--metrics", "127.0.0.1:0", "--", *ECHO_AGENT]
    with ws_server(args, env=env) as server:
        healthz = metrics_url(server.stderr).replace("/metrics", "/healthz")

        def check(**extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, str(script)],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "ACP_PROXY_HEALTH_URL": healthz, **extra},
            )

        assert check(ACP_PROXY_METRICS_TOKEN="t0k").returncode == 0
        refused = check(ACP_PROXY_METRICS_TOKEN="wrong")
        assert refused.returncode == 1
        assert refused.stderr.startswith(f"unhealthy: {healthz}: 401 a valid token")
    gone = check()
    assert gone.returncode == 1 and gone.stderr.startswith(f"unhealthy: {healthz}: <urlopen")


def test_serve_metrics_over_tls_count_http_and_websocket_connections(
    tmp_path: Path,
    pki: Pki,  # noqa: F811
) -> None:
    """``serve --tls-cert/--tls-key --metrics``: /metrics over https with the server's cert."""
    import asyncio

    import websockets

    from tests.transport.http.helpers import DEMO
    from tests.transport.test_tls import INITIALIZE, post_initialize, running

    db = tmp_path / "serve.db"
    args = ["serve", "--listen", "127.0.0.1:0", "--record", str(db), "--metrics", "127.0.0.1:0"]
    tls = ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    agent = [*DEMO, "--state", str(tmp_path / "state")]
    with running([*args, *tls, "--", *agent]) as server:
        url = metrics_url(server.lines)
        assert url == server.url and url.startswith("https://127.0.0.1:")  # said first
        deadline = time.monotonic() + WAIT_SECONDS
        while not (found := re.search(rb"listening on (https://\S+)", b"".join(server.lines))):
            assert time.monotonic() < deadline, server.lines
            time.sleep(0.05)
        acp_url = found.group(1).decode()
        context = pki.client()
        status, _ = asyncio.run(post_initialize(acp_url, context))
        assert status == 200

        async def over_ws() -> None:
            ws_url = acp_url.replace("https://", "wss://")
            async with websockets.connect(ws_url, ssl=context) as ws:
                await ws.send(INITIALIZE.decode())
                await ws.recv()

        asyncio.run(over_ws())

        def https_scrape() -> dict[str, float]:
            with urllib.request.urlopen(url, context=context, timeout=30) as response:
                body = response.read().decode()
            return {
                f"{s.name}{sorted(s.labels.items())}": s.value
                for family in text_string_to_metric_families(body)
                for s in family.samples
            }

        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            samples = https_scrape()
            done = samples.get("acp_proxy_frames_recorded_total[]", 0) >= 4
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert samples["acp_proxy_connections_total[('transport', 'http')]"] == 1
        assert samples["acp_proxy_connections_total[('transport', 'websocket')]"] == 1
        assert samples["acp_proxy_frames_forwarded_total[('direction', 'c2a')]"] == 2
        assert samples["acp_proxy_frames_recorded_total[]"] == store_counts(db)[0] == 4
        with pytest.raises(OSError):  # plain http is not served (the handshake fails)
            urllib.request.urlopen(url.replace("https://", "http://"), timeout=30)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(url, timeout=30)


def test_request_turn_and_first_chunk_histograms_by_spec_method(tmp_path: Path) -> None:
    """Latency per method, measured in the writer; an invented method is ``other``."""
    import os
    import subprocess

    from tests.conftest import proxy_exe
    from tests.transport.http.helpers import DEMO

    db = tmp_path / "turns.db"
    proc = subprocess.Popen(
        [*proxy_exe(), "--record", str(db), "--metrics", "127.0.0.1:0", "--", *DEMO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ACP_PROXY_STATS": ""},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    url = metrics_url([proc.stderr.readline()])

    def ask(rid: int, method: str, params: dict[str, object]) -> dict[str, object]:
        line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        proc.stdin.write(json.dumps(line).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        while True:
            got = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            if got.get("id") == rid and "method" not in got:
                return dict(got)
            if "id" in got and "method" in got:  # the agent asks: permission, a file...
                answer(got)

    def answer(request: dict[str, object]) -> None:
        params = request.get("params") or {}
        result: object = {"content": ""}
        if request["method"] == "session/request_permission":
            option = params["options"][0]["optionId"]  # type: ignore[index,call-overload]
            result = {"outcome": {"outcome": "selected", "optionId": option}}
        line = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        proc.stdin.write(json.dumps(line).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        ask(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = ask(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = new["result"]["sessionId"]  # type: ignore[index]
        ask(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        for i in range(20):  # a peer inventing methods: one label, "other"
            ask(10 + i, f"x/invented-{i}", {})
        samples = wait_for(
            url, lambda s: s.get("acp_proxy_request_duration_seconds_count{method=other}") == 20
        )
    finally:
        proc.stdin.close()
        proc.wait(60)
    count = "acp_proxy_request_duration_seconds_count{{method={}}}"
    assert samples[count.format("initialize")] == 1
    assert samples[count.format("session/new")] == 1
    assert samples[count.format("session/prompt")] == 1
    assert samples[count.format("session/request_permission")] == 1  # the agent's request
    labels = {
        k.split("method=")[1].rstrip("}")
        for k in samples
        if k.startswith("acp_proxy_request_duration_seconds_count")
    }
    assert "other" in labels and labels <= SPEC_METHODS | {"other"}  # whatever the peer sent
    assert samples["acp_proxy_turn_duration_seconds_count"] == 1
    assert samples["acp_proxy_first_chunk_seconds_count"] == 1
    assert (
        0
        < samples["acp_proxy_first_chunk_seconds_sum"]
        <= (samples["acp_proxy_turn_duration_seconds_sum"])
    )
    inf = "acp_proxy_request_duration_seconds_bucket{le=+Inf,method=other}"
    assert samples[inf] == 20
    # the same pairs the store holds: one answered request per response row
    con = sqlite3.connect(db)
    try:
        stored = dict(
            con.execute(
                "SELECT method, count(*) FROM frames WHERE kind = 'response' AND "
                "method IN ('initialize', 'session/new', 'session/prompt') GROUP BY method"
            )
        )
    finally:
        con.close()
    assert stored == {"initialize": 1, "session/new": 1, "session/prompt": 1}


def findings_of(samples: dict[str, float]) -> dict[tuple[str, str, str], float]:
    """``acp_proxy_findings_total`` by (rule, tier, side)."""
    found = {}
    for key, value in samples.items():
        match = re.fullmatch(r"acp_proxy_findings_total\{rule=(.+),side=(.+),tier=(.+)\}", key)
        if match:
            found[(match.group(1), match.group(3), match.group(2))] = value
    return found


def checked_findings(db: Path) -> dict[tuple[str, str, str], float]:
    """What ``acp-proxy check --json`` finds on the stored recording, by (rule, tier, side)."""
    from tests.conftest import proxy_exe

    done = subprocess.run(
        [*proxy_exe(), "check", str(db), "--json", "--max-per-rule", "100000"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr
    counts: dict[tuple[str, str, str], float] = {}
    for connection in json.loads(done.stdout)["connections"]:
        assert connection["suppressed"] == {}, connection  # every finding is listed
        for f in connection["findings"]:
            key = (f["rule"], f["tier"], f["side"] or "recorder")
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_live_findings_equal_what_check_finds_on_the_recording(tmp_path: Path) -> None:
    """An agent that breaks the protocol behind ``ws --metrics``: the writer checks each
    connection live, and ``acp_proxy_findings_total`` by rule, tier and side is what
    ``acp-proxy check`` later finds on the stored frames (end-of-connection rules included)."""
    import asyncio

    import websockets

    from tests.conftest import ECHO_AGENT

    db = tmp_path / "findings.db"
    # the echo agent sends the client's requests back to it: requests the agent may not
    # send, ids it reuses, and the client's requests never answered
    with ws_server(["--record", str(db), "--metrics", "127.0.0.1:0", "--", *ECHO_AGENT]) as server:
        url = metrics_url(server.stderr)
        deadline = time.monotonic() + WAIT_SECONDS  # once the writer has reported (0.1 s)
        while "# TYPE acp_proxy_findings_total counter" not in get(url)[1].decode():
            assert time.monotonic() < deadline, get(url)[1]
            time.sleep(0.05)
        assert findings_of(scrape(url)) == {}  # the family is there, with no sample yet

        async def talk(lines: list[bytes]) -> None:
            async with websockets.connect(server.url) as ws:
                for raw in lines:
                    await ws.send(raw.decode())
                    await ws.recv()

        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
        first = [json.dumps(initialize).encode(), *lines_of(12).splitlines()]
        asyncio.run(talk(first))
        asyncio.run(talk(lines_of(3, "session/new").splitlines()))
        samples = wait_for(
            url,
            lambda s: (
                s["acp_proxy_frames_recorded_total"] >= 2 * (13 + 3)
                and s["acp_proxy_connections_open{transport=websocket}"] == 0
                and bool(findings_of(s))
            ),
        )
        expected = checked_findings(db)
        assert expected, "the echo agent breaks rules"
        # the connections' end is checked once the writer saw their close: poll for it
        deadline = time.monotonic() + WAIT_SECONDS
        while findings_of(samples) != expected and time.monotonic() < deadline:
            time.sleep(0.1)
            samples = scrape(url)
        assert findings_of(samples) == expected
        assert samples["acp_proxy_live_check_cpu_seconds_total"] > 0  # what checking cost
        sides = {side for _rule, _tier, side in expected}
        assert "agent" in sides
        from acp_proxy.acp.rules import RULE_BY_ID

        assert all(rule in RULE_BY_ID for rule, _tier, _side in expected)


def test_live_check_is_off_without_metrics_and_can_be_turned_off(tmp_path: Path) -> None:
    """``ACP_PROXY_LIVE_CHECK=0``: --metrics without the findings family (the writer does
    not check)."""
    import asyncio

    import websockets

    from tests.conftest import ECHO_AGENT

    async def talk_once(ws_url: str) -> None:
        async with websockets.connect(ws_url) as ws:
            await ws.send(lines_of(1).decode().strip())
            await ws.recv()

    db = tmp_path / "off.db"
    args = ["--record", str(db), "--metrics", "127.0.0.1:0", "--", *ECHO_AGENT]
    with ws_server(args, env={"ACP_PROXY_LIVE_CHECK": "0"}) as server:
        url = metrics_url(server.stderr)
        wait_for(url, lambda s: "acp_proxy_store_up" in s)
        asyncio.run(talk_once(server.url))
        wait_for(url, lambda s: s["acp_proxy_frames_recorded_total"] >= 2)
        body = get(url)[1].decode()
        assert "acp_proxy_request_duration_seconds" in body  # the writer did report
        assert "acp_proxy_findings" not in body
        assert "acp_proxy_live_check_cpu_seconds" not in body


@pytest.mark.parametrize("collector", ["working", "refused"])
def test_otlp_spans_exported_and_dropped_are_counted(tmp_path: Path, collector: str) -> None:
    """``--otlp-endpoint`` with ``--metrics``: every span the recording makes (``export
    --format otlp`` maps it the same way) is counted once, as exported (what the collector
    received) or dropped (a collector that refuses connections)."""
    import asyncio
    import contextlib

    import websockets

    from tests.conftest import ECHO_AGENT
    from tests.peers.otlp_collector import otlp_collector, refused_url
    from tests.recorder.writer.test_otlp_live import exported_spans

    pytest.importorskip("opentelemetry.sdk", reason="needs pip install 'acp-proxy[otlp]'")
    db = tmp_path / "otlp.db"
    with contextlib.ExitStack() as stack:
        if collector == "working":
            endpoint, got = stack.enter_context(otlp_collector())
        else:
            endpoint, got = refused_url(), None
        args = ["--record", str(db), "--otlp-endpoint", endpoint, "--metrics", "127.0.0.1:0"]
        server = stack.enter_context(ws_server([*args, "--", *ECHO_AGENT]))
        url = metrics_url(server.stderr)

        async def talk() -> None:
            async with websockets.connect(server.url) as ws:
                for raw in lines_of(20, "session/list").splitlines():
                    await ws.send(raw.decode())
                    await ws.recv()

        asyncio.run(talk())
        wait_for(
            url,
            lambda s: (
                s["acp_proxy_frames_recorded_total"] >= 40
                and s["acp_proxy_connections_open{transport=websocket}"] == 0
            ),
        )
        produced = len(exported_spans(db))
        assert produced > 0
        samples = wait_for(
            url,
            lambda s: (
                s.get("acp_proxy_otlp_spans_exported_total", 0)
                + s.get("acp_proxy_otlp_spans_dropped_total", 0)
                >= produced
            ),
        )
        exported = samples["acp_proxy_otlp_spans_exported_total"]
        dropped = samples["acp_proxy_otlp_spans_dropped_total"]
        assert exported + dropped == produced
        if got is not None:
            assert (exported, dropped) == (len(got.spans()), 0)
        else:
            assert (exported, dropped) == (0, produced)


def test_no_otlp_counters_without_otlp(db_path: Path) -> None:
    proc = echo_proxy(db_path, "--metrics", "127.0.0.1:0")
    try:
        assert proc.stderr is not None
        url = metrics_url([proc.stderr.readline()])
        echo_through(proc, lines_of(2))
        samples = wait_for(url, lambda s: s["acp_proxy_frames_recorded_total"] >= 4)
        assert not any(name.startswith("acp_proxy_otlp") for name in samples)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(60)
