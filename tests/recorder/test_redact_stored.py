"""``--redact`` on recording: no secret byte at rest, forwarding byte-exact, readers still work.

A session as an editor and an agent hold it (``authenticate`` with a key, an MCP server with
``API_KEY`` in its env, the agent's ``terminal/create`` with one too, a token on the agent's
stderr, a token in the ``connect`` URL's query and in an ``Acp-*`` handshake header) runs
through the real executable over stdio, ``ws`` and ``serve`` (both driven by ``connect``).
Then the raw bytes of the SQLite file, its -wal and its -shm (while the proxy still runs, and
after it exits) and a ``pg_dump`` of a PostgreSQL store must hold none of the secrets, while
what each side received is exactly what the other sent. The same session recorded without
``--redact`` holds every secret: the search would find them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

from tests.conftest import frame_count, proxy_exe, run_proxy
from tests.helpers import listening_url
from tests.pg_server import PgServer, find_bindir

AUTH_KEY = "zq-AUTHKEY-41ab7c"  # no known key shape: found by its key name only
MCP_ENV = "mcpENV-7731-zz"
TERM_ENV = "termENV-5521-qq"
STDERR_TOKEN = "STDERRtok-9911"
QUERY_TOKEN = "QUERYtok-5511xx"
HEADER_TOKEN = "HDRtok-3301yy"
SECRETS = [AUTH_KEY, MCP_ENV, TERM_ENV, STDERR_TOKEN]
WIRE_SECRETS = [QUERY_TOKEN, HEADER_TOKEN]  # only when a connection has a URL and headers

AGENT = r"""
import json, os, sys
inp = open(os.environ["AGENT_LOG"] + ".in", "ab")
out = open(os.environ["AGENT_LOG"] + ".out", "ab")
def send(obj):
    data = (json.dumps(obj) + "\n").encode()
    out.write(data); out.flush()
    sys.stdout.buffer.write(data); sys.stdout.buffer.flush()
sys.stderr.write("agent: debug token=%s\n" % os.environ["STDERR_TOKEN"]); sys.stderr.flush()
prompt = None
for line in sys.stdin.buffer:
    inp.write(line); inp.flush()
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1,
              "agentCapabilities": {}, "authMethods": [{"id": "api-key", "name": "Key"}]}})
    elif method == "authenticate":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "sess-1"}})
    elif method == "session/prompt":
        prompt = mid
        send({"jsonrpc": "2.0", "id": 100, "method": "terminal/create", "params": {
              "sessionId": "sess-1", "command": "make", "args": ["test"],
              "env": [{"name": "API_KEY", "value": os.environ["TERM_ENV"]}]}})
    elif method is None and mid == 100:
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-1",
              "update": {"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "text", "text": "done"}}}})
        send({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}})
"""


def client_lines() -> list[bytes]:
    """What the client sends, in order (the terminal's answer after the agent asks)."""
    msgs: list[dict[str, Any]] = [
        {"id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "id": 2,
            "method": "authenticate",
            "params": {"methodId": "api-key", "_meta": {"apiKey": AUTH_KEY}},
        },
        {
            "id": 3,
            "method": "session/new",
            "params": {
                "cwd": "/work",
                "mcpServers": [
                    {
                        "name": "db",
                        "command": "mcp-db",
                        "args": [],
                        "env": [{"name": "API_KEY", "value": MCP_ENV}],
                    }
                ],
            },
        },
        {
            "id": 4,
            "method": "session/prompt",
            "params": {"sessionId": "sess-1", "prompt": [{"type": "text", "text": "hi"}]},
        },
        {"id": 100, "result": {"terminalId": "t1"}},
    ]
    return [json.dumps({"jsonrpc": "2.0", **m}).encode() + b"\n" for m in msgs]


# after each client line, the ids (or methods) of the agent's lines it waits for
EXPECTED = [[1], [2], [3], ["terminal/create"], ["session/update", 4]]
FRAMES = 11  # per recorded connection: 5 from the client, 6 from the agent


class Client:
    """Drives a stdio ACP pipe (the proxy, ``connect`` or ``replay``) line by line."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert proc.stdout is not None
        self.out: IO[bytes] = proc.stdout
        self.received = b""

    def talk(self) -> None:
        assert self.proc.stdin is not None
        for line, wanted in zip(client_lines(), EXPECTED, strict=True):
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
            for want in wanted:
                got = self.out.readline()
                assert got, f"the pipe closed waiting for {want!r}"
                self.received += got
                msg = json.loads(got)
                assert "error" not in msg, got
                assert want in (msg.get("id"), msg.get("method")), (want, got)


def agent_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "agent.py").write_text(AGENT)
    return {
        "AGENT_LOG": str(tmp_path / "agent"),
        "TERM_ENV": TERM_ENV,
        "STDERR_TOKEN": STDERR_TOKEN,
    }


def agent_cmd(tmp_path: Path) -> list[str]:
    return [sys.executable, str(tmp_path / "agent.py")]


def stored_bytes(db: Path) -> dict[str, bytes]:
    """The raw bytes of the SQLite file and its -wal and -shm, as they are on disk now."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{db}{suffix}")
        if path.exists():
            out[path.name] = path.read_bytes()
    return out


