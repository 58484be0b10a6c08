"""store.search_text: the text of a JSON value as searched, and a hit's snippet.

(Query phrases, storable text and frame documents are tested with search in test_search.py.)
"""

from __future__ import annotations

from acp_proxy.store.search_text import TEXT_CAP, snippet, strings_of

WORDS = " ".join(f"w{i}" for i in range(40))


def test_strings_of_keeps_strings_and_numbers_but_not_ids_tags_or_booleans() -> None:
    value = {
        "jsonrpc": "2.0",
        "id": 7,
        "params": {"sessionId": "s1", "update": {"sessionUpdate": "x", "text": "hi", "ok": True}},
        "list": ["a", 1.5, None],
    }
    assert strings_of(value) == "7 hi a 1.5"
    assert len(strings_of(["x" * TEXT_CAP, "more"])) == TEXT_CAP


def test_snippet_is_a_window_centred_on_the_first_match_with_cuts_marked() -> None:
    expected = "…" + " ".join(f"w{i}" for i in range(13, 20)) + " [w20] "
    assert snippet(WORDS, [["w20"]]) == expected + " ".join(f"w{i}" for i in range(21, 29)) + "…"
    assert snippet(WORDS, [["w0"]], size=4) == "[w0] w1 w2 w3…"
    assert snippet(WORDS, [["w38", "w39"]], size=4) == "…w36 w37 [w38 w39]"


def test_snippet_brackets_a_whole_phrase_and_keeps_the_text_between_words() -> None:
    assert snippet("Hello, big World of tests", [["big", "world"]]) == "Hello, [big World] of tests"
    assert snippet("a b c", [["zz"]]) == "a b c"
    assert snippet("!!!", [["zz"]]) == "!!!"
