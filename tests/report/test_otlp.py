"""report.otlp: the spans of one session, those naming it and everything under them.

(Whole OTLP exports are tested in formats/test_otlp.py.)
"""

from __future__ import annotations

from acp_proxy.acp.span_records import SpanRecord
from acp_proxy.report.otlp import select_session


def _span(span_id: int, parent: int | None, session: str | None = None) -> SpanRecord:
    attributes = {} if session is None else {"gen_ai.conversation.id": session}
    return SpanRecord(1, span_id, parent, f"span {span_id}", "internal", 0, attributes=attributes)


def test_a_session_keeps_its_spans_and_their_descendants_in_order() -> None:
    spans = [
        _span(1, None),  # the connection
        _span(2, 1, "s-a"),
        _span(3, 2),
        _span(4, 3),
        _span(5, 1, "s-b"),
        _span(6, 5),
        _span(7, 99),  # parent not exported
    ]
    assert [s.span_id for s in select_session(spans, "s-a")] == [2, 3, 4]
    assert [s.span_id for s in select_session(spans, "s-b")] == [5, 6]
    assert select_session(spans, "s-z") == []


def test_a_child_listed_before_its_parent_is_kept_too() -> None:
    spans = [_span(3, 2), _span(2, None, "s-a")]
    assert [s.span_id for s in select_session(spans, "s-a")] == [3, 2]
