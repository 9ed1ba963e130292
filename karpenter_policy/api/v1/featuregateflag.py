"""The `--feature-gates` flag of the commands that run Karpenter v1.14.1's controllers (`reconcile`, `simulate`, and
`plan`, which runs their disruption in virtual time), declared once: read by `featuregates.read_feature_gates`, which
accepts `StaticCapacity=true`. `check` and `test` declare theirs with `read_policy_feature_gates`
(`checks.options.PolicyOptions`): their reports model the gate off only."""

from __future__ import annotations

from typing import Any

from karpenter_policy.api.v1.featuregates import read_feature_gates
from karpenter_policy.optionspec import option

__all__ = ["controller_feature_gates"]


def controller_feature_gates(help: str) -> Any:
    """The flag's field, with the command's own help text."""
    return option("", "--feature-gates", metavar="NAME=BOOL,...", read=read_feature_gates, help=help)
