"""The plain launch read without click behaves as the click command does, through the real
console script.

``acp-proxy [--record X] [--label L] -- AGENT`` (and ``ACP_PROXY_RECORD``) is run by
:mod:`acp_proxy.commands.stdio_launch` before click is imported; every other command line
goes to click. Each case here runs the fast command line and the same one through click (an
option the fast path leaves to click, given its default value: ``--grace 5``) under
``python -X importtime``, checks which way each went (click imported or not), and compares
what a user sees: exit code, stdout, stderr lines, and the rows recorded.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from acp_proxy.commands.stdio_launch import fast_command_line
from tests.conftest import ECHO_AGENT, importtime_proxy

FORCE_CLICK = ["--grace", "5"]
"""An option the fast path leaves to click, with its default value: the same proxy."""

STDIN = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\nnot json\n'


def launch(
    args: list[str], tmp_path: Path, *, stdin: bytes = b"", env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[bytes], bool]:
    """Run ``acp-proxy ARGS`` in ``tmp_path``: (the process, its stderr without the import
    times; whether click was imported)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ACP_PROXY_", "_ACP"))}
    done = subprocess.run(
        [*importtime_proxy(), *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        env={**clean, **(env or {})},
        cwd=tmp_path,
    )
    lines = done.stderr.splitlines(keepends=True)
    imported = {line.split(b"|")[-1].strip() for line in lines if line.startswith(b"import time:")}
    done.stderr = b"".join(line for line in lines if not line.startswith(b"import time:"))
    return done, b"click" in imported


def both(
    args: list[str], tmp_path: Path, *, stdin: bytes = b"", env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    """``args`` (``[OPTIONS] -- AGENT...``) the fast way and through click, each in a
    directory of its own (``fast/``, ``click/``) so that a relative ``--record`` differs."""
    split = args.index("--")
    runs = []
    for name, extra, via_click in (("fast", [], False), ("click", FORCE_CLICK, True)):
        where = tmp_path / name
        where.mkdir(parents=True)
        done, clicked = launch([*args[:split], *extra, *args[split:]], where, stdin=stdin, env=env)
        assert clicked == via_click, f"{name}: click imported: {clicked}"
        runs.append(done)
    return runs[0], runs[1]


def rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """What a recording holds, without its times and process ids."""
    conn = sqlite3.connect(db)
    try:
        return {
            "connections": conn.execute(
                "SELECT transport, agent_command, exit_status, protocol_version, label, "
                "frames_dropped, bytes_dropped, end_reason, host, meta FROM connections "
                "ORDER BY id"
            ).fetchall(),
            "frames": conn.execute(
                "SELECT connection_id, seq, direction, kind, raw FROM frames ORDER BY id"
            ).fetchall(),
            "stderr": conn.execute("SELECT raw FROM stderr_lines ORDER BY id").fetchall(),
            "events": conn.execute("SELECT kind, detail FROM events ORDER BY id").fetchall(),
        }
    finally:
        conn.close()


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(["--record", "session.db", "--label", "editor 1"], id="record-label"),
        pytest.param(["--label=editor 1", "--record=session.db"], id="equals-forms"),
    ],
)
def test_the_fast_launch_records_what_click_records(tmp_path: Path, options: list[str]) -> None:
    fast, click = both([*options, "--", *ECHO_AGENT], tmp_path, stdin=STDIN)
    assert fast.returncode == click.returncode == 0, (fast.stderr, click.stderr)
    assert fast.stdout == click.stdout == STDIN
    assert fast.stderr == click.stderr == b"echo agent ready\n"
    fast_rows, click_rows = rows(tmp_path / "fast/session.db"), rows(tmp_path / "click/session.db")
    assert fast_rows == click_rows
    assert fast_rows["connections"][0][4] == "editor 1"
    assert [raw for *_, raw in fast_rows["frames"]] == [*STDIN.splitlines(keepends=True)] * 2
    assert (tmp_path / "fast/session.db").stat().st_mode & 0o777 == 0o600


def test_the_fast_launch_reads_acp_proxy_record_as_click_does(tmp_path: Path) -> None:
    env = {"ACP_PROXY_RECORD": "env.db"}
    fast, click = both(["--", *ECHO_AGENT], tmp_path, stdin=STDIN, env=env)
    assert fast.returncode == click.returncode == 0
    assert rows(tmp_path / "fast/env.db") == rows(tmp_path / "click/env.db")
    assert len(rows(tmp_path / "fast/env.db")["frames"]) == 4
    # --record wins over the variable, both ways
    fast, click = both(["--record", "given.db", "--", *ECHO_AGENT], tmp_path / "x", env=env)
    for name in ("fast", "click"):
        assert (tmp_path / "x" / name / "given.db").exists()
        assert not (tmp_path / "x" / name / "env.db").exists()


