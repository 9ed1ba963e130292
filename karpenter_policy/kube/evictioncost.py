"""Karpenter's eviction cost of a pod (core pkg/utils/disruption/disruption.go `EvictionCost`): what its disruption
decisions (`reconcile.state.pods`, the controller's records) and `plan`'s static deprovisioning order
(`commands.plan.staticnodepools`) weigh a node's pods by. One definition for both."""

from __future__ import annotations

import contextlib
import math

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj

__all__ = ["DELETION_COST", "disruption_cost"]

#: The ReplicaSet controller's deletion-cost annotation, which Karpenter adds to a pod's cost.
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def disruption_cost(pod: Obj) -> float:
    """Karpenter's eviction cost of a pod: 1, plus its deletion cost and priority scaled down, within ±10."""
    cost = 1.0
    raw = objects.annotations(pod).get(DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):
            cost += float(raw) / 2**27
    priority = (pod.get("spec") or {}).get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        cost += max(-(2**31), min(priority, 2**31 - 1)) / 2**25  # an int32 in the API: any int must not overflow
    return max(-10.0, min(10.0, cost)) if math.isfinite(cost) else 1.0
