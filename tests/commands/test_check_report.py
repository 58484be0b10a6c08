"""``acp-proxy check --format junit|sarif|json|text``: CI report formats, schema-validated.

The JUnit XML is validated against the common ``junit-10.xsd`` and the SARIF log against the
official SARIF 2.1.0 JSON schema (both in ``tests/commands/schemas``, see its README).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import jsonschema
import orjson
import pytest
import xmlschema

from acp_proxy.acp.rules import RULES
from tests.acp.conformance.helpers import (
    BROKEN_V2,
    CLEAN_V1,
    check,
    write_recording,
)

SCHEMAS = Path(__file__).parent / "schemas"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "recording.db"
    write_recording(path, [CLEAN_V1, BROKEN_V2])
    return path


def test_junit_is_valid_and_fails_the_broken_rule(db: Path) -> None:
    done = check(str(db), "--format", "junit")
    assert done.returncode == 1, done.stderr
    schema = xmlschema.XMLSchema(SCHEMAS / "junit-10.xsd")
    schema.validate(done.stdout)  # raises on any schema error
    root = ET.fromstring(done.stdout)
    suites = root.findall("testsuite")
    assert [s.get("id") for s in suites] == ["1", "2"]
    clean, broken = suites
    v1_rules = [r.id for r in RULES if r.applies_to(1)]
    assert [c.get("name") for c in clean.findall("testcase")] == v1_rules
    assert clean.get("failures") == "0" and clean.findall(".//failure") == []
    assert broken.get("tests") == str(sum(r.applies_to(2) for r in RULES))
    assert broken.get("failures") == "1" and root.get("failures") == "1"
    (failure,) = broken.findall(".//failure")
    case = next(c for c in broken.findall("testcase") if c.find("failure") is not None)
    assert case.get("name") == "v2.prompt-message-id"
    message = failure.get("message") or ""
    assert message.startswith("error by the agent at #6")
    assert "rule: The session/prompt response returns" in (failure.text or "")
    # warnings and info are reported, but do not fail a test case
    outs = {c.get("name"): c.findtext("system-out") for c in broken.findall("testcase")}
    assert (outs["v2.stop-reason"] or "").startswith("warning by the agent at #8")
    assert (outs["framing.crlf"] or "").startswith("info by the agent at #9")


def sarif_schema() -> dict[str, Any]:
    schema: dict[str, Any] = orjson.loads((SCHEMAS / "sarif-2.1.0-rtm.4.json").read_bytes())
    return schema


def test_sarif_is_valid_with_one_result_per_finding(db: Path) -> None:
    done = check(str(db), "--format", "sarif")
    assert done.returncode == 1, done.stderr
    log = orjson.loads(done.stdout)
    jsonschema.validate(log, sarif_schema(), cls=jsonschema.Draft4Validator)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.id for r in RULES]
    results = {r["ruleId"]: r for r in run["results"]}
    assert set(results) == {"v2.prompt-message-id", "v2.stop-reason", "framing.crlf"}
    error = results["v2.prompt-message-id"]
    assert error["level"] == "error"
    assert rules[error["ruleIndex"]]["id"] == "v2.prompt-message-id"
    assert error["message"]["text"].startswith("error by the agent at #6")
    (location,) = error["locations"]
    assert location["physicalLocation"] == {
        "artifactLocation": {"uri": str(db)},
        "region": {"startLine": 6},
    }
    assert location["logicalLocations"][0]["fullyQualifiedName"] == "connection 2/frame #6"
    assert error["properties"]["connection"] == 2
    assert error["properties"]["side"] == "agent"
    assert 6 in error["properties"]["frames"]
    assert results["v2.stop-reason"]["level"] == "warning"
    assert results["framing.crlf"]["level"] == "note"


def test_min_tier_filters_sarif_results_but_not_the_exit_code(db: Path) -> None:
    done = check(str(db), "--format", "sarif", "--min-tier", "error")
    assert done.returncode == 1
    (run,) = orjson.loads(done.stdout)["runs"]
    assert [r["ruleId"] for r in run["results"]] == ["v2.prompt-message-id"]


def test_a_clean_recording_passes_in_every_format(tmp_path: Path) -> None:
    clean = tmp_path / "clean.db"
    write_recording(clean, [CLEAN_V1])
    for fmt in ("text", "json", "junit", "sarif"):
        assert check(str(clean), "--format", fmt).returncode == 0, fmt
    log = orjson.loads(check(str(clean), "--format", "sarif").stdout)
    jsonschema.validate(log, sarif_schema(), cls=jsonschema.Draft4Validator)
    assert log["runs"][0]["results"] == []
    xmlschema.XMLSchema(SCHEMAS / "junit-10.xsd").validate(
        check(str(clean), "--format", "junit").stdout
    )


def test_json_is_an_alias_and_text_is_the_default(db: Path) -> None:
    assert check(str(db), "--json").stdout == check(str(db), "--format", "json").stdout
    assert check(str(db)).stdout == check(str(db), "--format", "text").stdout
    assert check(str(db)).stdout.startswith("== connection 1 ")
    bad = check(str(db), "--format", "xml")
    assert bad.returncode == 2 and "'xml' is not one of" in bad.stderr
