"""The writer's live measures (recorder.writer.measures), in process: the live check counts
what ``acp-proxy check``'s checker finds on the same rows, batch boundaries and all."""

from __future__ import annotations

import json
from collections import Counter

from acp_proxy.acp.conformance import ConnectionChecker
from acp_proxy.recorder import ipc
from acp_proxy.recorder.writer.measures import Measures, live_check_wanted
from acp_proxy.recorder.writer.rows import Rows, RowsOp
from acp_proxy.wire.frame import Frame


def _line(**message: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


MESSAGES = [
    ("c2a", _line(id=1, method="session/prompt", params={"sessionId": "s"})),  # before initialize
    ("c2a", _line(id=2, method="initialize", params={"protocolVersion": 1})),
    ("a2c", _line(id=2, result={"protocolVersion": 1})),
    ("a2c", _line(id=99, result={})),  # answers no request
    ("a2c", _line(id=2, result={})),  # answers it twice
    ("c2a", _line(id=3, method="session/new", params={"cwd": "/", "mcpServers": []})),
    ("a2c", b"{not json"),
] * 3  # never answered: session/prompt and session/new, at the end


def test_live_findings_are_those_the_checker_finds_on_the_stored_rows() -> None:
    conn = object()
    rows = Rows()
    items: list[ipc.Item] = [ipc.Control(conn, "open", {"transport": "websocket"})]
    items += [ipc.Whole(conn, d, 0.0, n, raw, False) for n, (d, raw) in enumerate(MESSAGES)]
    items += [ipc.Drops(conn, 2, 10), ipc.Control(conn, "close", {})]
    measures = Measures(live_check=True)
    stored = []
    for start in range(0, len(items), 4):  # in batches, as the writer takes them
        ops = rows.build(items[start : start + 4])
        measures.observe_ops(ops)
        stored += [row for op in ops if isinstance(op, RowsOp) for row in op.frames]
    # what `acp-proxy check` does with the connection row and its frames
    checker = ConnectionChecker(1, transport="websocket", frames_dropped=2)
    found = checker.drain()
    for row in stored:
        found += checker.feed(Frame(0, 1, row[1], row[2], row[3], row[4], bytes(row[5])))
    found += checker.finish()
    expected = Counter((f.rule, f.tier, f.side or "recorder") for f in found)
    snapshot = measures.snapshot()
    assert {(r, t, s): n for r, t, s, n in snapshot["findings"]} == dict(expected)
    assert any(rule == "recording.incomplete" for rule, _t, _s in expected)  # the drops
    assert {side for _r, _t, side in expected} >= {"client", "agent", "recorder"}
    assert snapshot["check_cpu"] >= 0
    assert json.loads(ipc.measures_line(snapshot)[2:]) == snapshot  # it travels as JSON


def test_no_live_check_unless_asked() -> None:
    assert "findings" not in Measures(live_check=False).snapshot()
    assert not live_check_wanted({})
    assert not live_check_wanted({"ACP_PROXY_LIVE_CHECK": "0"})
    assert live_check_wanted({"ACP_PROXY_LIVE_CHECK": "1"})


def test_a_failing_measure_stops_measuring_never_the_recording() -> None:
    """A bug in the live check (here: a row it cannot read) is one line; what was counted
    stays, and the writer goes on (observe_ops returns)."""
    said: list[str] = []
    measures = Measures(live_check=True, warn=said.append)
    conn = object()
    rows = Rows()
    ops = rows.build([ipc.Control(conn, "open", {}), ipc.Whole(conn, "a2c", 0.0, 1, b"{", False)])
    measures.observe_ops(ops)
    counted = measures.snapshot()["findings"]
    assert counted  # framing.json
    broken = [RowsOp(op.conn, [(None,)], []) if isinstance(op, RowsOp) else op for op in ops]
    measures.observe_ops(broken)
    measures.observe_ops(ops)  # stopped: nothing more is counted
    assert measures.stopped and len(said) == 1 and said[0].startswith("metrics: live measures")
    assert measures.snapshot()["findings"] == counted
