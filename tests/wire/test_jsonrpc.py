"""classify() and the indexer on arbitrary input: never raise, keep ids exact.

Also checks that the indexer's fast path for notifications gives exactly what the general
path (classify + index_message) gives.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.wire.jsonrpc import classify

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
IDS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63),
    st.text(max_size=12),
    st.sampled_from(["1.0", "-0", "1e3", '"\\u0031"', '"a\\"b"', "1.50"]).map(
        lambda t: json.loads(t) if not t[0].isdigit() and t[0] != "-" else t
    ),
)
METHODS = st.sampled_from(
    ["initialize", "session/new", "session/prompt", "session/update", "_vendor/x", "x"]
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {}
    if draw(st.booleans()):
        msg["jsonrpc"] = draw(st.sampled_from(["2.0", "1.0", 2]))
    if draw(st.booleans()):
        msg["id"] = draw(st.integers(min_value=-5, max_value=2**40) | st.text(max_size=6))
    if draw(st.booleans()):
        msg["method"] = draw(METHODS | st.integers())
    kind = draw(st.sampled_from(["params", "result", "error", "none"]))
    if kind == "params":
        update = draw(
            st.dictionaries(
                st.sampled_from(["sessionUpdate", "messageId", "toolCallId", "plan", "content"]),
                st.sampled_from(["agent_message_chunk", "plan_update", "notice", "m1"]) | JSON,
                max_size=4,
            )
        )
        msg["params"] = draw(
            st.sampled_from(
                [
                    {"sessionId": "s1", "update": update},
                    {"sessionId": 3, "update": update},
                    {"update": update},
                ]
            )
            | JSON
        )
    elif kind in ("result", "error"):
        msg[kind] = draw(JSON)
    return msg


@settings(max_examples=300)
@given(raw=st.binary(max_size=300))
def test_classify_never_raises_on_bytes(raw: bytes) -> None:
    msg = classify(raw)
    assert msg.kind in ("request", "response", "notification", "batch", "invalid")
    ConnectionIndexer().index("c2a", raw)


@settings(max_examples=300)
@given(value=JSON)
def test_classify_any_json(value: Any) -> None:
    raw = json.dumps(value).encode() + b"\n"
    msg = classify(raw)
    if not isinstance(value, (dict, list)) or value == []:
        assert msg.kind == "invalid"


@settings(max_examples=500)
@given(msg=messages(), direction=st.sampled_from(["c2a", "a2c"]))
def test_fast_path_equals_general_path(msg: dict[str, Any], direction: str) -> None:
    raw = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
    fast, general = ConnectionIndexer(), ConnectionIndexer()
    assert fast.index(direction, raw) == general.index_message(direction, classify(raw))  # type: ignore[arg-type]
    assert fast.facts == general.facts


@given(
    rpc_id=st.sampled_from(
        ["1", "1.0", '"1"', "-0", "1e3", '"a\\u0062"', "12345678901234567890123"]
    )
)
def test_ids_keep_their_exact_text(rpc_id: str) -> None:
    raw = (f'{{"jsonrpc":"2.0","id":{rpc_id},"method":"m"}}\n').encode()
    assert classify(raw).id == rpc_id
    answer = (f'{{"jsonrpc":"2.0","id":{rpc_id},"result":{{}}}}').encode()
    assert classify(answer).id == rpc_id


def test_kinds() -> None:
    assert classify(b'{"jsonrpc":"2.0","id":1,"method":"a"}').kind == "request"
    assert classify(b'{"jsonrpc":"2.0","method":"a"}').kind == "notification"
    assert classify(b'{"jsonrpc":"2.0","id":1,"result":1}').kind == "response"
    assert classify(b'{"jsonrpc":"2.0","id":1,"error":{}}').is_error_response
    assert classify(b'[{"jsonrpc":"2.0","method":"a"}]').kind == "batch"
    for bad in (b"", b"\r\n", b"[]", b"{", b"\xff", b"3", b'{"result":1}', b'{"id":1}'):
        assert classify(bad).kind == "invalid", bad
