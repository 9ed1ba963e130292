"""Ports of `Describe("Pod Eviction Cost")`, pkg/controllers/deprovisioning/suite_test.go of kubernetes-sigs/karpenter
at v0.31.1: a pod's disruption cost (`GetPodEvictionCost`), which orders consolidation's candidates. (The suite's
other contexts named by issue #18 — TTL, Multi-NodeClaim, Timeout, Parallelization — are in
machine_consolidation_test.go at v0.31.1: test_deprovisioning_consolidation.py ports them.)"""

from __future__ import annotations

from collections.abc import Mapping

from karpenter_policy.reconcile.state.pods import disruption_cost
from karpenter_policy.testing import Scene

from .support import Policies, provisioner

STANDARD = 1.0


def _cost(policies: Policies, name: str, annotations: Mapping[str, str] | None = None,
          priority: int | None = None) -> float:
    scene = Scene(policies(provisioner()), types=["m5.large"])
    return disruption_cost(scene.add_pod(name, annotations=annotations, priority=priority))


def _deletion_cost(policies: Policies, value: str) -> float:
    return _cost(policies, f"cost-{value}", {"controller.kubernetes.io/pod-deletion-cost": value})


def test_standard_disruption_cost_for_a_pod_with_no_priority_or_disruption_cost(policies: Policies) -> None:
    """Pod Eviction Cost > should have a standard disruptionCost for a pod with no priority or disruptionCost
    specified — suite_test.go:133."""
    assert _cost(policies, "plain") == STANDARD


def test_higher_disruption_cost_for_a_pod_with_a_positive_deletion_cost(policies: Policies) -> None:
    """Pod Eviction Cost > should have a higher disruptionCost for a pod with a positive deletion disruptionCost —
    suite_test.go:137."""
    assert _deletion_cost(policies, "100") > STANDARD


def test_lower_disruption_cost_for_a_pod_with_a_negative_deletion_cost(policies: Policies) -> None:
    """Pod Eviction Cost > should have a lower disruptionCost for a pod with a positive deletion disruptionCost —
    suite_test.go:145 (the Go title says positive; its pod's cost is -100)."""
    assert _deletion_cost(policies, "-100") < STANDARD


def test_higher_costs_for_higher_deletion_costs(policies: Policies) -> None:
    """Pod Eviction Cost > should have higher costs for higher deletion costs — suite_test.go:153."""
    assert _deletion_cost(policies, "101") > _deletion_cost(policies, "100") > _deletion_cost(policies, "99")


def test_higher_disruption_cost_for_a_pod_with_a_higher_priority(policies: Policies) -> None:
    """Pod Eviction Cost > should have a higher disruptionCost for a pod with a higher priority — suite_test.go:172."""
    assert _cost(policies, "high", priority=1) > STANDARD


def test_lower_disruption_cost_for_a_pod_with_a_lower_priority(policies: Policies) -> None:
    """Pod Eviction Cost > should have a lower disruptionCost for a pod with a lower priority — suite_test.go:178."""
    assert _cost(policies, "low", priority=-1) < STANDARD
