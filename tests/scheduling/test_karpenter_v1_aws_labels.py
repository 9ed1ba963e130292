"""The node labels Karpenter v1.14.1 on AWS sets and schedules on, replayed over the embedded us-east-1 catalog.

The reference is aws/karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/suite_test.go`,
`It("should support individual instance type labels")` (line 223: one pod per label, each selecting g4dn.8xlarge's
value, each scheduled) and `It("should support combined instance type labels")` (line 290: one pod selecting them
all, scheduled), on a NodePool without requirements. The rest of that suite (prices, ENI and pod density, overhead,
the insufficient-capacity cache) tests the AWS provider's instance-type provider, not scheduling, and is not here.

Adaptations: the Go fake's region and zone (`test-zone-1a`) are us-east-1's and us-east-1a, and its values are
g4dn.8xlarge's real ones; the fake gives g4dn.8xlarge accelerator labels (`inferentia2`, a TODO in the Go test),
which no real g4dn has, and the Windows build label belongs to its Windows NodePool: both are left out.

The labels v1.14.1 added over v0.31 (CPU manufacturer, sustained clock speed, EBS bandwidth, flex capability,
tenancy) are on a v1 NodePool's types, from the embedded catalog, and never on a v1alpha5 Provisioner's: Karpenter
v0.31 knew none of them, and a Provisioner behaves as it did (the last tests here).

Where we differ: `topology.k8s.aws/zone-id`. v1.14.1 reads a zone's id from the EC2NodeClass's subnets
(DescribeSubnets' `AvailabilityZoneId`); which id a zone name has is drawn per AWS account (us-east-1a is use1-az6
in one account, use1-az4 in another), so no catalog can say it, and a pod selecting a zone id is reported
unschedulable where Karpenter schedules it. Those cases are `xfail(strict=True)` (docs/v1.md, "Where we differ").
"""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.api.provisionerrules import requirement_violations
from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.scheduling import KARPENTER, InstanceTable, NodeClaimTemplate, TopologyRules
from karpenter_policy.scheduling.instances import V1_TYPE_KEYS

from .cluster import Cluster, make_pod

GO_FILE = "aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/suite_test.go"
ZONE = "us-east-1a"

#: g4dn.8xlarge's labels as line 223 selects them (in its order), with us-east-1's region and zone.
LABELS: dict[str, str] = {
    wk.NODEPOOL: "default",
    wk.REGION: "us-east-1",
    wk.ZONE: ZONE,
    wk.INSTANCE_TYPE: "g4dn.8xlarge",
    wk.OS: "linux",
    wk.ARCH: "amd64",
    wk.CAPACITY_TYPE: "on-demand",
    "karpenter.k8s.aws/instance-tenancy": "default",
    wk.INSTANCE_HYPERVISOR: "nitro",
    wk.INSTANCE_ENCRYPTION_IN_TRANSIT: "true",
    wk.INSTANCE_CATEGORY: "g",
    "karpenter.k8s.aws/instance-capability-flex": "false",
    wk.INSTANCE_GENERATION: "4",
    wk.INSTANCE_FAMILY: "g4dn",
    wk.INSTANCE_SIZE: "8xlarge",
    wk.INSTANCE_CPU: "32",
    "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "2500",
    wk.INSTANCE_MEMORY: "131072",
    "karpenter.k8s.aws/instance-ebs-bandwidth": "9500",
    wk.INSTANCE_NETWORK_BANDWIDTH: "50000",
    wk.INSTANCE_GPU_NAME: "t4",
    wk.INSTANCE_GPU_MANUFACTURER: "nvidia",
    wk.INSTANCE_GPU_COUNT: "1",
    wk.INSTANCE_GPU_MEMORY: "16384",
    wk.INSTANCE_LOCAL_NVME: "900",
    "topology.k8s.aws/zone-id": "use1-az6",  # us-east-1a's id differs per account; no value is known here
    "failure-domain.beta.kubernetes.io/region": "us-east-1",
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "beta.kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/os": "linux",
    "beta.kubernetes.io/instance-type": "g4dn.8xlarge",
    "topology.ebs.csi.aws.com/zone": ZONE,
}

#: The labels v1.14.1 sets from facts no catalog can hold.
NOT_IN_CATALOG = frozenset({wk.ZONE_ID})
_MISSING = "a zone's id differs per AWS account, so no catalog says it and no node of ours has the label (docs/v1.md)"


@cache
def _table() -> InstanceTable:
    catalog = load_catalog()
    return InstanceTable(catalog.instance_types, catalog.region)


def _world() -> Cluster:
    """A NodePool without requirements (Go: `test.NodePool()` with its EC2NodeClass) over us-east-1's types."""
    pool = NodeClaimTemplate.build(_table(), name="default", requirements=Requirements(), owner_label=wk.NODEPOOL)
    return Cluster(_table(), pool, strategy=KARPENTER, topology=TopologyRules.V1_14)


def _case(key: str) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=f"{key}: {_MISSING}")] if key in NOT_IN_CATALOG else []
    return pytest.param(key, marks=marks, id=key)


@pytest.mark.parametrize("key", [_case(key) for key in LABELS])
def test_l223_a_pod_selecting_one_label_of_g4dn_8xlarge_is_scheduled(key: str) -> None:
    """suite_test.go:223 "should support individual instance type labels": a pod selecting the label's value."""
    world = _world()
    pod = make_pod(node_selector={key: LABELS[key]})
    world.provision(pod)
    assert pod.key in world.node_of, f"{GO_FILE}:223 {key}={LABELS[key]} not scheduled"


