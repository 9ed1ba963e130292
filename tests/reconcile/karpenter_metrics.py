"""Karpenter v0.31's metrics as its sources define them (kubernetes-sigs/karpenter and aws/karpenter-provider-aws at
v0.31.1, with controller-runtime v0.14.6's): name → (type, label names, histogram buckets). Written out here, not
read from the controller, so that a test comparing the controller's scrape with this table checks the controller
against Karpenter, not against itself. `KARPENTER_V1`: v1.14.1's, which a NodePool's nodes are counted under."""

from __future__ import annotations

#: pkg/metrics/constants.go `DurationBuckets()`.
DURATION = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
    120, 150, 300, 450, 600,
)
#: controller-runtime v0.14.6 pkg/internal/controller/metrics/metrics.go `ReconcileTime`.
RECONCILE = DURATION[:40]
#: client_golang `prometheus.DefBuckets` (karpenter_cloudprovider_duration_seconds sets none).
GO_DEFAULT = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

#: pkg/controllers/metrics/node/controller.go: the well-known labels of v1alpha5 and v1beta1 (with the AWS
#: provider's, pkg/apis/v1alpha1/register.go), by their last path segment in snake case, then its own four.
NODE = (
    "provisioner_name", "nodepool", "zone", "region", "instance_type", "arch", "os", "capacity_type",
    "instance_hypervisor", "instance_encryption_in_transit_supported", "instance_category", "instance_family",
    "instance_generation", "instance_size", "instance_local_nvme", "instance_cpu", "instance_memory",
    "instance_network_bandwidth", "instance_pods", "instance_gpu_name", "instance_gpu_manufacturer",
    "instance_gpu_count", "instance_gpu_memory", "instance_accelerator_name", "instance_accelerator_manufacturer",
    "instance_accelerator_count", "windows_build",
    "resource_type", "node_name", "provisioner", "phase",
)

Definition = tuple[str, tuple[str, ...], tuple[float, ...] | None]

KARPENTER: dict[str, Definition] = {
    # controller-runtime (every controller)
    "controller_runtime_reconcile_total": ("counter", ("controller", "result"), None),
    "controller_runtime_reconcile_errors_total": ("counter", ("controller",), None),
    "controller_runtime_reconcile_time_seconds": ("histogram", ("controller",), RECONCILE),
    "controller_runtime_max_concurrent_reconciles": ("gauge", ("controller",), None),
    "controller_runtime_active_workers": ("gauge", ("controller",), None),
    # pkg/metrics/metrics.go
    "karpenter_nodes_created": ("counter", ("nodepool", "provisioner"), None),
    "karpenter_nodes_terminated": ("counter", ("nodepool", "provisioner"), None),
    "karpenter_machines_created": ("counter", ("reason", "provisioner"), None),
    "karpenter_machines_launched": ("counter", ("provisioner",), None),
    "karpenter_machines_registered": ("counter", ("provisioner",), None),
    "karpenter_machines_initialized": ("counter", ("provisioner",), None),
    "karpenter_machines_terminated": ("counter", ("reason", "provisioner"), None),
    "karpenter_machines_disrupted": ("counter", ("type", "provisioner"), None),
    # pkg/controllers/termination/metrics.go (a summary: quantile is its own label)
    "karpenter_nodes_termination_time_seconds": ("summary", ("provisioner",), None),
    # pkg/controllers/metrics/node/controller.go
    "karpenter_nodes_allocatable": ("gauge", NODE, None),
    "karpenter_nodes_total_pod_requests": ("gauge", NODE, None),
    "karpenter_nodes_total_pod_limits": ("gauge", NODE, None),
    "karpenter_nodes_total_daemon_requests": ("gauge", NODE, None),
    "karpenter_nodes_total_daemon_limits": ("gauge", NODE, None),
    "karpenter_nodes_system_overhead": ("gauge", NODE, None),
    # pkg/controllers/metrics/pod/controller.go
    "karpenter_pods_state": ("gauge", (
        "name", "namespace", "owner", "node", "provisioner", "nodepool", "zone", "arch", "capacity_type",
        "instance_type", "phase",
    ), None),
    "karpenter_pods_startup_time_seconds": ("summary", (), None),
    # pkg/controllers/metrics/provisioner/controller.go
    "karpenter_provisioner_limit": ("gauge", ("resource_type", "provisioner"), None),
    "karpenter_provisioner_usage": ("gauge", ("resource_type", "provisioner"), None),
    "karpenter_provisioner_usage_pct": ("gauge", ("resource_type", "provisioner"), None),
    # pkg/controllers/provisioning/metrics.go, provisioning/scheduling/metrics.go
    "karpenter_provisioner_scheduling_duration_seconds": ("histogram", (), DURATION),
    "karpenter_provisioner_scheduling_simulation_duration_seconds": ("histogram", (), DURATION),
    # pkg/controllers/deprovisioning/metrics.go
    "karpenter_deprovisioning_evaluation_duration_seconds": ("histogram", ("method",), DURATION),
    "karpenter_deprovisioning_replacement_machine_initialized_seconds": ("histogram", (), DURATION),
    "karpenter_deprovisioning_actions_performed": ("counter", ("action", "deprovisioner"), None),
    "karpenter_deprovisioning_eligible_machines": ("gauge", ("deprovisioner",), None),
    "karpenter_deprovisioning_consolidation_timeouts": ("counter", ("consolidation_type",), None),
    "karpenter_deprovisioning_replacement_machine_launch_failure_counter": ("counter", ("deprovisioner",), None),
    # aws: pkg/controllers/interruption/metrics.go
    "karpenter_interruption_received_messages": ("counter", ("message_type",), None),
    "karpenter_interruption_deleted_messages": ("counter", (), None),
    "karpenter_interruption_message_latency_time_seconds": ("histogram", (), DURATION),
    "karpenter_interruption_actions_performed": ("counter", ("action_type",), None),
    # pkg/cloudprovider/metrics/cloudprovider.go
    "karpenter_cloudprovider_duration_seconds": ("histogram", ("controller", "method", "provider"), GO_DEFAULT),
    "karpenter_cloudprovider_errors_total": ("counter", ("controller", "method", "provider", "error"), None),
    # aws: pkg/providers/instancetype/metrics.go, pkg/providers/pricing/metrics.go
    "karpenter_cloudprovider_instance_type_cpu_cores": ("gauge", ("instance_type",), None),
    "karpenter_cloudprovider_instance_type_memory_bytes": ("gauge", ("instance_type",), None),
    "karpenter_cloudprovider_instance_type_price_estimate": (
        "gauge", ("instance_type", "capacity_type", "region", "zone"), None,
    ),
}

