"""``acp-proxy search`` through the real executable: what is found, where, and the index."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.acp.conformance.helpers import SID, A, C, er, ok, rq, up, v1_prelude, write_recording
from tests.conftest import proxy_exe, run_proxy
from tests.helpers import insert_frames, unwritable
from tests.web.helpers import web_server

S2 = "s2"


def chunk(text: str, sid: str = SID, variant: str = "agent_message_chunk") -> Any:
    return A(up(variant, sid=sid, content={"type": "text", "text": text}))


def connection_one() -> list[Any]:
    return [
        *v1_prelude(),
        C(rq(2, "session/prompt", sessionId=SID, prompt=[{"type": "text", "text": "Say hi"}])),
        chunk("Hello wo"),  # a word split across two chunks of one message: #6, #7
        chunk("rld and good morning"),
        A(up("tool_call", toolCallId="t1", title="grep TODO", kind="search", status="pending")),
        A(
            up(
                "tool_call_update",
                toolCallId="t1",
                status="completed",
                content=[
                    {"type": "content", "content": {"type": "text", "text": "found 42 matches"}}
                ],
            )
        ),
        chunk("a second message after the tool"),  # #10: a new message, not joined
        A(ok(2, stopReason="end_turn")),
        C(rq(3, "session/new", cwd="/work", mcpServers=[])),
        A(ok(3, sessionId=S2)),
        C(
            rq(4, "session/prompt", sessionId=S2, prompt=[{"type": "text", "text": "crash now"}])
        ),  # #14
        A(er(4, -32603, "Internal error: the agent fell over")),  # #15
    ]


def connection_two() -> list[Any]:
    return [*v1_prelude(), chunk("Hello again world")]


def two_connections(tmp_path: Path) -> Path:
    """A recording of :func:`connection_one` and :func:`connection_two`, indexed."""
    path = tmp_path / "rec.db"
    write_recording(path, [connection_one(), connection_two()], protocol_version=1)
    done = run_proxy(["reindex", str(path)])
    assert done.returncode == 0, done.stderr.decode()
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return two_connections(tmp_path)


def search(db: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = run_proxy(["search", str(db), *args, "--json"])
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return done.returncode, orjson.loads(done.stdout)


def test_a_word_split_across_chunks_is_found_in_every_connection(db: Path) -> None:
    code, doc = search(db, "world")
    assert code == 0
    assert doc["index"] == "file"
    first, second = doc["hits"]
    assert (first["connection"], first["seq"], first["last_seq"], first["frames"]) == (1, 6, 7, 2)
    assert first["session"] == SID and first["field"] == "message"
    assert first["variant"] == "agent_message_chunk"
    assert first["snippet"] == "Hello [world] and good morning"
    assert (second["connection"], second["seq"], second["frames"]) == (2, 5, 1)
    assert isinstance(first["frame"], int) and second["frame"] > first["frame"]


def test_tool_output_errors_methods_and_prompts(db: Path) -> None:
    (tool,) = search(db, "42 matches")[1]["hits"]
    assert (tool["seq"], tool["field"], tool["variant"]) == (9, "tool", "tool_call_update")
    (error,) = search(db, "fell over")[1]["hits"]
    assert (error["seq"], error["field"], error["session"]) == (15, "error", S2)
    assert "-32603" in error["snippet"]
    methods = search(db, "session/prompt")[1]["hits"]
    assert {(h["seq"], h["field"]) for h in methods} >= {(5, "prompt"), (14, "prompt")}
    (prompt,) = search(db, "crash")[1]["hits"]
    assert prompt["seq"] == 14 and prompt["field"] == "prompt"
    # a new message after the tool call is its own document
    (second,) = search(db, "second message")[1]["hits"]
    assert (second["seq"], second["frames"]) == (10, 1)


def test_filters_limit_and_no_hits(db: Path) -> None:
    assert [h["connection"] for h in search(db, "world", "--connection", "2")[1]["hits"]] == [2]
    assert {h["session"] for h in search(db, "prompt", "--session", S2)[1]["hits"]} == {S2}
    assert len(search(db, "session", "--limit", "2")[1]["hits"]) == 2
    code, doc = search(db, "xylophone")
    assert code == 1 and doc["hits"] == []
    text = run_proxy(["search", str(db), "world"])
    assert text.returncode == 0
    lines = text.stdout.decode().splitlines()
    # the matching text first, then where it is
    assert lines[0].startswith(
        "Hello [world] and good morning · connection 1 #6-#7 (2 frames) frame "
    )
    assert lines[0].endswith("[s1] message session/update [agent_message_chunk]")
    assert lines[-1] == "2 hit(s)"


def tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_the_index_is_kept_in_the_recording_and_updated_incrementally(db: Path) -> None:
    assert not any(t.startswith("search_") for t in tables(db))
    search(db, "world")
    assert {"search_docs", "search_docs_fts", "search_state"} <= tables(db)
    with sqlite3.connect(db) as conn:
        docs = conn.execute("SELECT count(*) FROM search_docs").fetchone()[0]
        (last,) = conn.execute("SELECT last_frame_id FROM search_state").fetchone()
        assert last == conn.execute("SELECT max(id) FROM frames").fetchone()[0]
    search(db, "world")  # nothing new: nothing indexed twice
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM search_docs").fetchone()[0] == docs
    # a third connection arrives (as a live recorder would add it): only it is indexed
    export = run_proxy(["export", str(db), "--connection", "2"])
    assert export.returncode == 0, export.stderr.decode()
    imported = run_proxy(["import", "--allow-duplicates", "-", str(db)], stdin=export.stdout)
    assert imported.returncode == 0, imported.stderr.decode()
    hits = search(db, "again")[1]["hits"]
    assert [h["connection"] for h in hits] == [2, 3]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM search_docs").fetchone()[0] == docs + 5


def read_only_copy(db: Path, tmp_path: Path) -> Path:
    """A copy of ``db`` alone in its own directory, to be made unwritable by the caller."""
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    ro = ro_dir / "rec.db"
    shutil.copy(db, ro)
    return ro


def search_read_only(ro: Path, text: str) -> subprocess.CompletedProcess[bytes]:
    """``search RO TEXT --json`` while ``ro`` and its folder cannot be written (root included)."""
    with unwritable(ro.parent):
        return subprocess.run(
            [*proxy_exe(), "search", str(ro), text, "--json"], capture_output=True, timeout=60
        )


def test_a_read_only_recording_is_searched_in_memory_and_not_touched(
    db: Path, tmp_path: Path
) -> None:
    ro = read_only_copy(db, tmp_path)
    ro_dir = ro.parent
    before = ro.read_bytes()
    done = search_read_only(ro, "world")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.decode() == (
        f"acp-proxy: {ro} is read-only: indexed in memory for this search (not saved)\n"
    )
    doc = orjson.loads(done.stdout)
    assert doc["index"] == "memory" and len(doc["hits"]) == 2
    assert ro.read_bytes() == before
    assert sorted(p.name for p in ro_dir.iterdir()) == ["rec.db"]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    not_db = tmp_path / "x.db"
    not_db.write_bytes(b"hello")
    done = run_proxy(["search", str(not_db), "world"])
    assert done.returncode == 1
    assert len(done.stderr.decode().strip().splitlines()) == 1
    assert done.stderr.startswith(b"Error: ")
    empty = run_proxy(["search", str(not_db), "  "])
    assert empty.returncode == 2 and b"no words to search for" in empty.stderr


def test_a_message_still_growing_is_joined_across_searches(tmp_path: Path) -> None:
    """A live recording: a search sees the first chunk, the next search the whole message."""
    path = tmp_path / "live.db"
    write_recording(path, [[*v1_prelude(), chunk("Hello wo")]], protocol_version=1)
    assert run_proxy(["reindex", str(path)]).returncode == 0
    assert search(path, "world")[0] == 1
    assert [h["seq"] for h in search(path, "Hello")[1]["hits"]] == [5]
    # the recorder appends the next chunk
    insert_frames(path, [chunk("rld, again")], connection_id=1, first_seq=6)
    assert run_proxy(["reindex", str(path)]).returncode == 0
    (hit,) = search(path, "world")[1]["hits"]
    assert (hit["seq"], hit["last_seq"], hit["frames"]) == (5, 6, 2)
    assert hit["snippet"] == "Hello [world], again"


def test_frames_replaced_in_place_rebuild_the_index(db: Path) -> None:
    assert search(db, "again")[0] == 0
    with sqlite3.connect(db) as conn:  # the last frame is replaced, its id reused
        (last,) = conn.execute("SELECT max(id) FROM frames").fetchone()
        raw = chunk("Goodbye cruel world")[1]
        conn.execute("UPDATE frames SET raw = ?, size = ? WHERE id = ?", (raw, len(raw), last))
    code, doc = search(db, "again")
    assert code == 1 and doc["hits"] == []
    (hit,) = search(db, "goodbye")[1]["hits"]
    assert hit["frame"] == last


def test_an_index_saved_before_the_file_became_read_only_is_used(db: Path, tmp_path: Path) -> None:
    search(db, "world")  # indexed and saved while writable
    ro = read_only_copy(db, tmp_path)
    before = ro.read_bytes()
    done = search_read_only(ro, "world")
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
    doc = orjson.loads(done.stdout)
    assert doc["index"] == "file" and len(doc["hits"]) == 2
    assert ro.read_bytes() == before


def test_a_connection_deleted_after_it_was_indexed_is_never_a_hit(db: Path) -> None:
    assert {h["connection"] for h in search(db, "world")[1]["hits"]} == {1, 2}
    with sqlite3.connect(db) as con:  # by hand: its frames and its row, not the index's text
        con.execute("DELETE FROM frames WHERE connection_id = 1")
        con.execute("DELETE FROM connections WHERE id = 1")
    code, doc = search(db, "world")
    assert (code, doc["index"]) == (0, "file")
    assert [h["connection"] for h in doc["hits"]] == [2]
    assert search(db, "morning")[0] == 1  # only connection 1 said it


def test_the_first_index_of_a_big_recording_shows_progress(tmp_path: Path) -> None:
    big = tmp_path / "big.db"
    chunks = [chunk(f"word{i} ", variant="agent_thought_chunk") for i in range(12_000)]
    write_recording(big, [[*v1_prelude(), *chunks]], protocol_version=1)
    done = run_proxy(["search", str(big), "word11999", "--json"])
    assert done.returncode == 0, done.stderr.decode()
    total = 12_000 + len(v1_prelude())
    assert done.stderr.decode().splitlines() == [
        f"acp-proxy search: indexed 5000/{total} frames (41%)",
        f"acp-proxy search: indexed 10000/{total} frames (83%)",
    ]
    assert orjson.loads(done.stdout)["hits"][0]["snippet"].endswith("[word11999] ")
    again = run_proxy(["search", str(big), "word7"])  # up to date: nothing to index
    assert (again.returncode, again.stderr) == (0, b"")
    write_recording(big, [[*v1_prelude(), *chunks]], protocol_version=1)  # a second one
    quiet = run_proxy(["search", str(big), "word7", "--quiet", "--json"])
    assert (quiet.returncode, quiet.stderr) == (0, b"")
    assert {h["connection"] for h in orjson.loads(quiet.stdout)["hits"]} == {1, 2}


@pytest.mark.parametrize("dropped", ["search_docs", "search_docs_fts", "search_state"])
def test_a_partly_dropped_index_is_built_again(db: Path, dropped: str) -> None:
    assert search(db, "world")[0] == 0  # the index, saved in the file
    with sqlite3.connect(db) as con:
        con.execute(f"DROP TABLE {dropped}")
    code, doc = search(db, "world")
    assert (code, doc["index"], len(doc["hits"])) == (0, "file", 2)


# -- hostile queries and frames (issues 21, 22) ----------------------------------------------


def refused(db: Path | str, text: str | bytes) -> str:
    """Search ``text`` (bytes: as the shell passes them) and return the refusal on stderr."""
    done = subprocess.run([*proxy_exe(), "search", str(db), text], capture_output=True, timeout=60)
    err = done.stderr.decode()
    assert done.returncode == 2 and done.stdout == b"" and "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("acp-proxy search: ")]
    return line


@pytest.mark.parametrize("text", ['"', '""', '"""', "* ( ) : ^ -", '"\t"'])
def test_a_query_without_words_is_refused_in_one_line(db: Path, text: str) -> None:
    assert "no words to search for" in refused(db, text)


