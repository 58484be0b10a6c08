"""``show``, ``stats`` and ``reindex`` on real recordings made through the real proxy."""

from __future__ import annotations

import os
import pty
import shutil
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import proxy_exe, run_proxy
from tests.peers.scripted_client import record_v1, record_v2


@pytest.fixture(scope="module")
def v1_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("v1") / "v1.db"
    record_v1(db)
    return db


@pytest.fixture(scope="module")
def v2_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("v2") / "v2.db"
    record_v2(db, prompts=2)
    return db


def out(args: list[str], code: int = 0, env: dict[str, str] | None = None) -> str:
    done = run_proxy(args, env=env)
    assert done.returncode == code, done.stderr.decode()
    return done.stdout.decode()


def test_show_v1_conversation(v1_db: Path) -> None:
    text = out(["show", str(v1_db), "--connection", "1"])
    assert "\x1b[" not in text  # piped: no colour
    lines = text.splitlines()
    assert lines[0].startswith("== connection 1 · stdio")
    assert "protocol v1" in lines[0] and "agent: scripted-agent 0.1" in lines[0]
    assert "client: test-client" in lines[0]
    assert "-- session sess_1" in lines
    # who said what, in order; chunks of one v1 message read as one text
    want = [
        "-> session/prompt #3",
        "you: say hello",
        "thought",
        "│ thinking",
        "agent",
        "Hello, world",
        "plan",
        "[x] Say hello (high)",
        "[ ] Write file (low)",
        "tool [call_1] Write file (edit) completed",
        "> wrote 3 bytes",
        "<- session/request_permission #1",
        "mode code",
        "notice warning (live-only) MCP server unavailable",
        "unknown update _vendor_x",
        '{"sessionUpdate":"_vendor_x","payload":{"n":1}}',
        "agent",
        "Done.",
        "-> session/prompt #4",
        "you: fail",
    ]
    pos = 0
    for needle in want:
        while pos < len(lines) and needle not in lines[pos]:
            pos += 1
        assert pos < len(lines), f"{needle!r} missing or out of order in:\n{text}"
        pos += 1
    assert "stopReason=end_turn" in text
    assert "error -32603: boom" in text
    assert "outcome=selected allow" in text
    assert "session sess_1: 2 turns" in text


def test_show_v1_load_marks_replayed_history(v1_db: Path) -> None:
    text = out(["show", str(v1_db), "-c", "2"])
    assert "-> session/load #2" in text
    replayed = [ln for ln in text.splitlines() if ln.endswith("(replayed)")]
    assert any(" user" in ln for ln in replayed) and any(" agent" in ln for ln in replayed)
    assert "earlier answer" in text  # two replayed chunks read as one message


def test_show_v2_folds_entities(v2_db: Path) -> None:
    text = out(["show", str(v2_db)])
    assert "protocol v2" in text
    assert "messageId=msg_user_3" in text
    assert "user [msg_user_3]" in text and "question 0" in text
    assert "thought [m3]" in text
    # agent_message [A], chunk B, agent_message [C] renders [C]
    i = text.index("agent [m3]")
    assert text[i:].splitlines()[1].strip() == "C"
    assert "tool [call_3] Run tests (execute) completed" in text and "> 3 passed" in text
    assert "terminal [t3] $ pytest exit 0" in text and "| collected 3 items" in text
    assert "plan [p1]" in text and "[~] Check (high)" in text
    assert "compaction [cmp3] completed" in text and "## Retained" in text
    assert "usage 53000/200000 tokens, 0.045 USD" in text
    assert "state requires_action" in text and "state idle (end_turn)" in text
    assert "notice info (live-only) Retrying model request" in text
    assert '{"sessionUpdate":"_vendor_x","payload":{"n":3}}' in text
    assert "-> _vendor/ping #5" in text and "error -32601: nope" in text
    assert "session sess_1: 2 turns" in text


