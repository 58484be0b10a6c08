"""``acp-proxy search URL TEXT``: PostgreSQL's own full-text search finds what FTS5 finds.

A recording is written to a SQLite file, copied into a real PostgreSQL database with
``acp-proxy copy``, and both are searched through the real executable.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from acp_proxy.store.pg import connect_pg, frames_transaction
from tests.acp.conformance.helpers import v1_prelude, write_recording
from tests.commands.test_search import HOSTILE_FRAMES, chunk, connection_one, connection_two
from tests.conftest import proxy_exe, run_proxy
from tests.helpers import insert_frames
from tests.pg_server import PASSWORD

LONG = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
    "rho sigma the needle is here tau upsilon phi chi psi omega and then some more words "
    "follow until the end of this long message"
)


def connection_three() -> list[Any]:
    return [
        *v1_prelude(),
        chunk(LONG),
        chunk(" see README.md, café au lait; foo_bar 1.5 x"),
    ]


QUERIES = [
    "world",
    "42 matches",
    "fell over",
    "session/prompt",
    "crash",
    "second message",
    "needle",
    "README",
    "readme.md",
    "café",
    "foo",
    "Internal error",
    "xylophone",
    "hello",
    "1.5",
]


@pytest.fixture
def stores(tmp_path: Path, pg_url: str) -> tuple[Path, str]:
    db = tmp_path / "rec.db"
    write_recording(
        db, [connection_one(), connection_two(), connection_three()], protocol_version=1
    )
    done = run_proxy(["reindex", str(db)])
    assert done.returncode == 0, done.stderr
    done = run_proxy(["copy", str(db), pg_url])
    assert done.returncode == 0, done.stderr
    return db, pg_url


def search(location: Path | str, *args: str) -> tuple[int, dict[str, Any]]:
    done = run_proxy(["search", str(location), *args, "--json"])
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert PASSWORD.encode() not in done.stdout + done.stderr
    return done.returncode, orjson.loads(done.stdout)


def test_the_same_hits_and_snippets_as_sqlite(stores: tuple[Path, str]) -> None:
    db, url = stores
    for query in QUERIES:
        code_file, in_file = search(db, query)
        code_pg, in_pg = search(url, query)
        assert (code_pg, in_pg["hits"]) == (code_file, in_file["hits"]), query
    assert in_pg["index"] == "database" and in_pg["recording"].startswith("postgresql://acp@")
    code, doc = search(url, "needle")
    assert code == 0
    (hit,) = doc["hits"]
    assert hit["snippet"] == search(db, "needle")[1]["hits"][0]["snippet"]
    assert hit["snippet"].startswith("…") and "[needle]" in hit["snippet"]


def test_filters_and_text_output(stores: tuple[Path, str]) -> None:
    db, url = stores
    for args in (("world", "-c", "2"), ("prompt", "--session", "s2"), ("session", "--limit", "2")):
        assert search(url, *args)[1]["hits"] == search(db, *args)[1]["hits"], args
    texts = [run_proxy(["search", str(loc), "world"]) for loc in (db, url)]
    assert texts[0].returncode == texts[1].returncode == 0
    assert texts[1].stdout == texts[0].stdout and texts[1].stdout.endswith(b"2 hit(s)\n")


def test_the_index_lives_in_the_database_and_follows_new_frames(
    stores: tuple[Path, str], tmp_path: Path
) -> None:
    _, url = stores
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('search_docs')").fetchone() == (None,)
    search(url, "world")
    with psycopg.connect(url) as conn:
        (indexdef,) = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'search_docs_words'"
        ).fetchone()  # type: ignore[misc]
        assert "USING gin (words)" in indexdef
        (docs,) = conn.execute("SELECT count(*) FROM search_docs").fetchone()  # type: ignore[misc]
    assert docs > 0
    search(url, "world")  # up to date: nothing indexed again
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM search_docs").fetchone() == (docs,)

    more = tmp_path / "more.db"
    write_recording(more, [[*v1_prelude(), chunk("a brand new zebra")]], protocol_version=1)
    done = run_proxy(["copy", str(more), url])
    assert done.returncode == 0, done.stderr
    (hit,) = search(url, "zebra")[1]["hits"]
    assert hit["connection"] == 4 and hit["snippet"] == "a brand new [zebra]"


def test_bad_input_is_one_line(pg_url: str) -> None:
    done = run_proxy(["search", pg_url, "world"])
    err = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in err and PASSWORD not in err
    assert err.strip().splitlines() == [err.strip()] and "holds no acp-proxy recording" in err


def test_a_read_only_role_searches_in_memory(stores: tuple[Path, str], pg_server: Any) -> None:
    db, url = stores
    name = url.rsplit("/", 1)[1]
    pg_server.psql(
        f"CREATE ROLE reader LOGIN PASSWORD '{PASSWORD}'; GRANT CONNECT ON DATABASE {name} "
        "TO reader",
        name,
    )
    pg_server.psql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", name)
    reader = url.replace("acp:", "reader:", 1)
    done: subprocess.CompletedProcess[bytes] = run_proxy(["search", reader, "world", "--json"])
    assert done.returncode == 0, done.stderr
    doc = orjson.loads(done.stdout)
    assert doc["index"] == "memory"
    assert doc["hits"] == search(db, "world")[1]["hits"]
    assert b"read-only: indexed in memory" in done.stderr


def _said(text: str) -> bytes:
    return (
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "s9",
                    "update": {"sessionUpdate": "tool_call", "toolCallId": "t", "title": text},
                },
            }
        )
        + b"\n"
    )


def test_a_batch_committed_after_a_higher_id_is_still_indexed(pg_url: str) -> None:
    # Two writers (hosts): A draws an id, B the next and commits; a search runs while A
    # is in progress (and waits for it), then A commits. A's frame must be found later.
    alpha = insert_frames(pg_url, [("c2a", _said("hello"))], index=True)
    beta = insert_frames(pg_url, [("c2a", _said("hello"))], index=True)
    slow = connect_pg(pg_url, create=False)
    with frames_transaction(slow):
        insert_frames(slow, [("a2c", _said("saffron late"))], connection_id=alpha, first_seq=2,
                      index=True)  # fmt: skip
        insert_frames(pg_url, [("a2c", _said("umber early"))], connection_id=beta, first_seq=2,
                      index=True)  # fmt: skip
        searching = subprocess.Popen(
            [*proxy_exe(), "search", pg_url, "umber", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)  # (it waits for A: a writer in progress holds an id below B's)
        assert searching.poll() is None
    slow.close()
    out, err = searching.communicate(timeout=60)
    assert searching.returncode == 0, err
    assert [h["connection"] for h in orjson.loads(out)["hits"]] == [beta]
    code, found = search(pg_url, "saffron")
    assert code == 0
    assert [(h["connection"], h["seq"]) for h in found["hits"]] == [(alpha, 2)]


def test_a_connection_deleted_after_it_was_indexed_is_never_a_hit(
    stores: tuple[Path, str],
) -> None:
    _, url = stores
    assert {h["connection"] for h in search(url, "world")[1]["hits"]} == {1, 2}
    with psycopg.connect(url, autocommit=True) as conn:  # its rows, not the index's text
        conn.execute("DELETE FROM frames WHERE connection_id = 1")
        conn.execute("DELETE FROM connections WHERE id = 1")
        assert conn.execute(
            "SELECT count(*) FROM search_docs WHERE connection_id = 1"
        ).fetchone() != (0,)
    code, doc = search(url, "world")
    assert (code, doc["index"]) == (0, "database")
    assert [h["connection"] for h in doc["hits"]] == [2]
    assert search(url, "morning")[0] == 1


@pytest.mark.parametrize("dropped", ["search_docs", "search_state"])
def test_a_partly_dropped_index_is_built_again(stores: tuple[Path, str], dropped: str) -> None:
    _, url = stores
    before = search(url, "world")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {dropped}")
    assert search(url, "world") == before


def test_frames_with_a_lone_surrogate_or_nul_are_copied_recorded_and_searched(
    tmp_path: Path, pg_url: str
) -> None:
    db = tmp_path / "rec.db"
    insert_frames(db, HOSTILE_FRAMES, index=True)
    done = run_proxy(["copy", str(db), pg_url])
    assert done.returncode == 0, done.stderr
    # and recorded live by the real proxy: the same lines through `cat` (and back)
    lines = b"".join(raw + b"\n" for _, raw in HOSTILE_FRAMES)
    done = run_proxy(["--record", pg_url, "--", "cat"], stdin=lines)
    assert done.returncode == 0 and done.stdout == lines, done.stderr
    for location in (db, pg_url):
        code, doc = search(location, "lone surrogate")
        assert code == 0 and len(doc["hits"]) == (1 if location == db else 2), location
        assert doc["hits"][0]["snippet"] == "hello \ufffd [lone] [surrogate]"
        assert all("\ufffd [lone]" in h["snippet"] for h in doc["hits"])  # (cat: both ways)
        code, doc = search(location, "here", "-s", "s\\u0000")  # NUL kept as its escape
        assert code == 0 and doc["hits"][0]["snippet"] == "nul   [here]", location
        assert search(location, "byte")[0] == 0
        code, doc = search(location, "nul tool")
        assert code == 0 and doc["hits"][0]["session"] == "s\\u0000", location
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(
            "SELECT DISTINCT method FROM frames WHERE kind = 'request'"
        ).fetchall() == [("x\\u0000y",)]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('"', "no words to search for"),
        (" ".join(f"w{i}" for i in range(17_000)), "at most 1,000 are searched"),
        (" ".join(f"w{i}" for i in range(33)), "33 words: at most 32"),
    ],
)
def test_hostile_queries_are_refused_on_postgresql(
    stores: tuple[Path, str], text: str, said: str
) -> None:
    done = run_proxy(["search", stores[1], text])
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err and said in err, err


def test_many_words_and_repeats_are_searched_on_postgresql(stores: tuple[Path, str]) -> None:
    db, url = stores
    for text in (" ".join(["world"] * 160), "hello " + " ".join(f"w{i}" for i in range(31))):
        (code, doc), (code_file, in_file) = search(url, text), search(db, text)
        assert (code, doc["hits"]) == (code_file, in_file["hits"]), text[:20]
    assert search(url, " ".join(["world"] * 160))[0] == 0
