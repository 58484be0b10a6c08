"""Redaction: each secret shape is replaced in the exported copy, and only there."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import orjson
import pytest

from acp_proxy.formats.redact import REDACTED, redact_argv, redact_frame, redact_text
from tests.formats.helpers import cli, frame_rows, record

# (name, secret, a frame carrying it). Every secret string must vanish from a redacted export.
CASES: list[tuple[str, str, bytes]] = [
    (
        "openai key in prompt text",
        "sk-proj-Abc123def456ghi789jkl",
        b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s",'
        b'"prompt":[{"type":"text","text":"my key is sk-proj-Abc123def456ghi789jkl ok"}]}}\n',
    ),
    (
        "anthropic key",
        "sk-ant-api03-AAAABBBBCCCC1111",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text",'
        b'"text":"export ANTHROPIC=sk-ant-api03-AAAABBBBCCCC1111"}}}}\n',
    ),
    (
        "github token",
        "ghp_0123456789abcdefghijABCDEFGHIJ",
        b'{"jsonrpc":"2.0","id":4,"method":"fs/write_text_file","params":{"sessionId":"s",'
        b'"path":"/x/.env","content":"GH=ghp_0123456789abcdefghijABCDEFGHIJ\\n"}}\n',
    ),
    (
        "aws access key",
        "AKIAIOSFODNN7EXAMPLE",
        b'{"jsonrpc":"2.0","id":5,"result":{"content":"aws_access_key_id AKIAIOSFODNN7EXAMPLE"}}\n',
    ),
    (
        "slack token",
        "xoxb-1234567890-abcdefghij",
        b'{"jsonrpc":"2.0","method":"_log","params":{"line":"slack xoxb-1234567890-abcdefghij"}}\n',
    ),
    (
        "bearer token in text",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz",
        b'{"jsonrpc":"2.0","method":"_log","params":{"line":"Authorization: Bearer '
        b'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz"}}\n',
    ),
    (
        "auth token in _meta",
        "tok-meta-secret-value",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
        b'"_meta":{"vendor.example/auth":{"value":"tok-meta-secret-value"}}}}\n',
    ),
    (
        "authorization header in _meta",
        "Basic dXNlcjpwYXNzd29yZA==",
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[],'
        b'"_meta":{"headers":{"Authorization":"Basic dXNlcjpwYXNzd29yZA=="}}}}\n',
    ),
    (
        "mcp stdio server env value",
        "plain-env-value-no-shape",
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":'
        b'[{"name":"db","command":"/bin/db-mcp","args":[],"env":[{"name":"DB_URL",'
        b'"value":"plain-env-value-no-shape"}]}]}}\n',
    ),
    (
        "mcp http server header",
        "opaque-header-value",
        b'{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s","cwd":"/w",'
        b'"mcpServers":[{"type":"http","name":"h","url":"https://mcp.example.com",'
        b'"headers":[{"name":"X-Custom","value":"opaque-header-value"}]}]}}\n',
    ),
    (
        "jetbrains llm endpoint auth header (initialize)",
        "anthropic-token-abc123",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
        b'"llmEndpoints":{"anthropic":{"url":"https://llm-gateway.corp.example.com/v1",'
        b'"authHeader":"Bearer anthropic-token-abc123"}}}}\n',
    ),
    (
        "jetbrains setLlmEndpoints headers",
        "routing-secret-xyz",
        b'{"jsonrpc":"2.0","id":2,"method":"setLlmEndpoints","params":{"endpoints":{"openai":'
        b'{"url":"https://gw.example.com/openai/v1","headers":{"X-Route":"routing-secret-xyz"}}}}}\n',
    ),
    (
        "ide proxy url with credentials",
        "hunter2",
        b'{"jsonrpc":"2.0","id":9,"method":"_jetbrains/proxy","params":'
        b'{"httpsProxy":"http://alice:hunter2@proxy.corp:3128"}}\n',
    ),
    (
        "password key",
        "correct-horse-battery",
        b'{"jsonrpc":"2.0","id":9,"method":"_x","params":{"proxyPassword":"correct-horse-battery"}}\n',
    ),
    (
        "terminal env",
        "terminal-env-secret",
        b'{"jsonrpc":"2.0","id":8,"method":"terminal/create","params":{"sessionId":"s",'
        b'"command":"make","env":[{"name":"FOO","value":"terminal-env-secret"}]}}\n',
    ),
    (
        "not json: pattern based",
        "ghp_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZ",
        b"garbage token ghp_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZ and password=opensesame\r\n",
    ),
    (
        "invalid utf-8: pattern based on the bytes",
        "AKIAABCDEFGHIJKLMNOP",
        b"\xff\xfe AKIAABCDEFGHIJKLMNOP \xc3\n",
    ),
]

CLEAN = b'{"jsonrpc":"2.0","id":1,"result":{"authMethods":[{"id":"oauth","name":"Log in"}]}}\n'


def _records(data: bytes) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in data.splitlines()]


def _raw(rec: dict[str, object]) -> bytes:
    if "text" in rec:
        return str(rec["text"]).encode()
    return base64.b64decode(str(rec["base64"]))


def test_every_secret_shape_is_redacted_in_the_export_only(tmp_path: Path) -> None:
    db = tmp_path / "secrets.db"
    stdin = b"".join(frame for _, _, frame in CASES) + CLEAN
    record(db, stdin)  # asserts the proxy forwarded every byte unchanged
    stored = frame_rows(db, 1)
    assert b"".join(r[2] for r in stored if r[1] == "c2a") == stdin  # type: ignore[misc]

    done = cli("export", str(db))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name, secret, _ in CASES:
        assert secret.encode() not in out, name
    assert b"opensesame" not in out
    records = _records(out)
    assert records[0]["redacted"] is True
    frames = [r for r in records if r["type"] == "frame"]
    c2a = [f for f in frames if f["direction"] == "c2a"]
    assert len(c2a) == len(CASES) + 1
    for (name, _, original), rec in zip(CASES, c2a, strict=False):
        assert rec.get("redacted") is True, name
        assert REDACTED.encode() in _raw(rec), name
        assert _raw(rec).endswith(b"\r\n") == original.endswith(b"\r\n"), name
    # JSON frames stay JSON with the same structure around the marker
    init = orjson.loads(_raw(c2a[10]))
    endpoint = init["params"]["llmEndpoints"]["anthropic"]
    assert endpoint == {"url": "https://llm-gateway.corp.example.com/v1", "authHeader": REDACTED}
    env = orjson.loads(_raw(c2a[8]))["params"]["mcpServers"][0]["env"]
    assert env == [{"name": "DB_URL", "value": REDACTED}]
    assert "alice" not in _raw(c2a[12]).decode() and "proxy.corp:3128" in _raw(c2a[12]).decode()
    # a frame without secrets keeps its raw bytes exactly and is not flagged
    assert _raw(c2a[-1]) == CLEAN and "redacted" not in c2a[-1]

    # --no-redact keeps every secret, and the recording itself was never changed
    plain = cli("export", str(db), "--no-redact")
    assert plain.returncode == 0
    plain_c2a = [
        _raw(r) for r in _records(plain.stdout) if r["type"] == "frame" and r["direction"] == "c2a"
    ]
    assert plain_c2a == [frame for _, _, frame in CASES] + [CLEAN]
    assert frame_rows(db, 1) == stored


def test_connection_row_and_stderr_are_redacted(tmp_path: Path) -> None:
    db = tmp_path / "argv.db"
    from tests.conftest import ECHO_AGENT, run_proxy

    done = run_proxy(
        [
            "--record",
            str(db),
            "--label",
            "ci",
            "--",
            *ECHO_AGENT,
            "--api-key",
            "sk-live-0123456789abcdefXYZ",
        ],
        stdin=b"{}\n",
    )
    assert done.returncode == 0
    # an agent stderr line carrying a secret (the echo agent itself only says hello)
    leak = b"auth failed for token ghp_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZ\n"
    with sqlite3.connect(db) as conn_db:
        conn_db.execute(
            "INSERT INTO stderr_lines (connection_id, seq, ts, mono_ns, raw) "
            "SELECT 1, max(seq) + 1, max(ts), max(mono_ns), ? FROM stderr_lines",
            (leak,),
        )
    conn_db.close()
    target = tmp_path / "out.jsonl"
    done = cli("export", str(db), "-o", str(target))
    assert done.returncode == 0, done.stderr
    out = target.read_bytes()
    assert b"sk-live-0123456789abcdefXYZ" not in out and b"ghp_ZZZZ" not in out
    records = _records(out)
    conn = records[1]
    assert conn["agent_command"][-2:] == ["--api-key", REDACTED]  # type: ignore[index]
    assert conn["redacted"] is True
    stderr = [r for r in records if r["type"] == "stderr"]
    assert [r.get("redacted") for r in stderr] == [None, True]
    assert _raw(stderr[0]) == b"echo agent ready\n"
    assert _raw(stderr[1]) == f"auth failed for token {REDACTED}\n".encode()
    # the summary counts the connection row and the stderr line
    assert b", 2 redacted to " in done.stderr, done.stderr


@pytest.mark.parametrize(
    "text",
    [
        "task-assignment-handler-0123456789",
        "Basic instructions for the agent",
        "Bearer authentication is described in RFC 6750",
        "file:///home/user/project/a@b.py",
        "the sessionId is sess_abc123def456",
        "max_tokens: 100",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_frame_without_secrets_is_the_same_object() -> None:
    raw = b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{"inputTokens":3}}}\n'
    assert redact_frame(raw) is raw
    usage = b'{"jsonrpc":"2.0","id":1,"result":{"authMethods":[{"id":"a","name":"n"}]}}\n'
    assert redact_frame(usage) is usage


def test_unicode_escaped_secret_keys_are_found() -> None:
    raw = b'{"params":{"\\u0074oken":"abc-def-ghi"}}\n'
    assert b"abc-def-ghi" not in redact_frame(raw)


def test_binary_frames_get_pattern_redaction() -> None:
    raw = b'{"x":"ghp_0123456789abcdefghijABCDEFGHIJ"}'
    out = redact_frame(raw, binary=True)
    assert out == b'{"x":"[REDACTED]"}'


def test_argv() -> None:
    argv = ["agent", "--token", "t0p", "--password=pw", "--model", "x", "ghp_0123456789abcdefghij0"]
    new, changed = redact_argv(argv)
    assert changed
    assert new == ["agent", "--token", REDACTED, f"--password={REDACTED}", "--model", "x", REDACTED]
