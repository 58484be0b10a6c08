"""The committed example recordings import cleanly and hold what they promise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from acp_proxy.acp.updates import KNOWN_VARIANTS
from tests.formats.helpers import cli, rows

RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


@pytest.fixture(scope="module", params=["v1-load.jsonl", "v2-resume-replay.jsonl"])
def imported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = RECORDINGS / request.param
    assert source.is_file(), f"missing {source}: run python scripts/make_recordings.py"
    db = tmp_path_factory.mktemp("rec") / "rec.db"
    done = cli("import", str(source), str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("imported 2 connection(s) (1->1, 2->2)")
    # Re-exporting gives the committed bytes back; redaction finds nothing to replace.
    # (the header names the acp-proxy version that wrote it: compare it without that)
    committed = source.read_bytes().splitlines()
    again = cli("export", str(db), "--no-redact").stdout.splitlines()
    assert again[1:] == committed[1:]
    header = orjson.loads(committed[0])
    assert header["format"] == "acp-proxy-recording" and header["redacted"] is False
    assert {**orjson.loads(again[0]), "created_by": None} == {**header, "created_by": None}
    redacted = cli("export", str(db)).stdout.splitlines()
    assert b'"redacted":true' in redacted[0]
    assert redacted[1:] == committed[1:]
    return db


def _methods(db: Path, cid: int) -> set[object]:
    return {r[0] for r in rows(db, "SELECT method FROM frames WHERE connection_id = ?", (cid,))}


def _updates(db: Path, cid: int) -> set[object]:
    q = "SELECT update_kind FROM frames WHERE connection_id = ? AND update_kind IS NOT NULL"
    return {r[0] for r in rows(db, q, (cid,))}


def _before_response(db: Path, cid: int, method: str) -> list[object]:
    """update kinds between the request ``method`` and its response, in order."""
    q = "SELECT kind, method, update_kind FROM frames WHERE connection_id = ? ORDER BY seq"
    out: list[object] = []
    inside = False
    for kind, m, update in rows(db, q, (cid,)):
        if m == method and kind == "request":
            inside = True
        elif m == method and kind == "response":
            return out
        elif inside and update is not None:
            out.append(update)
    raise AssertionError(f"no response to {method}")


def test_recordings_hold_the_scenarios(imported: Path) -> None:
    versions = rows(imported, "SELECT protocol_version FROM connections ORDER BY id")
    version = versions[0][0]
    assert versions == [(version,), (version,)] and version in (1, 2)
    unanswered = rows(
        imported, "SELECT count(*) FROM frames WHERE kind='response' AND method IS NULL"
    )
    assert unanswered == [(0,)]  # every response follows its request
    first = _methods(imported, 1)
    assert {"initialize", "session/new", "session/prompt", "session/request_permission"} <= first
    assert "session/cancel" in first
    for cid in (1, 2):
        kinds = _updates(imported, cid)
        assert "notice" in kinds, cid
        assert kinds - KNOWN_VARIANTS, f"connection {cid} has no unknown update variant"
    if version == 1:
        assert "session/load" in _methods(imported, 2)
        replay = _before_response(imported, 2, "session/load")
        assert "user_message_chunk" in replay and "agent_message_chunk" in replay
        assert "notice" not in replay
    else:
        assert "session/resume" in _methods(imported, 2)
        (params,) = rows(
            imported,
            "SELECT raw FROM frames WHERE connection_id = 2 AND method = 'session/resume' "
            "AND kind = 'request'",
        )
        assert orjson.loads(params[0])["params"]["replayFrom"] == {"type": "start"}  # type: ignore[arg-type]
        replay = _before_response(imported, 2, "session/resume")
        assert {"user_message", "agent_message"} <= set(replay)
        assert "notice" not in replay


def test_readme_lists_the_files() -> None:
    readme = (RECORDINGS / "README.md").read_text()
    for path in RECORDINGS.glob("*.jsonl"):
        assert path.name in readme


def test_the_script_regenerates_normalized_recordings(tmp_path: Path) -> None:
    """scripts/make_recordings.py runs the demo through the real proxy and writes exports."""
    script = RECORDINGS.parent / "scripts" / "make_recordings.py"
    done = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)],
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    for name in ("v1-load.jsonl", "v2-resume-replay.jsonl"):
        lines = (tmp_path / name).read_bytes().splitlines()
        records = [orjson.loads(line) for line in lines]
        conns = [r for r in records if r["type"] == "connection"]
        assert conns[0]["started_at"] == 1767225600.01 and len(conns) == 2
        assert all(c["pid"] is None and c["agent_command"][0] == "python" for c in conns)
        stamps = [r["ts"] for r in records if "ts" in r]
        assert all(1767225600 < ts < 1767225700 for ts in stamps)
        # same records as the committed copy, up to the interleaving of the two directions
        committed = (RECORDINGS / name).read_bytes().splitlines()
        assert len(lines) == len(committed)
        assert {r["type"] for r in records} == {
            "header", "connection", "frame", "stderr", "event", "end"
        }  # fmt: skip
        assert records[-1] == orjson.loads(committed[-1])
