"""The search index as a library (what the inspector's text filter calls), in process."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from acp_proxy.store.search import open_search_index
from acp_proxy.store.search_text import QueryError, document_of, query_phrases, storable
from acp_proxy.wire.frame import Frame
from tests.acp.conformance.helpers import write_recording
from tests.commands.test_search import connection_one, connection_two
from tests.conftest import run_proxy


def frame(raw: bytes, **columns: object) -> Frame:
    base: dict[str, object] = {
        "id": 1,
        "connection_id": 1,
        "seq": 1,
        "ts": 0.0,
        "mono_ns": 0,
        "direction": "a2c",
        "raw": raw,
        "size": len(raw),
        "binary": False,
        "kind": "notification",
        "rpc_id": None,
        "method": None,
        "session_id": None,
        "update_kind": None,
        "entity_type": None,
        "entity_id": None,
    }
    base.update(columns)
    return Frame(**base)  # type: ignore[arg-type]


def test_documents_say_what_a_person_searches_for() -> None:
    update = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s1",
            "update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "grep"},
        },
    }
    raw = orjson.dumps(update)
    assert document_of(frame(raw, method="session/update", update_kind="tool_call")) == (
        "tool",
        "grep",
    )  # ids and type tags are not text
    error = b'{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error"}}'
    assert document_of(frame(error, kind="response")) == ("error", "error -32603 Internal error ")
    assert document_of(frame(b"\xff not json", binary=False)) == ("raw", "\ufffd not json")


def test_the_inspector_calls_the_same_index(tmp_path: Path) -> None:
    db = tmp_path / "rec.db"
    write_recording(db, [connection_one(), connection_two()], protocol_version=1)
    assert run_proxy(["reindex", str(db)]).returncode == 0
    index = open_search_index(db)
    try:
        assert index.in_file
        hits = index.search("world", connection_id=1)
        assert [(h.seq, h.last_seq, h.frames) for h in hits] == [(6, 7, 2)]
        assert index.update() == 0  # up to date: nothing indexed again
    finally:
        index.close()


def test_query_phrases_are_words_without_syntax() -> None:
    assert query_phrases('"README says" OR session/prompt -32603 README') == [
        "readme",
        "says",
        "or",
        "session prompt",
        "32603",
    ]
    for text in ('"', '""', "  ", "\x00", "\ud800", "-*()"):
        with pytest.raises(QueryError, match="no words"):
            query_phrases(text)
    with pytest.raises(QueryError, match="at most 32"):
        query_phrases(" ".join(f"w{i}" for i in range(33)))
    with pytest.raises(QueryError, match="at most 1,000"):
        query_phrases("a" * 1001)


def test_storable_text_has_no_lone_surrogate_or_nul() -> None:
    assert storable("a\x00b\ud800c\U0001f600") == "a b\ufffdc\U0001f600"
    assert storable("plain") == "plain"