def test_show_json_is_the_reconstructed_state(v2_db: Path) -> None:
    data = orjson.loads(out(["show", str(v2_db), "--json"]))
    (conn,) = data["connections"]
    assert conn["protocolVersion"] == 2 and conn["agentInfo"]["name"] == "scripted-agent"
    (session,) = conn["sessions"]
    assert session["sessionId"] == "sess_1"
    assert session["facts"]["state"] == "idle" and session["facts"]["stopReason"] == "end_turn"
    entities = [i for i in session["items"] if i["item"] == "entity"]
    messages = {(e["type"], e["id"]): e for e in entities}
    assert messages[("agent_message", "m3")]["content"] == [{"type": "text", "text": "C"}]
    assert messages[("agent_thought", "m3")]["text"] == "hmm"  # same id, other type
    assert messages[("terminal", "t3")]["outputText"] == "collected 3 items\n"
    assert messages[("compaction", "cmp3")]["fields"]["status"] == "completed"
    notices = [i for i in session["items"] if i.get("kind") == "notice"]
    assert len(notices) == 2 and all(n["liveOnly"] for n in notices)
    unknown = [i for i in session["items"] if i.get("kind") == "unknown"]
    assert [u["payload"] for u in unknown] == [
        {"sessionUpdate": "_vendor_x", "payload": {"n": 3}},
        {"sessionUpdate": "_vendor_x", "payload": {"n": 4}},
    ]
    prompts = [i for i in session["items"] if i.get("method") == "session/prompt"]
    assert [p["result"] for p in prompts] == [
        {"messageId": "msg_user_3"},
        {"messageId": "msg_user_4"},
    ]
    assert all(p["latencyMs"] >= 0 for p in prompts)
    assert [t["stopReason"] for t in conn["turns"]] == ["end_turn", "end_turn"]
    # order of first appearance: the user message precedes the thought and the answer
    order = [(e["type"], e["id"]) for e in entities][:3]
    assert order == [
        ("user_message", "msg_user_3"),
        ("agent_thought", "m3"),
        ("agent_message", "m3"),
    ]


def test_show_session_filter_and_raw(v1_db: Path) -> None:
    text = out(["show", str(v1_db), "--session", "sess_1"])
    assert text.count("== connection") == 2  # the session spans both connections
    assert "initialize" not in text  # connection-level items are left out
    raw = out(["show", str(v1_db), "--raw", "-c", "1"])
    assert '"sessionUpdate": "agent_message_chunk"' in raw  # frames as recorded, not folded
    assert raw.count("[agent_message_chunk]") == 3
    assert "-> request session/new #2" in raw and "<- response session/new #2" in raw


def on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """Run ``acp-proxy ARGS`` with its stdout on a pseudo-terminal; return what it wrote."""
    base = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    base["PAGER"] = "cat"  # (on a terminal, long output goes through the pager)
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [*proxy_exe(), *args], stdout=child, stderr=subprocess.DEVNULL, env={**base, **env}
    )
    os.close(child)
    data = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO once the child side is closed
            break
        if not chunk:
            break
        data += chunk
    os.close(main)
    assert proc.wait(timeout=60) == 0
    return data


def test_show_colour_on_a_terminal_only(v2_db: Path) -> None:
    coloured = on_a_terminal(["show", str(v2_db)], {})
    assert b"\x1b[" in coloured and b"session/prompt" in coloured
    assert b"\x1b[" not in on_a_terminal(["show", str(v2_db)], {"NO_COLOR": "1"})
    assert "\x1b[" not in out(["show", str(v2_db)])  # piped: plain


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--session", "nope"], "no session 'nope' in this recording"),
        (["--connection", "9"], "no connection 9 in this recording"),
    ],
)
def test_show_bad_input_is_one_line(v1_db: Path, args: list[str], message: str) -> None:
    done = run_proxy(["show", str(v1_db), *args])
    assert done.returncode == 1
    assert done.stderr.decode().strip() == f"Error: {message}"


@pytest.mark.parametrize("command", ["show", "stats", "reindex"])
def test_bad_files_are_one_line_errors(tmp_path: Path, command: str) -> None:
    missing = run_proxy([command, str(tmp_path / "missing.db")])
    assert missing.returncode == 1 and missing.stderr.decode().count("\n") == 1
    assert "no such recording" in missing.stderr.decode()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    done = run_proxy([command, str(junk)])
    assert done.returncode == 1 and "Traceback" not in done.stderr.decode()
    assert "not a usable acp-proxy recording" in done.stderr.decode()


def test_stats_counts_latency_and_turns(v1_db: Path) -> None:
    data = orjson.loads(out(["stats", str(v1_db), "--json"]))
    db = sqlite3.connect(v1_db)
    (frames,) = db.execute("SELECT count(*) FROM frames").fetchone()
    assert data["frames"] == frames and data["connections"] == 2
    methods = {(m["method"], m["direction"]): m for m in data["methods"]}
    prompt = methods[("session/prompt", "c2a")]
    assert (prompt["requests"], prompt["responses"], prompt["errors"]) == (3, 3, 1)
    assert prompt["p50Ms"] is not None and prompt["p50Ms"] <= prompt["p99Ms"] <= prompt["maxMs"]
    perm = methods[("session/request_permission", "a2c")]
    assert perm["requests"] == 2  # the agent's requests, paired in the other direction
    assert methods[("session/update", "a2c")]["notifications"] == 23
    (sess,) = data["sessions"]
    assert sess["sessionId"] == "sess_1" and sess["connections"] == [1, 2]
    assert sess["turns"] == 3 and sess["unfinished"] == 0
    assert sess["stopReasons"] == {"end_turn": 2, "(error response)": 1}
    updates = {u["variant"]: u["count"] for u in data["updates"]}
    assert updates["agent_message_chunk"] == 8 and updates["_vendor_x"] == 2
    text = out(["stats", str(v1_db)])
    assert "session/prompt" in text and "sess_1" in text and "end_turn x2" in text


