"""Conformance findings as CI systems read them (``acp-proxy check --format junit|sarif``).

Pure functions over the per-connection reports of :mod:`acp_proxy.analysis.connection` (anything
with the attributes of :class:`Report`), returning the document as text:

- **JUnit XML** (:func:`junit_xml`): a ``<testsuite>`` per connection and a ``<testcase>``
  per rule that applies to it (its protocol version), failed (``<failure>``, one per
  finding) when the connection broke it at the error tier; warnings and info findings are
  the test case's ``<system-out>``. Every message names the side that broke the rule and
  the frames (``#seq``). Valid against the common Jenkins/Surefire ``junit-10.xsd``.
- **SARIF 2.1.0** (:func:`sarif_json`): one run, the rule table as the tool's rules, a
  result per finding (``ruleId``, ``level`` error/warning/note, the reason as message) whose
  location is the recording file with ``region.startLine`` = the frame's ``seq`` plus the
  frames as logical locations (``connection N/frame #seq``); ``properties`` carry the
  connection, side, session and every frame named.
- **JSON** (:func:`check_json`): ``check --json``, the connections with their counts and
  findings, and a summary whose ``passed`` is false when any error-tier finding exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from acp_proxy import __version__
from acp_proxy.acp.conformance import Finding, frames_text
from acp_proxy.acp.rules import RULE_BY_ID, RULES, TIER_RANK, TIERS, Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


class Report(Protocol):
    """What a formatter needs of one connection's check (``analyze.ConnectionReport``)."""

    connection_id: int
    transport: str
    protocol_version: int | None
    frames: int
    findings: list[Finding]
    counts: dict[str, int]
    suppressed: dict[str, int]


def _frames_text(f: Finding) -> str:
    return frames_text(f.seqs) if f.seqs else "no frame"


def finding_line(f: Finding) -> str:
    """``error by the agent at #3,#4 [sess_1]: reason`` (one finding in a message)."""
    side = f"by the {f.side}" if f.side else "in the recording"
    session = f" [{f.session_id}]" if f.session_id else ""
    return f"{f.tier} {side} at {_frames_text(f)}{session}: {f.reason}"


def _rules_for(report: Report) -> list[Rule]:
    version = report.protocol_version if report.protocol_version is not None else 1
    rules = [r for r in RULES if r.applies_to(version)]
    seen = {r.id for r in rules}
    rules += [RULE_BY_ID[f.rule] for f in report.findings if f.rule not in seen]
    return list({r.id: r for r in rules}.values())


def junit_xml(reports: Sequence[Report], recording: Path | str, min_tier: str = "info") -> str:
    """The JUnit XML document: a test suite per connection, a test case per rule."""
    threshold = TIER_RANK[min_tier]
    from xml.etree import ElementTree as ET  # (here: only JUnit needs it)

    root = ET.Element("testsuites", name=f"acp-proxy check {recording}")
    total_tests = total_failures = 0
    for r in reports:
        version = f"v{r.protocol_version}" if r.protocol_version is not None else "v?"
        rules = _rules_for(r)
        by_rule: dict[str, list[Finding]] = {}
        for f in r.findings:
            if TIER_RANK[f.tier] >= threshold or f.tier == "error":
                by_rule.setdefault(f.rule, []).append(f)
        failed = sum(
            1 for rule in rules if any(f.tier == "error" for f in by_rule.get(rule.id, []))
        )
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"connection {r.connection_id} ({r.transport}, {version})",
            id=str(r.connection_id),
            tests=str(len(rules)),
            failures=str(failed),
            errors="0",
            skipped="0",
            file=str(recording),
        )
        props = ET.SubElement(suite, "properties")
        for name, value in (
            ("connection", r.connection_id),
            ("transport", r.transport),
            ("protocol_version", r.protocol_version),
            ("frames", r.frames),
        ):
            ET.SubElement(props, "property", name=name, value="" if value is None else str(value))
        for rule in rules:
            case = ET.SubElement(
                suite,
                "testcase",
                name=rule.id,
                classname=f"acp.connection{r.connection_id}.{rule.id.split('.')[0]}",
            )
            findings = by_rule.get(rule.id, [])
            others: list[str] = []
            for f in findings:
                if f.tier == "error":
                    failure = ET.SubElement(case, "failure", type=f.rule, message=finding_line(f))
                    failure.text = f"{finding_line(f)}\nrule: {f.rule_text}"
                else:
                    others.append(finding_line(f))
            more = r.suppressed.get(rule.id)
            if more:
                others.append(f"... and {more} more finding(s) (raise --max-per-rule)")
            if others:
                ET.SubElement(case, "system-out").text = "\n".join(others)
        total_tests += len(rules)
        total_failures += failed
    root.set("tests", str(total_tests))
    root.set("failures", str(total_failures))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": rule.id,
        "shortDescription": {"text": rule.text},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.tier]},
        "properties": {"tier": rule.tier, "applies": rule.applies, "breaker": rule.breaker},
    }


