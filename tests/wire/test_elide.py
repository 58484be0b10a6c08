"""Huge frames are indexed from their envelope: long JSON strings elided, the columns equal."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.acp import index as index_module
from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.wire.jsonrpc import elide_long_strings

LONG = "x" * 5000


def test_long_strings_become_empty_and_short_ones_stay() -> None:
    raw = orjson.dumps({"a": LONG, "b": 's"q\\', "c": [LONG, "é"], "d": {"k": LONG}}) + b"\n"
    assert orjson.loads(elide_long_strings(raw)) == {
        "a": "",
        "b": 's"q\\',
        "c": ["", "é"],
        "d": {"k": ""},
    }
    short = b'{"a":"b"}\n'
    assert elide_long_strings(short) is short


@given(
    st.recursive(
        st.text() | st.integers(-(2**63), 2**63 - 1) | st.none(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_any_json_stays_json_with_the_same_short_strings(value: object) -> None:
    raw = orjson.dumps(value)
    assert orjson.loads(elide_long_strings(raw, limit=10**9)) == value
    orjson.loads(elide_long_strings(raw, limit=3))  # still valid JSON


def test_a_huge_frame_gets_the_columns_of_its_full_parse(monkeypatch: object) -> None:
    frames = [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "image", "data": LONG * 4}]},
        },
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s1",
                "update": {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "t1",
                    "content": LONG * 4,
                },
            },
        },
    ]
    full = ConnectionIndexer()
    expected = [full.values("c2a", orjson.dumps(f) + b"\n") for f in frames]
    monkeypatch.setattr(index_module, "HUGE_FRAME_BYTES", 1000)  # type: ignore[attr-defined]
    seen: list[int] = []

    def spy(raw: bytes) -> bytes:
        out = elide_long_strings(raw)
        seen.append(len(raw) - len(out))
        return out

    monkeypatch.setattr(index_module, "elide_long_strings", spy)  # type: ignore[attr-defined]
    elided = ConnectionIndexer()
    assert [elided.values("c2a", orjson.dumps(f) + b"\n") for f in frames] == expected
    assert len(seen) == 2 and min(seen) > 4 * len(LONG) - 10  # the long strings were cut
