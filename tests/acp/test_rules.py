"""acp.rules: which versions a rule applies to and its text as it applies to each side.

(Every rule's breaking and keeping transcripts are in conformance/test_rules.py.)
"""

from __future__ import annotations

from acp_proxy.acp.rules import RULE_BY_ID, RULES, TIER_RANK, TIERS, Rule

TEMPLATE = "The {Side} MUST answer the {other}; a {side} that does not is broken."


def test_applies_to_follows_the_negotiated_version() -> None:
    every, v1, v2 = (Rule("x.y", "error", a, "t") for a in ("all", "v1", "v2"))
    assert [every.applies_to(v) for v in (1, 2, 3)] == [True, True, True]
    assert [v1.applies_to(v) for v in (0, 1, 2)] == [True, True, False]
    assert [v2.applies_to(v) for v in (1, 2, 3)] == [False, True, True]


def test_text_for_names_the_side_that_broke_it_and_the_other_one() -> None:
    rule = Rule("x.y", "error", "all", TEMPLATE)
    assert (
        rule.text_for("agent")
        == "The Agent MUST answer the client; a agent that does not is broken."
    )
    assert rule.text_for("client") == (
        "The Client MUST answer the agent; a client that does not is broken."
    )
    assert (
        rule.text_for(None)
        == rule.text
        == ("The Peer MUST answer the other peer; a peer that does not is broken.")
    )


def test_a_side_with_its_own_wording_and_a_one_sided_rule() -> None:
    worded = Rule("x.y", "info", "all", TEMPLATE, by_side=(("client", "Clients say it so."),))
    assert worded.text_for("client") == "Clients say it so."
    assert worded.text_for("agent").startswith("The Agent MUST")
    agent_only = Rule("x.y", "info", "all", TEMPLATE, breaker="agent")
    assert agent_only.text == agent_only.text_for("agent")


def test_the_table_has_unique_ids_known_tiers_and_formats_for_both_sides() -> None:
    assert len(RULE_BY_ID) == len(RULES)
    assert all(RULE_BY_ID[r.id] is r for r in RULES)
    assert sorted(TIERS, key=TIER_RANK.__getitem__) == ["info", "warning", "error"]
    for rule in RULES:
        assert rule.tier in TIERS and rule.applies in ("all", "v1", "v2")
        assert "{" not in rule.text_for("client") + rule.text_for("agent") + rule.text
