"""Live OTLP export through the real ``acp-proxy --record --otlp-endpoint`` (issue 16).

The bundled demo client drives the demo agent (v1 and v2: a tool call, a permission
request, a cancel, a reconnect) through the real proxy; a real OTLP/HTTP receiver decodes
what arrives with the official protobuf messages. The same recording exported with
``export --format otlp`` must give the very same spans.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_proxy.formats.otlp import parse_json_line
from tests.peers import PEERS
from tests.peers.otlp_collector import otlp_collector, refused_url, stalled_collector

AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]


def demo_through_proxy(
    db: Path, proxy_args: list[str], protocol: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The demo client, with `acp-proxy --record DB ARGS -- demo agent` as its agent."""
    argv = [sys.executable, "-m", "acp_proxy.demo.client", "--protocol", str(protocol)]
    argv += ["--reconnect", "--", "acp-proxy", "--record", str(db), *proxy_args, "--", *AGENT]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


def exported_spans(db: Path) -> dict[bytes, Any]:
    out = subprocess.run(
        ["acp-proxy", "export", str(db), "--format", "otlp"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    spans = {}
    for line in out.stdout.splitlines():
        for rs in parse_json_line(line).resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    spans[span.span_id] = span
    return spans


def attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        value = getattr(kv.value, kind)
        out[kv.key] = list(v.string_value for v in value.values) if kind == "array_value" else value
    return out


@pytest.mark.parametrize("protocol", [1, 2])
def test_live_spans_tree_and_export_gives_the_same(tmp_path: Path, protocol: int) -> None:
    db = tmp_path / "live.db"
    with otlp_collector() as (url, got):
        run = demo_through_proxy(
            db, ["--otlp-endpoint", url, "--otlp-header", "x-api-key=k1"], protocol
        )
        assert run.returncode == 0, run.stderr
        exported = exported_spans(db)
        live = {s.span_id: s for s in got.wait_spans(len(exported))}
    assert got.paths and set(got.paths) == {"/v1/traces"}
    assert got.headers[0]["x-api-key"] == "k1"
    assert got.headers[0]["content-type"] == "application/x-protobuf"
    # the same spans, byte for byte, live and from the file
    assert set(live) == set(exported)
    for span_id, span in live.items():
        assert span.SerializeToString(deterministic=True) == exported[span_id].SerializeToString(
            deterministic=True
        )

    spans = list(live.values())
    by_id = {s.span_id: s for s in spans}
    names = sorted(s.name for s in spans)
    assert names.count("acp.connection") == 2 and names.count("acp.session") == 2
    turns = [s for s in spans if s.name == "invoke_agent acp-proxy-demo"]
    assert len(turns) == 3  # allowed, cancelled, then rejected after the reconnect
    for turn in turns:
        a = attrs(turn)
        parent = by_id[turn.parent_span_id]
        assert parent.name == "acp.session" and turn.trace_id == parent.trace_id
        assert a["gen_ai.operation.name"] == "invoke_agent"
        assert a["gen_ai.conversation.id"] == "sess_1"
        assert a["gen_ai.agent.name"] == "acp-proxy-demo"
        assert a["acp.protocol_version"] == protocol
    reasons = sorted(attrs(t)["gen_ai.response.finish_reasons"][0] for t in turns)
    assert reasons == ["cancelled", "end_turn", "end_turn"]
    cancelled = next(t for t in turns if attrs(t)["acp.stop_reason"] == "cancelled")
    assert attrs(cancelled)["acp.turn.cancelled"] is True
    tools = [s for s in spans if s.name == "execute_tool read"]
    assert len(tools) == 3 and all(by_id[t.parent_span_id] in turns for t in tools)
    assert sorted(attrs(t)["acp.tool.status"] for t in tools) == sorted(
        ["completed", "failed", "failed" if protocol == 1 else "cancelled"]
    )
    perms = [s for s in spans if s.name == "session/request_permission"]
    assert len(perms) == 3 and all(by_id[p.parent_span_id] in tools for p in perms)
    assert sorted(attrs(p)["acp.permission.outcome"] for p in perms) == [
        "cancelled",
        "selected",
        "selected",
    ]
    replay = "session/load" if protocol == 1 else "session/resume"
    (load,) = [s for s in spans if s.name == replay]
    assert by_id[load.parent_span_id].name == "acp.session"
    assert any(attrs(e).get("acp.replayed") for e in _events(load))
    # content is off by default: the prompt text never leaves
    assert not any("acp.prompt.text" in attrs(t) for t in turns)


def test_otlp_content_flag_puts_the_prompt_text_into_live_spans(tmp_path: Path) -> None:
    db = tmp_path / "content.db"
    with otlp_collector() as (url, got):
        run = demo_through_proxy(db, ["--otlp-endpoint", url, "--otlp-content"], 2)
        assert run.returncode == 0, run.stderr
        assert got.wait_spans(len(exported_spans(db)))
    turns = [s for s in got.spans() if s.name.startswith("invoke_agent")]
    assert turns and any(attrs(t).get("acp.prompt.text") for t in turns)


def _events(span: Any) -> list[Any]:
    return list(span.events)


def test_standard_otel_environment_switches_it_on(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    with otlp_collector() as (url, got):
        run = demo_through_proxy(db, [], 2, env={"OTEL_EXPORTER_OTLP_ENDPOINT": url})
        assert run.returncode == 0, run.stderr
        assert got.wait_spans(len(exported_spans(db)))
    assert {s.name for s in got.spans()} >= {"acp.session", "invoke_agent acp-proxy-demo"}


def test_in_process_recorder_exports_live_too(tmp_path: Path) -> None:
    """ACP_PROXY_RECORDER=thread runs the same writer pipeline in the proxy: same spans."""
    db = tmp_path / "thread.db"
    with otlp_collector() as (url, got):
        run = demo_through_proxy(
            db, ["--otlp-endpoint", url], 2, env={"ACP_PROXY_RECORDER": "thread"}
        )
        assert run.returncode == 0, run.stderr
        exported = exported_spans(db)
        live = {s.span_id: s for s in got.wait_spans(len(exported))}
    assert set(live) == set(exported)
    assert {s.name for s in live.values()} >= {"acp.session", "invoke_agent acp-proxy-demo"}


def _echo(db: Path, url: str, lines: int) -> subprocess.CompletedProcess[bytes]:
    data = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}\n' % i for i in range(lines)
    )
    fixture = PEERS / "echo_agent.py"
    return subprocess.run(
        ["acp-proxy", "--record", str(db), "--otlp-endpoint", url, "--", sys.executable, fixture],
        input=data,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize("collector", ["stalled", "refused"])
def test_dead_collector_changes_nothing_and_drops_are_counted(
    tmp_path: Path, collector: str
) -> None:
    db = tmp_path / f"{collector}.db"
    lines = 3000
    if collector == "stalled":
        with stalled_collector() as url:
            run = _echo(db, url, lines)
    else:
        run = _echo(db, refused_url(), lines)
    assert run.returncode == 0
    expected = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}\n' % i for i in range(lines)
    )
    assert run.stdout == expected  # forwarded unchanged
    rec = sqlite3.connect(db)
    assert rec.execute("SELECT count(*) FROM frames").fetchone()[0] == 2 * lines  # all recorded
    assert rec.execute("SELECT sum(frames_dropped) FROM connections").fetchone()[0] == 0
    drops = rec.execute("SELECT detail FROM events WHERE kind = 'otlp_drop'").fetchall()
    assert drops and sum(int(json.loads(d[0])["spans"]) for d in drops) > 0
    err = run.stderr.decode()
    assert err.count("OTLP export to") == 1  # one line for the incident
    assert "span(s) could not be exported" in err
    assert "Traceback" not in err


