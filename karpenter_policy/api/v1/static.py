"""Static NodePools (`spec.replicas`) as Karpenter v1.14.1 leaves them out of pod scheduling, its `StaticCapacity`
feature gate on or off (core pkg/operator/options/options.go: `StaticCapacity=false`, alpha, by default).

The provisioner leaves every static NodePool out of its scheduler (pkg/controllers/provisioning/provisioner.go
`NewScheduler`: `nodepoolutils.IsStatic`): no pod is provisioned to it. With the gate off the static provisioning
and deprovisioning controllers are not started (core pkg/controllers/controllers.go) and such a NodePool gets no
node; with it on (the controller and `simulate` only: `reconcile.static`) it gets `replicas` nodes. When no other
NodePool remains, Karpenter marks every pending pod with `no dynamic nodepools found` (`Schedule`, the same line
logged). What is static is decided by `api.v1.objects.is_static`; this module holds what is said of it: the
`static-nodepool` finding at `spec.replicas` (`static_violations`), why the controller and the placement leave such a
NodePool out (`LEFT_OUT`), and Karpenter's words for pods with no dynamic NodePool (`NO_DYNAMIC_NODEPOOLS`). `check`
and `plan` model the gate off only (`featuregates.read_policy_feature_gates` refuses it on). docs/v1.md, "Static
NodePools".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpenter_policy.api.v1.objects import is_static
from karpenter_policy.api.violations import STATIC_NODEPOOL, Violation

__all__ = ["GATE", "LEFT_OUT", "NO_DYNAMIC_NODEPOOLS", "static_violations"]

#: Karpenter's name of the feature gate (`--feature-gates` / `FEATURE_GATES`).
GATE: Final = "StaticCapacity"

#: Why a static NodePool takes no pod, wherever this tool leaves one out (the controller's templates, the plans).
LEFT_OUT: Final = (
    "static NodePool (spec.replicas): Karpenter v1.14.1 never schedules pods onto it; its nodes are its replicas, "
    f"launched only with the {GATE} feature gate (alpha, off by default)"
)

#: What Karpenter v1.14.1 logs, and marks every pending pod with, when every NodePool is static (provisioner.go).
NO_DYNAMIC_NODEPOOLS: Final = "no dynamic nodepools found"

_MESSAGE: Final = (
    f"static NodePool: Karpenter v1.14.1 provisions it only with the {GATE} feature gate (alpha, off by default): "
    "with the gate off it gets no node and no pod is provisioned to it; remove spec.replicas for a NodePool that "
    f"provisions for pending pods, or run Karpenter with --feature-gates {GATE}=true (this tool models the default)"
)


def static_violations(stored: Mapping[str, Any]) -> list[Violation]:
    """`static-nodepool` at `spec.replicas` of an admitted NodePool (its stored form) that is static; none else."""
    spec = stored.get("spec")
    if not isinstance(spec, Mapping) or not is_static(spec):
        return []
    return [Violation(STATIC_NODEPOOL, ("spec", "replicas"), f"replicas {spec['replicas']}: {_MESSAGE}")]
