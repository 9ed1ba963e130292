"""`karpenter-policy rules [ID]`: the rule catalog (`api/rules`) as a user reads it, as `ruff rule` and
`cfn-lint --list-rules` do — without ID, every rule on one line (id, severity, whether it can be silenced, summary);
with ID, that rule in full (its description, when its severity varies, how to silence it, the Karpenter source it
follows, its page). `--output json` gives the same as data; `--output markdown`, the table of docs/rules/README.md
(a test holds that page to it). An unknown ID exits 2 with the id meant.
"""

from __future__ import annotations

import textwrap

from karpenter_policy.api.rules import RULES, Rule, rule_named, unknown_rule_message
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.checks.reporters import json_text
from karpenter_policy.checks.ruledocs import docs_url, help_uri
from karpenter_policy.commands.flags import RULE_OUTPUTS

OUTPUTS = RULE_OUTPUTS  # one definition: the flag's choices

_WIDTH = 100


def rules_command(rule_id: str | None, output: str = "text") -> CommandOutput:
    """Every rule, or the one named `rule_id`, in `output` (`OUTPUTS`); exit 2 for an id no rule has."""
    if rule_id is None:
        chosen = RULES
    elif (rule := rule_named(rule_id)) is not None:
        chosen = (rule,)
    else:
        return CommandOutput(2, "", f"karpenter-policy rules: {unknown_rule_message(rule_id)}\n")
    if output == "json":
        return CommandOutput(0, json_text([_data(r) for r in chosen] if rule_id is None else _data(chosen[0])), "")
    if output == "markdown":
        return CommandOutput(0, markdown_table(chosen), "")
    return CommandOutput(0, _table(chosen) if rule_id is None else _explained(chosen[0]), "")


def _silencing(rule: Rule) -> str:
    if not rule.silenceable:
        return "no: neither --disable nor a comment silences it (what it is about cannot be checked or applied)"
    return f"--disable {rule.id}, or `# karpenter-policy: disable={rule.id}` on the finding's line or the line above"


def _data(rule: Rule) -> dict[str, object]:
    return {
        "id": rule.id,
        "severity": rule.severity,
        "severity_varies": rule.severity_varies or None,
        "error_when_compiled": rule.error_when_compiled,
        "silenceable": rule.silenceable,
        "summary": rule.summary,
        "description": rule.description,
        "karpenter": rule.karpenter_source() if rule.karpenter else None,
        "page": rule.page,
        "url": help_uri(rule.id, docs_url()),
    }


def _table(rules: tuple[Rule, ...]) -> str:
    width = max(len(r.id) for r in rules)
    header = f"{'RULE':<{width}}  SEVERITY  SILENCEABLE  SUMMARY"
    rows = [
        f"{r.id:<{width}}  {r.severity + ('*' if r.severity_varies or r.error_when_compiled else ''):<8}  "
        f"{'yes' if r.silenceable else 'no':<11}  {r.summary}"
        for r in rules
    ]
    footer = (
        f"{len(rules)} rules; * a severity that varies with the finding. `karpenter-policy rules RULE` explains one."
    )
    return "\n".join([header, *rows, "", footer]) + "\n"


def markdown_table(rules: tuple[Rule, ...]) -> str:
    """The rules as a Markdown table, each id linking to its page (the links are relative to docs/rules/)."""
    rows = ["| rule | severity | can be silenced | what it catches |", "|---|---|---|---|"]
    for r in rules:
        severity = f"{r.severity} (varies)" if r.severity_varies else r.severity
        severity += "; error under compile" if r.error_when_compiled else ""
        summary = r.summary.replace("|", "\\|")
        rows.append(f"| [`{r.id}`]({r.id}.md) | {severity} | {'yes' if r.silenceable else 'no'} | {summary} |")
    return "\n".join(rows) + "\n"


def _explained(rule: Rule) -> str:
    severity = rule.severity
    if rule.severity_varies:
        severity += f" ({rule.severity_varies})"
    elif rule.error_when_compiled:
        severity += " (an error under compile: what it writes is applied)"
    fields = [
        ("Severity", severity),
        ("Can be silenced", _silencing(rule)),
        ("Follows Karpenter", rule.karpenter_source()),
        ("Page", help_uri(rule.id, docs_url()) or rule.page),
    ]
    lines = [f"{rule.id}: {rule.summary}", ""]
    for label, value in fields:
        lines += textwrap.wrap(
            value, _WIDTH, initial_indent=f"{label}: ", subsequent_indent="  ", break_on_hyphens=False
        )
    lines += ["", *textwrap.wrap(rule.description, _WIDTH, break_on_hyphens=False)]
    return "\n".join(lines) + "\n"
