"""The rule catalog (`karpenter_policy/api/rules/`) is complete and the one truth about its rules: every rule the
code reports is declared, every call site reports a severity its rule's declaration allows, every declared rule
has its page (and every page is a declared rule's), each page's header says what the declaration says, and the
table of docs/rules/README.md is the catalog's."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from karpenter_policy.api import violations
from karpenter_policy.api.rules import ERROR, RULE_IDS, RULES, WARNING, Rule, rule_named, unknown_rule_message
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.repository import check_paths
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.commands.rules import markdown_table

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "karpenter_policy"
PAGES = ROOT / "docs" / "rules"
#: The severities as the checks name them.
SEVERITY_NAMES = {"ERROR": ERROR, "WARNING": WARNING}
#: Where each constructor takes its rule and severity (positional index; keyword name).
CONSTRUCTORS = {"Finding": (0, 1), "Violation": (0, 3)}


def _rule_id_constants() -> dict[str, str]:
    """The names `api/violations.py` gives the rule ids (`DEAD_VALUE` → "dead-value")."""
    return {
        name: value
        for name, value in vars(violations).items()
        if name.isupper() and isinstance(value, str) and name not in SEVERITY_NAMES
    }


def _reports() -> Iterator[tuple[str, ast.Call, ast.expr | None, ast.expr | None]]:
    """Every `Finding(...)` and `Violation(...)` the package constructs: where, the call, its rule and severity."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CONSTRUCTORS):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            rule_at, severity_at = CONSTRUCTORS[node.func.id]
            rule = node.args[rule_at] if len(node.args) > rule_at else keywords.get("rule")
            severity = node.args[severity_at] if len(node.args) > severity_at else keywords.get("severity")
            yield f"{path.relative_to(ROOT)}:{node.lineno}", node, rule, severity


def test_every_rule_id_the_code_names_is_declared() -> None:
    constants = _rule_id_constants()
    assert sorted(constants.values()) == sorted(RULE_IDS)  # violations.py names each declared rule, once
    undeclared = []
    for where, _, rule, _ in _reports():
        if isinstance(rule, ast.Constant) and rule_named(str(rule.value)) is None:
            undeclared.append(f"{where}: {rule.value!r}")
        if isinstance(rule, ast.Name) and rule.id.isupper() and rule.id not in constants:
            undeclared.append(f"{where}: {rule.id}")
    assert not undeclared, undeclared


def test_every_call_site_reports_a_severity_its_rule_allows() -> None:
    """A check may give a severity other than its rule's only where the declaration says when (`severity_varies`);
    a Violation without one takes its rule's."""
    constants = _rule_id_constants()
    checked, wrong = 0, []
    for where, _, rule, severity in _reports():
        if not (isinstance(rule, ast.Name) and rule.id in constants):
            continue  # a rule chosen at run time: held by the run over the examples below
        declared = rule_named(constants[rule.id])
        assert declared is not None
        if severity is None:
            continue  # a Violation: its rule's severity
        if isinstance(severity, ast.Name) and severity.id in SEVERITY_NAMES:
            checked += 1
            if SEVERITY_NAMES[severity.id] not in declared.severities:
                wrong.append(f"{where}: {declared.id} as {SEVERITY_NAMES[severity.id]} (declared {declared.severity})")
        elif not declared.severity_varies:
            wrong.append(f"{where}: {declared.id} with a computed severity, but its declaration says it never varies")
    assert checked > 30 and not wrong, wrong  # the scan finds the call sites (35 when written)


def test_a_violation_without_a_severity_takes_its_rule_s() -> None:
    assert violations.Violation(violations.TTL_CHURN, ("spec",), "short").severity == WARNING
    assert violations.Violation(violations.INVALID_SPEC, ("spec",), "bad").severity == ERROR
    assert violations.Violation(violations.INVALID_REQUIREMENT, ("spec",), "ignored", WARNING).severity == WARNING


def _allowed(finding: Finding) -> bool:
    declared = rule_named(finding.rule)
    return declared is not None and finding.severity in declared.severities


