"""The CLI on a terminal, through the real executable in a pseudo-terminal (python's pty).

Every line of ``ls``, ``show``, ``search``, ``diff``, ``stats`` and ``check`` fits the
terminal's width (at 100 and 80 columns) on the demo recording and on a recording of a real
SDK agent; ``--wide`` prints what a pipe gets, whole; colour on a terminal only (``NO_COLOR``,
``--color``); long output goes through ``PAGER`` (``LESS=FRX`` by default) unless
``--no-pager`` or piped; a usage mistake is one line ``acp-proxy CMD: ...``, exit 2.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import socket
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from acp_proxy.console import cells
from tests.conftest import proxy_exe
from tests.peers import PEERS
from tests.peers.sdk_clients import run_v2_client

AGENT_V2 = [
    sys.executable,
    str(PEERS / "sdk_agent_v2.py"),
]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")


def on_terminal(argv: list[str], columns: int = 100, **env: str) -> tuple[int, str]:
    """Run ``acp-proxy ARGV`` with stdout on a pty ``columns`` wide: (exit code, output)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "LESS")}
    environ.update({"COLUMNS": str(columns), "PAGER": "cat", **env})
    proc = subprocess.Popen(
        [*proxy_exe(), *argv],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=subprocess.PIPE,
        env=environ,
    )
    os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(controller)
    assert proc.wait(timeout=120) is not None
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert "Traceback" not in err, err
    return proc.returncode, out.decode().replace("\r\n", "\n")