def test_query_text_is_words_never_fts5_syntax(db: Path) -> None:
    assert search(db, "world")[0] == 0
    for text in ("world OR xylophone", "NOT world", 'world" OR "x', "NEAR(world morning)"):
        code, doc = search(db, text)  # each word must occur: "or", "not", "near" do not
        assert (code, doc["hits"]) == (1, []), text
    code, doc = search(db, "world*")  # the star is a word break, not a prefix query
    assert code == 0 and len(doc["hits"]) == 2
    code, doc = search(db, '"good" morning')
    assert code == 0 and doc["hits"][0]["snippet"].endswith("[good] [morning]")


def test_bytes_that_are_not_utf8_and_queries_beyond_the_limits_are_refused(db: Path) -> None:
    assert "TEXT: is not valid UTF-8" in refused(db, b"world \xff")
    long_query = " ".join(["a"] * 17_000)
    assert "at most 1,000 are searched" in refused(db, long_query)
    assert "33 words: at most 32" in refused(db, " ".join(f"w{i}" for i in range(33)))
    assert "at most 32" in refused(db, "_".join(["a"] * 33))  # one piece, 33 words
    code, _ = search(db, " ".join(["world"] * 100))  # repeats count once
    assert code == 0


def recorded(path: Path, frames: list[Any]) -> Path:
    """A recording of one connection of ``frames``, index columns derived (``reindex``)."""
    write_recording(path, [frames], protocol_version=1)
    done = run_proxy(["reindex", str(path)])
    assert done.returncode == 0, done.stderr.decode()
    return path


