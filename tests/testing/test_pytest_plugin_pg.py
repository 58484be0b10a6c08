"""The pytest plugin replaying from a PostgreSQL store (``recording="postgresql://..."``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.pg_mirror import mirror_to_pg
from tests.pg_server import PASSWORD, PgServer
from tests.replay.conftest import AGENT_V1
from tests.testing.test_pytest_plugin import INNER

ON_PG = INNER.replace(
    "@pytest.mark.acp_agent(*AGENT)",
    '@pytest.mark.acp_agent(*AGENT, recording="$INNER_URL", replay_args=["--connection", "1"])',
)


def run_inner(
    tmp: Path, *args: str, agent: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The inner pytest run (as in test_pytest_plugin), with extra environment."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "INNER_AGENT": json.dumps(agent), **(env or {})},
    )


def test_a_test_replays_from_a_database_url(tmp_path: Path, pg_server: PgServer) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    (tmp_path / "test_inner.py").write_text(INNER)
    recorded = run_inner(tmp_path, "--acp-record-mode=once", agent=AGENT_V1)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    db = tmp_path / "recorded.db"
    done = run_inner_import(tmp_path, db)
    assert done == 0
    url = pg_server.database()
    mirror_to_pg(db, url)
    (tmp_path / "test_inner.py").write_text(ON_PG)
    (tmp_path / "acp_recordings").rename(tmp_path / "elsewhere")  # not the file it reads
    env = {"INNER_URL": url}
    # none: replays from the database; the real agent is not even runnable.
    replayed = run_inner(tmp_path, agent=["/nonexistent/agent"], env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "MODE replay" in replayed.stdout
    # once: the database holds the recording, so it replays too.
    again = run_inner(tmp_path, "--acp-record-mode=once", agent=["/nonexistent/agent"], env=env)
    assert again.returncode == 0 and "MODE replay" in again.stdout, again.stdout
    # all would delete the team's recordings: refused in one line.
    refused = run_inner(tmp_path, "--acp-record-mode=all", agent=AGENT_V1, env=env)
    assert refused.returncode == 1
    assert "acp_record_mode=all would delete the recordings in postgresql://acp@" in refused.stdout
    # An empty database: a clear failure, never the password.
    empty = run_inner(tmp_path, agent=AGENT_V1, env={"INNER_URL": pg_server.database()})
    assert empty.returncode == 1
    assert "the database holds no acp-proxy recording" in empty.stdout
    assert PASSWORD not in empty.stdout + empty.stderr


def run_inner_import(tmp: Path, db: Path) -> int:
    from tests.conftest import run_proxy

    jsonl = tmp / "acp_recordings" / "test_inner" / "test_echo.jsonl"
    return run_proxy(["import", str(jsonl), str(db)]).returncode
