"""The options of `karpenter-policy simulate`, declared once (`optionspec`): each flag's default, help text and
spelling, in --help's order. Light on purpose: the CLI imports it to make its flags, without moto or the
controller."""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_policy.optionspec import like, option, required
from karpenter_policy.reconcile.flags import STRATEGY_NAMES, ReconcileOptions


@dataclass(frozen=True, slots=True)
class SimulateOptions:
    """`karpenter-policy simulate`'s flags (docs/simulate.md)."""

    constraints: str = required("--constraints", metavar="DIR", help="Compiled constraint sets (compile -o DIR).")
    workload_paths: tuple[str, ...] = required(
        "--workloads", multiple=True, path="any", help="Workload manifests (files or directories, repeatable)."
    )
    scale: tuple[str, ...] = option(
        (),
        "--scale",
        multiple=True,
        metavar="KIND/NAME=N",
        help="A step that scales a workload to N replicas (repeatable: the steps run in order).",
    )
    placement_groups: tuple[str, ...] = option(
        (),
        "--placement-group",
        multiple=True,
        metavar="NAME=STRATEGY[:N]",
        help="A placement group of the simulated account an EC2NodeClass names: partition:N (1-7), cluster or "
        "spread (repeatable; one not declared is a partition group of 7).",
    )
    report: str | None = option(None, "--report", path="file", help="Write a self-contained HTML report here.")
    strategy: str = option(STRATEGY_NAMES[0], "--strategy", choices=STRATEGY_NAMES, show_default=True)
    min_values_policy: str = like(ReconcileOptions, "min_values_policy")
    feature_gates: str = like(ReconcileOptions, "feature_gates")


__all__ = ["SimulateOptions"]
