"""What every fuzz test checks of a report, whatever the input: the finding's shape and every output format."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from hypothesis import HealthCheck
from profiles import deterministic

from karpenter_policy.checks.findings import Report
from karpenter_policy.checks.reporters import FORMATS, render

FUZZ = deterministic(700, HealthCheck.filter_too_much, HealthCheck.large_base_example)

LINE_BREAKS = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
GITHUB_ANNOTATION = re.compile(r"^::(error|warning) file=[^,:\n]*(,line=[1-9]\d*,col=\d+)?,title=[a-z-]+::")
TEXT_SUMMARY = re.compile(r"^validated (\d+) objects? .*: (\d+) errors?, (\d+) warnings?$")


def max_line(content: bytes) -> int:
    """One past the last line a finding about `content` may point at."""
    text = content.decode("utf-8", errors="replace")
    return len(LINE_BREAKS.findall(text)) + 2


def check_rendering(report: Report, rules: frozenset[str]) -> None:
    """Every output format renders: json and sarif parse as JSON (with rule ids among `rules`), junit as XML
    (strictly: nothing is tolerated), github has one annotation per finding, text ends with its summary; all
    encodable as UTF-8."""
    outputs = {output: render(report, output) for output in FORMATS}
    for output, text in outputs.items():
        assert isinstance(text, str) and text.endswith("\n"), output
        text.encode("utf-8")  # what the CLI writes: no lone surrogates
    findings = report.findings
    data = json.loads(outputs["json"])
    assert len(data["findings"]) == len(findings)
    assert data["summary"]["errors"] == report.errors and data["summary"]["warnings"] == report.warnings
    for item in data["findings"]:
        assert {"rule", "severity", "message", "file", "line", "column"} <= item.keys(), item
    sarif = json.loads(outputs["sarif"])
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert len(results) == len(findings)
    for result in results:
        assert result["ruleId"] in rules and result["level"] in ("error", "warning")
        assert result["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1
    annotations = [line for line in outputs["github"].split("\n") if line.startswith("::")]
    assert len(annotations) == len(findings), outputs["github"]
    for line in annotations:
        assert GITHUB_ANNOTATION.match(line), line
    summary = TEXT_SUMMARY.match(outputs["text"].rstrip("\n").rsplit("\n", 1)[-1])
    assert summary is not None, outputs["text"][-300:]
    assert (int(summary[2]), int(summary[3])) == (report.errors, report.warnings)
    junit = ET.fromstring(outputs["junit"].encode("utf-8"))
    files_with_findings = {f.file for f in findings}
    files_with_errors = {f.file for f in findings if f.severity == "error"}
    # One test case per file read (passing ones too), and per file named by a finding.
    assert len(junit.findall("testcase")) == len(files_with_findings | set(report.file_names))
    assert int(junit.get("failures", "-1")) == len(files_with_errors)