def piped(argv: list[str]) -> str:
    done = subprocess.run([*proxy_exe(), *argv], capture_output=True, timeout=120)
    assert "Traceback" not in done.stderr.decode()
    return done.stdout.decode()


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    subprocess.run(
        [*proxy_exe(), "demo", "--db", str(db), "--quiet", "--delay", "0"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return db


@pytest.fixture(scope="module")
def sdk_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The v2 SDK client talking to the v2 SDK agent through `acp-proxy --record`."""
    tmp = tmp_path_factory.mktemp("sdk")
    db = tmp / "sdk.db"
    argv = [*proxy_exe(), "--record", str(db), "--", *AGENT_V2]
    asyncio.run(run_v2_client(argv, ["hello", "again"], str(tmp)))
    return db


def readers(db: Path, other: Path) -> list[list[str]]:
    return [
        ["ls", str(db)],
        ["show", str(db)],
        ["show", str(db), "--raw"],
        ["search", str(db), "hello"],
        ["diff", str(db), str(other)],
        ["stats", str(db)],
        ["check", str(db)],
        ["dump", str(db)],
    ]


@pytest.mark.parametrize("columns", [100, 80])
@pytest.mark.parametrize("which", ["demo", "sdk"])
def test_every_line_fits_the_terminal(
    which: str, columns: int, demo_db: Path, sdk_db: Path
) -> None:
    db = demo_db if which == "demo" else sdk_db
    for argv in readers(db, sdk_db if which == "demo" else demo_db):
        _code, out = on_terminal([*argv, "--color", "never"], columns)
        lines = ANSI.sub("", out).splitlines()
        assert len(lines) > 1, (argv, out)
        too_long = [line for line in lines if cells(line) > columns]
        assert not too_long, (argv, too_long)


def test_wide_prints_what_a_pipe_gets(demo_db: Path, sdk_db: Path) -> None:
    for db, other in ((demo_db, sdk_db), (sdk_db, demo_db)):
        for argv in readers(db, other):
            if argv[0] == "dump":  # (dump cuts frames even piped: --full prints them whole)
                continue
            whole = piped(argv)
            _code, wide = on_terminal([*argv, "--wide", "--color", "never"], 80)
            assert wide == whole, argv
            widest = max(cells(x) for x in whole.splitlines())
            assert widest > 80 or argv[0] == "check", argv  # (so at 80 columns it is cut)


def test_search_starts_each_hit_with_the_matching_text(demo_db: Path) -> None:
    lines = piped(["search", str(demo_db), "README"]).splitlines()
    assert " hit(s)" in lines[-1]
    for line in lines[:-1]:
        text, _, place = line.partition(" · ")
        assert "[README]" in text and place.startswith("connection "), line
    _code, out = on_terminal(["search", str(demo_db), "README", "--color", "never"], 80)
    first = out.splitlines()[0]
    assert "[README]" in first.partition(" · ")[0] and cells(first) <= 80, first


def test_colour_on_a_terminal_only_and_as_asked(demo_db: Path) -> None:
    for command in ("ls", "show", "check", "stats", "search", "diff", "dump"):
        argv = [command, str(demo_db)]
        if command == "search":
            argv.append("README")
        if command == "diff":
            argv = ["diff", str(demo_db), str(demo_db), "-c", "1", "-c", "3"]
        assert "\x1b[" in on_terminal(argv)[1], command
        assert "\x1b[" not in on_terminal(argv, NO_COLOR="1")[1], command
        assert "\x1b[" not in on_terminal([*argv, "--color", "never"])[1], command
        assert "\x1b[" not in piped(argv), command
        assert "\x1b[" in piped([*argv, "--color", "always"]), command
    ls = on_terminal(["ls", str(demo_db)])[1]
    assert "\x1b[32mexit 0\x1b[0m" in ls  # how a connection ended, in green


def test_long_output_goes_through_the_pager(demo_db: Path) -> None:
    pager = "printf 'PAGED LESS=%s\\n' \"$LESS\"; cat"
    code, out = on_terminal(["show", str(demo_db)], PAGER=pager)
    assert code == 0 and out.startswith("PAGED LESS=FRX\n"), out[:200]
    assert "-- session sess_1" in out
    _code, out = on_terminal(["show", str(demo_db)], PAGER=pager, LESS="S")
    assert out.startswith("PAGED LESS=S\n")  # the user's LESS wins
    _code, out = on_terminal(["ls", str(demo_db), "--no-pager"], PAGER=pager)
    assert "PAGED" not in out and out.startswith("#")
    assert "PAGED" not in piped(["show", str(demo_db)])
    # quitting the pager early ends the command quietly
    code, out = on_terminal(["show", str(demo_db)], PAGER="head -n 2")
    assert code == 0 and len(out.splitlines()) == 2


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["ls", "--bogus", "x.db"], "acp-proxy ls: no such option '--bogus'"),
        (["show", "x.db", "-c", "1", "-c", "2"], "acp-proxy show: --connection takes one value"),
        (["check"], "acp-proxy check: missing argument DB"),
        (["ls", "x.db", "--color", "pink"], "acp-proxy ls: invalid value for '--color'"),
        (["diff", "a", "b", "-c", "1", "-c", "2", "-c", "3"], "acp-proxy diff: --connection at"),
        (["demo", "--keep", "--force"], "acp-proxy demo: --keep (add to the recording)"),
        (["search", "x.db", "  "], "acp-proxy search: invalid value for TEXT"),
    ],
)
def test_a_usage_mistake_is_one_line_exit_2(argv: list[str], start: str) -> None:
    done = subprocess.run([*proxy_exe(), *argv], capture_output=True, timeout=60)
    err = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b"", err
    (line,) = err.splitlines()
    command = start.partition(":")[0]
    assert line.startswith(start) and line.endswith(f"(see {command} --help)"), line


def test_help_texts_read_as_text() -> None:
    """No raw reStructuredText (``exit 0``, :class:) and defaults as people write them."""
    from acp_proxy.commands import COMMAND_NAMES

    for name in COMMAND_NAMES:
        done = subprocess.run(
            [*proxy_exe(), name, "--help"],
            capture_output=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "100"},
        )
        text = done.stdout.decode()
        assert done.returncode == 0 and "Usage: acp-proxy" in text, name
        assert "``" not in text and not re.search(r":(class|func|mod|meth):", text), name
        assert "[default: (" not in text, name  # e.g. (256M)
        assert max(cells(line) for line in text.splitlines()) <= 100, name
    serve = subprocess.run([*proxy_exe(), "serve", "--help"], capture_output=True, timeout=60)
    assert "[default: 256M]" in serve.stdout.decode()
    assert "WebSocket connection." not in serve.stdout.decode()  # (HTTP too)


def test_connect_names_what_it_accepts_and_why_it_failed() -> None:
    done = subprocess.run([*proxy_exe(), "connect", "ftp://x"], capture_output=True, timeout=60)
    assert done.returncode == 2
    assert "http://" in done.stderr.decode() and "wss://" in done.stderr.decode()
    init = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done = subprocess.run(
        [*proxy_exe(), "connect", f"http://127.0.0.1:{port}/acp"],
        input=init,
        capture_output=True,
        timeout=60,
    )
    err = done.stderr.decode()
    assert done.returncode == 1 and "connection refused" in err, err
    assert "ssl:default" not in err and "Connect call failed" not in err, err