def _produced_spans(db: Path) -> int:
    """How many spans the recording makes (``export --format otlp``: the same mapping)."""
    return len(exported_spans(db))


def test_a_flood_to_a_working_collector_counts_every_span_once(tmp_path: Path) -> None:
    """Received + dropped == produced: a span the collector got is never also "dropped"
    (issue 22: 2,224 spans, 2,048 received, 1,712 dropped)."""
    db = tmp_path / "flood.db"
    with otlp_collector() as (url, got):
        run = _echo(db, url, 3000)
        assert run.returncode == 0, run.stderr
        produced = _produced_spans(db)
        rec = sqlite3.connect(db)
        drops = rec.execute("SELECT detail FROM events WHERE kind = 'otlp_drop'").fetchall()
        dropped = sum(int(json.loads(d[0])["spans"]) for d in drops)
        received = len(got.wait_spans(produced - dropped, timeout=10))
    assert received + dropped == produced, (received, dropped, produced)
    err = run.stderr.decode()
    if dropped:  # the exit's line says the same figures
        assert f"{dropped} span(s) could not be exported" in err and f"({received} sent)" in err
    assert "Traceback" not in err


def test_bad_otlp_options_are_one_line_errors(tmp_path: Path) -> None:
    for args in (["--otlp-endpoint", "ftp://x"], ["--otlp-header", "novalue"]):
        run = subprocess.run(
            ["acp-proxy", "--record", str(tmp_path / "x.db"), *args, "--", "true"],
            capture_output=True,
            text=True,
        )
        assert (
            run.returncode == 2
            and "acp-proxy proxy: " in run.stderr
            and "Traceback" not in run.stderr
        )


