"""acp.span_records: span ids, W3C traceparent, content text and a span's capped events."""

from __future__ import annotations

from acp_proxy.acp.span_records import (
    CONTENT_LIMIT,
    MAX_EVENTS,
    SpanEvent,
    SpanRecord,
    cap,
    content_text,
    derive_id,
    parse_traceparent,
    str_or_none,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def test_derive_id_is_deterministic_sized_and_depends_on_every_part() -> None:
    a = derive_id(64, "conn", "1")
    assert a == derive_id(64, "conn", "1")
    assert 0 < a < 2**64
    assert derive_id(64, "conn", "2") != a
    assert derive_id(64, "conn1") != derive_id(64, "conn", "1")
    assert 64 < derive_id(128, "x").bit_length() <= 128


def test_parse_traceparent_reads_valid_w3c_headers_only() -> None:
    meta = {"traceparent": f" 00-{TRACE.upper()}-{PARENT}-01 ", "tracestate": "k=v"}
    assert parse_traceparent(meta) == (int(TRACE, 16), int(PARENT, 16), "k=v")
    assert parse_traceparent({"traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": ""}) == (
        int(TRACE, 16),
        int(PARENT, 16),
        None,
    )
    for bad in (
        None,
        {"traceparent": 5},
        {"traceparent": f"ff-{TRACE}-{PARENT}-01"},  # version ff is invalid
        {"traceparent": f"00-{'0' * 32}-{PARENT}-01"},  # all-zero trace id
        {"traceparent": f"00-{TRACE}-{'0' * 16}-01"},
        {"traceparent": f"00-{TRACE}-{PARENT}"},
    ):
        assert parse_traceparent(bad) is None


def test_content_text_joins_text_blocks_and_tool_call_content() -> None:
    assert content_text({"type": "text", "text": "hi"}) == "hi"
    tool = [{"type": "content", "content": {"type": "text", "text": "a"}}, {"type": "text"}]
    assert content_text([*tool, {"type": "text", "text": "b"}]) == "ab"
    assert content_text({"type": "image", "data": "..."}) == ""
    assert content_text("plain") == ""


def test_cap_and_str_or_none() -> None:
    assert cap("x" * (CONTENT_LIMIT + 5)) == "x" * CONTENT_LIMIT
    assert cap("short") == "short"
    assert (str_or_none(""), str_or_none(3), str_or_none("a")) == (None, None, "a")


def _span() -> SpanRecord:
    return SpanRecord(1, 2, None, "turn", "internal", 0)


def test_chunks_of_one_message_fold_into_one_event() -> None:
    span = _span()
    key = ("agent_message_chunk", "m1")
    span.add_event(SpanEvent("chunk", 1, {"acp.content.text": "Hel"}), key)
    span.add_event(SpanEvent("chunk", 2, {"acp.content.text": "lo"}), key)
    span.add_event(SpanEvent("chunk", 3, {"acp.content.text": "!"}), ("agent_message_chunk", "m2"))
    assert [e.attributes["acp.content.text"] for e in span.events] == ["Hello", "!"]
    assert span.events[0].attributes["acp.chunks"] == 2
    assert "acp.chunks" not in span.events[1].attributes


def test_events_past_the_limit_are_counted_not_kept() -> None:
    span = _span()
    for n in range(MAX_EVENTS + 3):
        span.add_event(SpanEvent("e", n))
    assert len(span.events) == MAX_EVENTS
    assert span.events_dropped == 3
    assert span.attributes["acp.events.dropped"] == 3
