"""The one definition of what differs between two runs: entity ids, timestamps, trace context."""

from __future__ import annotations

import copy

from acp_proxy.acp.volatile import VOLATILE, scrub, scrub_parsed


def test_ids_timestamps_and_trace_context_are_masked_at_any_depth() -> None:
    value = {
        "sessionId": "s1",
        "update": {
            "toolCallId": "call_8f3a",
            "content": [{"type": "terminal", "terminalId": "t-1"}],
            "updatedAt": "2026-12-02T01:00:00Z",
            "_meta": {"traceparent": "00-abc-01", "tracestate": "x", "keep": 1},
        },
        "optionId": "allow",  # chosen by the agent's author, not minted: compared
    }
    assert scrub(value) == {
        "sessionId": VOLATILE,
        "update": {
            "toolCallId": VOLATILE,
            "content": [{"type": "terminal", "terminalId": VOLATILE}],
            "updatedAt": VOLATILE,
            "_meta": {"traceparent": VOLATILE, "tracestate": VOLATILE, "keep": 1},
        },
        "optionId": "allow",
    }
    assert value["sessionId"] == "s1"  # a copy: the input is untouched
    # a member that appears is still a difference; traceparent outside _meta is content
    assert scrub({"a": 1}) != scrub({"a": 1, "messageId": "m"})
    assert scrub({"traceparent": "x"}) == {"traceparent": "x"}


def test_nesting_deeper_than_the_recursion_limit() -> None:
    deep: object = {"messageId": "m"}
    for _ in range(5000):
        deep = [deep]
    out = scrub(deep)
    for _ in range(5000):
        assert isinstance(out, list)
        out = out[0]
    assert out == {"messageId": VOLATILE}


def test_in_place_scrub_gives_what_the_copying_one_gives() -> None:
    values: list[object] = [
        {
            "sessionId": "s1",
            "update": {
                "toolCallId": {"nested": {"messageId": "m"}},  # a volatile object: one mask
                "content": [{"terminalId": "t-1"}, [{"createdAt": 5}], "sessionId", 3],
                "_meta": {"traceparent": "00-abc-01", "baggage": [1], "keep": {"x": 1}},
            },
            "traceparent": "content outside _meta",
        },
        [{"_meta": {"tracestate": "x"}}, {"a": [{"_meta": [{"baggage": "b"}]}]}],
        "text",
        7,
        None,
    ]
    for value in values:
        held = copy.deepcopy(value)
        assert scrub_parsed(held) == scrub(value)
        assert held == scrub(value)  # in place: the value itself is the scrubbed one
    deep: list[object] = [{"messageId": "m"}]
    for _ in range(5000):  # deeper than the recursion limit
        deep = [deep]
    expected = scrub(deep)
    assert scrub_parsed(deep) is deep
    for _ in range(5000):
        assert isinstance(deep, list) and isinstance(expected, list)
        deep, expected = deep[0], expected[0]  # type: ignore[assignment]
    assert deep == expected == [{"messageId": VOLATILE}]