@pytest.mark.parametrize(
    ("agent", "code", "line"),
    [
        pytest.param(
            "definitely-not-an-agent-xyz",
            127,
            b"acp-proxy: agent command not found: definitely-not-an-agent-xyz\n",
            id="missing",
        ),
        pytest.param(
            "agent.sh", 126, b"acp-proxy: agent command is not executable: agent.sh\n", id="0644"
        ),
    ],
)
def test_an_agent_that_cannot_start_is_the_same_line_and_exit_code(
    tmp_path: Path, agent: str, code: int, line: bytes
) -> None:
    for name in ("fast", "click"):
        (tmp_path / name).mkdir()
        script = tmp_path / name / "agent.sh"
        script.write_text("#!/bin/sh\necho hi\n")
        script.chmod(0o644)
    argv = ["--record", "session.db", "--", agent if agent != "agent.sh" else "./agent.sh"]
    if agent == "agent.sh":
        line = line.replace(b"agent.sh", b"./agent.sh")
    for name, extra in (("fast", []), ("click", FORCE_CLICK)):
        done, clicked = launch([*argv[:2], *extra, *argv[2:]], tmp_path / name)
        assert clicked == (name == "click")
        assert (done.returncode, done.stderr) == (code, line), name
        assert not (tmp_path / name / "session.db").exists()


@pytest.mark.parametrize(
    "record",
    [
        pytest.param("no/such/dir/session.db", id="missing-directory"),
        pytest.param(".", id="a-directory"),
        pytest.param("mysql://someone@db/x", id="unknown-scheme"),
    ],
)
def test_an_unusable_recording_is_the_same_warning_and_forwarding_goes_on(
    tmp_path: Path, record: str
) -> None:
    fast, click = both(["--record", record, "--", *ECHO_AGENT], tmp_path, stdin=STDIN)
    assert fast.returncode == click.returncode == 0
    assert fast.stdout == click.stdout == STDIN
    assert b"recording disabled" in fast.stderr
    # (the same lines, in the order the agent's and the writer's lines came; each run had a
    # directory of its own)
    lines = [
        sorted(done.stderr.replace(str(tmp_path / name).encode(), b"HERE").splitlines())
        for done, name in ((fast, "fast"), (click, "click"))
    ]
    assert lines[0] == lines[1]


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(["--help"], {}, id="help"),
        pytest.param(["--version"], {}, id="version"),
        pytest.param(["ls", "missing.db"], {}, id="subcommand"),
        pytest.param(["--bogus", "--", "true"], {}, id="unknown-option"),
        pytest.param(["--record", "x.db"], {}, id="no-agent"),
        pytest.param(["--record", "x.db", "true"], {}, id="no-double-dash"),
        pytest.param(["--label", "a", "--label", "b", "--", "true"], {}, id="repeated"),
        pytest.param(["--record=", "--", "true"], {}, id="empty-value"),
        pytest.param(["--label", "--", "true"], {}, id="value-like-an-option"),
        pytest.param(["--", "true"], {"ACP_PROXY_REDACT": "nonsense"}, id="redact-env"),
        pytest.param(["--", "true"], {"_ACP_PROXY_COMPLETE": "bash_source"}, id="completion"),
    ],
)
def test_what_the_fast_launch_does_not_read_goes_to_click(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    done, clicked = launch(args, tmp_path, env=env)
    assert clicked, (done.returncode, done.stderr)


def test_click_still_answers_what_it_answered(tmp_path: Path) -> None:
    done, _ = launch(["--bogus", "--", "true"], tmp_path)
    assert (done.returncode, done.stderr) == (
        2,
        b"acp-proxy proxy: no such option '--bogus' (see acp-proxy proxy --help)\n",
    )
    done, _ = launch(["--help"], tmp_path)
    assert done.returncode == 0 and b"Usage: acp-proxy" in done.stdout
    done, _ = launch(["--", "true"], tmp_path, env={"ACP_PROXY_REDACT": "nonsense"})
    assert done.returncode == 2 and b"ACP_PROXY_REDACT: 'nonsense' is not a rule" in done.stderr


@pytest.mark.parametrize(
    ("args", "env", "parsed"),
    [
        (["--", "a", "--b"], {}, (None, None, ["a", "--b"])),
        (["--record", "r", "--", "a"], {}, ("r", None, ["a"])),
        (["--label", "l", "--record", "r", "--", "a", "--"], {}, ("r", "l", ["a", "--"])),
        (["--record=r=1", "--label=x y", "--", "a"], {}, ("r=1", "x y", ["a"])),
        (["--", "a"], {"ACP_PROXY_RECORD": "e"}, ("e", None, ["a"])),
        (["--record", "r", "--", "a"], {"ACP_PROXY_RECORD": "e"}, ("r", None, ["a"])),
        (["--", "a"], {"ACP_PROXY_RECORD": ""}, (None, None, ["a"])),
        (["--", "a"], {"ACP_PROXY_REDACT": " "}, (None, None, ["a"])),
        (["--", "a"], {"ACP_PROXY_REDACT": "0"}, None),
        (["--"], {}, None),
        (["a"], {}, None),
        (["--record"], {}, None),
        (["--record", "-x", "--", "a"], {}, None),
        (["--grace", "5", "--", "a"], {}, None),
        (["-h"], {}, None),
        (["proxy", "--", "a"], {}, None),
    ],
)
def test_the_fast_command_line(
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    parsed: tuple[str | None, str | None, list[str]] | None,
) -> None:
    for name in ("ACP_PROXY_RECORD", "ACP_PROXY_REDACT", "_ACP_PROXY_COMPLETE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert fast_command_line(args) == parsed
