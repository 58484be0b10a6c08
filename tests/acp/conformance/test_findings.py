"""acp.conformance.findings: a finding as JSON and frame numbers as ``#5,#6\u2013#15`` (an en dash).

(How the checker groups and caps findings is tested through it in test_rules.py.)
"""

from __future__ import annotations

from acp_proxy.acp.conformance.findings import Finding, frames_text
from acp_proxy.acp.rules import RULES


def test_frames_text_makes_ranges_of_three_or_more_consecutive_frames() -> None:
    assert frames_text([]) == ""
    assert frames_text([5]) == "#5"
    assert frames_text([5, 6]) == "#5,#6"
    assert frames_text([1, 5, 6, 7, 8, 10, 11]) == "#1,#5\u2013#8,#10,#11"
    assert frames_text([3, 4, 5], sep=" ") == "#3\u2013#5"


def test_finding_to_json_names_everything_and_quotes_its_rule_for_the_side() -> None:
    rule = RULES[0]
    f = Finding(rule.id, rule.tier, 3, (4, 9), "agent: said no", "s1", "agent")
    assert f.rule_text == rule.text_for("agent")
    assert f.to_json() == {
        "rule": rule.id,
        "tier": rule.tier,
        "side": "agent",
        "connection": 3,
        "seqs": [4, 9],
        "session": "s1",
        "reason": "agent: said no",
        "rule_text": rule.text_for("agent"),
    }
