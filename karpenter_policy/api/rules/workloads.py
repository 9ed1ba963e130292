"""The rules of `check --workloads` and `test`: workloads read and placed by the scheduler, PlacementTests.

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, WARNING, Rule

INVALID_WORKLOAD = Rule(
    id="invalid-workload",
    severity=ERROR,
    summary=(
        "A workload's pod spec cannot be read (a malformed quantity, operator or toleration), or the API server "
        "refuses its resources."
    ),
    description=(
        "check --workloads: a workload's pod spec cannot be read (a malformed quantity, operator or "
        "toleration), or the Kubernetes API server refuses its resources (ValidateResourceRequirements, on every "
        "container, init container, the overhead and pod-level resources): an extended resource or huge pages "
        "requested without a limit or with a request other than the limit, a request above its limit, a negative "
        "quantity, huge pages that are not whole pages or come without cpu or memory, a resource name that is "
        "not a qualified name; at pod level (v1.34's validatePodResources), a name other than cpu, memory or huge "
        "pages, a request below the containers' aggregate, a container limit above the pod's. The workload is "
        "never placed; each field is a finding in the API server's words."
    ),
)


INVALID_REPLICAS = Rule(
    id="invalid-replicas",
    severity=ERROR,
    summary="A workload's replicas (a Job's parallelism) is not an integer of 0 to 100,000.",
    description=(
        "A workload's number of pods — spec.replicas of a Deployment, StatefulSet, ReplicaSet or "
        "ReplicationController, spec.parallelism of a Job, spec.jobTemplate.spec.parallelism of a CronJob — is not "
        "an integer of 0 to 100,000: a string, a fraction, a boolean or a negative number (the API server refuses "
        "them too), or more pods than karpenter-policy plans or simulates for one workload. The workload is left "
        "out of the plan, the simulation and pin's proof."
    ),
)


WORKLOAD_UNSCHEDULABLE = Rule(
    id="workload-unschedulable",
    severity=ERROR,
    summary="No provisioner or NodePool can launch a node for a workload (the reason per pool).",
    description=(
        "check --workloads: no provisioner (or NodePool) can launch a node for the workload's pods; the message "
        "gives the reason per pool (requirements, a taint not tolerated, an unknown label, resources too large, "
        "limits). A pod Karpenter ignores (v0.31 Provisioner.Validate: node affinity with matchFields, a required or "
        "preferred term on a restricted label such as kubernetes.io/hostname, a karpenter.sh/provisioner-name "
        "DoesNotExist requirement) is refused with Karpenter's reason."
    ),
    karpenter=(
        "core pkg/controllers/provisioning/scheduling/scheduler.go: Scheduler.Solve; core "
        "pkg/controllers/provisioning/provisioner.go: Provisioner.Validate"
    ),
)


VOLUME_ZONES_CONFLICT = Rule(
    id="volume-zones-conflict",
    severity=ERROR,
    summary="A pod's volumes (their PersistentVolumes' zones) leave no zone: no node can hold it.",
    description=(
        "(check --workloads) Karpenter v0.31 adds each of a pod's volumes' topology to its required node affinity "
        "(volumetopology.go): a bound claim's PersistentVolume nodeAffinity, an unbound claim's StorageClass "
        "allowedTopologies. When these leave no value of a key — claims bound to PersistentVolumes in different "
        "zones — no node can hold the pod: it stays pending. The finding names the volumes; the workload is not "
        "placed or planned further."
    ),
    karpenter="core pkg/controllers/provisioning/scheduling/volumetopology.go: VolumeTopology.Inject",
)


UNKNOWN_TOPOLOGY_KEY = Rule(
    id="unknown-topology-key",
    severity=WARNING,
    summary="A workload's topology key that no node the provisioners or NodePools launch has: probably a typo.",
    description=(
        "A topologyKey of a workload's topology spread constraint or pod (anti-)affinity term that no node the "
        "provisioners launch has (neither a label of their instance types, zones and capacity types, nor one of "
        "their labels or In requirements, nor the hostname), with the nearest key they have "
        "(topology.kubernetes.io/hostname: did you mean kubernetes.io/hostname?). Karpenter v0.31 finds no domain "
        "for such a term: a required one leaves the pods pending (the workload-unschedulable error says so), a "
        "preferred one or a ScheduleAnyway spread is dropped. A warning: a key your existing nodes carry is not "
        "known to check."
    ),
    karpenter="core pkg/controllers/provisioning/scheduling/topologygroup.go: TopologyGroup.Get",
)


OVERLAP = Rule(
    id="overlap",
    severity=WARNING,
    summary=(
        "Provisioners or NodePools of equal weight both match a workload: which one launches its nodes is "
        "arbitrary (v0.31) or decided by their names (v1)."
    ),
    description=(
        "check --workloads: two provisioners or NodePools of equal weight both match a workload. Karpenter v0.31.1 "
        "orders provisioners by weight alone, so its choice between two Provisioners is arbitrary; v1.14.1 puts the "
        "NodePool whose name is later in the alphabet first, so a rename moves the workload. A warning: give them "
        "different weights."
    ),
    karpenter=(
        "core pkg/controllers/provisioning/provisioner.go: Provisioner.NewScheduler; "
        "core-v1 pkg/utils/nodepool/nodepool.go: OrderByWeight"
    ),
)


SHADOWED = Rule(
    id="shadowed",
    severity=WARNING,
    summary="Higher-weight pools take every workload a provisioner or NodePool could launch a node for.",
    description=(
        "check --workloads: every workload the provisioner could launch a node for goes to a provisioner of higher "
        "weight. A warning."
    ),
    karpenter="core pkg/controllers/provisioning/provisioner.go: Provisioner.NewScheduler",
)


PLACEMENT_TEST_FAILED = Rule(
    id="placement-test-failed",
    severity=ERROR,
    summary="A PlacementTest expectation does not hold for the planned placement of its workload.",
    description=(
        "test, or check --workloads with PlacementTest files among the policies: an expectation of a PlacementTest "
        "(provisioner, capacity types, zones, architectures, instance families, unschedulable, maxMonthlyCost) does"
        " not hold for the plan of its workload; reported at the expectation's line (docs/placement-tests.md)."
    ),
)


MULTI_ARCH = Rule(
    id="multi-arch",
    severity=WARNING,
    summary="A workload that names no CPU architecture may land on nodes of another one than amd64 (arm64).",
    description=(
        "check --workloads: a workload whose node selector and affinity do not name kubernetes.io/arch may be "
        "placed on arm64 (Graviton) nodes — Karpenter picks the type at launch among every type that fits, by price "
        "and availability. A warning: its images must be multi-arch, or pin an architecture with a nodeSelector."
    ),
    karpenter="core pkg/controllers/provisioning/scheduling/nodeclaim.go: filterInstanceTypesByRequirements",
)


PLACEMENT_GROUP_PARTITION = Rule(
    id="placement-group-partition",
    severity=WARNING,
    summary="A workload requires or spreads over placement group partitions that check cannot know the group has.",
    description=(
        "check --workloads: a workload's node selector or required node affinity names a partition (1 to 7) of "
        "karpenter.k8s.aws/placement-group-partition, or a required topology spread or pod (anti-)affinity has it "
        "as topology key, and a NodePool's EC2NodeClass has a placementGroupSelector. The class names the group, "
        "not its strategy, which Karpenter v1.14.1 reads from DescribePlacementGroups: check asks no cloud, so it "
        "places the pods as if the group were a partition group of 7 partitions (EC2's most per zone); in the "
        "cluster a group with fewer partitions has fewer (a required partition may not exist), and a cluster or "
        "spread group none: the pod stays pending. A partition above 7 is a workload-unschedulable error. A "
        "warning: check the group's strategy and partition count."
    ),
    karpenter="aws-v1 pkg/providers/instancetype/offering/placement_group_resolver.go: ResolveOfferings",
)


RULES = (
    INVALID_WORKLOAD,
    INVALID_REPLICAS,
    WORKLOAD_UNSCHEDULABLE,
    VOLUME_ZONES_CONFLICT,
    UNKNOWN_TOPOLOGY_KEY,
    OVERLAP,
    SHADOWED,
    PLACEMENT_TEST_FAILED,
    MULTI_ARCH,
    PLACEMENT_GROUP_PARTITION,
)
