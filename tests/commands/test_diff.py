"""``acp-proxy diff`` through the real executable, on real recordings and edited copies.

The committed demo recording (``recordings/v1-load.jsonl``) is imported as A; B is the same
export edited as a session of "today" would differ: every JSON-RPC id, sessionId, messageId
and wall-clock time changed (none of which is a difference), one agent message reworded, one
notice gone, one update more, and the first turn 5 s slower.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.acp.conformance.helpers import write_recording
from tests.conftest import run_proxy

RECORDING = Path(__file__).parents[2] / "recordings" / "v1-load.jsonl"
SECOND = 1_000_000_000


def export_lines(connection: int | None = 1) -> list[dict[str, Any]]:
    rows = [orjson.loads(line) for line in RECORDING.read_bytes().splitlines() if line.strip()]
    return [r for r in rows if connection is None or r.get("connection") in (None, connection)]


def renumber(rows: list[dict[str, Any]]) -> None:
    """Number the frame rows 1, 2, ... again after frames were added or removed."""
    frames = (r for r in rows if r["type"] == "frame")
    for seq, r in enumerate(frames, 1):
        r["seq"] = seq


def imported(tmp: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    """Import export rows (the end line's counts recomputed) into ``tmp/NAME.db``."""
    rows = [r for r in rows if r["type"] != "end"]
    counts = {k: sum(r["type"] == k.rstrip("s") for r in rows) for k in ("connections", "frames")}
    counts |= {
        k: sum(r["type"] == t for r in rows) for k, t in (("events", "event"), ("stderr", "stderr"))
    }
    rows.append({**counts, "type": "end"})
    jsonl = tmp / f"{name}.jsonl"
    jsonl.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    db = tmp / f"{name}.db"
    done = run_proxy(["import", str(jsonl), str(db)])
    assert done.returncode == 0, done.stderr.decode()
    return db


def edit_frames(rows: list[dict[str, Any]], edit: Callable[[dict[str, Any]], Any]) -> None:
    for r in rows:
        if r["type"] == "frame":
            r["text"] = edit(r) or r["text"]


def renumbered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Other ids, sessionIds, messageIds and times: what differs between two runs anyway."""

    def edit(r: dict[str, Any]) -> str:
        msg = orjson.loads(r["text"])
        if "id" in msg and isinstance(msg["id"], int):
            msg["id"] += 100
        text = orjson.dumps(msg).decode()
        return text.replace("sess_1", "sess_42").replace('"msg_', '"other_') + "\n"

    edit_frames(rows, edit)
    for r in rows:
        if "ts" in r:
            r["ts"] += 86400.0
    return rows


def diff(a: Path, b: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_proxy(["diff", str(a), str(b), *args])


def diff_json(a: Path, b: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = diff(a, b, "--json", *args)
    assert done.stderr == b"", done.stderr.decode()
    return done.returncode, orjson.loads(done.stdout)


@pytest.fixture
def yesterday(tmp_path: Path) -> Path:
    return imported(tmp_path, "yesterday", export_lines())


def test_ids_sessions_and_times_alone_are_equal(tmp_path: Path, yesterday: Path) -> None:
    today = imported(tmp_path, "today", renumbered(export_lines()))
    done = diff(yesterday, today)
    assert done.returncode == 0, done.stdout.decode()
    assert done.stdout.decode().splitlines()[-1] == (
        "summary: 0 added, 0 removed, 0 changed, 0 slower: equal"
    )


@pytest.fixture
def today(tmp_path: Path) -> Path:
    rows = renumbered(export_lines())
    frames = [r for r in rows if r["type"] == "frame"]
    by_seq = {r["seq"]: r for r in frames}
    # reworded agent message (seq 11)
    by_seq[11]["text"] = by_seq[11]["text"].replace("Let me look", "I will look")
    # the first turn's response (seq 24) and everything after it 5 s later
    for r in frames:
        if r["seq"] >= 24:
            r["mono_ns"] += 5 * SECOND
    # one more usage update after seq 23
    extra = dict(by_seq[23])
    # the notice (seq 13) is gone
    rows = [r for r in rows if r is not by_seq[13]]
    rows.insert(rows.index(by_seq[23]) + 1, extra)
    renumber(rows)
    return imported(tmp_path, "today", rows)


def test_added_removed_changed_and_slower(yesterday: Path, today: Path) -> None:
    code, doc = diff_json(yesterday, today)
    assert code == 1
    assert doc["summary"] == {
        "removed": 1,
        "added": 1,
        "changed": 1,
        "slower": 1,
        "slower_failing": 0,
        "equal": False,
    }
    (removed,) = doc["removed"]
    assert removed["seq"] == 13 and "[notice]" in removed["what"]
    (added,) = doc["added"]
    # B has two usage updates in a row (#22, #23): either one is the added frame
    assert added["seq"] in (22, 23) and "[usage_update]" in added["what"]
    (changed,) = doc["changed"]
    assert changed["a"]["seq"] == 11 and changed["b"]["seq"] == 11
    assert changed["members"] == [
        {
            "path": "params.update.content.text",
            "old": "Let me look at the project README first.",
            "new": "I will look at the project README first.",
        }
    ]
    (slow,) = doc["timing"]
    assert slow["what"] == "turn" and slow["method"] == "session/prompt"
    assert slow["a"]["seq"] == 5 and slow["b"]["seq"] == 5
    assert slow["b_ms"] - slow["a_ms"] == pytest.approx(5000)
    assert slow["fails"] is False  # reported; a failure only with --fail-slower
    assert doc["alignment"]["exact"] is True
    assert doc["a"] == {"recording": str(yesterday), "connection": 1, "frames": 39}


def test_text_output_names_frames_and_members(yesterday: Path, today: Path) -> None:
    done = diff(yesterday, today)
    assert done.returncode == 1
    out = done.stdout.decode()
    assert "- removed  #13  <- notification session/update [notice]" in out
    assert re.search(r"\+ added    #2[23]  <- notification session/update \[usage_update\]", out)
    assert "~ changed  #11 → #11  <- notification session/update [agent_message_chunk]" in out
    assert (
        'params.update.content.text: "Let me look at the project README first." → '
        '"I will look at the project README first."'
    ) in out
    assert "  slower   #5 → #5  turn session/prompt:" in out
    assert out.splitlines()[-1] == (
        "summary: 1 added, 1 removed, 1 changed, 1 slower (reported only): differ"
    )


def test_ignore_paths_and_the_timing_threshold(yesterday: Path, today: Path) -> None:
    code, doc = diff_json(
        yesterday, today, "--ignore", "update.content.text", "--timing-threshold", "6000"
    )
    assert code == 1  # still one added, one removed
    assert doc["changed"] == [] and doc["timing"] == []
    bad = diff(yesterday, today, "--ignore", "")
    assert bad.returncode == 2 and b"empty ignore path" in bad.stderr


def test_two_connections_of_one_file(tmp_path: Path) -> None:
    both = imported(tmp_path, "both", export_lines(None))
    code, doc = diff_json(both, both, "-c", "1", "-c", "2")
    assert code == 1
    assert (doc["a"]["connection"], doc["b"]["connection"]) == (1, 2)
    assert any("session/load" in f["what"] for f in doc["added"])
    assert any("session/new" in f["what"] for f in doc["removed"])
    same, doc = diff_json(both, both, "-c", "2")
    assert same == 0 and doc["summary"]["equal"] is True


def test_two_demo_runs_are_equal(tmp_path: Path) -> None:
    dbs = []
    for name in ("one", "two"):
        db = tmp_path / f"{name}.db"
        done = run_proxy(["demo", "--db", str(db), "--protocol", "2", "--quiet"], timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        dbs.append(db)
    done = diff(*dbs, "--timing-threshold", "60000")
    assert done.returncode == 0, done.stdout.decode()


def test_bad_input_is_one_line(tmp_path: Path, yesterday: Path) -> None:
    missing = diff(yesterday, tmp_path / "nope.db")
    assert missing.returncode == 1
    assert missing.stderr.decode().strip() == f"Error: no such recording: {tmp_path / 'nope.db'}"
    no_conn = diff(yesterday, yesterday, "-c", "9")
    assert no_conn.returncode == 1
    assert (
        no_conn.stderr.decode().strip() == f"Error: {yesterday}: no connection 9 in this recording"
    )
    empty = tmp_path / "empty.db"
    write_recording(empty, [])
    none = diff(yesterday, empty)
    assert none.returncode == 1
    assert none.stderr.decode().strip() == f"Error: {empty}: no connections recorded"
    three = diff(yesterday, yesterday, "-c", "1", "-c", "1", "-c", "1")
    assert three.returncode == 2 and b"at most twice" in three.stderr


def test_a_chunk_added_to_a_message_is_added_not_a_change(tmp_path: Path, yesterday: Path) -> None:
    rows = export_lines()
    by_seq = {r["seq"]: r for r in rows if r["type"] == "frame"}
    extra = dict(by_seq[20])  # the chunks #20, #21 of one message; one more between them
    extra["text"] = extra["text"].replace("The README says", "Briefly:")
    rows.insert(rows.index(by_seq[20]) + 1, extra)
    renumber(rows)
    code, doc = diff_json(yesterday, imported(tmp_path, "longer", rows))
    assert code == 1
    assert doc["changed"] == [] and doc["removed"] == []
    (added,) = doc["added"]
    assert added["seq"] == 21 and "[agent_message_chunk]" in added["what"]


def test_a_v2_turn_is_timed_to_its_idle_state_update(tmp_path: Path) -> None:
    v2 = RECORDING.with_name("v2-resume-replay.jsonl")
    rows = [orjson.loads(x) for x in v2.read_bytes().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("connection") in (None, 1)]
    a = imported(tmp_path, "v2a", rows)
    frames = [r for r in rows if r["type"] == "frame"]
    idle = next(r for r in frames if '"state":"idle"' in r["text"])
    assert idle["seq"] == 30  # the first turn (prompt #5, acknowledged at #8) ends here
    for r in frames:
        if r["seq"] >= 30:
            r["mono_ns"] += 5 * SECOND
    b = imported(tmp_path, "v2b", rows)
    code, doc = diff_json(a, b)
    assert code == 0  # slower is reported, not a failure by default
    assert doc["summary"] == {
        "removed": 0,
        "added": 0,
        "changed": 0,
        "slower": 1,
        "slower_failing": 0,
        "equal": True,
    }
    # --fail-slower: relative to A's time, or in milliseconds
    for limit, fails in (("50%", True), ("2000%", False), ("4000", True), ("6000ms", False)):
        code, doc = diff_json(a, b, "--fail-slower", limit)
        assert (code, doc["summary"]["slower_failing"]) == ((1, 1) if fails else (0, 0)), limit
    done = diff(a, b, "--fail-slower", "50%")
    assert "! slower   #5 → #5  turn session/prompt: 260ms → 5.3s" in done.stdout.decode()
    assert done.stdout.decode().splitlines()[-1] == (
        "summary: 0 added, 0 removed, 0 changed, 1 slower (1 past --fail-slower): differ"
    )
    bad = diff(a, b, "--fail-slower", "soon")
    assert bad.returncode == 2 and b"'soon' is not PCT% or MS" in bad.stderr
    (slow,) = doc["timing"]
    assert (slow["what"], slow["a"]["seq"], slow["method"]) == ("turn", 5, "session/prompt")
    assert slow["a_ms"] == pytest.approx(260) and slow["b_ms"] == pytest.approx(5260)


def test_lone_surrogates_and_deep_error_data_are_diffed_not_crashed(tmp_path: Path) -> None:
    """Valid JSON that UTF-8 cannot hold (a lone surrogate) and an error ``data`` nested 900
    deep: both are frames a peer can send, and diff names them like any other change."""
    deep = '{"jsonrpc":"2.0","id":99,"error":{"code":-32603,"message":"m","data":%s}}\n'

    def variant(surrogate: str, leaf: str) -> list[dict[str, Any]]:
        rows = export_lines()
        by_seq = {r["seq"]: r for r in rows if r["type"] == "frame"}
        by_seq[11]["text"] = by_seq[11]["text"].replace("Let me look", f"Let me \\{surrogate}")
        error = dict(by_seq[23])
        error["text"] = deep % ("[" * 900 + leaf + "]" * 900)
        rows.insert(rows.index(by_seq[23]) + 1, error)
        renumber(rows)
        return rows

    a = imported(tmp_path, "a", variant("ud800", "1"))
    b = imported(tmp_path, "b", variant("udc00", "2"))
    same = imported(tmp_path, "same", variant("ud800", "1"))
    done = diff(a, same)
    assert (done.returncode, done.stderr) == (0, b""), done.stderr.decode()
    done = diff(a, b)
    assert (done.returncode, done.stderr) == (1, b""), done.stderr.decode()
    out = done.stdout.decode()
    # the lone surrogate is shown as its escape (JSON text, so its backslash doubled)
    assert '"Let me \\\\ud800 at the project README first." → "Let me \\\\udc00' in out
    assert "~ changed  #24 → #24  <- response" in out
    (deep_line,) = [line for line in out.splitlines() if line.startswith("      error.data[0]")]
    assert "…" in deep_line and deep_line.endswith("[0][0]: 1 → 2") and len(deep_line) < 100
    code, doc = diff_json(a, b)
    assert code == 1 and doc["summary"]["changed"] == 2
    (text,), (error,) = (c["members"] for c in doc["changed"])
    assert text["old"] == "Let me \\ud800 at the project README first."
    assert error["path"] == "error.data" + "[0]" * 900
    assert (error["old"], error["new"]) == (1, 2)
