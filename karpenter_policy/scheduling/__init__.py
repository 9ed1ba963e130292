"""The scheduling core: one scheduler for `check --workloads`, `diff`, `simulate` and the controller.

Pure (no I/O, no solver): it imports only `model`, `api` and `catalog` (the :class:`Catalog` an instance table
is built from). Given pods, node claim templates (one per provisioner,
built from a Provisioner or a compiled ConstraintSet over an :class:`InstanceTable`), existing nodes and DaemonSets, it
returns a :class:`Plan`: pods onto existing nodes, pods onto new node claims (every fitting instance type,
cheapest first, and the launch choice), and the pods that fit nowhere with the reason per template.
"""

from karpenter_policy.scheduling.instances import InstanceTable
from karpenter_policy.scheduling.nodes import ExistingNode, NodeClaim
from karpenter_policy.scheduling.plan import ClaimPlan, Plan, PodFailure
from karpenter_policy.scheduling.pods import Attempt, Pod, PodShape, shape_of
from karpenter_policy.scheduling.reasons import Refusal
from karpenter_policy.scheduling.running import ClusterPod, RunningPods
from karpenter_policy.scheduling.scheduler import (
    COST,
    KARPENTER,
    STRATEGIES,
    Scheduler,
    SchedulerOptions,
    TemplateParts,
    solve,
)
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.topology import TopologyRules

__all__ = [
    "COST",
    "KARPENTER",
    "STRATEGIES",
    "Attempt",
    "ClaimPlan",
    "ClusterPod",
    "ExistingNode",
    "InstanceTable",
    "NodeClaim",
    "NodeClaimTemplate",
    "Plan",
    "Pod",
    "PodFailure",
    "PodShape",
    "Refusal",
    "RunningPods",
    "Scheduler",
    "SchedulerOptions",
    "TemplateParts",
    "TopologyRules",
    "shape_of",
    "solve",
]
