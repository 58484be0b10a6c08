"""report.findings: conformance findings as one line, JUnit XML, SARIF and ``check --json``.

(The documents are validated against the official schemas in commands/test_check_report.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

from acp_proxy.acp.conformance import Finding
from acp_proxy.acp.rules import RULES
from acp_proxy.analysis.connection import ConnectionReport
from acp_proxy.report.findings import check_json, finding_line, junit_xml, sarif_json

ERROR_RULE = next(r for r in RULES if r.tier == "error" and r.applies_to(1))
INFO_RULE = next(r for r in RULES if r.tier == "info" and r.applies_to(1))
ERROR = Finding(ERROR_RULE.id, "error", 1, (3, 4, 5), "agent: broke it", "s1", "agent")
INFO = Finding(INFO_RULE.id, "info", 1, (), "a note")
REC = Path("/r/rec.sqlite")


def _report() -> ConnectionReport:
    return ConnectionReport(
        1,
        "stdio",
        1,
        9,
        [ERROR, INFO],
        {"error": 1, "warning": 0, "info": 1},
        {INFO_RULE.id: 2},
    )


def test_finding_line_names_tier_side_frames_and_session() -> None:
    assert finding_line(ERROR) == "error by the agent at #3\u2013#5 [s1]: agent: broke it"
    assert finding_line(INFO) == "info in the recording at no frame: a note"


def test_junit_fails_the_broken_rule_and_prints_the_others_as_output() -> None:
    root = ET.fromstring(junit_xml([_report()], REC))
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert root.get("failures") == suite.get("failures") == "1"
    assert root.get("tests") == str(len(cases))
    failure = cases[ERROR_RULE.id].find("failure")
    assert failure is not None and failure.get("message") == finding_line(ERROR)
    out = cases[INFO_RULE.id].findtext("system-out") or ""
    assert out.splitlines() == [
        finding_line(INFO),
        "... and 2 more finding(s) (raise --max-per-rule)",
    ]
    quiet = ET.fromstring(junit_xml([_report()], REC, min_tier="error"))
    assert not [c for c in quiet.iter("system-out") if INFO.reason in (c.text or "")]


def test_sarif_has_a_result_per_shown_finding_located_at_its_first_frame() -> None:
    (run,) = json.loads(sarif_json([_report()], REC))["runs"]
    assert [r["ruleId"] for r in run["results"]] == [ERROR_RULE.id, INFO_RULE.id]
    first = run["results"][0]
    assert first["level"] == "error" and run["results"][1]["level"] == "note"
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "/r/rec.sqlite"},
        "region": {"startLine": 3},
    }
    assert run["tool"]["driver"]["rules"][first["ruleIndex"]]["id"] == ERROR_RULE.id
    (only,) = json.loads(sarif_json([_report()], REC, min_tier="warning"))["runs"]
    assert [r["ruleId"] for r in only["results"]] == [ERROR_RULE.id]


def test_check_json_filters_findings_but_counts_all_and_fails_on_an_error() -> None:
    doc = json.loads(check_json([_report()], REC, min_tier="error"))
    (conn,) = doc["connections"]
    assert [f["rule"] for f in conn["findings"]] == [ERROR_RULE.id]
    assert doc["summary"] == {
        "error": 1,
        "warning": 0,
        "info": 1,
        "connections": 1,
        "frames": 9,
        "passed": False,
    }
    clean = ConnectionReport(2, "ws", 2, 4, [], {"info": 3})
    assert json.loads(check_json([clean], "postgresql://h/db"))["summary"]["passed"] is True
