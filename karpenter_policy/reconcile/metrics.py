"""Prometheus metrics of the controller (prometheus-client), in a registry of its own per controller.

* `karpenter_policy_pods_pending` — provisionable pods the last pass saw (pods already planned onto a node being
  launched are not pending); `karpenter_policy_pods_unschedulable` — those no constraint set can take.
* `karpenter_policy_nodes_launched_total{provisioner, capacity_type}` — instances launched.
* `karpenter_policy_launch_duration_seconds{provisioner}` — one launch, from the cloud call to the instance
  (CreateFleet and the offerings it fell back to), histogram.
* `karpenter_policy_insufficient_capacity_total{provisioner, capacity_type}` — offerings the cloud refused for lack
  of capacity (each is then unavailable for 3 minutes).
* `karpenter_policy_launch_errors_total{provisioner, reason}` — launches that failed: `insufficient_capacity`
  (every offering), `configuration`, `throttled`, `cloud`.
* `karpenter_policy_pods_bound_total` — pods the controller bound.
* `karpenter_policy_reconcile_duration_seconds` — one pass that scheduled a batch, histogram.
* `karpenter_policy_plans_ahead_total{used}` — plans made ahead while a batch window was quiet, and whether the
  pass closing the window used it (`true`) or something had changed (`false`: it planned again).
* `karpenter_policy_constraint_sets` — constraint sets in force; `karpenter_policy_constraint_set_refusals_total` —
  versions refused (unreadable, hash mismatch, wrong region).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series next to every counter

LAUNCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The controller's metrics (see the module docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.pods_pending = Gauge(
            "karpenter_policy_pods_pending", "Provisionable pods seen by the last pass.", registry=registry
        )
        self.pods_unschedulable = Gauge(
            "karpenter_policy_pods_unschedulable",
            "Pending pods that no constraint set can take (last scheduling pass).",
            registry=registry,
        )
        self.nodes_launched = Counter(
            "karpenter_policy_nodes_launched",
            "Instances launched, per provisioner and capacity type.",
            ["provisioner", "capacity_type"],
            registry=registry,
        )
        self.launch_duration = Histogram(
            "karpenter_policy_launch_duration_seconds",
            "Time of one launch: the cloud call until the instance is known, fallbacks included.",
            ["provisioner"],
            buckets=LAUNCH_BUCKETS,
            registry=registry,
        )
        self.insufficient_capacity = Counter(
            "karpenter_policy_insufficient_capacity",
            "Offerings the cloud refused for lack of capacity, per provisioner and capacity type.",
            ["provisioner", "capacity_type"],
            registry=registry,
        )
        self.launch_errors = Counter(
            "karpenter_policy_launch_errors",
            "Launches that failed, per provisioner and reason.",
            ["provisioner", "reason"],
            registry=registry,
        )
        self.pods_bound = Counter("karpenter_policy_pods_bound", "Pods the controller bound.", registry=registry)
        self.reconcile_duration = Histogram(
            "karpenter_policy_reconcile_duration_seconds",
            "Passes that scheduled a batch: from the start of the pass to its end.",
            buckets=PASS_BUCKETS,
            registry=registry,
        )
        self.plans_ahead = Counter(
            "karpenter_policy_plans_ahead",
            "Plans made ahead while a batch window was quiet, by whether the pass closing it used them.",
            ["used"],
            registry=registry,
        )
        self.constraint_sets = Gauge(
            "karpenter_policy_constraint_sets", "Constraint sets in force.", registry=registry
        )
        self.constraint_set_refusals = Counter(
            "karpenter_policy_constraint_set_refusals",
            "Constraint-set versions refused (unreadable, hash mismatch, wrong region).",
            registry=registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


__all__ = ["Metrics"]
