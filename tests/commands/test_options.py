"""The reader commands' selection options through the real executable: a single-valued
option given twice is refused (never silently the last one), ``replay -s`` selects a
session, and ``stats`` counts connections as ``ls`` lists them.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.commands.test_errors import one_line
from tests.conftest import ECHO_AGENT, run_proxy

PING = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n'


@pytest.fixture
def two_connections(tmp_path: Path) -> Path:
    db = tmp_path / "two.db"
    for _ in range(2):
        assert run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=PING).returncode == 0
    return db


@pytest.mark.parametrize(
    ("command", "option", "values"),
    [
        ("show", "--connection", ["-c", "1", "-c", "2"]),
        ("show", "--session", ["-s", "a", "--session", "b"]),
        ("check", "--connection", ["-c", "1", "-c", "2"]),
        ("stats", "--connection", ["-c", "1", "--connection", "2"]),
        ("dump", "--connection", ["-c", "1", "-c", "2"]),
        ("export", "--connection", ["-c", "1", "-c", "2"]),
        ("replay", "--connection", ["-c", "1", "-c", "2"]),
        ("replay", "--session", ["-s", "a", "-s", "b"]),
    ],
)
def test_a_single_valued_option_given_twice_is_refused(
    two_connections: Path, command: str, option: str, values: list[str]
) -> None:
    done = run_proxy([command, str(two_connections), *values])
    given = ", ".join(values[1::2])
    assert one_line(done, code=2) == f"Error: {option} takes one value; it was given 2 ({given})"
    assert done.stdout == b""


def test_a_single_valued_option_given_once_still_selects(two_connections: Path) -> None:
    done = run_proxy(["show", str(two_connections), "-c", "2"])
    assert done.returncode == 0, done.stderr
    assert b"== connection 2 " in done.stdout and b"== connection 1 " not in done.stdout


def test_replay_has_a_short_session_option(two_connections: Path) -> None:
    done = run_proxy(["replay", str(two_connections), "-s", "sess_nope"])
    assert one_line(done) == "Error: unknown session sess_nope: it is not in this recording"


def test_stats_counts_a_connection_without_frames_as_ls_lists_it(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    done = run_proxy(["--record", str(db), "--", *ECHO_AGENT])
    assert done.returncode == 0
    ls = run_proxy(["ls", str(db), "--json"])
    assert len(ls.stdout.splitlines()) == 1 and orjson.loads(ls.stdout)["frame_count"] == 0
    stats = run_proxy(["stats", str(db)])
    assert stats.stdout.splitlines()[0] == b"1 connection(s), 0 session(s), 0 frames, 0B"
    assert orjson.loads(run_proxy(["stats", str(db), "--json"]).stdout)["connections"] == 1


@pytest.mark.parametrize(
    ("option", "values"),
    [("--connection", ["-c", "1", "-c", "2"]), ("--session", ["-s", "a", "-s", "b"])],
)
def test_search_refuses_a_single_valued_option_given_twice(
    two_connections: Path, option: str, values: list[str]
) -> None:
    done = run_proxy(["search", str(two_connections), "session", *values])
    given = ", ".join(values[1::2])
    assert one_line(done, code=2) == f"Error: {option} takes one value; it was given 2 ({given})"
    assert done.stdout == b""