def test_stats_v2_turns_end_at_idle(v2_db: Path) -> None:
    data = orjson.loads(out(["stats", str(v2_db), "--json"]))
    (sess,) = data["sessions"]
    assert sess["turns"] == 2 and sess["stopReasons"] == {"end_turn": 2}
    assert sess["totalMs"] >= sess["maxMs"] >= sess["p50Ms"] > 0


def test_reindex_rederives_columns_and_facts(v1_db: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(v1_db, copy)
    cols = "kind, rpc_id, method, session_id, update_kind, entity_type, entity_id"
    db = sqlite3.connect(copy)
    before = db.execute(f"SELECT seq, {cols} FROM frames ORDER BY connection_id, seq").fetchall()
    db.execute(
        "UPDATE frames SET kind = NULL, rpc_id = NULL, method = NULL, session_id = NULL, "
        "update_kind = NULL, entity_type = NULL, entity_id = NULL"
    )
    db.execute("UPDATE connections SET protocol_version = NULL, agent_info = NULL")
    db.commit()
    done = run_proxy(["reindex", str(copy)])
    assert done.returncode == 0, done.stderr
    assert "reindexed 41 frames in 2 connection(s)" in done.stderr.decode()
    after = db.execute(f"SELECT seq, {cols} FROM frames ORDER BY connection_id, seq").fetchall()
    # everything the live recorder derived is back ...
    assert len(after) == len(before)
    for b, a in zip(before, after, strict=True):
        # only a method the recorder could not know yet may be new (index 3 is method)
        assert a == (b if b[3] is not None else (*b[:3], a[3], *b[4:]))
    # ... and responses recorded before their request got their method too
    assert db.execute(
        "SELECT count(*) FROM frames WHERE kind = 'response' AND method IS NULL"
    ).fetchone() == (0,)
    assert (
        db.execute("SELECT protocol_version, agent_info FROM connections").fetchall()
        == [(1, '{"name":"scripted-agent","version":"0.1"}')] * 2
    )
    again = run_proxy(["reindex", str(copy)])
    assert "0 row(s) changed" in again.stderr.decode()


RECORDINGS = Path(__file__).resolve().parents[2] / "recordings"


@pytest.mark.parametrize("name", ["v1-load.jsonl", "v2-resume-replay.jsonl"])
def test_show_and_stats_on_the_example_recordings(tmp_path: Path, name: str) -> None:
    source = RECORDINGS / name
    if not source.exists():
        pytest.skip(f"{source} is not in this checkout")
    db = tmp_path / "example.db"
    out(["import", str(source), str(db)])
    text = out(["show", str(db)])
    assert "(replayed)" in text  # connection 2 takes the session back with a replay
    assert "(live-only)" in text and "unknown update _vendor_demo" in text
    replayed = [ln for ln in text.splitlines() if "(replayed)" in ln]
    assert not [ln for ln in replayed if "notice" in ln]  # notices are not replayed history
    data = orjson.loads(out(["show", str(db), "--json"]))
    assert len(data["connections"]) == 2
    stats = orjson.loads(out(["stats", str(db), "--json"]))
    (sess,) = stats["sessions"]
    assert sess["turns"] >= 2 and sess["unfinished"] == 0


def test_stats_tells_sessions_apart_by_lineage(tmp_path: Path) -> None:
    # The demo records a v1 sess_1 (connection 1, taken back by session/load on 2) and an
    # unrelated v2 sess_1 of another agent process (connection 3, resumed on 4).
    db = tmp_path / "demo.db"
    out(["demo", "--db", str(db), "--quiet", "--delay", "0"])
    data = orjson.loads(out(["stats", str(db), "--json"]))
    sessions = sorted(data["sessions"], key=lambda s: s["connections"])
    assert [(s["sessionId"], s["connections"]) for s in sessions] == [
        ("sess_1", [1, 2]),
        ("sess_1", [3, 4]),
    ]
    assert [s["turns"] for s in sessions] == [3, 3]  # a prompt and a cancel each, one after
    rows = sqlite3.connect(db).execute(
        "SELECT connection_id IN (1, 2), count(*), sum(size) FROM frames "
        "WHERE session_id = 'sess_1' GROUP BY 1 ORDER BY 1 DESC"
    )
    assert [(s["frames"], s["bytes"]) for s in sessions] == [(n, b) for _, n, b in rows]
    text = out(["stats", str(db)])
    assert text.startswith("4 connection(s), 2 session(s),")
    assert "sess_1 (conn 1,2)" in text and "sess_1 (conn 3,4)" in text
