"""Lone surrogates (``"\\ud800"``: valid JSON, not encodable as UTF-8) in every indexed member.

Every column the indexer returns must be text SQLite can bind and a terminal can print,
with the member indexed as far as possible (its ``\\uXXXX`` escape stands for the lone
half); the recording of such frames through the real proxy keeps them raw and indexed, and
``show``, ``check``, ``stats`` and ``dump`` read it back cleanly.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_proxy.acp.index import INDEX_COLUMNS, ConnectionIndexer
from acp_proxy.wire.jsonrpc import classify
from acp_proxy.wire.surrogates import (
    classify_encodable,
    encodable,
    escape_lone_surrogates,
)
from tests.conftest import run_proxy

LONE = "\\ud800"  # the JSON escape text of a lone high surrogate (six characters)


def frame(text: str) -> bytes:
    """A frame written as JSON text (so ``\\ud800`` stays an escape, as a peer sends it)."""
    return text.replace("LONE", LONE).encode() + b"\n"


INIT = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
NEW = '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}'
UPDATE = (
    '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",'
    '"update":{"sessionUpdate":"agent_message_chunk","messageId":"m1",'
    '"content":{"type":"text","text":"hi"}}}}'
)

# member -> (frames as JSON text, index of the frame to look at, column, expected value)
CASES: dict[str, tuple[list[tuple[str, str]], int, str, Any]] = {
    "method": ([("c2a", '{"jsonrpc":"2.0","id":1,"method":"xLONE"}')], 0, "method", "xLONE"),
    "notification method": (
        [("c2a", '{"jsonrpc":"2.0","method":"LONE","params":{}}')],
        0,
        "method",
        "LONE",
    ),
    "id": (
        [
            ("c2a", '{"jsonrpc":"2.0","id":"LONE","method":"_x"}'),
            ("a2c", '{"jsonrpc":"2.0","id":"LONE","result":{}}'),
        ],
        1,
        "method",  # the response still pairs with its request ...
        "_x",
    ),
    "id text": (
        [("c2a", '{"jsonrpc":"2.0","id":"LONE","method":"_x"}')],
        0,
        "rpc_id",
        '"LONE"',  # ... and the id keeps its exact JSON text
    ),
    "sessionId": (
        [
            (
                "c2a",
                '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sLONE"}}',
            )
        ],
        0,
        "session_id",
        "sLONE",
    ),
    "sessionId in a result": (
        [("c2a", NEW), ("a2c", '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"sLONE"}}')],
        1,
        "session_id",
        "sLONE",
    ),
    "sessionUpdate": (
        [("a2c", UPDATE.replace("agent_message_chunk", "agent_message_chunkLONE"))],
        0,
        "update_kind",
        "agent_message_chunkLONE",
    ),
    "messageId": ([("a2c", UPDATE.replace('"m1"', '"mLONE"'))], 0, "entity_id", "mLONE"),
    "toolCallId": (
        [
            (
                "a2c",
                '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",'
                '"update":{"sessionUpdate":"tool_call_update","toolCallId":"tLONE"}}}',
            )
        ],
        0,
        "entity_id",
        "tLONE",
    ),
    "content text": ([("a2c", UPDATE.replace('"hi"', '"LONE"'))], 0, "entity_id", "m1"),
    "batch element": (
        [
            (
                "c2a",
                '[{"jsonrpc":"2.0","id":"LONE","method":"bLONE","params":{"sessionId":"sLONE"}}]',
            )
        ],
        0,
        "method",
        "bLONE",
    ),
    "batch session": (
        [("c2a", '[{"jsonrpc":"2.0","id":3,"method":"b","params":{"sessionId":"sLONE"}}]')],
        0,
        "session_id",
        "sLONE",
    ),
}


def _bindable(values: tuple[Any, ...]) -> None:
    db = sqlite3.connect(":memory:")
    for v in values:
        if isinstance(v, str):
            v.encode("utf-8")  # raises on a lone surrogate
        db.execute("SELECT ?", (v,))


@pytest.mark.parametrize("member", list(CASES))
def test_every_indexed_member_is_encodable_text(member: str) -> None:
    frames, at, column, want = CASES[member]
    indexer = ConnectionIndexer()
    rows = [indexer.values(d, frame(text)) for d, text in frames]  # type: ignore[arg-type]
    for row in rows:
        _bindable(row)
    assert rows[at][INDEX_COLUMNS.index(column)] == want.replace("LONE", LONE)


@pytest.mark.parametrize("field", ["clientInfo", "info"])
def test_client_and_agent_info_are_encodable(field: str) -> None:
    indexer = ConnectionIndexer()
    indexer.values(
        "c2a",
        frame(
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
            f'"{field}":{{"name":"cLONE","vLONE":"1"}}}}}}'
        ),
    )
    agent = "agentInfo" if field == "clientInfo" else "info"
    indexer.values(
        "a2c",
        frame(f'{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"{agent}":"aLONE"}}}}'),
    )
    facts = indexer.facts
    assert facts.client_info == {"name": "c" + LONE, "v" + LONE: "1"}
    assert facts.agent_info == "a" + LONE
    orjson.dumps(facts.client_info)  # the recorder stores them as JSON text
    orjson.dumps(facts.agent_info)


def test_the_helper_keeps_pairs_and_escaped_backslashes() -> None:
    assert encodable("ok \u00e9") == "ok \u00e9"
    assert encodable("a\ud800b") == "a\\ud800b"
    pair = b'"\\ud83d\\ude00"'  # a valid pair is one character, left alone
    assert escape_lone_surrogates(pair) == pair
    assert escape_lone_surrogates(b'"\\\\ud800"') == b'"\\\\ud800"'  # an escaped backslash
    assert escape_lone_surrogates(b'"\\udc00\\ud800"') == b'"\\\\udc00\\\\ud800"'  # low, high
    raw = frame('{"jsonrpc":"2.0","id":"LONE","method":"mLONE"}')
    with pytest.raises(TypeError):
        orjson.dumps(classify(raw).method)  # what the plain parser gives
    msg = classify_encodable(raw)
    assert (msg.kind, msg.id, msg.method) == ("request", f'"{LONE}"', "m" + LONE)


def test_the_real_proxy_records_and_reads_back_lone_surrogates(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    lines = [
        frame(
            INIT.replace('"protocolVersion":1', '"protocolVersion":1,"clientInfo":{"name":"cLONE"}')
        ),
        frame('{"jsonrpc":"2.0","id":1,"method":"LONE"}'),
        frame('{"jsonrpc":"2.0","id":"LONE","method":"m","params":{"sessionId":"sLONE"}}'),
        frame(
            UPDATE.replace('"s1"', '"sLONE"').replace('"m1"', '"mLONE"').replace('"hi"', '"LONE"')
        ),
        frame('[{"jsonrpc":"2.0","id":"LONE","method":"bLONE"}]'),
    ]
    data = b"".join(lines)
    done = run_proxy(["--record", str(db), "--", "cat"], stdin=data)
    assert done.returncode == 0 and done.stdout == data, done.stderr  # forwarding exact
    assert b"Traceback" not in done.stderr
    rows = (
        sqlite3.connect(db)
        .execute(
            "SELECT direction, raw, kind, rpc_id, method, session_id, entity_id FROM frames "
            "WHERE direction = 'c2a' ORDER BY seq"
        )
        .fetchall()
    )
    assert [bytes(r[1]) for r in rows] == lines  # recorded raw, every one
    assert [r[2:] for r in rows] == [
        ("request", "0", "initialize", None, None),
        ("request", "1", LONE, None, None),
        ("request", f'"{LONE}"', "m", "s" + LONE, None),
        ("notification", None, "session/update", "s" + LONE, "m" + LONE),
        ("batch", None, "b" + LONE, None, None),
    ]
    (client_info,) = sqlite3.connect(db).execute("SELECT client_info FROM connections").fetchone()
    assert orjson.loads(client_info) == {"name": "c" + LONE}
    dump = run_proxy(["dump", str(db)])
    assert dump.returncode == 0 and f"request {LONE} id=1".encode() in dump.stdout
    for args in (["show"], ["show", "--json"], ["check"], ["check", "--json"], ["stats"]):
        done = run_proxy([*args, str(db)])
        assert done.returncode in (0, 1), (args, done.stderr)  # check: 1 = rules broken
        assert done.stderr == b"", (args, done.stderr)
        assert LONE.encode() in done.stdout or args == ["stats"]
