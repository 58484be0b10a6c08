"""``acp-proxy tail``: started before real proxies record, it prints every frame once, in order.

The tail and the proxies are the real executable in subprocesses; the stores are a real
SQLite file and a real PostgreSQL database (:mod:`tests.pg_server`), restarted mid-way.
"""

from __future__ import annotations

import os
import pty
import queue
import re
import signal
import sqlite3
import subprocess
import threading
from pathlib import Path

import orjson

from tests.conftest import echo_proxy, echo_through, frames_of, proxy_exe, run_proxy

LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} c(\d+) +(\d+) (->|<-) ")


class Follower:
    """A running ``acp-proxy tail``: its stdout lines, its stderr lines (read in threads)."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "400"}
        self.proc = subprocess.Popen(
            [*proxy_exe(), "tail", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.out: queue.Queue[str] = queue.Queue()
        self.err: queue.Queue[str] = queue.Queue()
        self.err_lines: list[str] = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(pipe, q), daemon=True)
            for pipe, q in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(pipe: object, q: queue.Queue[str]) -> None:
        for raw in iter(pipe.readline, b""):  # type: ignore[attr-defined]
            q.put(raw.decode("utf-8", "replace").rstrip("\n"))

    def lines(self, count: int, timeout: float = 60) -> list[str]:
        """The next ``count`` stdout lines (fails after ``timeout`` seconds without one)."""
        return [self.out.get(timeout=timeout) for _ in range(count)]

    def wait_err(self, needle: str, timeout: float = 60) -> str:
        while True:
            line = self.err.get(timeout=timeout)
            self.err_lines.append(line)
            if needle in line:
                return line

    def stop(self) -> tuple[int, str]:
        """Ctrl-C; the exit status and the rest of stderr."""
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=30)
        for pump in self.pumps:
            pump.join(timeout=30)
        rest: list[str] = []
        while not self.err.empty():
            rest.append(self.err.get())
        return rc, "\n".join([*self.err_lines, *rest])


def _requests(n: int, start: int = 1) -> bytes:
    return b"".join(
        orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "session/prompt", "params": {"n": i}})
        + b"\n"
        for i in range(start, start + n)
    )


def _record(db: Path | str, data: bytes) -> None:
    proc = echo_proxy(db)
    out, err = proc.communicate(data, timeout=60)
    assert out == data, err


def _parsed(lines: list[str]) -> list[tuple[int, int]]:
    got = []
    for line in lines:
        m = LINE.match(line)
        assert m, line
        got.append((int(m.group(1)), int(m.group(2))))
    return got


def test_tail_sqlite_prints_every_frame_once_in_order_and_exits_0_on_ctrl_c(
    tmp_path: Path,
) -> None:
    db = tmp_path / "live.db"
    tail = Follower(str(db))
    tail.wait_err("waiting for it")  # started before the file exists
    first, second = _requests(20), _requests(15, start=100)
    writers = [threading.Thread(target=_record, args=(db, d)) for d in (first, second)]
    _record(db, _requests(1, start=50))  # creates the file: one connection first
    for w in writers:  # then two proxies writing at the same time
        w.start()
    for w in writers:
        w.join()
    expected = 2 * (1 + 20 + 15)
    got = _parsed(tail.lines(expected))
    stored = {(cid, seq) for cid in (1, 2, 3) for seq in range(1, len(frames_of(db, cid)) + 1)}
    assert sorted(got) == sorted(stored) and len(set(got)) == expected  # each once
    for cid in (1, 2, 3):
        seqs = [seq for c, seq in got if c == cid]
        assert seqs == sorted(seqs)  # in order per connection
    rc, err = tail.stop()
    assert rc == 0 and "Traceback" not in err, err
    assert tail.out.empty()  # nothing twice


def test_tail_filters_and_since(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    error = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no such method"}}\n'
    _record(db, _requests(3) + error)
    # --since all starts at the beginning; --errors keeps the error response (both ways)
    tail = Follower(str(db), "--since", "all", "--errors")
    lines: list[str] = []
    while len(lines) < 2:
        line = tail.out.get(timeout=60)
        if not line.startswith("finding "):  # findings of the checker come too
            lines.append(line)
    assert all("no such method" in line for line in lines), lines
    rc, _ = tail.stop()
    assert rc == 0
    tail = Follower(str(db), "--since", "1h", "--connection", "1", "--method", "session/prompt")
    assert len(_parsed(tail.lines(6))) == 6
    _record(db, _requests(2))  # connection 2: filtered out
    tail.stop()
    assert tail.out.empty()
    (host,) = sqlite3.connect(db).execute("SELECT host FROM connections WHERE id = 1").fetchone()
    # --since all: no race with the first poll; connections 1 and 2 are in the store already
    elsewhere = Follower(str(db), "--since", "all", "--host", "elsewhere")
    here = Follower(str(db), "--since", "all", "--host", host, "-c", "3")
    _record(db, _requests(1))
    assert _parsed(here.lines(2)) == [(3, 1), (3, 2)]
    here.stop()
    rc, _ = elsewhere.stop()
    assert rc == 0 and elsewhere.out.empty()  # another host's connections are left out
    bad = run_proxy(["tail", str(db), "--since", "yesterday"])
    assert bad.returncode == 2 and b"give a duration" in bad.stderr


def test_tail_conversation_prints_what_show_prints(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    tail = Follower(str(db), "--conversation")
    tail.wait_err("waiting for it")
    done = run_proxy(["demo", "--db", str(db), "--protocol", "1", "--quiet"], timeout=120)
    assert done.returncode == 0, done.stderr
    shown = run_proxy(["show", str(db)], env={"NO_COLOR": "1"}).stdout.decode().splitlines()
    headers = ("== connection", "   session ")  # its state then; show's closing totals
    expected = [line for line in shown if not line.startswith(headers)]
    got: list[str] = []
    while len(got) < len(expected):
        line = tail.out.get(timeout=60)
        if not line.startswith("== connection"):
            got.append(line)
    assert got == expected  # every message once, in order, as show prints it
    assert any(re.match(r" *\d+ agent \[", line) for line in got)
    tail.stop()


def test_tail_postgresql_survives_a_restart(pg_server: object, pg_url: str) -> None:
    from tests.pg_server import PgServer

    assert isinstance(pg_server, PgServer)
    tail = Follower(pg_url)  # before the database has acp-proxy's tables
    tail.wait_err("holds no acp-proxy recording; waiting for it")
    _record(pg_url, _requests(1))
    _record(pg_url, _requests(10, start=10))
    got = _parsed(tail.lines(22))
    assert got == [(1, 1), (1, 2), *((2, seq) for seq in range(1, 21))]
    pg_server.stop()
    try:
        tail.wait_err("trying again")  # one line says the database went away
    finally:
        pg_server.start()
    tail.wait_err("is back")
    _record(pg_url, _requests(5, start=30))
    got = _parsed(tail.lines(10))
    assert sorted(got) == [(3, seq) for seq in range(1, 11)]
    rc, err = tail.stop()
    assert rc == 0 and "Traceback" not in err


def test_a_subcommand_named_like_a_program_says_which_one_ran(tmp_path: Path) -> None:
    """On a terminal, ``acp-proxy tail --help`` says it ran the subcommand, not tail(1)."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [*proxy_exe(), "tail", "--help"], stdout=subprocess.PIPE, stderr=secondary
    )
    os.close(secondary)
    out, _ = proc.communicate(timeout=60)
    err = b""
    try:
        while chunk := os.read(primary, 4096):
            err += chunk
    except OSError:  # the other end closed
        pass
    os.close(primary)
    assert b"running the 'tail' subcommand" in err and b"-- tail" in err
    assert b"Follow DB as it is recorded" in out


def test_tail_errors_prints_the_end_of_connection_findings(tmp_path: Path) -> None:
    """A request never answered is known when the connection ends: --errors says so then."""
    db = tmp_path / "e.db"
    tail = Follower(str(db), "--errors")
    tail.wait_err("waiting for it")
    proc = echo_proxy(db)
    echo_through(proc, _requests(1))
    # The first findings come while the connection is still recorded...
    assert tail.lines(1)[0].startswith("finding c1 1: error lifecycle.initialize-first")
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(timeout=60) == 0
    # ...the rule on unanswered requests runs once it has ended.
    later = [tail.out.get(timeout=60) for _ in range(2)]
    assert all("jsonrpc.request-answered" in line for line in later), later
    tail.stop()
