"""Recordings shared by the web inspector tests (built once per test session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.web.helpers import make_big_db, make_rich_db, record_session

PROMPTS = ["Please review main.py", "xss please", "bad-utf8 now"]


@pytest.fixture(scope="session")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two connections recorded through the real proxy; the first has three turns."""
    db = tmp_path_factory.mktemp("web-recording") / "session.db"
    record_session(db, PROMPTS)
    record_session(db, ["second connection"])
    return db


@pytest.fixture(scope="session")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100,000 frames in two connections, written straight into SQLite."""
    db = tmp_path_factory.mktemp("web-big") / "big.db"
    make_big_db(db, 100_000)
    return db


@pytest.fixture(scope="session")
def rich_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two connections with known times: turns, plans per turn, a permission prompt."""
    db = tmp_path_factory.mktemp("web-rich") / "rich.db"
    make_rich_db(db)
    return db
