"""Every rule, by id: the families' declarations collected, and the questions asked of them by id (is it declared,
its severity, can it be silenced, which name was meant).

A rule is declared in its family's module (`reading`, `webhook`, `proof`, `workloads`, `pinning`, `output`, `v1`,
`budgets`, `migrate`); this index only lists the families, so adding a rule to a family adds it everywhere.
"""

from __future__ import annotations

from karpenter_policy.api.rules import budgets, migrate, output, pinning, proof, reading, v1, webhook, workloads
from karpenter_policy.api.rules.rule import Rule
from karpenter_policy.model.spelling import nearest_name

__all__ = ["RULES", "RULE_IDS", "default_severity", "rule_named", "unknown_rule_message", "unsilenceable"]

_FAMILIES = (reading, webhook, proof, workloads, pinning, output, v1, budgets, migrate)

#: Every declared rule, sorted by id.
RULES: tuple[Rule, ...] = tuple(sorted((r for family in _FAMILIES for r in family.RULES), key=lambda r: r.id))
RULE_IDS: tuple[str, ...] = tuple(r.id for r in RULES)
_BY_ID = {r.id: r for r in RULES}
if len(_BY_ID) != len(RULES):  # a programming error: two declarations of one id
    raise ValueError(f"a rule id is declared twice: {sorted(i for i in RULE_IDS if RULE_IDS.count(i) > 1)}")


def rule_named(rule_id: str) -> Rule | None:
    """The declaration of `rule_id`, None when no rule has that id."""
    return _BY_ID.get(rule_id)


def default_severity(rule_id: str) -> str:
    """The severity `rule_id` is declared with; a KeyError for an id nothing declares (a bug of the caller)."""
    return _BY_ID[rule_id].severity


def unsilenceable() -> frozenset[str]:
    """The ids of the rules neither `--disable` nor a directive can silence."""
    return frozenset(r.id for r in RULES if not r.silenceable)


def unknown_rule_message(rule_id: str) -> str:
    """What to say of an id no rule has: the one meant, when one is near enough, else every id."""
    meant = nearest_name(rule_id, RULE_IDS)
    hint = f"did you mean {meant}?" if meant is not None else f"rules: {', '.join(RULE_IDS)}"
    return f"unknown rule {rule_id!r}; {hint}"