def repetitive(tmp_path: Path) -> Path:
    """A recording whose messages repeat one word: 800 times, and to the 64 KiB cap."""
    frames = [*v1_prelude(), chunk("a " * 800), A(ok(9, text="a " * 40_000 + "b"))]
    return recorded(tmp_path / "rep.db", frames)


# The cost was FTS5's snippet(): 100 repeats of "a" over 800 a's took 52 s, the seven phrases
# "a", "a a", ... over 32k a's 3 min 13 s. The bound here is the subprocess timeout (60 s).
HEAVY_QUERIES = [
    " ".join(["a"] * 100),
    " ".join("_".join(["a"] * k) for k in range(1, 8)),
    "_".join(["a"] * 32),
]


@pytest.mark.parametrize("text", HEAVY_QUERIES)
def test_a_query_repeating_a_word_of_a_repetitive_message_is_cheap(
    tmp_path: Path, text: str
) -> None:
    db = repetitive(tmp_path)
    code, doc = search(db, text)
    assert code == 0 and len(doc["hits"]) == 2
    assert all(h["snippet"].startswith("[a") for h in doc["hits"])


HOSTILE_FRAMES: list[tuple[Any, bytes]] = [
    ("a2c", chunk("")[1].replace(b'"text":""', b'"text":"hello \\ud800 lone surrogate"')),
    (
        "c2a",
        b'{"jsonrpc":"2.0","id":1,"method":"x\\u0000y","params":{"sessionId":"s\\u0000",'
        b'"t":"nul \\u0000 here"}}',
    ),
    ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"t":"nul\\u0000byte done"}}'),
    (
        "a2c",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\\u0000",'
        b'"update":{"sessionUpdate":"tool_call","toolCallId":"t\\u0000","title":"nul tool"}}}',
    ),
]
"""Frames whose text neither engine stores as it is: a lone surrogate; NUL (PostgreSQL)."""


