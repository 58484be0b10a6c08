"""Arbitrary byte streams through the real proxy and an echoing agent, compared by hash.

Whatever goes in (invalid UTF-8, CRLF, blank lines, NULs, no final newline, long lines)
must come out unchanged, and the recording must hold exactly those bytes cut into lines.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ECHO_AGENT, frames_of, incident_lines, run_proxy

PIECES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(
        [
            b"\n",
            b"\r\n",
            b"\r",
            b"\n\n",
            b"\xff\xfe\xc3(",
            b"\x00",
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}',
            b'{"jsonrpc":"2.0","id":"x","result":null}',
            b'[{"jsonrpc":"2.0","method":"_vendor/x"}]',
            b"[]",
            "☃ naïve\u2028".encode(),
        ]
    ),
    st.integers(min_value=60_000, max_value=700_000).map(lambda n: b"L" * n),
)
STREAMS = st.lists(PIECES, max_size=40).map(b"".join)


def expected_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=STREAMS)
def test_any_bytes_pass_through_and_are_recorded_exactly(tmp_path: Path, data: bytes) -> None:
    db = tmp_path / f"{hashlib.sha256(data).hexdigest()[:16]}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    done = run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=data, timeout=120)
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(done.stdout).digest() == hashlib.sha256(data).digest()
    frames = frames_of(db)
    c2a = [raw for d, raw in frames if d == "c2a"]
    a2c = [raw for d, raw in frames if d == "a2c"]
    assert c2a == expected_lines(data)
    assert hashlib.sha256(b"".join(a2c)).digest() == hashlib.sha256(data).digest()
    assert incident_lines(done.stderr) == []  # no drop warnings


def test_a_last_line_without_newline_and_blank_lines(tmp_path: Path) -> None:
    data = b"\n\n\r\n{}\r\nabc"
    db = tmp_path / "t.db"
    done = run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=data)
    assert done.stdout == data
    assert [raw for d, raw in frames_of(db) if d == "c2a"] == [
        b"\n",
        b"\n",
        b"\r\n",
        b"{}\r\n",
        b"abc",
    ]
