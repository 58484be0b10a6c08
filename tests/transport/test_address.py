"""``--listen`` parsing and the loopback rule every server shares (transport/address.py)."""

from __future__ import annotations

import pytest

from acp_proxy.transport.address import ListenError, check_listen, is_loopback, parse_listen


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("8765", ("127.0.0.1", 8765)),
        (" 0 ", ("127.0.0.1", 0)),
        ("127.0.0.1:9000", ("127.0.0.1", 9000)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
        ("[::1]:8080", ("::1", 8080)),
        ("localhost:1", ("localhost", 1)),
    ],
)
def test_parse_listen_reads_host_and_port(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("[::1]8080", "[ADDRESS]:PORT"),
        ("[::1", "[ADDRESS]:PORT"),
        ("host", "HOST:PORT"),
        (":80", "HOST:PORT"),
        ("127.0.0.1:65536", "0..65535"),
        ("127.0.0.1:http", "0..65535"),
    ],
)
def test_a_bad_listen_value_is_one_message_that_names_it(value: str, says: str) -> None:
    with pytest.raises(ListenError) as caught:
        parse_listen(value)
    message = str(caught.value)
    assert says in message
    assert repr(value) in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST",
        "ip6-localhost",
        "a.localhost",
        "127.0.0.1",
        "127.9.9.9",
        "::1",
        "[::1]",
    ],
)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.com", "localhostx", ""])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_beyond_loopback_needs_a_token() -> None:
    check_listen("127.0.0.1", None)
    check_listen("0.0.0.0", "secret")
    with pytest.raises(ListenError, match="needs --token; the metrics"):
        check_listen("0.0.0.0", None, what="the metrics")