def leaked(blobs: dict[str, bytes], secrets: list[str]) -> list[tuple[str, str]]:
    """(blob, secret) for each secret found, as bytes or hex-encoded (a dump's bytea)."""
    return [
        (name, s)
        for name, data in blobs.items()
        for s in secrets
        if s.encode() in data or s.encode().hex().encode() in data
    ]


def wait_for_frames(db: Path, n: int) -> None:
    deadline = time.monotonic() + 60
    while frame_count(db) < n:
        assert time.monotonic() < deadline, f"the recording never reached {n} frames"
        time.sleep(0.05)


@contextmanager
def popen(args: list[str], env: dict[str, str], **kw: Any) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
        **kw,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


@contextmanager
def server(
    command: str, db: Path | str, flags: list[str], tmp_path: Path
) -> Iterator[tuple[str, list[bytes]]]:
    """``acp-proxy ws|serve --listen 127.0.0.1:0 --record DB FLAGS -- agent``: its URL."""
    args = [*proxy_exe(), command, "--listen", "127.0.0.1:0", "--record", str(db), *flags]
    with popen([*args, "--", *agent_cmd(tmp_path)], agent_env(tmp_path)) as proc:
        url, lines = listening_url(proc, re.compile(rb"listening on ((?:ws|http)://\S+)"))
        assert proc.stderr is not None
        pump = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
        pump.start()
        yield url, lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, b"".join(lines)
        pump.join(10)


def run_session(
    transport: str,
    db: Path | str,
    flags: list[str],
    tmp_path: Path,
    *,
    live_check: bool = False,
    redacted: bool | None = None,
) -> dict[str, bytes]:
    """One session over ``transport``, recorded into ``db``; returns what was on disk while
    the proxy still ran (``live_check``: after every frame was stored, before it exits)."""
    live: dict[str, bytes] = {}
    for suffix in (".in", ".out"):
        Path(f"{tmp_path}/agent{suffix}").unlink(missing_ok=True)
    if transport == "stdio":
        args = [*proxy_exe(), "--record", str(db), *flags, "--", *agent_cmd(tmp_path)]
        with popen(args, agent_env(tmp_path)) as proc:
            client = Client(proc)
            client.talk()
            if live_check:
                wait_for_frames(Path(db), FRAMES)
                live = stored_bytes(Path(db))
            assert proc.stdin is not None
            proc.stdin.close()
            assert proc.stderr is not None
            said = proc.stderr.read()
            assert proc.wait(60) == 0, said
            # the agent's stderr passes through as it was: only the stored line is redacted
            assert f"agent: debug token={STDERR_TOKEN}\n".encode() in said
        expected_conns = 1
    else:
        command = "ws" if transport == "ws" else "serve"
        with server(command, db, flags, tmp_path) as (url, _lines):
            url = f"{url}?token={QUERY_TOKEN}"
            args = [*proxy_exe(), "connect", url, "--record", str(db), *flags]
            args += ["-H", f"Acp-Client-Token: {HEADER_TOKEN}"]
            with popen(args, {}) as proc:
                client = Client(proc)
                client.talk()
                if live_check:
                    wait_for_frames(Path(db), 2 * FRAMES)
                    live = stored_bytes(Path(db))
                assert proc.stdin is not None
                proc.stdin.close()
                assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else b""
        expected_conns = 2
    # byte-exact both ways: the agent got what the client sent, the client what the agent sent
    assert Path(f"{tmp_path}/agent.in").read_bytes() == b"".join(client_lines())
    assert client.received == Path(f"{tmp_path}/agent.out").read_bytes()
    if isinstance(db, Path):
        con = sqlite3.connect(db)
        try:
            rows = con.execute("SELECT meta FROM connections").fetchall()
        finally:
            con.close()
        assert len(rows) == expected_conns
        if redacted is None:
            redacted = "--redact" in flags
        want = {"redaction": "default"} if redacted else None
        assert [json.loads(m) if m else None for (m,) in rows] == [want] * expected_conns
    return live


