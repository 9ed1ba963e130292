"""The rule catalog: one declaration per rule — id, severity, summary, description, whether it can be silenced,
its page (`docs/rules/<id>.md`) and the Karpenter source it follows — grouped by family, one module each.

The reporters (SARIF's rule metadata), `--disable`, the `# karpenter-policy: disable=` directives, compile's
severities, `karpenter-policy rules` and the tests that hold the pages and the call sites to it all read these
declarations; `api/violations.py` names each rule's id for the checks that report it. How to add a rule:
docs/architecture.md ("How to add a rule").
"""

from __future__ import annotations

from karpenter_policy.api.rules.index import (
    RULE_IDS,
    RULES,
    default_severity,
    rule_named,
    unknown_rule_message,
    unsilenceable,
)
from karpenter_policy.api.rules.rule import ERROR, RULE_PAGES, SEVERITIES, WARNING, Rule

__all__ = [
    "ERROR",
    "RULES",
    "RULE_IDS",
    "RULE_PAGES",
    "SEVERITIES",
    "WARNING",
    "Rule",
    "default_severity",
    "rule_named",
    "unknown_rule_message",
    "unsilenceable",
]