#: pkg/controllers/node/termination/metrics.go at v1.14.1 `NodeLifetimeDurationSeconds`: 15 minutes to 30 days.
_H, _D = 3600.0, 86400.0
LIFETIME = (900.0, 1800.0, 2700.0, _H, 2 * _H, 4 * _H, 6 * _H, 8 * _H, 10 * _H, 12 * _H, 16 * _H, 20 * _H, _D, 2 * _D,
            3 * _D, 5 * _D, 10 * _D, 15 * _D, 20 * _D, 25 * _D, 30 * _D)

#: Karpenter v1.14.1's metrics that this controller exports for a NodePool's nodes, as core v1.14.1 defines them
#: (a Provisioner's nodes keep v0.31's, above).
KARPENTER_V1: dict[str, Definition] = {
    # pkg/metrics/metrics.go
    "karpenter_nodeclaims_created_total": ("counter", ("reason", "nodepool", "min_values_relaxed"), None),
    "karpenter_nodeclaims_terminated_total": ("counter", ("nodepool", "capacity_type", "zone"), None),
    "karpenter_nodeclaims_disrupted_total": ("counter", ("reason", "nodepool", "capacity_type"), None),
    "karpenter_nodes_created_total": ("counter", ("nodepool", "zone"), None),
    "karpenter_nodes_terminated_total": ("counter", ("nodepool", "zone"), None),
    # pkg/controllers/node/termination/metrics.go
    "karpenter_nodes_termination_duration_seconds": ("summary", ("nodepool",), None),
    "karpenter_nodes_drained_total": ("counter", ("nodepool",), None),
    "karpenter_nodes_lifetime_duration_seconds": ("histogram", ("nodepool",), LIFETIME),
    # pkg/controllers/disruption/metrics.go
    "karpenter_voluntary_disruption_decisions_total": ("counter", ("decision", "reason", "consolidation_type"), None),
    "karpenter_voluntary_disruption_decisions_by_nodepool_total": (
        "counter", ("nodepool", "decision", "reason", "consolidation_type"), None,
    ),
    "karpenter_voluntary_disruption_eligible_nodes": ("gauge", ("reason",), None),
    "karpenter_voluntary_disruption_decision_evaluation_duration_seconds": (
        "histogram", ("reason", "consolidation_type"), DURATION,
    ),
    "karpenter_voluntary_disruption_consolidation_timeouts_total": ("counter", ("consolidation_type",), None),
    "karpenter_voluntary_disruption_failed_validations_total": ("counter", ("consolidation_type",), None),
    # pkg/controllers/metrics/nodepool/controller.go
    "karpenter_nodepools_limit": ("gauge", ("resource_type", "nodepool"), None),
    "karpenter_nodepools_usage": ("gauge", ("resource_type", "nodepool"), None),
    "karpenter_nodepools_cost_total": ("gauge", ("nodepool",), None),
}

#: Karpenter v0.31 metrics (website/content/en/docs/concepts/metrics.md at v0.31.1) this controller has no use
#: for; docs/metrics.md says why for each.
NOT_APPLICABLE = (
    "karpenter_consistency_errors",
    "karpenter_machines_drifted",
    "karpenter_nodes_leases_deleted",
    "karpenter_cloudprovider_batcher_batch_size",
    "karpenter_cloudprovider_batcher_batch_time_seconds",
)

__all__ = ["KARPENTER", "KARPENTER_V1", "NOT_APPLICABLE"]
