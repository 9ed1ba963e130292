"""Every output format renders the same findings, deterministically, in the shape its consumer expects."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

import pytest

from karpenter_policy.checks.findings import Finding, Location, Report
from karpenter_policy.checks.reporters import json_text, render
from karpenter_policy.checks.ruledocs import DOCS_URL_ENV

FINDINGS = [
    Finding(
        "restricted-label", "error", "label kubernetes.io/team is restricted", "policies/a.yaml", 12, 9, "Provisioner/a"
    ),
    Finding(
        "deprecated-label",
        "warning",
        "label beta.kubernetes.io/arch is deprecated, 100%: use\nkubernetes.io/arch",
        "policies/a.yaml",
        3,
        7,
        "Provisioner/a",
    ),
    Finding(
        "duplicate-name",
        "error",
        "Provisioner 'a' is defined twice",
        "policies/b.yaml",
        4,
        9,
        "Provisioner/a",
        (Location("policies/a.yaml", 4, 9),),
    ),
]


def _report(findings: list[Finding]) -> Report:
    return Report(
        findings=list(findings), files=2, kinds=Counter({"Provisioner": 2}), skipped=Counter({"Deployment": 1})
    )


def test_json_follows_the_design_contract() -> None:
    data = json.loads(render(_report(FINDINGS), "json"))
    assert data["summary"] == {
        "errors": 2,
        "warnings": 1,
        "files": 2,
        "objects": 2,
        "kinds": {"Provisioner": 2},
        "skipped": {"Deployment": 1},
        "not_kubernetes": 0,
        "suppressed": 0,
    }
    first = data["findings"][0]
    assert first == {
        "rule": "deprecated-label",
        "severity": "warning",
        "file": "policies/a.yaml",
        "line": 3,
        "column": 7,
        "object": "Provisioner/a",
        "message": FINDINGS[1].message,
    }
    assert data["findings"][2]["related"] == [{"file": "policies/a.yaml", "line": 4, "column": 9}]


def test_every_format_is_deterministic_whatever_the_finding_order() -> None:
    for output in ("text", "json", "sarif", "github", "junit"):
        shuffled = FINDINGS[:]
        random.Random(7).shuffle(shuffled)
        assert render(_report(shuffled), output) == render(_report(FINDINGS), output)


def test_text_is_file_line_column_then_a_summary() -> None:
    lines = render(_report(FINDINGS), "text").splitlines()
    assert lines[0].startswith("policies/a.yaml:3:7: warning: Provisioner/a: label beta.kubernetes.io/arch")
    assert lines[-1] == (
        "validated 2 objects (2 Provisioner) in 2 files; skipped 1 of other kinds (Deployment: 1): 2 errors, 1 warning"
    )
    assert "    related: policies/a.yaml:4:9" in lines


def test_sarif_results_carry_rule_level_and_region() -> None:
    sarif = json.loads(render(_report(FINDINGS), "sarif"))
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    rule_ids = {rule["id"] for rule in run["tool"]["driver"]["rules"]}
    assert {"restricted-label", "deprecated-label", "duplicate-name", "schema", "parse-error"} <= rule_ids
    result = next(r for r in run["results"] if r["ruleId"] == "restricted-label")
    assert result["level"] == "error"
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "policies/a.yaml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 12, "startColumn": 9},
    }


def test_github_annotations_escape_data_and_properties() -> None:
    lines = render(_report(FINDINGS), "github").splitlines()
    assert lines[0] == (
        "::warning file=policies/a.yaml,line=3,col=7,title=deprecated-label::Provisioner/a: label "
        "beta.kubernetes.io/arch is deprecated, 100%25: use%0Akubernetes.io/arch"
    )
    assert lines[1].startswith("::error file=policies/a.yaml,line=12,col=9,title=restricted-label::")


def test_junit_is_xml_with_a_failing_case_per_file_with_errors() -> None:
    suite = ET.fromstring(render(_report(FINDINGS), "junit"))
    assert suite.attrib["tests"] == "2" and suite.attrib["failures"] == "2"
    cases = {case.attrib["name"]: case for case in suite.iter("testcase")}
    assert cases["policies/b.yaml"].find("failure") is not None
    assert "is defined twice" in (cases["policies/b.yaml"].findtext("failure") or "")


def test_empty_report() -> None:
    report = Report(files=1, kinds=Counter({"Provisioner": 1}))
    assert render(report, "text") == "validated 1 object (1 Provisioner) in 1 file: 0 errors, 0 warnings\n"
    assert json.loads(render(report, "json"))["findings"] == []
    assert report.exit_code() == 0


def test_an_object_of_no_known_kind_is_counted_in_words() -> None:
    """#27: `validated 1 object (1 (invalid))` read as a typo of the tool; the summary says what it counted."""
    report = Report(files=1)
    report.kinds["(invalid)"] += 1
    summary = render(report, "text").splitlines()[-1]
    assert summary == "validated 1 object (1 of an unknown kind) in 1 file: 0 errors, 0 warnings"
    assert json.loads(render(report, "json"))["summary"]["kinds"] == {"(invalid)": 1}  # the JSON key is unchanged


def test_sarif_rule_descriptions_written_once_follow_the_docs_url_and_the_rules_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rule descriptors SARIF lists are written once per rule set and docs URL (`reporters._sarif_rules`): a
    change of either is a new list, and the report is still exactly the pretty JSON of what it says."""
    monkeypatch.setenv(DOCS_URL_ENV, "https://one.test/docs")
    first = render(_report(FINDINGS), "sarif")
    monkeypatch.setenv(DOCS_URL_ENV, "https://two.test/docs")
    unknown = Finding("not-a-declared-rule", "warning", "made up", "policies/c.yaml", 1, 1)
    second = render(_report([*FINDINGS, unknown]), "sarif")
    monkeypatch.setenv(DOCS_URL_ENV, "https://one.test/docs")
    assert render(_report(FINDINGS), "sarif") == first

    def rules(text: str) -> dict[str, dict[str, Any]]:
        return {rule["id"]: rule for rule in json.loads(text)["runs"][0]["tool"]["driver"]["rules"]}

    assert rules(first)["schema"]["helpUri"] == "https://one.test/docs/rules/schema.md"
    assert rules(second)["schema"]["helpUri"] == "https://two.test/docs/rules/schema.md"
    assert "not-a-declared-rule" not in rules(first)
    assert rules(second)["not-a-declared-rule"]["shortDescription"] == {"text": "not-a-declared-rule"}
    for text in (first, second):
        assert text == json_text(json.loads(text))  # placed at its depth: the same bytes as written in one pass