def _sarif_result(f: Finding, rule_index: dict[str, int], uri: str) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": uri}}
    if f.seqs:
        physical["region"] = {"startLine": max(1, f.seqs[0])}
    logical = [
        {
            "name": f"#{s}",
            "fullyQualifiedName": f"connection {f.connection_id}/frame #{s}",
            "kind": "object",
        }
        for s in f.seqs
    ]
    location: dict[str, Any] = {"physicalLocation": physical}
    if logical:
        location["logicalLocations"] = logical
    return {
        "ruleId": f.rule,
        "ruleIndex": rule_index[f.rule],
        "level": SARIF_LEVEL[f.tier],
        "message": {"text": f"{finding_line(f)} (rule: {f.rule_text})"},
        "locations": [location],
        "properties": {
            "connection": f.connection_id,
            "side": f.side,
            "session": f.session_id,
            "frames": list(f.seqs),
            "tier": f.tier,
        },
    }


def sarif_json(reports: Sequence[Report], recording: Path | str, min_tier: str = "info") -> str:
    """The SARIF 2.1.0 log: one run, a result per finding shown at ``min_tier`` and above."""
    threshold = TIER_RANK[min_tier]
    rule_index = {rule.id: i for i, rule in enumerate(RULES)}
    # A file is its path; a PostgreSQL store its URL (already without its password).
    uri = recording.as_posix() if isinstance(recording, Path) else str(recording)
    results = [
        _sarif_result(f, rule_index, uri)
        for r in reports
        for f in r.findings
        if TIER_RANK[f.tier] >= threshold
    ]
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "acp-proxy",
                        "version": __version__,
                        "informationUri": "https://agentclientprotocol.com",
                        "rules": [_sarif_rule(rule) for rule in RULES],
                    }
                },
                "artifacts": [{"location": {"uri": uri}}],
                "results": results,
                "properties": {
                    "connections": [
                        {
                            "connection": r.connection_id,
                            "transport": r.transport,
                            "protocol_version": r.protocol_version,
                            "frames": r.frames,
                            "counts": r.counts,
                            "suppressed": r.suppressed,
                        }
                        for r in reports
                    ]
                },
            }
        ],
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()


def check_json(reports: Sequence[Report], recording: Path | str, min_tier: str = "info") -> str:
    """``check --json``: each connection's findings at ``min_tier`` and above, and a summary
    (its counts are of every finding, whatever ``min_tier`` hides)."""
    threshold = TIER_RANK[min_tier]
    totals = {t: sum(r.counts.get(t, 0) for r in reports) for t in TIERS}
    doc: dict[str, Any] = {
        "recording": str(recording),
        "connections": [
            {
                "id": r.connection_id,
                "transport": r.transport,
                "protocol_version": r.protocol_version,
                "frames": r.frames,
                "counts": r.counts,
                "suppressed": r.suppressed,
                "findings": [f.to_json() for f in r.findings if TIER_RANK[f.tier] >= threshold],
            }
            for r in reports
        ],
        "summary": {
            **totals,
            "connections": len(reports),
            "frames": sum(r.frames for r in reports),
            "passed": totals["error"] == 0,
        },
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()
