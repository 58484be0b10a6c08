"""The pure rules of the WebSocket transport (acp_proxy.transport.ws.rules), in process."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.transport.address import ListenError, is_loopback, parse_listen
from acp_proxy.transport.ws.rules import (
    Ignore,
    PendingRequests,
    Refuse,
    ToLine,
    clip_reason,
    downstream_response_headers,
    headers_worth_keeping,
    line_to_message,
    message_to_line,
    origin_allowed,
    relay_close,
    token_from,
    token_ok,
    upstream_request_headers,
    ws_url_ok,
)


@given(st.binary().filter(lambda b: b"\n" not in b))
def test_a_text_message_without_newline_is_one_line_and_back(payload: bytes) -> None:
    decision = message_to_line(payload, binary=False)
    assert decision == ToLine(payload + b"\n")
    back, binary = line_to_message(decision.line)
    assert back == payload
    try:
        payload.decode("utf-8")
        assert binary is False
    except UnicodeDecodeError:
        assert binary is True


@given(st.binary(), st.binary())
def test_a_newline_anywhere_is_refused_never_altered(before: bytes, after: bytes) -> None:
    decision = message_to_line(before + b"\n" + after, binary=False)
    assert isinstance(decision, Refuse) and decision.code == 1007


def test_binary_messages_are_ignored_for_stdio() -> None:
    assert isinstance(message_to_line(b"{}", binary=True), Ignore)


def test_line_to_message_keeps_cr_and_unterminated_lines() -> None:
    assert line_to_message(b'{"a":1}\r\n') == (b'{"a":1}\r', False)
    assert line_to_message(b"tail") == (b"tail", False)
    assert line_to_message(b"\n") == (b"", False)
    assert line_to_message(b"\xc3\n") == (b"\xc3", True)


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_listen("0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    assert parse_listen("localhost:1") == ("localhost", 1)
    for bad in ("", "host", ":80", "h:65536", "h:-1", "[::1]9000", "h:x"):
        with pytest.raises(ListenError):
            parse_listen(bad)


def test_is_loopback() -> None:
    for yes in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST", "a.localhost"):
        assert is_loopback(yes), yes
    for no in ("0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.evil.com", ""):
        assert not is_loopback(no), no


def test_tokens() -> None:
    assert token_from({"Authorization": "Bearer abc"}, {}) == "abc"
    assert token_from({"Authorization": "bearer  abc "}, {}) == "abc"
    assert token_from({"Authorization": "Basic abc"}, {}) is None
    assert token_from({}, {"token": "q"}) == "q"
    assert token_ok("abc", "abc") and not token_ok("abd", "abc")
    assert not token_ok(None, "abc") and not token_ok("", "abc")
    assert token_ok("héllo", "héllo")


def test_origins() -> None:
    assert origin_allowed(None, ())
    assert origin_allowed("http://localhost:5173", ())
    assert origin_allowed("http://127.0.0.1", ())
    assert origin_allowed("http://[::1]:8000", ())
    assert not origin_allowed("http://evil.example:8765", ())
    assert not origin_allowed("http://localhost.evil.example", ())
    assert not origin_allowed("null", ())
    assert not origin_allowed("file://", ())
    assert origin_allowed("https://App.Example.com/", ["https://app.example.com"])
    assert not origin_allowed("https://app.example.com.evil", ["https://app.example.com"])
    assert origin_allowed("https://anything", ["*"])


def test_relay_close() -> None:
    assert relay_close(4001, "bye", peer="client") == (4001, "bye")
    assert relay_close(1000, "", peer="upstream") == (1000, "")
    assert relay_close(1005, "", peer="client") == (1000, "")
    assert relay_close(None, "", peer="client") == (1000, "")
    assert relay_close(1006, "", peer="upstream") == (1014, "upstream connection lost")
    assert relay_close(1006, "", peer="client") == (1001, "client went away")
    code, reason = relay_close(1011, "é" * 100, peer="upstream")
    assert code == 1011 and len(reason.encode()) <= 123


@given(st.text())
def test_clip_reason_fits_a_close_frame(reason: str) -> None:
    clipped = clip_reason(reason)
    assert len(clipped.encode()) <= 123
    if len(reason.encode()) <= 123:
        assert clipped == reason


def test_headers_kept_in_recordings_hide_secrets() -> None:
    kept = headers_worth_keeping(
        [
            ("Host", "h"),
            ("Cookie", "a=1; b=2"),
            ("Authorization", "Bearer s3cret"),
            ("Acp-Foo", "x"),
            ("Accept", "*/*"),
        ],
        [("Acp-Connection-Id", "id1"), ("Set-Cookie", "aff=node; Path=/"), ("Date", "now")],
    )
    assert kept == {
        "request": {"Host": "h", "Cookie": "a=…; b=…", "Authorization": "Bearer …", "Acp-Foo": "x"},
        "response": {"Acp-Connection-Id": "id1", "Set-Cookie": "aff=…"},
    }


def test_upstream_headers() -> None:
    request = [
        ("Host", "proxy"),
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", "k"),
        ("Cookie", "a=1"),
        ("Authorization", "Bearer t"),
        ("Acp-X", "1"),
        ("User-Agent", "ua"),
    ]
    assert upstream_request_headers(request, strip_authorization=True) == [
        ("Cookie", "a=1"),
        ("Acp-X", "1"),
        ("User-Agent", "ua"),
    ]
    assert ("Authorization", "Bearer t") in upstream_request_headers(
        request, strip_authorization=False
    )
    assert downstream_response_headers(
        [("Acp-Connection-Id", "u1"), ("Set-Cookie", "s"), ("Server", "x")]
    ) == [("Acp-Connection-Id", "u1"), ("Set-Cookie", "s")]


def test_pending_requests() -> None:
    pending = PendingRequests()
    pending.sent(b'{"jsonrpc":"2.0","id":1,"method":"a"}')
    pending.sent(b'[{"jsonrpc":"2.0","id":"x","method":"b"},{"jsonrpc":"2.0","method":"n"}]')
    pending.sent(b"not json")
    assert pending.ids == {"1", '"x"'}
    pending.received(b'{"jsonrpc":"2.0","id":"1","result":{}}')  # "1" is not 1
    assert not pending.empty
    pending.received(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    pending.received(b'{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}')
    assert pending.empty


def test_ws_url_ok() -> None:
    assert ws_url_ok("ws://127.0.0.1:8765/acp") is None
    assert ws_url_ok("wss://host/acp") is None
    assert ws_url_ok("ftp://h/acp") is not None
    assert ws_url_ok("ws:///acp") is not None
    assert ws_url_ok("ws://h:99999/acp") is not None