@pytest.mark.parametrize("transport", ["stdio", "ws", "serve"])
def test_no_secret_byte_in_the_sqlite_file_wal_or_shm(tmp_path: Path, transport: str) -> None:
    secrets = SECRETS + (WIRE_SECRETS if transport != "stdio" else [])
    plain = tmp_path / "plain.db"
    run_session(transport, plain, [], tmp_path)
    on_disk = stored_bytes(plain)
    # the search finds them when they are there (connect's URL and headers: in the WAL or file)
    assert sorted({s for _, s in leaked(on_disk, secrets)}) == sorted(secrets)

    db = tmp_path / "redacted.db"
    live = run_session(transport, db, ["--redact"], tmp_path, live_check=True)
    assert "redacted.db-wal" in live  # caught before any checkpoint folded the WAL in
    assert leaked(live, secrets) == []
    after = stored_bytes(db)
    assert leaked(after, secrets) == []
    con = sqlite3.connect(db)
    try:
        methods = [m for (m,) in con.execute("SELECT method FROM frames ORDER BY id")]
        raws = b"".join(bytes(r) for (r,) in con.execute("SELECT raw FROM frames"))
    finally:
        con.close()
    assert methods.count("terminal/create") == 2 * (1 if transport == "stdio" else 2)
    assert b"[REDACTED]" in raws


def test_readers_work_on_a_redacted_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, db = tmp_path / "plain.db", tmp_path / "redacted.db"
    run_session("stdio", plain, [], tmp_path)
    monkeypatch.setenv("ACP_PROXY_REDACT", "1")  # the environment variable turns it on too
    run_session("stdio", db, [], tmp_path, redacted=True)
    monkeypatch.delenv("ACP_PROXY_REDACT")
    # show and check read it as they read the plain one
    shown, shown_plain = run_proxy(["show", str(db)]), run_proxy(["show", str(plain)])
    assert shown.returncode == 0, shown.stderr

    # the same conversation (but for the first line's start time, and durations)
    def untimed(out: bytes) -> list[bytes]:
        return [re.sub(rb"\d+(\.\d+)?m?s\b", b"T", line) for line in out.splitlines()[1:]]

    assert untimed(shown.stdout) == untimed(shown_plain.stdout)
    assert b"session sess-1: 1 turn" in shown.stdout
    dumped = run_proxy(["dump", str(db)])
    assert dumped.returncode == 0 and b"[REDACTED]" in dumped.stdout, dumped.stderr
    assert all(s.encode() not in dumped.stdout for s in SECRETS)
    checked, checked_plain = run_proxy(["check", str(db)]), run_proxy(["check", str(plain)])
    assert checked.returncode == checked_plain.returncode, checked.stdout + checked.stderr
    same = run_proxy(["diff", str(db), str(db)])
    assert same.returncode == 0, same.stdout + same.stderr
    differ = run_proxy(["diff", str(plain), str(db)])
    assert differ.returncode == 1 and b"[REDACTED]" in differ.stdout, differ.stderr
    # replay answers a live client that sends the real secrets the recording does not hold
    with popen([*proxy_exe(), "replay", str(db)], {}) as proc:
        client = Client(proc)
        client.talk()
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(60) == 0
    assert b'"stopReason":"end_turn"' in client.received.replace(b" ", b"")


