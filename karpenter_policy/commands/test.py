"""`karpenter-policy test`: run the PlacementTests among the policies against the plan of `check --workloads`, and
report what they found in the format asked for (the reporters of `check`; markdown: a pull-request comment).

The report holds the failed expectations (`placement-test-failed`), the problems of the PlacementTest files
themselves (parse and schema errors) and the files that could not be read; the rest of what `check` finds is
`check`'s to report. JUnit has one test case per PlacementTest file. Exit codes as `check`: 1 when a test fails or a
test file is malformed, 2 when the tool could not run or no PlacementTest is among PATHS (a run that tests nothing
must not pass).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from karpenter_policy.api.kinds import PLACEMENT_TEST_KIND
from karpenter_policy.api.violations import PARSE_ERROR, PLACEMENT_TEST_FAILED
from karpenter_policy.checks.findings import CommandOutput, Finding, Report
from karpenter_policy.checks.options import PolicyOptions
from karpenter_policy.checks.proof.placementtests import TestRun
from karpenter_policy.checks.reporters import displayable, json_text, render
from karpenter_policy.commands.check import run_check
from karpenter_policy.commands.costcomment import markdown_text

__all__ = ["test_command"]

_TEST_OBJECT = f"{PLACEMENT_TEST_KIND}/"


def test_command(
    paths: Sequence[str], options: PolicyOptions, output: str = "text", *, quiet: bool = False
) -> CommandOutput:
    """Run `karpenter-policy test` (see the module docstring): the tests run against the workloads of
    `options.workload_paths`."""
    run = run_check(paths, options)
    if isinstance(run, str):
        return CommandOutput(2, "", f"karpenter-policy test: {run}\n")
    report = run.report
    test_files = {doc.file for doc in run.test_documents}
    test_files |= {f.file for f in report.findings if (f.object_ref or "").startswith(_TEST_OBJECT)}
    if not test_files:
        return CommandOutput(2, "", "karpenter-policy test: no PlacementTest among the paths: nothing to test\n")
    tested = _tested(report, test_files)
    tests = run.tests if run.tests is not None else TestRun()
    if output == "markdown":
        text = _markdown(tested, tests)
    else:
        text = render(tested, output, "tested", quiet)
        if output == "json":
            document = json.loads(text)
            document["placement_tests"] = tests.to_json()
            text = json_text(document)
        elif output == "text" and not quiet:
            lines = text.rstrip("\n").split("\n")
            text = "\n".join([*lines[:-1], tests.summary(), lines[-1]]) + "\n"
    return CommandOutput(tested.exit_code(False), text, "")


def _tested(report: Report, test_files: set[str]) -> Report:
    """`report` narrowed to what `test` reports (see the module docstring)."""

    def kept(f: Finding) -> bool:
        return f.rule in (PLACEMENT_TEST_FAILED, PARSE_ERROR) or f.file in test_files

    tested = Report(
        findings=[f for f in report.findings if kept(f)],
        files=len(test_files),
        could_not_run=report.could_not_run,
        file_names=[file for file in report.file_names if file in test_files],
    )
    tested.kinds[PLACEMENT_TEST_KIND] = report.kinds.get(PLACEMENT_TEST_KIND, 0)
    tested.suppression = report.suppression
    return tested


def _markdown(report: Report, tests: TestRun) -> str:
    """A pull-request comment: the verdict and how many tests hold, then each failed expectation."""
    errors = report.errors
    verdict = "❌" if errors else "✅"
    held = tests.tests - tests.failed
    lines = [f"### {verdict} karpenter-policy test: {held} of {tests.tests} placement tests hold"]
    findings = [f for f in report.sorted_findings() if f.severity == "error"]
    if findings:
        lines.append("")
        for f in findings:
            where = f"{displayable(f.file)}:{f.line}" if f.file else ""
            lines.append(f"- `{f.rule}` {markdown_text(where)}: {markdown_text(displayable(f.message))}")
    return "\n".join(lines) + "\n"
