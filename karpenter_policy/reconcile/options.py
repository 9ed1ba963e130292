"""How the controller behaves: every knob in one frozen value (see docs/reconcile.md)."""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_policy.model.minvalues import STRICT
from karpenter_policy.reconcile.flags import DEFAULT_IDLE_SECONDS, DEFAULT_MAX_SECONDS, DEFAULT_REGISTRATION_TTL
from karpenter_policy.scheduling import COST

#: Garbage collection every 2 minutes; an instance without a Node is collected once seen without one for 2
#: minutes; a Node once its instance was missing from reads spanning 5 minutes (longer than EC2's eventual
#: consistency: DescribeInstances may lag a launch).
DEFAULT_GC_INTERVAL = 120.0
DEFAULT_INSTANCE_GRACE = 120.0
DEFAULT_NODE_GRACE = 300.0
#: Launches issued at once: Karpenter launches every node claim of a batch at once (kubernetes-sigs/karpenter v0.31.1
#: `pkg/controllers/provisioning/provisioner.go`, `Provisioner.CreateNodeClaims`: as many workers as claims); 64
#: bounds the threads and the AWS connection pool (`AwsConnection.max_pool_connections`) of a large batch.
DEFAULT_LAUNCH_PARALLELISM = 64
#: Bindings issued at once.
DEFAULT_BIND_PARALLELISM = 8
#: Karpenter's defaults: a decision every 10 s, consolidation validated after 15 s, replacements given 10 min.
DEFAULT_DISRUPTION_INTERVAL = 10.0
DEFAULT_VALIDATION = 15.0
DEFAULT_REPLACEMENT_TIMEOUT = 600.0

#: Karpenter v0.31's time budgets of one decision: single-node consolidation 3 minutes, multi-node 1 minute.
DEFAULT_SINGLE_NODE_BUDGET = 180.0
DEFAULT_MULTI_NODE_BUDGET = 60.0


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    """How the controller behaves (see docs/reconcile.md)."""

    cluster_name: str
    batch_idle: float = DEFAULT_IDLE_SECONDS
    batch_max: float = DEFAULT_MAX_SECONDS
    #: Provision only for pods kube-scheduler marked Unschedulable (a real cluster); else every unbound pod.
    unschedulable_only: bool = False
    #: Bind pods the plan puts on existing nodes (when no kube-scheduler runs); else nominate them.
    bind_existing: bool = True
    strategy: str = COST
    #: How a v1 NodePool's minValues are kept when packing (Karpenter's operator flag): Strict or BestEffort.
    min_values_policy: str = STRICT
    #: Launches issued at once (Karpenter launches every node of a batch at once); 1: in plan order.
    launch_parallelism: int = DEFAULT_LAUNCH_PARALLELISM
    bind_parallelism: int = DEFAULT_BIND_PARALLELISM
    #: Pods still pending after a batch are tried again after this many seconds (capacity may be back).
    retry_interval: float = 10.0
    #: Scheduling rounds after a launch found no capacity at all, in the same pass.
    replans: int = 1
    #: A launched instance whose Node never shows up is forgotten after this many seconds.
    registration_timeout: float = 300.0
    #: A node of ours whose kubelet has not joined this many seconds after its launch (or after this controller
    #: first saw it) is deleted, its instance terminated (`provisioning.liveness`).
    registration_ttl: float = DEFAULT_REGISTRATION_TTL
    #: Plan the batch ahead while its window is open and quiet (see `provisioning.ahead`); the plan is used when
    #: the window closes if nothing changed meanwhile.
    speculate: bool = True
    #: Garbage collection (see `garbage`): every this many seconds (0: never); an instance with no Node is
    #: terminated once seen without one this long; a Node of ours is deleted once its instance was missing from
    #: three reads in a row spanning this long (ages as the controller observed them, never from timestamps).
    gc_interval: float = DEFAULT_GC_INTERVAL
    gc_instance_grace: float = DEFAULT_INSTANCE_GRACE
    gc_node_grace: float = DEFAULT_NODE_GRACE
    #: Disruption (see `disruption`): decide at most this often; act on a consolidation only when a decision
    #: this much later agrees; abandon a command whose replacements are not initialized within this time.
    disruption_interval: float = DEFAULT_DISRUPTION_INTERVAL
    consolidation_validation: float = DEFAULT_VALIDATION
    replacement_timeout: float = DEFAULT_REPLACEMENT_TIMEOUT
    #: The time one decision may take (seconds of the controller's clock): a decision that runs out stops with
    #: what it found so far (Karpenter's budgets).
    single_node_budget: float = DEFAULT_SINGLE_NODE_BUDGET
    multi_node_budget: float = DEFAULT_MULTI_NODE_BUDGET
    #: Karpenter v1.14.1's StaticCapacity feature gate (`--feature-gates StaticCapacity=true`): static NodePools'
    #: replicas kept by the static provisioning and deprovisioning controllers (`reconcile.static`).
    static_capacity: bool = False
    #: Karpenter v1.14.1's ReservedCapacity feature gate (on by default; `--feature-gates ReservedCapacity=false`):
    #: an EC2NodeClass's capacity reservations offered to the scheduler (`cloud.reservedtypes`).
    reserved_capacity: bool = True

    def __post_init__(self) -> None:
        if not self.cluster_name:
            raise ValueError("a cluster name is required")
        if self.retry_interval <= 0 or self.registration_timeout <= 0 or self.replans < 0:
            raise ValueError("retry interval and registration timeout must be > 0, replans >= 0")
        if self.registration_ttl <= 0:
            raise ValueError("the registration TTL must be > 0")
        if self.single_node_budget <= 0 or self.multi_node_budget <= 0:
            raise ValueError("the decision budgets must be > 0")


__all__ = [
    "DEFAULT_BIND_PARALLELISM",
    "DEFAULT_DISRUPTION_INTERVAL",
    "DEFAULT_GC_INTERVAL",
    "DEFAULT_IDLE_SECONDS",
    "DEFAULT_INSTANCE_GRACE",
    "DEFAULT_LAUNCH_PARALLELISM",
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_MULTI_NODE_BUDGET",
    "DEFAULT_NODE_GRACE",
    "DEFAULT_REGISTRATION_TTL",
    "DEFAULT_REPLACEMENT_TIMEOUT",
    "DEFAULT_SINGLE_NODE_BUDGET",
    "DEFAULT_VALIDATION",
    "ControllerOptions",
]
