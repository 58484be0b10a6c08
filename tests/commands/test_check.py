"""The ``acp-proxy check`` command line: exit codes, text and JSON output, bad input."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from acp_proxy.acp.rules import RULES
from acp_proxy.cli import cli
from tests.acp.conformance.helpers import (
    BROKEN_V2,
    CLEAN_V1,
    CLEAN_V2,
    SID,
    A,
    C,
    check,
    er,
    nt,
    ok,
    rq,
    up,
    v1_prelude,
    v2_prelude,
    v2_turn,
    write_recording,
)
from tests.acp.stray import make_stray_db


def check_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The same command line in process (click's runner), for the finer cases."""
    result = CliRunner().invoke(cli, ["check", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def test_text_output_groups_by_connection_and_exit_code_gates(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    write_recording(db, [CLEAN_V1, BROKEN_V2, CLEAN_V2])
    done = check(str(db))
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "== connection 1 (stdio, v1, 10 frames): 0 error, 0 warning, 0 info" in out
    assert "== connection 2 (stdio, v2, 9 frames): 1 error, 1 warning, 1 info" in out
    assert "== connection 3 (stdio, v2, 13 frames): 0 error, 0 warning, 0 info" in out
    lines = out.splitlines()
    error_line = next(x for x in lines if "v2.prompt-message-id" in x)
    assert error_line.split()[:3] == ["error", "v2.prompt-message-id", "#6"]
    assert "rule: The session/prompt response returns the inserted user message's messageId" in out
    assert any(x.split()[:3] == ["warning", "v2.stop-reason", "#8"] for x in lines)
    assert any(x.split()[:3] == ["info", "framing.crlf", "#9"] for x in lines)
    assert lines[-1] == (
        "summary: 1 error(s), 1 warning(s), 1 info in 3 connection(s), 32 frames: FAIL"
    )
    assert "\x1b[" not in out  # plain when piped


def test_clean_recording_exits_zero_and_connection_filter(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    write_recording(db, [CLEAN_V1, BROKEN_V2])
    done = check_in_process(str(db), "--connection", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "connection 2" not in done.stdout
    assert done.stdout.splitlines()[-1].endswith("1 connection(s), 10 frames: ok")


def test_json_document_shape(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    write_recording(db, [CLEAN_V1, BROKEN_V2])
    done = check(str(db), "--json")
    assert done.returncode == 1
    doc = orjson.loads(done.stdout)
    assert doc["recording"] == str(db)
    assert doc["summary"] == {
        "error": 1,
        "warning": 1,
        "info": 1,
        "connections": 2,
        "frames": 19,
        "passed": False,
    }
    first, second = doc["connections"]
    assert first == {
        "id": 1,
        "transport": "stdio",
        "protocol_version": 1,
        "frames": 10,
        "counts": {"error": 0, "warning": 0, "info": 0},
        "suppressed": {},
        "findings": [],
    }
    assert [f["rule"] for f in second["findings"]] == [
        "v2.prompt-message-id",
        "v2.stop-reason",
        "framing.crlf",
    ]
    f = second["findings"][0]
    assert set(f) == {
        "rule",
        "tier",
        "side",
        "connection",
        "seqs",
        "session",
        "reason",
        "rule_text",
    }
    assert (f["tier"], f["side"], f["connection"], f["seqs"], f["session"]) == (
        "error",
        "agent",
        2,
        [6],
        SID,
    )
    assert f["reason"].startswith("agent: ")


def test_min_tier_hides_findings_but_not_the_exit_code(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    write_recording(db, [BROKEN_V2])
    done = check_in_process(str(db), "--min-tier", "error", "--json")
    assert done.returncode == 1
    doc = orjson.loads(done.stdout)
    assert [f["rule"] for f in doc["connections"][0]["findings"]] == ["v2.prompt-message-id"]
    assert doc["summary"]["warning"] == 1  # counted, only hidden
    warned = check_in_process(str(db), "--min-tier", "warning")
    assert "framing.crlf" not in warned.stdout and "v2.stop-reason" in warned.stdout


def test_warnings_alone_do_not_fail(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    frames = v2_prelude() + v2_turn()[:-1] + [A(up("state_update", state="idle"))]
    write_recording(db, [frames])
    done = check_in_process(str(db))
    assert done.returncode == 0
    assert "0 error(s), 1 warning(s)" in done.stdout


def test_many_findings_are_capped_and_counted(tmp_path: Path) -> None:
    db = tmp_path / "noisy.db"
    # both sides in turn: not one repeated finding (see test_a_repeated_finding_is_one_row...)
    noise = [(A if i % 2 else C)(b"log line %d\n" % i) for i in range(50)]
    write_recording(db, [v1_prelude() + noise])
    done = check_in_process(str(db), "--max-per-rule", "3", "--json")
    doc = orjson.loads(done.stdout)
    conn = doc["connections"][0]
    assert len(conn["findings"]) == 3
    assert conn["suppressed"] == {"framing.json": 47}
    assert doc["summary"]["error"] == 50
    text = check_in_process(str(db), "--max-per-rule", "3")
    assert "... and 47 more framing.json finding(s)" in text.stdout


def test_dropped_frames_are_noted(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    write_recording(db, [CLEAN_V1])
    conn = sqlite3.connect(db)
    conn.execute("UPDATE connections SET frames_dropped = 4")
    conn.commit()
    conn.close()
    done = check_in_process(str(db), "--json")
    assert done.returncode == 0
    (finding,) = orjson.loads(done.stdout)["connections"][0]["findings"]
    assert finding["rule"] == "recording.incomplete" and "4 frame(s)" in finding["reason"]


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    db = tmp_path / "ok.db"
    write_recording(db, [CLEAN_V1])
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database at all" * 100)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    cases = {
        str(tmp_path / "missing.db"): "no such recording",
        str(tmp_path): "directory",
        str(corrupt): "not a usable acp-proxy recording",
        str(empty): "empty",
    }
    for path, words in cases.items():
        done = check(path)
        assert done.returncode == 1, path
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert words in done.stderr, done.stderr
    unknown = check(str(db), "--connection", "7")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "Error: no connection 7 in this recording"
    edited = tmp_path / "edited.db"  # a row no recorder writes: one line, nothing changed
    write_recording(edited, [CLEAN_V1])
    conn = sqlite3.connect(edited)
    conn.execute("UPDATE frames SET direction = 'zz' WHERE seq = 2")
    conn.commit()
    conn.close()
    before = edited.read_bytes()
    damaged = check(str(edited))
    assert damaged.returncode == 1 and damaged.stdout == ""
    assert damaged.stderr == (
        "Error: the recording is damaged: connection 1, frame #2: a direction neither c2a nor a2c\n"
    )
    assert edited.read_bytes() == before
    usage = check()
    assert usage.returncode == 2 and "missing argument DB" in usage.stderr


def test_rule_listing(tmp_path: Path) -> None:
    done = check_in_process("--rules", "--json")
    assert done.returncode == 0
    rows = orjson.loads(done.stdout)
    assert [r["rule"] for r in rows] == [r.id for r in RULES]
    text = check_in_process("--rules")
    assert "jsonrpc.response-id-echo" in text.stdout and "v2.cancel-idle" in text.stdout


def test_connection_without_initialize_has_no_version(tmp_path: Path) -> None:
    db = tmp_path / "raw.db"
    write_recording(db, [[C(b'{"jsonrpc":"2.0","method":"_hello"}\n')]])
    done = check_in_process(str(db), "--json")
    assert done.returncode == 1
    conn = orjson.loads(done.stdout)["connections"][0]
    assert conn["protocol_version"] is None
    assert [f["rule"] for f in conn["findings"]] == ["lifecycle.initialize-first"]
    text = check_in_process(str(db))
    assert "== connection 1 (stdio, v?, 1 frames): 1 error, 0 warning, 0 info" in text.stdout


def test_findings_name_the_side_the_rule_as_it_applies_and_the_frames(tmp_path: Path) -> None:
    db = tmp_path / "sides.db"
    frames = [
        *v1_prelude(),
        A(up("notice", title="Heads up", severity="info")),  # 5
        A(nt("_acme_custom", n=1)),  # 6
        C(ok(None)),  # 7: the client answers notifications
        C(ok(None)),  # 8
        A(rq(4, "fs/read_text_file", sessionId=SID, path="/a")),  # 9: never answered
    ]
    write_recording(db, [frames])
    done = check(str(db), "--json")
    assert done.returncode == 1, done.stderr
    findings = {f["rule"]: f for f in orjson.loads(done.stdout)["connections"][0]["findings"]}
    answered = findings["jsonrpc.notification-answered"]
    assert (answered["side"], answered["seqs"]) == ("client", [5, 6, 7, 8])
    assert answered["reason"] == (
        "client: #7 and #8 answer notifications `notice` #5 (by time: under 0.1 ms before)"
        " and `_acme_custom` #6 (by time: under 0.1 ms before)"
    )
    assert answered["rule_text"].startswith("The Client MUST NOT reply to a Notification")
    unanswered = findings["jsonrpc.request-answered"]
    assert (unanswered["side"], unanswered["seqs"]) == ("client", [9])
    assert "the Client MUST answer each request of the agent" in unanswered["rule_text"]
    text = check(str(db)).stdout
    assert "client: #7 and #8 answer notifications `notice` #5 (by time: under 0.1 ms" in text
    assert "rule: The Client MUST NOT reply to a Notification" in text
    assert "Server" not in text


def test_answers_to_notifications_name_the_nearest_ones_by_time(tmp_path: Path) -> None:
    """The client answered four extension notifications 2-8 ms after each, between
    ``session/update`` chunks it parsed fine: each answer names the one just before it,
    never a chunk; an answer with nothing before it to pair says so."""
    db = tmp_path / "stray.db"
    make_stray_db(db)
    done = check(str(db), "--json")
    assert done.returncode == 1, done.stderr
    (hit,) = [
        f
        for f in orjson.loads(done.stdout)["connections"][0]["findings"]
        if f["rule"] == "jsonrpc.notification-answered"
    ]
    assert hit["seqs"] == [7, 8, 10, 11, 15, 16, 18, 19]
    assert hit["reason"] == (
        "client: #8, #11, #16 and #19 answer notifications `_acme/a` #7 (by time: 2.0 ms"
        " before), `_acme/b` #10 (by time: 8.0 ms before), `_acme/c` #15 (by time: 3.0 ms"
        " before) and `_acme/d` #18 (by time: 4.0 ms before)"
    )
    lone = tmp_path / "lone.db"
    write_recording(lone, [[*v1_prelude(), C(er(None, -32602, "Invalid params"))]])
    (hit,) = [
        f
        for f in orjson.loads(check(str(lone), "--json").stdout)["connections"][0]["findings"]
        if f["rule"] == "jsonrpc.notification-answered"
    ]
    assert hit["seqs"] == [5]
    assert "#5 answers a notification" in hit["reason"]
    # an error text that names the notification wins over the nearest one
    named = tmp_path / "named.db"
    frames = [*v1_prelude(), A(nt("_acme/x")), A(nt("_acme/y")), C(er(None, -32602, "_acme/x?"))]
    write_recording(named, [frames])
    text = check(str(named)).stdout
    assert "client: #7 answers notification `_acme/x` #5 (named in its error)" in text


def test_a_repeated_finding_is_one_row_naming_its_frames(tmp_path: Path) -> None:
    """A plain resume that replays ten updates breaks one rule ten times in a row: one
    finding naming #6-#15, not ten identical rows."""
    db = tmp_path / "resume.db"
    caps: dict[str, Any] = {"session": {"prompt": {}, "resume": {}}}
    resume = C(rq(2, "session/resume", sessionId=SID, cwd="/w", mcpServers=[]))  # 5
    replayed = [A(up("agent_message_chunk", messageId="m1", content={"type": "text"}))] * 10
    write_recording(db, [[*v2_prelude(agent_caps=caps), resume, *replayed, A(ok(2))]])
    done = check(str(db), "--json")
    hits = [
        f
        for f in orjson.loads(done.stdout)["connections"][0]["findings"]
        if f["rule"] == "replay.plain-resume"
    ]
    assert [(f["seqs"], f["reason"]) for f in hits] == [
        (
            list(range(5, 16)),
            "agent: agent_message_chunk replayed during a session/resume without replayFrom"
            " (10 times: #6\u2013#15)",
        )
    ]
    rows = [line for line in check(str(db)).stdout.splitlines() if "replay.plain-resume" in line]
    assert len(rows) == 1 and " #5\u2013#15 [s1] " in rows[0], rows
