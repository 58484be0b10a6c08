"""The pure rules of the HTTP half: classifying POSTs, routing agent messages, byte forms."""

from __future__ import annotations

import json

import pytest

from acp_proxy.transport.http import rules
from acp_proxy.transport.http.rules import (
    SseParser,
    StreamRouter,
    accepts_sse,
    classify_post,
    is_json_type,
    parse,
    post_line,
    sse_data,
    sse_events,
)


def test_classify_post() -> None:
    assert classify_post(b"[]").kind == "batch"
    assert classify_post(b"{nope").kind == "invalid"
    assert classify_post(b"3").kind == "invalid"
    init = classify_post(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}')
    assert init.is_initialize and init.id == "1"
    prompt = classify_post(b'{"id":"a","method":"session/prompt","params":{"sessionId":"s"}}')
    assert prompt.session_scoped and prompt.session_id == "s" and prompt.id == "a"
    assert classify_post(b'{"id":5,"result":{}}').kind == "response"
    assert classify_post(b'{"method":"session/cancel","params":{}}').kind == "notification"


EDGE_BODIES = [
    b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"m"}',  # over 64 bits
    b'{"id":1.0,"method":"m"}',
    b'{"id":-0.0,"result":{}}',
    b'{"id":true,"method":"m"}',
    b'{"id":NaN,"method":"m"}',  # json reads NaN, orjson does not
    b'{"id":1e400,"method":"m"}',
    b'\xef\xbb\xbf{"id":1,"method":"m"}',  # a BOM
    b'{"id":"\\ud800","method":"m"}',  # a lone surrogate
    b'{"id":1,"method":"m","params":{"sessionId":"s"},"id":2}',  # a repeated key
    b'\xff{"id":1}',
    b' \n {"id": 7, "method": "m"} \n',
    b"[" * 2000 + b"]" * 2000,  # deeper than orjson reads
    b'{"id":[1],"method":"m"}',
]


def test_classify_post_answers_as_json_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson reads POST bodies first, for speed; the answers are json's, edge cases too."""
    fast = [classify_post(body) for body in EDGE_BODIES]
    monkeypatch.setattr(rules, "_fast_loads", lambda raw: rules._NOT_READ)
    assert fast == [classify_post(body) for body in EDGE_BODIES]
    assert fast[0].id == "123456789012345678901234567890"


def test_id_key_is_the_json_text() -> None:
    for value in [1, -5, 10**30, True, False, 1.5, [1], {"a": 1}]:
        assert rules.id_key(value) == json.dumps(value)
    assert rules.id_key("7") == "7" and rules.id_key(None) is None


def test_router_follows_the_sdk_server() -> None:
    router = StreamRouter()
    # session/new's answer goes to the connection stream and makes the session known
    assert router.route(parse(b'{"id":1,"result":{"sessionId":"s"}}')) is None
    assert "s" in router.sessions
    router.client_sent(
        classify_post(b'{"id":2,"method":"session/prompt","params":{"sessionId":"s"}}')
    )
    assert router.route(parse(b'{"method":"session/update","params":{"sessionId":"s"}}')) == "s"
    assert (
        router.route(
            parse(b'{"id":9,"method":"session/request_permission","params":{"sessionId":"s"}}')
        )
        == "s"
    )
    assert router.route(parse(b'{"id":2,"result":{"stopReason":"end_turn"}}')) == "s"
    # a load keeps the replay and its answer on the connection stream
    router.client_sent(
        classify_post(b'{"id":3,"method":"session/load","params":{"sessionId":"t"}}')
    )
    assert "t" in router.sessions
    assert router.route(parse(b'{"method":"session/update","params":{"sessionId":"t"}}')) is None
    assert router.route(parse(b'{"id":3,"result":{}}')) is None
    assert router.route(parse(b'{"method":"session/update","params":{"sessionId":"t"}}')) == "t"
    # unknown sessions, non-JSON and huge ids go to the connection stream
    assert router.route(parse(b'{"method":"x","params":{"sessionId":"u"}}')) is None
    assert router.route(parse(b"not json")) is None
    assert parse(b'{"id":123456789012345678901234567890}') == {"id": 123456789012345678901234567890}


def test_byte_forms() -> None:
    assert sse_events([(1, b"{}"), (2, b"[]")]) == b"id: 1\ndata: {}\n\nid: 2\ndata: []\n\n"
    assert sse_data(b'{"a": 1}\r\n') == b'{"a": 1}'
    assert post_line(b'{\n"a":\r\n1}') == b'{ "a":  1}\n'
    assert accepts_sse("text/event-stream") and accepts_sse("application/json, */*")
    assert not accepts_sse("application/json") and not accepts_sse(None)
    assert is_json_type("application/json; charset=utf-8") and not is_json_type("text/json")


SSE = (
    b': keepalive\n\nid: 1\ndata: {"a":1}\n\nevent: message\r\nid: 2\r\ndata:x\r\ndata:  y\r\n\r\n'
    b"id: 3\n\nretry: 10\ndata: after an id without data\n\ndata: the last, unended\n"
)
SSE_EVENTS = [
    (b'{"a":1}', b"1"),
    (b"x\n y", b"2"),
    (b"after an id without data", b"3"),
]


def test_sse_parser_events_whole_and_at_every_cut() -> None:
    assert SseParser().feed(SSE) == SSE_EVENTS
    for cut in range(1, len(SSE)):
        parser = SseParser()
        assert parser.feed(SSE[:cut]) + parser.feed(SSE[cut:]) == SSE_EVENTS, cut
    parser = SseParser()
    assert [e for i in range(len(SSE)) for e in parser.feed(SSE[i : i + 1])] == SSE_EVENTS
    assert parser.feed(b"\n") == [(b"the last, unended", None)]


def test_sse_parser_join_for_one_line_and_carriage_returns() -> None:
    assert SseParser(join=b" ").feed(b"data: a\ndata: b\r\r\n\n") == [(b"a b", None)]