def test_a_frame_with_a_lone_surrogate_or_nul_leaves_every_search_working(
    tmp_path: Path,
) -> None:
    db = tmp_path / "rec.db"
    insert_frames(db, HOSTILE_FRAMES, index=True)
    code, doc = search(db, "lone surrogate")
    assert code == 0 and doc["hits"][0]["snippet"] == "hello \ufffd [lone] [surrogate]"
    code, doc = search(db, "here")
    assert code == 0 and doc["hits"][0]["snippet"] == "nul   [here]"  # NUL: a space
    assert search(db, "byte")[0] == 0


def test_only_the_first_64_kib_of_a_message_is_indexed(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    text = "early " + "b " * 120_000 + "farword"  # 240 KB in
    message = [chunk(text), A(up("plan", entries=[])), chunk(text[:100_000]), chunk(text[100_000:])]
    recorded(db, [*v1_prelude(), *message])  # one chunk, then a run of two
    code, doc = search(db, "early")
    assert code == 0 and [h["frames"] for h in doc["hits"]] == [1, 2]
    assert search(db, "farword") == (1, search(db, "farword")[1] | {"hits": []})


def test_text_output_is_one_line_per_hit(tmp_path: Path) -> None:
    db = tmp_path / "lines.db"
    recorded(db, [*v1_prelude(), chunk("first line\nthe needle\r\n\tthird line")])
    done = run_proxy(["search", str(db), "needle"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [
        "first line the [needle] third line · "
        "connection 1 #5 frame 5 [s1] message session/update [agent_message_chunk]",
        "1 hit(s)",
    ]


def test_a_session_or_connection_the_recording_lacks_is_said(db: Path) -> None:
    for args, said in [
        (["-s", "nope"], "Error: no session 'nope' in this recording"),
        (["-c", "9"], "Error: no connection 9 in this recording"),
        (["-c", "2", "-s", S2], f"Error: session '{S2}' is not in connection 2"),
    ]:
        done = run_proxy(["search", str(db), "world", *args])
        assert done.returncode == 1 and done.stdout == b"", args
        assert done.stderr.decode().splitlines() == [said], args
    assert search(db, "crash", "-s", S2)[0] == 0


def api_search(base: str, query: str) -> tuple[int, Any]:
    """``GET /api/search?<query>`` of the real inspector: (status, JSON body)."""
    url = base.rstrip("/") + "/api/search?" + query
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


def test_the_inspector_answers_hostile_queries_with_a_json_400(tmp_path: Path) -> None:
    db = repetitive(tmp_path)
    insert_frames(db, HOSTILE_FRAMES, index=True)
    with web_server(db) as base:
        words = "+".join(f"w{i}" for i in range(33))
        hostile = ["q=%00", "q=%22", "q=%22%22%22", "q=-+*", "q=" + words, "q=" + "a" * 1001]
        for query in hostile:
            status, body = api_search(base, query)
            assert status == 400 and set(body) == {"error"}, (query, body)
            assert "damaged" not in body["error"]
        for text in HEAVY_QUERIES:
            status, body = api_search(base, "q=" + urllib.parse.quote(text))
            assert status == 200 and len(body["hits"]) == 2, text
        status, body = api_search(base, "q=lone+surrogate")
        assert status == 200 and len(body["hits"]) == 1
        status, body = api_search(base, "q=%FFhere")  # not UTF-8: a word break
        assert status == 200 and len(body["hits"]) == 1
