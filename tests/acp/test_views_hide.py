"""What the conversation views must not hide (issue 21): ``show``, ``show --json`` and the
inspector's session page on :mod:`tests.acp.stray`, through the real executable."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import orjson
import pytest

from tests.acp.stray import make_stray_db
from tests.conftest import run_proxy
from tests.web.helpers import web_server

STRAY_SEQS = [8, 11, 16, 19]
"""The client's ``"id": null`` error answers, two in each turn."""


@pytest.fixture(scope="module")
def stray_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("stray") / "stray.db"
    make_stray_db(db)
    return db


def _out(*args: str) -> str:
    done = run_proxy(list(args))
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _stray_lines(text: str) -> list[int]:
    return [int(line.split()[0]) for line in text.splitlines() if "response #null to no" in line]


@pytest.mark.parametrize("session", [[], ["-s", "s1"]], ids=["all", "one-session"])
def test_show_prints_every_stray_answer_in_its_turn(stray_db: Path, session: list[str]) -> None:
    text = _out("show", str(stray_db), *session)
    assert _stray_lines(text) == STRAY_SEQS, text
    # each in place, in the turn it broke into (not in a connection section after it)
    lines = text.splitlines()
    second_turn = next(n for n, line in enumerate(lines) if "session/prompt #3" in line)
    assert [int(x.split()[0]) for x in lines[second_turn:] if "#null" in x] == [16, 19]
    # the v1 chunks around the answers are still one message each turn
    assert text.count("ok ok") == 2


@pytest.mark.parametrize("session", [[], ["-s", "s1"]], ids=["all", "one-session"])
def test_show_json_holds_every_stray_answer_in_the_session(
    stray_db: Path, session: list[str]
) -> None:
    (conn,) = orjson.loads(_out("show", str(stray_db), "--json", *session))["connections"]
    (s1,) = conn["sessions"]
    strays = [i for i in s1["items"] if i.get("kind") == "orphan_response"]
    assert [i["seq"] for i in strays] == STRAY_SEQS
    assert all(i["payload"]["error"]["code"] == -32602 for i in strays)


def test_inspector_session_holds_every_stray_answer(stray_db: Path) -> None:
    with web_server(stray_db) as url:
        base = url.split("?")[0].split("#")[0].rstrip("/")
        with urllib.request.urlopen(base + "/api/connections/1/sessions/s1", timeout=60) as r:
            data = orjson.loads(r.read())
    items = data["session"]["items"]
    assert [i["seq"] for i in items if i.get("kind") == "orphan_response"] == STRAY_SEQS