async def test_ws_record_exports_live_too(tmp_path: Path) -> None:
    from tests.peers.sdk_ws import sdk_prompt_over_ws
    from tests.transport.ws.helpers import SDK_AGENT, ws_server

    db = tmp_path / "ws.db"
    with otlp_collector() as (url, got):
        with ws_server(["--record", str(db), "--otlp-endpoint", url, "--", *SDK_AGENT]) as server:
            await sdk_prompt_over_ws(server.url, "hello over ws")
            server.stop()
        assert server.returncode == 0, server.stderr_text
        exported = exported_spans(db)
        live = {s.span_id: s for s in got.wait_spans(len(exported))}
    assert set(live) == set(exported) and live
    names = {s.name for s in live.values()}
    assert "acp.session" in names and any(n.startswith("invoke_agent") for n in names)
    (root,) = [s for s in live.values() if s.name == "acp.connection"]
    assert attrs(root)["acp.connection.transport"] == "websocket"


def test_the_agent_never_sees_the_collector_settings(tmp_path: Path) -> None:
    probe = (
        "import json, os\n"
        "keys = sorted(k for k in os.environ if 'OTLP' in k)\n"
        "print(json.dumps({'jsonrpc': '2.0', 'method': '_env', 'params': {'keys': keys}}))\n"
    )
    with otlp_collector() as (url, _got):
        args = ["--otlp-endpoint", url, "--otlp-header", "authorization=Bearer s3cret"]
        run = subprocess.run(
            [
                "acp-proxy",
                "--record",
                str(tmp_path / "e.db"),
                *args,
                "--",
                sys.executable,
                "-c",
                probe,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["params"]["keys"] == []


def test_live_exporter_queue_is_bounded_and_every_loss_is_attributed() -> None:
    """In-process: a tiny queue, a working collector; what overflows is counted per connection."""
    from acp_proxy.recorder.writer.otlp_live import LiveExporter, LiveSettings, traces_url

    drops: list[tuple[object, int, str]] = []
    lines: list[str] = []
    with otlp_collector() as (url, got):
        live = LiveExporter(
            LiveSettings(traces_url(url)),
            on_drop=lambda cid, n, why: drops.append((cid, n, why)),
            queue_spans=4,
            warn_line=lines.append,
        )
        live.open("a", 1.0)
        for i in range(50):  # 50 requests answered: 50 spans at once, the queue holds 4
            raw = b'{"jsonrpc":"2.0","id":%d,"method":"x/y","params":{}}' % i
            live.feed("a", "c2a", raw, 2 * i + 1, 1.0, i)
            live.feed("a", "a2c", b'{"jsonrpc":"2.0","id":%d,"result":{}}' % i, 2 * i + 2, 1.0, i)
        live.close("a")
        dropped = live.shutdown(5.0)
        received = len(got.wait_spans(live.sent, timeout=5))
    assert dropped > 0 and live.sent + dropped == 51  # 50 requests + the connection root
    assert received == live.sent
    assert sum(n for _cid, n, _why in drops) == dropped and {c for c, _n, _w in drops} == {"a"}
    assert "queue full" in drops[0][2]
    assert sum("failing" in line for line in lines) == 1  # one line for the incident
