"""acp.index: the index columns the recorder derives from each frame.

(Its notification fast path is property-tested against the general path in
wire/test_jsonrpc.py, huge frames in wire/test_elide.py.)
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_proxy.acp.index import INDEX_COLUMNS, ConnectionIndexer, IndexColumns


def _raw(**msg: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **msg}) + b"\n"


def test_a_response_takes_the_method_and_session_of_its_request() -> None:
    ix = ConnectionIndexer()
    prompt = _raw(id=3, method="session/prompt", params={"sessionId": "s1", "prompt": []})
    assert ix.index("c2a", prompt) == IndexColumns("request", "3", "session/prompt", "s1")
    answer = ix.index("a2c", _raw(id=3, result={"stopReason": "end_turn"}))
    assert answer == IndexColumns("response", "3", "session/prompt", "s1")


def test_a_session_new_response_names_the_session_it_created() -> None:
    ix = ConnectionIndexer()
    ix.index("c2a", _raw(id="a", method="session/new", params={"cwd": "/"}))
    cols = ix.index("a2c", _raw(id="a", result={"sessionId": "s9"}))
    assert (cols.method, cols.session_id, cols.rpc_id) == ("session/new", "s9", '"a"')


def test_requests_are_paired_per_direction() -> None:
    ix = ConnectionIndexer()
    ix.index("c2a", _raw(id=1, method="initialize", params={"protocolVersion": 2}))
    assert ix.index("c2a", _raw(id=1, result={})).method is None  # not an answer to itself
    assert ix.index("a2c", _raw(id=1, result={"protocolVersion": 2})).method == "initialize"
    assert ix.facts.protocol_version == 2


def test_updates_name_their_kind_and_entity() -> None:
    ix = ConnectionIndexer()
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "t7", "status": "completed"}
    raw = _raw(method="session/update", params={"sessionId": "s1", "update": update})
    cols = ix.index("a2c", raw)
    assert cols.values() == (
        "notification",
        None,
        "session/update",
        "s1",
        "tool_call_update",
        "tool_call",
        "t7",
    )
    assert ix.values("a2c", raw, null=0)[1] == 0  # the recorder's NULL
    assert len(INDEX_COLUMNS) == len(cols.values())


def test_batches_and_junk() -> None:
    ix = ConnectionIndexer()
    batch = orjson.dumps(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "fs/read", "params": {"sessionId": "s1"}},
            {"jsonrpc": "2.0", "id": 2, "method": "fs/read", "params": {"sessionId": "s1"}},
        ]
    )
    assert ix.index("a2c", batch) == IndexColumns("batch", None, "fs/read", "s1")
    assert ix.index("c2a", _raw(id=1, result={})).method == "fs/read"  # its members were paired
    assert ix.index("c2a", b"not json\n").kind == "invalid"
