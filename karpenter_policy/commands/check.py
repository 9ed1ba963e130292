"""`karpenter-policy check`: read the policy repository and prove its provisioners (`checks.repository`), and with
`--workloads` place the workloads and plan the capacity they need (`placement`); the report in the format asked
for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from karpenter_policy.checks.findings import CommandOutput, Finding, Report
from karpenter_policy.checks.options import (
    OptionError,
    PolicyOptions,
    catalog_option,
    spot_prices_option,
    values_option,
)
from karpenter_policy.checks.pinning import check_pinning
from karpenter_policy.checks.proof.placement import WorkloadCheck, check_workloads, money, placement_info_lines
from karpenter_policy.checks.proof.placementtests import TestRun, run_placement_tests
from karpenter_policy.checks.proof.provisioners import CheckedProvisioner
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.checks.reporters import displayable, json_report, json_text, render
from karpenter_policy.checks.repository import load_repository
from karpenter_policy.checks.source.loader import Document, discover
from karpenter_policy.checks.validation.budgets import BudgetReport, check_budgets
from karpenter_policy.commands.budgetcomment import budget_lines
from karpenter_policy.commands.costcomment import check_cost_lines, markdown_text
from karpenter_policy.model.pools import pools_noun

#: `check` as its flags' defaults run it.
DEFAULTS = PolicyOptions()


def check_command(
    paths: Sequence[str],
    output: str = "text",
    options: PolicyOptions = DEFAULTS,
    *,
    fail_on_warn: bool = False,
    quiet: bool = False,
) -> CommandOutput:
    """Run `karpenter-policy check`: the report on stdout, exit code as `cli` documents it (2: could not run).
    With `options.workload_paths` (`--workloads PATHS`), the workloads found there are placed on the provisioners
    and their replicas (`options.scale` overrides some) packed onto new nodes, priced from
    `options.spot_prices_file` for spot. `options.selection`: the files left out and the rules disabled; `quiet`:
    the findings alone (text and github output)."""
    run = run_check(paths, options)
    if isinstance(run, str):
        return CommandOutput(2, "", f"karpenter-policy check: {run}\n")
    report, checked, result = run.report, run.checked, run.workloads
    text = render_check(report, checked, output, result, quiet, run.tests, run.budgets)
    return CommandOutput(report.exit_code(fail_on_warn), text, "")


@dataclass(slots=True)
class CheckRun:
    """What `check` found: the report, the proven provisioners and, with workloads, their placements and plan,
    the PlacementTest documents among the policies and, with workloads, what their tests found; the v1
    NodePools' disruption budgets (their findings are in the report)."""

    report: Report
    checked: list[CheckedProvisioner]
    workloads: WorkloadCheck | None = None
    test_documents: list[Document] = field(default_factory=list)
    tests: TestRun | None = None
    budgets: BudgetReport | None = None


def run_check(paths: Sequence[str], options: PolicyOptions = DEFAULTS) -> CheckRun | str:
    """The checks of `check` (and `test`), unrendered; a str: why they could not run (a bad option). The
    workloads are placed only when `options.workload_paths` names some."""
    workloads = options.workload_paths or None
    selection = options.selection
    try:
        values = values_option(options.values_file)
        catalog = catalog_option(options.catalog_file, options.region, options.previous_generation)
        pricing = spot_prices_option(catalog, options.spot_prices_file) if workloads is not None else None
    except OptionError as error:
        return str(error)
    repository = load_repository(
        paths,
        values,
        prove=True,
        catalog=catalog,
        timeout_ms=options.timeout_ms,
        selection=selection,
        min_values_policy=options.min_values_policy,
    )
    report, checked = repository.report, list(repository.checked)
    budgets = check_budgets(repository.nodepools.values(), options.budgets, datetime.now(UTC).date())
    report.findings.extend(budgets.findings)
    placement_tests = list(repository.placement_tests)
    result = None
    if workloads is not None and pricing is not None:
        try:
            result = check_workloads(
                report,
                checked,
                workloads,
                catalog,
                counted_files=discover(paths, selection.exclude)[0],
                scale=options.scale,
                pricing=pricing.description,
                estimated=pricing.estimated,
                capacity_catalog=pricing.catalog,
                min_values_policy=options.min_values_policy,
            )
        except OptionError as error:
            return str(error)
        report.findings.extend(check_pinning(repository.pinning_documents, checked, workloads))
    tests = None
    if result is not None and placement_tests:
        tests = run_placement_tests(placement_tests, result)
        report.findings.extend(tests.findings)
    return CheckRun(report, checked, result, placement_tests, tests, budgets)


