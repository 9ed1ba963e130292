"""A partition placement group's partitions as topology domains, as Karpenter v1.14.1 schedules them (issue #26).

aws/karpenter-provider-aws v1.14.1 expands, for an EC2NodeClass whose placement group is a partition group with a
partition count, each offering into one per partition (pkg/providers/instancetype/offering/
placement_group_resolver.go `ResolveOfferings`) and adds the group's id and `1` … `N` to its instance types'
requirements (offering.go:168-181 `InjectOfferings`), "so the scheduler can discover partition topology domains for
TopologySpreadConstraints". Here the NodePool's template carries them (`NodeClaimTemplate.offered`, what
`PlacingCloud.placement_requirements` answers); they are domains, never requirements its claims are written with:
a claim that no pod and no spread pins to a partition has none, and EC2 picks (cloudprovider.go:476-488).
v1.14.1 has no scheduling test of its own for this; the cases follow the resolver's doc comment.
"""

from __future__ import annotations

from functools import cache

from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.scheduling import KARPENTER, InstanceTable, NodeClaimTemplate, TopologyRules

from .cluster import LABELS, Cluster, make_pod, make_pods, requirement, spread

PARTITION = wk.PLACEMENT_GROUP_PARTITION
GROUP = "pg-0fedcba9876543210"
#: A partition group of three partitions, as `AwsCloudProvider.placement_requirements` answers for it.
OFFERED = {wk.PLACEMENT_GROUP_ID: (GROUP,), PARTITION: ("1", "2", "3")}


@cache
def _table() -> InstanceTable:
    catalog = load_catalog()
    return InstanceTable(catalog.instance_types, catalog.region)


def _world(offered: dict[str, tuple[str, ...]] | None = None, requirements: Requirements | None = None) -> Cluster:
    pool = NodeClaimTemplate.build(
        _table(), name="default", requirements=requirements or Requirements(), owner_label=wk.NODEPOOL,
        offered=OFFERED if offered is None else offered,
    )
    return Cluster(_table(), pool, strategy=KARPENTER, topology=TopologyRules.V1_14)


def test_a_spread_over_the_partition_key_lands_one_node_per_partition() -> None:
    """Three pods spreading over `placement-group-partition` with maxSkew 1: three claims, one per partition (each
    claim's requirement is its partition: what the launch's `PartitionNumber` is taken from)."""
    world = _world()
    pods = make_pods(3, cpu="1", labels=LABELS, spread_constraints=[spread(PARTITION)])
    plan = world.provision(*pods)
    assert sorted(tuple(c.requirements[PARTITION].values) for c in plan.claims) == [("1",), ("2",), ("3",)]
    assert world.skew(PARTITION) == [1, 1, 1]


def test_six_pods_spread_two_per_partition() -> None:
    world = _world()
    pods = make_pods(6, cpu="1", labels=LABELS, spread_constraints=[spread(PARTITION)])
    world.provision(*pods)
    assert world.skew(PARTITION) == [2, 2, 2]


def test_a_pod_requiring_a_partition_gets_a_claim_for_it() -> None:
    world = _world()
    pod = make_pod(cpu="1", node_requirements=[requirement(PARTITION, "In", "2")])
    plan = world.provision(pod)
    (claim,) = plan.claims
    assert claim.requirements[PARTITION].values == frozenset({"2"})
    assert world.scheduled(pod).labels[PARTITION] == "2"


def test_a_claim_no_pod_pins_to_a_partition_names_none() -> None:
    """cloudprovider.go:476-488: with no partition requirement the claim has none (EC2 assigns one, the
    registration hook reads it back) — the partitions are domains, not the template's requirements."""
    world = _world()
    plan = world.provision(make_pod(cpu="1"))
    (claim,) = plan.claims
    assert PARTITION not in claim.requirements


