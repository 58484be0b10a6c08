"""The sans-I/O HTTP/1.1 response reader of the upstream POST client (transport/http/h1.py)."""

from __future__ import annotations

import pytest

from acp_proxy.transport.http.h1 import (
    MAX_HEAD,
    H1Error,
    Response,
    ResponseReader,
    header,
    request_head,
)


def read(*parts: bytes) -> tuple[Response | None, ResponseReader]:
    reader = ResponseReader()
    got = None
    for part in parts:
        got = reader.feed(part)
    return got, reader


def bytewise(raw: bytes) -> Response:
    """Fed one byte at a time: the response comes with the last byte, not before."""
    reader = ResponseReader()
    for i in range(len(raw) - 1):
        assert reader.feed(raw[i : i + 1]) is None, f"a response after {i + 1} bytes"
    got = reader.feed(raw[-1:])
    assert got is not None
    return got


def test_content_length_body_whole_and_byte_by_byte() -> None:
    raw = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{"a": 12}'
    whole, reader = read(raw)
    assert whole == bytewise(raw)
    assert whole is not None and not reader.extra
    assert (whole.status, whole.body, whole.keep_alive) == (200, b'{"a": 12}', True)
    assert whole.headers == [("Content-Type", "application/json"), ("Content-Length", "9")]
    assert header(whole.headers, "CONTENT-type") == "application/json"


def test_chunked_body_with_extensions_and_trailers() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4;name=value\r\nWiki\r\nA\r\npedia in\r\n\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    got = bytewise(raw)
    assert got.body == b"Wikipedia in\r\n" and got.keep_alive


def test_no_length_reads_to_the_end_of_the_connection() -> None:
    got, reader = read(b"HTTP/1.1 200 OK\r\n\r\nsome ", b"bytes")
    assert got is None
    final = reader.eof()
    assert final.body == b"some bytes" and not final.keep_alive


def test_interim_responses_are_skipped_and_no_body_statuses_have_none() -> None:
    got, _ = read(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    )
    assert got is not None and (got.status, got.body) == (202, b"")
    got, _ = read(b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n")
    assert got is not None and got.status == 204 and got.keep_alive


def test_repeated_headers_kept_in_order_values_trimmed() -> None:
    got, _ = read(
        b"HTTP/1.1 503 Service Unavailable\r\nSet-Cookie: a=1\r\nset-cookie:b=2 \r\n"
        b"Content-Length: 4\r\n\r\nbusy"
    )
    assert got is not None and got.status == 503 and got.body == b"busy"
    assert got.headers[:2] == [("Set-Cookie", "a=1"), ("set-cookie", "b=2")]


@pytest.mark.parametrize(
    ("head", "keep_alive"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
            False,
        ),
    ],
)
def test_whether_the_connection_may_be_reused(head: bytes, keep_alive: bool) -> None:
    got, _ = read(head)
    assert got is not None and got.keep_alive is keep_alive


def test_bytes_after_the_response_are_noticed() -> None:
    got, reader = read(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1")
    assert got is not None and got.body == b"x" and reader.extra


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "status line"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "hexadecimal"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", "CRLF"),
    ],
)
def test_what_breaks_the_rules_says_what(raw: bytes, why: str) -> None:
    with pytest.raises(H1Error, match=why):
        read(raw)


def test_a_connection_closed_half_way_is_an_error() -> None:
    _, reader = read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    with pytest.raises(H1Error, match="middle of a response"):
        reader.eof()
    with pytest.raises(H1Error, match="before a response"):
        ResponseReader().eof()


def test_request_head() -> None:
    head = request_head("POST", "/acp?x=1", "h:8", [("Acp-Connection-Id", "c"), ("X", "é")], 5)
    assert head == (
        b"POST /acp?x=1 HTTP/1.1\r\nHost: h:8\r\nAcp-Connection-Id: c\r\nX: \xc3\xa9\r\n"
        b"Content-Length: 5\r\n\r\n"
    )


def test_a_head_or_chunk_line_that_never_ends_is_cut_at_max_head() -> None:
    with pytest.raises(H1Error, match="a response head over"):
        read(b"HTTP/1.1 200 OK\r\nX: ", b"a" * MAX_HEAD)
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    with pytest.raises(H1Error, match="a chunk size line over"):
        read(chunked, b"1" * (MAX_HEAD + 1))
    assert read(chunked, b"1" * MAX_HEAD)[0] is None  # up to the limit: still waiting
