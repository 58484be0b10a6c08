"""replay.splice: parsing, replacing and inserting JSON members without touching other bytes.

(:func:`find_spans` on arbitrary JSON is property-tested in test_core_units.py.)
"""

from __future__ import annotations

import pytest

from acp_proxy.replay.splice import Span, find_spans, insert_member, json_value, splice

RAW = b'{ "id" : 7,\n  "params": {"sessionId":"s-1", "n": 1.50} }'


def test_json_value_takes_a_lone_surrogate_and_raises_value_error_on_junk() -> None:
    assert json_value(b'{"a": 1}') == {"a": 1}
    assert json_value(b'"\\ud800"') == "\ud800"
    with pytest.raises(ValueError):
        json_value(b"{nope")


def test_span_text_and_value_are_the_bytes_at_the_path() -> None:
    (span,) = find_spans(RAW, [("params", "sessionId")])
    assert span.path == ("params", "sessionId")
    assert span.text(RAW) == b'"s-1"'
    assert span.value(RAW) == "s-1"
    assert Span((), 0, 3).value(b"{x]") is None


def test_splice_replaces_only_the_spans_and_keeps_every_other_byte() -> None:
    spans = {s.path: s for s in find_spans(RAW, [("id",), ("params", "sessionId")])}
    out = splice(RAW, [(spans[("params", "sessionId")], b'"s-2"'), (spans[("id",)], b"42")])
    assert out == b'{ "id" : 42,\n  "params": {"sessionId":"s-2", "n": 1.50} }'
    assert splice(RAW, []) is RAW


def test_splice_keeps_the_first_of_overlapping_spans() -> None:
    spans = {s.path: s for s in find_spans(RAW, [("params",), ("params", "n")])}
    out = splice(RAW, [(spans[("params", "n")], b"2"), (spans[("params",)], b"{}")])
    assert out == b'{ "id" : 7,\n  "params": {} }'


def test_insert_member_adds_a_first_member_with_a_comma_only_when_needed() -> None:
    (params,) = find_spans(RAW, [("params",)])
    out = insert_member(RAW, params, "cwd", b'"/w"')
    assert out == b'{ "id" : 7,\n  "params": {"cwd":"/w","sessionId":"s-1", "n": 1.50} }'
    empty = b'{"params": { }}'
    (obj,) = find_spans(empty, [("params",)])
    assert insert_member(empty, obj, "k", b"1") == b'{"params": {"k":1 }}'
