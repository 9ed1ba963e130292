"""The rules of PinningPolicies (`check --workloads`, `pin`, the webhook).

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, Rule

PINNING_VIOLATION = Rule(
    id="pinning-violation",
    severity=ERROR,
    summary="A workload lacks a nodeSelector entry or toleration that a PinningPolicy rule requires.",
    description=(
        "check --workloads: a workload lacks a nodeSelector entry or toleration that a PinningPolicy rule requires "
        "(`pin --write` adds them)."
    ),
)


PINNING_CONFLICT = Rule(
    id="pinning-conflict",
    severity=ERROR,
    summary="Two PinningPolicy rules that match one workload pin a nodeSelector key to different values.",
    description="Two PinningPolicy rules that match the same workload pin a nodeSelector key to different values.",
)


RULES = (PINNING_VIOLATION, PINNING_CONFLICT)