def test_what_the_examples_report_is_declared_with_its_severity() -> None:
    """Run: the rules chosen at run time (a loader's error, the solver's verdicts) are declared too."""
    validated = validate_paths([str(ROOT / "examples" / d) for d in ("negative", "positive", "templates")])
    checked, _ = check_paths([str(ROOT / "examples" / "check")])
    findings = [*validated.findings, *checked.findings]

    assert {"parse-error", "template-error", "schema", "requirements-conflict", "zone-outside-region"} <= {
        f.rule for f in findings
    }
    assert [f"{f.file}:{f.line}: {f.rule} {f.severity}" for f in findings if not _allowed(f)] == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("check", "examples/workloads/policies", "--workloads", "examples/workloads/negative"),
        ("check", "examples/workloads/scenarios/overlap", "--workloads", "examples/workloads/scenarios/overlap"),
        ("check", "examples/pinning/policies", "--workloads", "examples/pinning/apps"),
        ("compile", "examples/positive", "-o", "-", "--api", "v1", "--node-role", "KarpenterNodeRole"),
    ],
)
def test_what_the_workload_and_compile_examples_report_is_declared(args: tuple[str, ...]) -> None:
    import json

    output = ["--output", "json"] if args[0] == "check" else []
    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args, *output], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    if args[0] != "check":
        assert done.returncode in (0, 1), done.stderr
        return
    findings = json.loads(done.stdout)["findings"]
    assert findings, done.stderr
    for f in findings:
        declared = rule_named(f["rule"])
        assert declared is not None and f["severity"] in declared.severities, f


# --- the pages -----------------------------------------------------------------------------------------------------


def test_every_rule_has_a_page_and_every_page_is_a_rule_s() -> None:
    pages = {p.stem for p in PAGES.glob("*.md")} - {"README"}
    assert sorted(pages) == sorted(RULE_IDS)


def _header(rule: Rule) -> dict[str, str]:
    lines = (ROOT / rule.page).read_text(encoding="utf-8").splitlines()
    fields = dict(re.findall(r"^- \*\*([^*]+):\*\* (.*)$", "\n".join(lines), re.MULTILINE))
    return {"title": lines[0], "summary": next(line for line in lines[1:] if line.strip()), **fields}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_each_page_s_header_says_what_its_declaration_says(rule: Rule) -> None:
    header = _header(rule)

    assert header["title"] == f"# `{rule.id}`"
    assert header["summary"].replace("`", "") == rule.summary
    assert header["Severity"].startswith(rule.severity)
    if rule.severity_varies or rule.error_when_compiled:
        assert ERROR in header["Severity"] and WARNING in header["Severity"]
    else:
        assert {ERROR, WARNING} - {rule.severity} & set(re.findall(r"\w+", header["Severity"])) == set()
    assert header["Can be silenced"].startswith("no") is not rule.silenceable
    assert header["Karpenter source"] == rule.karpenter_source()


def test_the_rules_table_of_the_docs_is_the_catalog_s() -> None:
    page = (PAGES / "README.md").read_text(encoding="utf-8")
    assert markdown_table(RULES) in page, "regenerate it: karpenter-policy rules --output markdown"


# --- the declarations ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_each_declaration_is_whole(rule: Rule) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.id)
    assert rule.summary.endswith(".") and rule.description.endswith(".") and rule.description != rule.summary
    if not rule.silenceable:
        assert rule.severity == ERROR  # a warning that cannot be silenced would fail --strict for good
    for source in filter(None, (part.strip() for part in rule.karpenter.split(";"))):
        assert re.fullmatch(r"(core|aws)(-v1)? pkg/\S+\.(go: [\w.]+(, [\w.]+)*|yaml)", source), source


def test_an_unknown_rule_is_answered_with_the_one_meant() -> None:
    assert unknown_rule_message("dead-valeu") == "unknown rule 'dead-valeu'; did you mean dead-value?"
    assert unknown_rule_message("zzz").startswith(
        "unknown rule 'zzz'; rules: aws-id-shape, budget-blocks-drift, budget-overlap"
    )