def render_check(
    report: Report,
    checked: Sequence[CheckedProvisioner],
    output: str,
    workloads: WorkloadCheck | None = None,
    quiet: bool = False,
    tests: TestRun | None = None,
    budgets: BudgetReport | None = None,
) -> str:
    """The report in `output` format, with the proven provisioners: in text one info line each (before the
    summary), in JSON a `provisioners` section next to the JSON report's `findings` and `summary`. With
    `workloads` (`--workloads`), the same for each workload (where it goes: `workloads` in JSON) and the capacity
    plan (`capacity` in JSON; a table after the summary in text; the table alone is what `markdown` adds). With
    `tests` (PlacementTests ran), how many held: a line before the summary, `placement_tests` in JSON. With
    `budgets`, the v1 NodePools' disruption-budget timelines: after the findings in `markdown`, `budgets` in
    JSON."""
    placements = workloads.placements if workloads is not None else None
    capacity = workloads.capacity if workloads is not None else None
    if output == "markdown":
        return render_markdown(report, checked, workloads, budgets)
    if output == "json":  # the report as data, its sections added, printed once
        document = json_report(report)
        document["provisioners"] = [c.to_json() for c in checked]
        if placements is not None:
            document["workloads"] = [p.to_json() for p in placements]
        if capacity is not None:
            document["capacity"] = capacity.to_json()
        if tests is not None:
            document["placement_tests"] = tests.to_json()
        if budgets is not None and budgets.timelines:
            document["budgets"] = [timeline.to_json() for timeline in budgets.timelines]
        return json_text(document)
    text = render(report, output, "checked", quiet)
    if quiet and output in ("text", "github"):
        return text
    proven = [c for c in checked if c.verdict == Verdict.SAT]
    if output == "text" and (proven or placements):
        lines = text.rstrip("\n").split("\n")
        info = [f"{c.file}:{c.line}:{c.column}: info: {c.summary()}" for c in proven]
        info += placement_info_lines(placements or ())
        if capacity is not None:  # before the summary line, which stays last
            info += [capacity.summary(), *(capacity.table() if capacity.nodes else [])]
        info += [tests.summary()] if tests is not None else []
        return "\n".join([*lines[:-1], *info, lines[-1]]) + "\n"
    return text


def render_markdown(
    report: Report,
    checked: Sequence[CheckedProvisioner],
    workloads: WorkloadCheck | None,
    budgets: BudgetReport | None = None,
) -> str:
    """A pull-request comment: the verdict and, with `--workloads`, the monthly cost of the workloads' nodes as the
    headline; the errors; the cost per workload (`costcomment`); the warnings (folded away when there is a cost
    table); the v1 NodePools' disruption-budget timelines (`budgetcomment`)."""
    errors, warnings = report.errors, report.warnings
    verdict = "❌" if errors else ("⚠️" if warnings else "✅")
    capacity = workloads.capacity if workloads is not None else None
    headline = f"### {verdict} karpenter-policy check"
    if capacity is not None:
        monthly = capacity.monthly
        headline += (
            f": the workloads' nodes cost {money(monthly)} a month"
            if monthly is not None
            else f": the workloads' nodes' cost is unknown (no price data for {capacity.region or 'the region'})"
        )
    launching = sum(1 for c in checked if c.verdict == Verdict.SAT)
    summary = f"{launching} of {len(checked)} {pools_noun(c.key for c in checked)} can launch nodes"
    if workloads is not None:
        placed = sum(1 for p in workloads.placements if p.schedulable)
        summary += f"; {placed} of {len(workloads.placements)} workloads schedulable"
    summary += f"; {errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}."
    stranded = [p for p in workloads.placements if not p.schedulable] if workloads is not None else []
    if stranded:  # what broke leads, above the cost
        count = len(stranded)
        lead = f"### ❌ {count} workload{'s' if count != 1 else ''} cannot be placed"
        lead += f": {markdown_text(stranded[0].lead())}" if count == 1 else ""
        lines = [lead]
        if count > 1:
            lines += ["", *(f"- {markdown_text(p.lead())}" for p in stranded)]
        lines += ["", headline.removeprefix(f"### {verdict} "), "", summary]
    else:
        lines = [headline, "", summary]
    findings = report.sorted_findings()
    shown = [f for f in findings if f.severity == "error" or capacity is None]
    folded = [f for f in findings if f not in shown]
    if shown:
        lines += ["", *(_finding_line(f) for f in shown)]
    if capacity is not None:
        lines += ["", *check_cost_lines(capacity)]
    if folded:
        lines += ["", f"<details><summary>{len(folded)} warning{'s' if len(folded) != 1 else ''}</summary>", ""]
        lines += [*(_finding_line(f) for f in folded), "", "</details>"]
    if budgets is not None and budgets.timelines:
        lines += ["", *budget_lines(budgets)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _finding_line(f: Finding) -> str:
    where = f"{displayable(f.file)}:{f.line}" if f.file else ""
    return f"- **{f.severity}** `{f.rule}` {markdown_text(where)}: {markdown_text(displayable(f.message))}"