def test_l290_a_pod_selecting_every_label_the_catalog_holds_lands_on_g4dn_8xlarge() -> None:
    """suite_test.go:290 "should support combined instance type labels", the labels the catalog holds (all but the
    zone id): one pod selecting them all is scheduled, on g4dn.8xlarge in us-east-1a, on demand."""
    world = _world()
    pod = make_pod(node_selector={k: v for k, v in LABELS.items() if k not in NOT_IN_CATALOG})
    world.provision(pod)
    node = world.scheduled(pod)
    assert (node.instance_type, node.labels[wk.ZONE], node.labels[wk.CAPACITY_TYPE]) == (
        "g4dn.8xlarge", ZONE, "on-demand"), f"{GO_FILE}:290"  # fmt: skip


@pytest.mark.xfail(strict=True, reason=f"{wk.ZONE_ID}: {_MISSING}")
def test_l290_a_pod_selecting_every_label_is_scheduled() -> None:
    """suite_test.go:290 as written: the same pod selecting the zone id as well."""
    world = _world()
    pod = make_pod(node_selector=LABELS)
    world.provision(pod)
    assert pod.key in world.node_of, f"{GO_FILE}:290"


def test_the_ebs_csi_zone_key_is_read_as_the_zone_and_is_not_deprecated() -> None:
    """aws/karpenter-provider-aws adds `topology.ebs.csi.aws.com/zone` to `NormalizedLabels` (read as the zone, at
    v0.31.1 as at v1.14.1): a requirement on it is the zone's, and it is not one of the deprecated beta keys that
    the `deprecated-label` rule names."""
    assert Requirement.new(wk.EBS_CSI_ZONE, "In", [ZONE]).key == wk.ZONE
    found = {v.rule for v in requirement_violations({"key": wk.EBS_CSI_ZONE, "operator": "In", "values": [ZONE]}, ())}
    assert "deprecated-label" not in found
    beta = {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": [ZONE]}
    assert "deprecated-label" in {v.rule for v in requirement_violations(beta, ())}


def _provisioner_world() -> Cluster:
    """A v1alpha5 Provisioner without requirements over the same types (Karpenter v0.31)."""
    pool = NodeClaimTemplate.build(_table(), name="default", requirements=Requirements())
    return Cluster(_table(), pool, strategy=KARPENTER)


@pytest.mark.parametrize("key", sorted(wk.V1_INSTANCE_LABELS))
def test_a_provisioner_knows_none_of_v1s_new_labels(key: str) -> None:
    """Karpenter v0.31 set none of v1.14.1's new labels (aws/karpenter-provider-aws v0.31.1 pkg/apis/v1alpha1
    labels.go): a pod selecting one is not scheduled on a Provisioner, as before, while a NodePool takes it."""
    pod = make_pod(node_selector={key: LABELS[key]})
    world = _provisioner_world()
    world.provision(pod)
    assert pod.key not in world.node_of
    v1 = _world()
    v1_pod = make_pod(node_selector={key: LABELS[key]})
    v1.provision(v1_pod)
    assert v1_pod.key in v1.node_of


def test_a_pod_selecting_amd_lands_on_an_amd_type_of_a_nodepool() -> None:
    """`instance-cpu-manufacturer: amd` picks, of every type a NodePool without requirements may launch, the
    cheapest AMD one."""
    world = _world()
    pod = make_pod(requests={"cpu": "100m"}, node_selector={wk.INSTANCE_CPU_MANUFACTURER: "amd"})
    world.provision(pod)
    chosen = world.scheduled(pod).instance_type
    assert {it.name: it for it in _table().types}[chosen].cpu_manufacturer == "amd"


def test_an_affinity_on_a_new_label_is_scheduled_on_a_nodepool() -> None:
    """The same selection as a required node-affinity `NotIn [intel aws]`: Karpenter v1.14.1 schedules it on AMD
    (its `ValidateRequirement` holds the label well-known; v0.31's held it restricted: `scheduling/refusal.py`)."""
    selector = {"key": wk.INSTANCE_CPU_MANUFACTURER, "operator": "NotIn", "values": ["intel", "aws"]}
    world = _world()
    pod = make_pod(requests={"cpu": "100m"}, required_terms=[[selector]])
    world.provision(pod)
    assert pod.key in world.node_of


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@deterministic(200)
@given(
    key=st.sampled_from(sorted(wk.V1_INSTANCE_LABELS)),
    operator=st.sampled_from(_OPERATORS),
    picks=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=3),
)
def test_a_v1_requirement_keeps_exactly_the_types_whose_v1_label_it_admits(
    key: str, operator: str, picks: list[int]
) -> None:
    """For any of the new labels and any operator, the types a NodePool keeps are those whose v1.14.1 value (or
    its absence; both tenancies on every type) the requirement admits, as Karpenter's `Requirements.Compatible`
    of the type's requirements decides: counted type by type."""
    table = _table()
    carried = sorted({it.v1_labels[key] for it in table.types if key in it.v1_labels} | set(wk.TENANCIES))
    values = [carried[p % len(carried)] for p in picks] if operator in ("In", "NotIn") else []
    requirement = Requirement.new(key, operator, values)
    kept = table.type_mask(Requirements([requirement]), type_keys=V1_TYPE_KEYS)
    for i, it in enumerate(table.types):
        theirs = {it.v1_labels[key]} if key in it.v1_labels else set()
        if key == wk.INSTANCE_TENANCY:
            theirs = set(wk.TENANCIES)
        if operator == "In":
            expected = bool(theirs & set(values))
        elif operator == "NotIn":
            expected = not theirs or bool(theirs - set(values))
        else:
            expected = bool(theirs) == (operator == "Exists")
        assert bool(kept >> i & 1) == expected, (it.name, key, operator, values)
    assert table.type_mask(Requirements([requirement])) == table.everything  # a Provisioner's types: unconstrained
