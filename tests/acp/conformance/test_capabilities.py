"""The capability table, row by row: a request without the capability is flagged, with it not.

Each row of :data:`~acp_proxy.acp.conformance.capabilities.REQUIREMENTS` (and of the prompt
content table) is fed through the real checker twice: once after an ``initialize`` whose
receiver advertised nothing, once after one that advertised what the row names.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_proxy.acp.conformance.capabilities import (
    CONTENT_REQUIREMENTS,
    REQUIREMENTS,
    Requirement,
    required_capability,
)
from acp_proxy.replay.engine import LOAD_FLAG
from tests.acp.conformance.helpers import (
    SID,
    A,
    C,
    Line,
    ok,
    rq,
    run_engine,
    v1_prelude,
    v2_prelude,
)

FAMILY_EXAMPLE = {
    "session/": "session/new",
    "fs/": "fs/read_text_file",
    "terminal/": "terminal/create",
}

ROWS = [
    *((row, "") for row in REQUIREMENTS),
    *((row, block) for block, rows in CONTENT_REQUIREMENTS.items() for row in rows),
]


def _advertising(row: Requirement) -> Any:
    """Capabilities that meet ``row``: its path set to true (a flag) or ``{}``."""
    value: Any = True if row.need == "flag" else {}
    for key in reversed(row.path):
        value = {key: value}
    return value


def _frames(row: Requirement, block: str, version: int, meets: bool) -> tuple[list[Line], str]:
    method = FAMILY_EXAMPLE.get(row.method, row.method)
    caps = _advertising(row) if meets else {}
    auth = [{"id": "x", "name": "x"}] if meets and row.need == "auth-methods" else []
    prelude = v1_prelude if version == 1 else v2_prelude
    if row.holder == "agent":
        frames = (
            prelude(agent_caps=caps) if version == 1 else v2_prelude(agent_caps=caps, auth=auth)
        )
    else:
        frames = prelude(client_caps=caps)
    params: dict[str, Any] = {"sessionId": SID, "cwd": "/w", "path": "/w/a", "command": "ls"}
    if block:
        params["prompt"] = [{"type": block, "data": "", "mimeType": "x/y", "resource": {}}]
    request = rq(9, method, **params)
    frames.append(C(request) if row.holder == "agent" else A(request))
    frames.append(A(ok(9)) if row.holder == "agent" else C(ok(9)))
    return frames, row.text.replace("{method}", method)


@pytest.mark.parametrize(("row", "block"), ROWS, ids=lambda r: getattr(r, "text", r))
def test_each_requirement_is_flagged_without_and_kept_with_its_capability(
    row: Requirement, block: str
) -> None:
    for version in (1, 2) if row.versions == "all" else (int(row.versions[1]),):
        frames, text = _frames(row, block, version, meets=False)
        seq = len(frames) - 1
        reasons = [
            f.reason
            for f in run_engine(frames)
            if f.rule == "lifecycle.capabilities" and seq in f.seqs
        ]
        assert any(r.endswith(text) for r in reasons), (version, reasons)
        if row.need == "absent":
            continue  # the method does not exist on this version: nothing advertises it
        frames, text = _frames(row, block, version, meets=True)
        reasons = [
            f.reason
            for f in run_engine(frames)
            if f.rule == "lifecycle.capabilities" and seq in f.seqs
        ]
        assert not any(r.endswith(text) for r in reasons), (version, reasons)


def test_replay_advertises_the_capability_the_table_names_for_session_load() -> None:
    assert required_capability("client", "session/load", 1) == (LOAD_FLAG,) == ("loadSession",)
    # v2 has no session/load: what it needs there is only capabilities.session
    assert required_capability("client", "session/load", 2) == ("session",)