def test_the_nodepool_requirements_narrow_the_partitions() -> None:
    """offering.go's domain discovery intersects the types' requirements with the NodePool's: a NodePool allowing
    partitions 2 and 3 spreads over those two."""
    allowed = Requirements.from_node_selector([requirement(PARTITION, "In", "2", "3")])
    world = _world(requirements=allowed)
    pods = make_pods(4, cpu="1", labels=LABELS, spread_constraints=[spread(PARTITION)])
    plan = world.provision(*pods)
    assert {v for c in plan.claims for v in c.requirements[PARTITION].values} == {"2", "3"}
    assert world.skew(PARTITION) == [2, 2]


def test_without_a_partition_group_there_is_no_partition_domain() -> None:
    """The old behaviour, and a cluster or spread group's: no type has the key, so a spread over it finds no domain
    and its pods stay pending ("unsatisfiable topology constraint", docs/scheduling.md), as in v1.14.1."""
    for offered in ({}, {wk.PLACEMENT_GROUP_ID: (GROUP,)}):
        world = _world(offered)
        pods = make_pods(3, cpu="1", labels=LABELS, spread_constraints=[spread(PARTITION)])
        plan = world.provision(*pods)
        assert not plan.claims
        for pod in pods:
            world.not_scheduled(pod)


def test_a_pod_requiring_a_partition_the_group_does_not_have_is_not_scheduled() -> None:
    """A partition the group does not have (4 of 3): no instance type's requirements intersect the pod's, so v1.14.1
    schedules it nowhere — never a claim EC2 would refuse."""
    world = _world()
    pod = make_pod(cpu="1", node_requirements=[requirement(PARTITION, "In", "4")])
    plan = world.provision(pod)
    assert not plan.claims
    world.not_scheduled(pod)
    world = _world({})  # no placement group: the undefined well-known label is allowed, as before
    pod = make_pod(cpu="1", node_requirements=[requirement(PARTITION, "In", "4")])
    assert world.provision(pod).claims


def test_a_node_whose_partition_is_still_empty_is_the_domain_empty_string() -> None:
    """A claim launched with no partition pinned carries `placement-group-partition: ""` (v1.14.1's sentinel) until
    the registration hook writes EC2's number. v1.14.1 syncs the claim's labels onto the Node before it runs the
    hooks (core lifecycle/registration.go:103-107), and `StateNode.Labels` is the claim's while unregistered
    (state/statenode.go:296-309), so a pass in between finds the label: `countDomains` makes `""` a domain (topology.go
    :387-394) and `domainMinCount` takes it into the minimum (topologygroup.go:300-321), but `nextDomainTopologySpread`
    never picks it (topologygroup.go:292-295: `minDomain == ""` is DoesNotExist). So the spread's minimum stays 0: of
    four pods spreading with maxSkew 1 over three partitions, the fourth waits — and is placed once the hook has
    filled in the partition. (The old code made a claim for partition `""`.)"""
    world = _world()
    pending = world.add_node(labels={wk.PLACEMENT_GROUP_ID: GROUP, PARTITION: ""})  # no room: it takes no pod
    pods = make_pods(4, cpu="1", labels=LABELS, spread_constraints=[spread(PARTITION)])
    plan = world.provision(*pods)
    assert sorted(tuple(c.requirements[PARTITION].values) for c in plan.claims) == [("1",), ("2",), ("3",)]
    assert world.skew(PARTITION) == [1, 1, 1]
    world.not_scheduled(pods[3])
    pending.labels[PARTITION] = "2"  # the registration hook: EC2 says partition 2
    world.provision(pods[3])
    assert world.skew(PARTITION) == [1, 1, 2]


def test_a_spread_pod_never_lands_on_a_node_in_the_domain_empty_string() -> None:
    """topologygroup.go:292-295: the domain a spread picks is never `""` (Go's "none found"), even for a node whose
    label is `""` and that has room: the pod goes to a new claim in a partition. (The old code put it on that node,
    whose partition it could not know.)"""
    world = _world()
    room = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    pending = world.add_node(labels={wk.PLACEMENT_GROUP_ID: GROUP, PARTITION: ""}, allocatable=room)
    pod = make_pod(cpu="1", labels=LABELS, spread_constraints=[spread(PARTITION)])
    plan = world.provision(pod)
    assert world.scheduled(pod) is not pending
    (claim,) = plan.claims
    assert claim.requirements[PARTITION].values == frozenset({"1"})