def test_custom_rules_and_a_bad_rule(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    flags = ["--redact-path", "params.prompt", "--redact-value", "done"]
    args = [*proxy_exe(), "--record", str(db), *flags, "--", *agent_cmd(tmp_path)]
    env = {**agent_env(tmp_path), "ACP_PROXY_REDACT": "key:^methodId$"}  # adds to the flags
    with popen(args, env) as proc:
        Client(proc).talk()
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(60) == 0
    con = sqlite3.connect(db)
    try:
        raws = b"".join(bytes(r) for (r,) in con.execute("SELECT raw FROM frames"))
        (meta,) = con.execute("SELECT meta FROM connections").fetchone()
    finally:
        con.close()
    assert b'"prompt":[{"type":"text","text":"[REDACTED]"}]' in raws
    assert b'"methodId":"[REDACTED]"' in raws and b'"text":"done"' not in raws
    rules = json.loads(meta)["redaction"]
    assert rules.startswith("default key:^methodId$ path:params.prompt values:1:sha256:")
    assert "done" not in rules  # a value rule may spell a secret: only its digest is kept
    bad = run_proxy(["--record", str(db), "--redact-value", "(", "--", "true"])
    assert bad.returncode == 2 and bad.stderr.count(b"\n") == 1, bad.stderr
    assert b"not a regular expression" in bad.stderr
    bad = run_proxy(["--record", str(db), "--", "true"], env={"ACP_PROXY_REDACT": "maybe"})
    assert bad.returncode == 2 and b"ACP_PROXY_REDACT: 'maybe' is not a rule" in bad.stderr
    assert bad.stderr.count(b"\n") == 1


def test_no_secret_byte_in_a_pg_dump(tmp_path: Path, pg_server: PgServer, pg_url: str) -> None:
    bindir = find_bindir()
    assert bindir is not None
    pg_dump = bindir / "pg_dump"
    if not pg_dump.exists():
        pytest.skip(f"no pg_dump in {bindir}")

    def dump() -> bytes:
        done = subprocess.run(
            [str(pg_dump), "--no-owner", f"--dbname={pg_url}"],
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run_session("ws", pg_url, ["--redact"], tmp_path)
    dumped = dump()
    assert b"[REDACTED]" in dumped and b"terminal/create" in dumped
    assert leaked({"pg_dump": dumped}, SECRETS + WIRE_SECRETS) == []
    assert b'"redaction": "default"' in dumped or b'"redaction":"default"' in dumped
    # the same session without --redact: the dump holds them (the search works)
    run_session("ws", pg_url, [], tmp_path)
    secrets = SECRETS + WIRE_SECRETS
    assert sorted(s for _, s in leaked({"pg_dump": dump()}, secrets)) == sorted(secrets)


def test_export_takes_the_same_rule_options(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    run_session("stdio", db, [], tmp_path)
    done = run_proxy(["export", str(db), "--redact-path", "prompt", "--redact-key", "^methodId$"])
    assert done.returncode == 0, done.stderr
    assert b'"prompt":[{"type":"text","text":"[REDACTED]"}]' in done.stdout.replace(b"\\", b"")
    assert b'"methodId":"[REDACTED]"' in done.stdout.replace(b"\\", b"")
    assert all(s.encode() not in done.stdout for s in SECRETS)
    bad = run_proxy(["export", str(db), "--no-redact", "--redact-path", "prompt"])
    assert bad.returncode == 2 and bad.stderr.count(b"\n") == 1, bad.stderr


def test_rule_set_pieces_in_process() -> None:
    from acp_proxy.commands.redact_options import rules_from_env
    from acp_proxy.formats import redact

    assert rules_from_env("") == (False, [[], [], []])
    assert rules_from_env("0") == (False, [[], [], []])
    with pytest.raises(ValueError, match="'b' is not a rule"):
        rules_from_env("default value:a b")
    assert rules_from_env("1 path:params.prompt key:^x$") == (
        True,
        [["^x$"], ["params.prompt"], []],
    )
    # the factored regex (without ahocorasick-rs) finds what the automaton finds
    pattern = re.compile(redact._trie(sorted(set(redact._FRAME_NEEDLES))))
    for needle in redact._FRAME_NEEDLES:
        assert pattern.search(b"<<" + needle + b">>") and redact.might_have_secrets(needle)
    assert not pattern.search(b"the quick brown fox") and not redact.might_have_secrets(b"fox")
    # a path rule keeps what says what a value is
    rules = redact.RedactRules.of(paths=["update.content"])
    frame = (
        b'{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
        b'"agent_message_chunk","content":{"type":"text","text":"private words"}}}}\n'
    )
    assert rules.frame(frame) == frame.replace(b"private words", b"[REDACTED]")
    with pytest.raises(ValueError, match="not a dotted path"):
        redact.RedactRules.of(paths=["..."])


def test_without_ahocorasick_rs_the_stored_copy_is_redacted_the_same(tmp_path: Path) -> None:
    from tests.recorder.test_bare_install import _without

    env = _without(tmp_path, "ahocorasick_rs")
    dbs = []
    for name, extra in (("fallback", env), ("automaton", {})):
        db = tmp_path / f"{name}.db"
        args = [*proxy_exe(), "--record", str(db), "--redact", "--", *agent_cmd(tmp_path)]
        with popen(args, {**agent_env(tmp_path), **extra}) as proc:
            Client(proc).talk()
            assert proc.stdin is not None
            proc.stdin.close()
            assert proc.wait(60) == 0
        dbs.append(db)
    stored = []
    for db in dbs:
        con = sqlite3.connect(db)
        try:
            stored.append([bytes(r) for (r,) in con.execute("SELECT raw FROM frames ORDER BY id")])
        finally:
            con.close()
        assert leaked(stored_bytes(db), SECRETS) == []
    assert stored[0] == stored[1]


def test_replay_takes_a_recorded_marker_for_any_live_text() -> None:
    from acp_proxy.formats import redact
    from acp_proxy.replay import match
    from acp_proxy.replay.match import SessionMap, compare_call

    assert match.REDACTED == redact.REDACTED

    def call(params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": params}

    recorded = call(
        {"methodId": "k", "note": "key [REDACTED] end", "_meta": {"apiKey": "[REDACTED]"}}
    )
    live = call({"methodId": "k", "note": "key sk-123 end", "_meta": {"apiKey": AUTH_KEY}})
    assert compare_call(recorded, live, [], SessionMap()) == []
    other = call({"methodId": "k", "note": "lock sk-123 end", "_meta": {"apiKey": AUTH_KEY}})
    assert [d.path for d in compare_call(recorded, other, [], SessionMap())] == ["params.note"]
