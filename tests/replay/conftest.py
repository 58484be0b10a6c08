"""Fixtures for the replay tests: SDK agents recorded once per session through the real proxy."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import proxy_exe
from tests.peers import PEERS
from tests.peers.sdk_clients import Observed, run_v1_client, run_v2_client

AGENTS = PEERS
AGENT_V1 = [sys.executable, str(AGENTS / "sdk_agent_v1.py")]
AGENT_V2 = [sys.executable, str(AGENTS / "sdk_agent_v2.py")]
V1_PROMPTS = ["hello", "hello", "second prompt"]
V2_PROMPTS = ["hello", "again"]


@dataclass
class Recorded:
    path: Path
    observed: Observed
    cwd: str

    @property
    def session_id(self) -> str:
        return str(self.observed.results[1][1]["sessionId"])


@pytest.fixture(scope="session")
def v1_recording(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The v1 SDK client talking to the v1 SDK agent through `acp-proxy --record`."""
    tmp = tmp_path_factory.mktemp("v1")
    db = tmp / "v1.db"
    argv = [*proxy_exe(), "--record", str(db), "--", *AGENT_V1]
    observed = asyncio.run(run_v1_client(argv, V1_PROMPTS, str(tmp)))
    return Recorded(db, observed, str(tmp))


@pytest.fixture(scope="session")
def v2_recording(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    tmp = tmp_path_factory.mktemp("v2")
    db = tmp / "v2.db"
    argv = [*proxy_exe(), "--record", str(db), "--", *AGENT_V2]
    observed = asyncio.run(run_v2_client(argv, V2_PROMPTS, str(tmp)))
    return Recorded(db, observed, str(tmp))


def replay_argv(db: Path, *options: str) -> list[str]:
    return [*proxy_exe(), "replay", str(db), *options]
