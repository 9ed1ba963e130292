"""Karpenter v0.31's topology and affinity scheduling tests, replayed against our scheduler.

The reference is `pkg/controllers/provisioning/scheduling/provisioner_topology_test.go` (kubernetes-sigs/karpenter
v0.31.1; the Describe("Topology") and Describe("Taints") blocks) and the in-flight topology cases of
`provisioner_test.go`. Each test names the Go case it replays (`Context / It`) and asserts what the Go case asserts:
the skew per zone / hostname / capacity type (`ExpectSkew(...).To(ConsistOf(...))`), which pods are scheduled, node
counts where the Go case counts nodes. The cluster around the scheduler — the fake cloud provider launching claims as
nodes, pods bound only when passed in, later rounds seeing earlier nodes as in-flight — is `cluster.py`.

Every test runs under both packing strategies (`strategy` fixture): topology semantics must not depend on packing.
Three Go cases assert which of two conflicting pods wins, which is decided by Karpenter's queue (larger pods first);
the cost strategy may try another order, so under it those tests assert the order-independent part only (pod
affinity (arch), pod anti-affinity on zone (other schedules first), Schrödinger).

Go ties between equally loaded domains are random; ours are broken by name (and pods of equal size queue in creation
order instead of by random UID). The Go assertions hold for every tie-break, so they hold for ours.

The two identical Go cases "should handle interdependent selectors" (under Zonal and CapacityType, both spreading on
hostname) are one test. "should only count running/scheduled pods ..." (Zonal, CapacityType) is replayed in part:
the pods the Go case ignores because they are pending, terminating, Failed or Succeeded are never handed to the
scheduler (filtering them is the job of whoever lists the cluster's pods); those ignored for their labels, their
namespace or a node without the domain are handed over, and the scheduler must ignore them.

Go case NOT replayed: Topology / "should not spread an invalid label selector" (Kubernetes >= 1.27 admission rejects
the selector; the Go case is skipped there too).

Differences from Karpenter that no case here exercises (the scheduler's choices): the zones a template adds to the
topology universe are those it has an offering in for its own capacity types (Karpenter adds every zone of every
offering of its types, so a spot-only provisioner whose types are on-demand only in a third zone keeps that zone at
zero); the labels of existing nodes are domains too (Karpenter learns an existing node's domain only when a counted
pod runs there); the first pod of a self-affine group picks one domain (Karpenter may allow two).
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest

from karpenter_policy.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint
from karpenter_policy.scheduling import KARPENTER, InstanceTable, NodeClaimTemplate

from .cluster import (
    ARCH,
    CAPACITY_TYPE,
    FAKE_TABLE,
    HOSTNAME,
    INSTANCE_TYPE,
    LABELS,
    Z1,
    Z2,
    Z3,
    ZONE,
    cluster,
    make_pod,
    make_pods,
    provisioner,
    provisioner_requirements,
    requirement,
    spread,
    term,
    weighted,
    zones,
)
from .support import assorted_types, template

TABLE = FAKE_TABLE
AFF = {"security": "s2"}


# --- one round, one skew: cases that share a shape ------------------------------------------------------------------

ONE_ROUND: list[tuple[str, list[NodeClaimTemplate], list[tuple[int, dict[str, Any]]], str, list[int]]] = [
    (
        "Zonal / should balance pods across zones (match labels)",
        [provisioner()],
        [(4, {"spread_constraints": [spread(ZONE)]})],
        ZONE,
        [1, 1, 2],
    ),
    (
        "Zonal / should balance pods across zones (match expressions)",
        [provisioner()],
        [(4, {"spread_constraints": [spread(ZONE, labels=None, expressions=[requirement("test", "In", "test")])]})],
        ZONE,
        [1, 1, 2],
    ),
    (
        "Zonal / should respect provisioner zonal constraints",
        [provisioner("default", zones(Z1, Z2, Z3))],
        [(4, {"spread_constraints": [spread(ZONE)]})],
        ZONE,
        [1, 1, 2],
    ),
    (
        "Zonal / should respect provisioner zonal constraints (subset)",
        [provisioner("default", zones(Z1, Z2))],
        [(4, {"spread_constraints": [spread(ZONE)]})],
        ZONE,
        [2, 2],
    ),
    (
        "Zonal / should respect provisioner zonal constraints (subset) with labels",
        [provisioner(labels={ZONE: Z1})],
        [(4, {"spread_constraints": [spread(ZONE)]})],
        ZONE,
        [4],
    ),
    (
        "Zonal / should respect provisioner zonal constraints (subset) with labels and requirements",
        [provisioner("default", zones(Z1, Z2), labels={ZONE: Z1})],
        [(4, {"spread_constraints": [spread(ZONE)]})],
        ZONE,
        [4],
    ),
    (
        "Zonal / should respect provisioner zonal constraints (subset) with labels across NodePools",
        [provisioner(labels={ZONE: Z1}), template(TABLE, name="second", labels={ZONE: Z2})],
        [(4, {"spread_constraints": [spread(ZONE)]})],
        ZONE,
        [2, 2],
    ),
    (
        "Zonal / should respect minDomains constraints",
        [provisioner("default", zones(Z1, Z2))],
        [(3, {"spread_constraints": [spread(ZONE, min_domains=3)]})],
        ZONE,
        [1, 1],
    ),
    (
        "Zonal / satisfied minDomains constraints (equal) should allow expected pod scheduling",
        [provisioner("default", zones(Z1, Z2, Z3))],
        [(11, {"spread_constraints": [spread(ZONE, min_domains=3)]})],
        ZONE,
        [3, 4, 4],
    ),
    (
        "Zonal / satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling",
        [provisioner("default", zones(Z1, Z2, Z3))],
        [(11, {"spread_constraints": [spread(ZONE, min_domains=2)]})],
        ZONE,
        [3, 4, 4],
    ),
    (
        "Hostname / should balance pods across nodes",
        [provisioner()],
        [(4, {"spread_constraints": [spread(HOSTNAME)]})],
        HOSTNAME,
        [1, 1, 1, 1],
    ),
    (
        "Hostname / should balance pods on the same hostname up to maxskew",
        [provisioner()],
        [(4, {"spread_constraints": [spread(HOSTNAME, max_skew=4)]})],
        HOSTNAME,
        [4],
    ),
    (
        "CapacityType / should balance pods across capacity types",
        [provisioner()],
        [(4, {"spread_constraints": [spread(CAPACITY_TYPE)]})],
        CAPACITY_TYPE,
        [2, 2],
    ),
    (
        "CapacityType / should respect provisioner capacity type constraints",
        [provisioner("default", requirement(CAPACITY_TYPE, "In", "spot", "on-demand"))],
        [(4, {"spread_constraints": [spread(CAPACITY_TYPE)]})],
        CAPACITY_TYPE,
        [2, 2],
    ),
    (
        "Combined Zonal Topology and Node Affinity / should limit spread options by nodeSelector",
        [provisioner()],
        [
            (5, {"spread_constraints": [spread(ZONE)], "node_selector": {ZONE: Z1}}),
            (10, {"spread_constraints": [spread(ZONE)], "node_selector": {ZONE: Z2}}),
        ],
        ZONE,
        [5, 10],
    ),
    (
        "Combined Zonal Topology and Node Affinity / should limit spread options by node requirements",
        [provisioner()],
        [(10, {"spread_constraints": [spread(ZONE)], "node_requirements": [zones(Z1, Z2)]})],
        ZONE,
        [5, 5],
    ),
    (
        "Combined Zonal Topology and Node Affinity / should not limit spread options by preferred node affinity",
        [provisioner()],
        [(6, {"spread_constraints": [spread(ZONE)], "node_preferences": [zones(Z1, Z2)]})],
        ZONE,
        [2, 2, 2],
    ),
    (
        "Combined Capacity Type Topology and Node Affinity / should limit spread options by nodeSelector",
        [provisioner()],
        [
            (
                5,
                {
                    "spread_constraints": [spread(CAPACITY_TYPE, when="ScheduleAnyway")],
                    "node_selector": {CAPACITY_TYPE: "spot"},
                },
            ),
            (
                5,
                {
                    "spread_constraints": [spread(CAPACITY_TYPE, when="ScheduleAnyway")],
                    "node_selector": {CAPACITY_TYPE: "on-demand"},
                },
            ),
        ],
        CAPACITY_TYPE,
        [5, 5],
    ),
    (
        "Pod Affinity/Anti-Affinity / should count topology across multiple provisioners",
        [
            template(TABLE, name="first", requirements=provisioner_requirements(zones(Z1))),
            template(TABLE, name="second", requirements=provisioner_requirements(zones(Z2, Z3))),
        ],
        [(10, {"spread_constraints": [spread(ZONE, labels={"foo": "bar"})], "labels": {"foo": "bar"}})],
        ZONE,
        [3, 3, 4],
    ),
]


@pytest.mark.parametrize(
    ("go_case", "templates", "groups", "key", "expected"), ONE_ROUND, ids=[c[0] for c in ONE_ROUND]
)
def test_one_round_skew(
    strategy: str,
    go_case: str,
    templates: list[NodeClaimTemplate],
    groups: list[tuple[int, dict[str, Any]]],
    key: str,
    expected: list[int],
) -> None:
    """One `ExpectProvisioned` of pods with a spread constraint, then `ExpectSkew(...).To(ConsistOf(expected))`."""
    world = cluster(strategy, *templates)
    pods = []
    for count, options in groups:
        options = {"labels": LABELS, **options}
        pods += make_pods(count, **options)
    world.provision(*pods)
    selector = groups[0][1].get("labels", LABELS)
    assert world.skew(key, selector) == expected


# --- Topology ---------------------------------------------------------------------------------------------------------


def test_should_ignore_unknown_topology_keys(strategy: str) -> None:
    """Topology / should ignore unknown topology keys"""
    world = cluster(strategy)
    spreading = make_pod(labels=LABELS, spread_constraints=[spread("unknown")])
    plain = make_pod()
    world.provision(spreading, plain)
    world.not_scheduled(spreading)
    world.scheduled(plain)


@pytest.mark.parametrize("key", [ZONE, CAPACITY_TYPE])
def test_should_match_all_pods_when_label_selector_is_not_specified(strategy: str, key: str) -> None:
    """Zonal and CapacityType / should match all pods when labelSelector is not specified"""
    world = cluster(strategy)
    world.provision(make_pod())
    assert world.skew(key, labels=None) == [1]


def test_should_handle_interdependent_selectors(strategy: str) -> None:
    """Zonal and CapacityType / should handle interdependent selectors: the selector selects none of the pods that
    own the constraint, so spreading them does not change the skew and they pack onto one node."""
    world = cluster(strategy)
    pods = make_pods(5, spread_constraints=[spread(HOSTNAME)])
    world.provision(*pods)
    assert len({world.scheduled(p).name for p in pods}) == 1


# --- Zonal ------------------------------------------------------------------------------------------------------------


def test_zonal_should_respect_provisioner_zonal_constraints_existing_pod(strategy: str) -> None:
    """Zonal / should respect provisioner zonal constraints (existing pod)"""
    world = cluster(strategy)
    first = make_pod(cpu="1.1", labels=LABELS, node_selector={ZONE: Z3})
    world.provision(first)
    world.scheduled(first)
    world.templates = [provisioner("default", zones(Z1, Z2))]
    world.provision(*make_pods(6, cpu="1.1", labels=LABELS, spread_constraints=[spread(ZONE)]))
    assert world.skew(ZONE) == [1, 2, 2]


def test_zonal_should_schedule_to_the_non_minimum_domain_if_its_all_thats_available(strategy: str) -> None:
    """Zonal / should schedule to the non-minimum domain if its all that's available"""
    constraint = [spread(ZONE, max_skew=5)]
    world = cluster(strategy, provisioner("default", zones(Z1)))
    world.provision(make_pod(cpu="1.1", labels=LABELS, spread_constraints=constraint))
    assert world.skew(ZONE) == [1]
    world.templates = [provisioner("default", zones(Z2))]
    world.provision(make_pod(cpu="1.1", labels=LABELS, spread_constraints=constraint))
    assert world.skew(ZONE) == [1, 1]
    world.templates = [provisioner("default", zones(Z3))]
    world.provision(*make_pods(10, cpu="1.1", labels=LABELS, spread_constraints=constraint))
    assert world.skew(ZONE) == [1, 1, 6]


def test_zonal_should_only_schedule_to_minimum_domains_if_already_violating_max_skew(strategy: str) -> None:
    """Zonal / should only schedule to minimum domains if already violating max skew"""
    world = cluster(strategy)
    pods = make_pods(9, cpu="1.1", labels=LABELS, spread_constraints=[spread(ZONE)])
    world.provision(*pods)
    assert world.skew(ZONE) == [3, 3, 3]
    for pod in pods:
        if world.scheduled(pod).labels[ZONE] != Z1:
            world.delete(pod)
    assert world.skew(ZONE) == [3]
    world.provision(*make_pods(3, cpu="1.1", labels=LABELS, spread_constraints=[spread(ZONE)]))
    assert world.skew(ZONE) == [1, 2, 3]


@pytest.mark.parametrize("first_has_constraint", [True, False], ids=["existing", "discover domains"])
def test_zonal_should_not_violate_max_skew_when_unsat_do_not_schedule(
    strategy: str, first_has_constraint: bool
) -> None:
    """Zonal / should not violate max-skew when unsat = do not schedule (and "(discover domains)": the first pod has
    no spread constraint, its zone is found by counting)"""
    constraint = [spread(ZONE)]
    world = cluster(strategy, provisioner("default", zones(Z1)))
    first = make_pod(cpu="1.1", labels=LABELS, spread_constraints=constraint if first_has_constraint else None)
    world.provision(first)
    assert world.skew(ZONE) == [1]
    world.templates = [provisioner("default", zones(Z2, Z3))]
    world.provision(*make_pods(10, cpu="1.1", labels=LABELS, spread_constraints=constraint))
    assert world.skew(ZONE) == [1, 2, 2]


@pytest.mark.parametrize(
    ("key", "first", "second", "expected"),
    [(ZONE, Z1, Z2, [1, 2, 2]), (CAPACITY_TYPE, "spot", "on-demand", [2, 3])],
    ids=["Zonal", "CapacityType"],
)
def test_should_only_count_running_scheduled_pods_with_matching_labels_on_nodes_with_the_domain(
    strategy: str, key: str, first: str, second: str, expected: list[int]
) -> None:
    """Zonal and CapacityType / should only count running/scheduled pods with matching labels scheduled to nodes with
    a corresponding domain (the pending, terminating, Failed and Succeeded pods are not handed to the scheduler: see
    the module docstring)"""
    world = cluster(strategy, namespace_labels={"wrong": {}})
    first_node = world.add_node({key: first})
    second_node = world.add_node({key: second})
    third_node = world.add_node({})  # no domain
    world.bind(make_pod(), first_node)  # ignored: no labels
    world.bind(make_pod(labels=LABELS), third_node)  # ignored: no domain
    world.bind(make_pod(labels=LABELS, namespace="wrong"), first_node)  # ignored: another namespace
    world.bind(make_pod(labels=LABELS), first_node)
    world.bind(make_pod(labels=LABELS), first_node)
    world.bind(make_pod(labels=LABELS), second_node)
    world.provision(*make_pods(2, labels=LABELS, spread_constraints=[spread(key)]))
    assert world.skew(key) == expected


# --- Hostname ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arches", "nodes"),
    [((None, None), 2), (("amd64", "arm64"), 4)],
    ids=["same arch", "varying arch"],
)
def test_hostname_balance_multiple_deployments(
    strategy: str, arches: tuple[str | None, str | None], nodes: int
) -> None:
    """Hostname / balance multiple deployments with hostname topology spread (and "& varying arch")"""
    world = cluster(strategy)
    pods = []
    for app, arch in zip(("app1", "app2"), arches, strict=True):
        labels = {"app": app}
        extra: dict[str, Any] = {"node_requirements": [requirement(ARCH, "In", arch)]} if arch else {}
        pods += make_pods(2, labels=labels, spread_constraints=[spread(HOSTNAME, labels=labels)], **extra)
    world.provision(*pods)
    for pod in pods:
        world.scheduled(pod)
    assert len(world.nodes) == nodes


# --- CapacityType -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("when", "expected"), [("DoNotSchedule", [1, 2]), ("ScheduleAnyway", [1, 5])])
def test_capacity_type_max_skew(strategy: str, when: str, expected: list[int]) -> None:
    """CapacityType / should not violate max-skew when unsat = do not schedule (capacity type); and
    "should violate max-skew when unsat = schedule anyway (capacity type)" """
    constraint = [spread(CAPACITY_TYPE, when=when)]
    world = cluster(strategy, provisioner("default", requirement(CAPACITY_TYPE, "In", "spot")))
    world.provision(make_pod(cpu="1.1", labels=LABELS, spread_constraints=constraint))
    assert world.skew(CAPACITY_TYPE) == [1]
    world.templates = [provisioner("default", requirement(CAPACITY_TYPE, "In", "on-demand"))]
    world.provision(*make_pods(5, cpu="1.1", labels=LABELS, spread_constraints=constraint))
    assert world.skew(CAPACITY_TYPE) == expected


def test_capacity_type_should_balance_pods_node_required_affinity_constrained(strategy: str) -> None:
    """CapacityType / should balance pods across capacity-types (node required affinity constrained): the node
    filter of the spread (zone-2 and spot) keeps the on-demand node in zone-1 from counting."""
    world = cluster(strategy)
    first = make_pod(labels=LABELS, node_requirements=[zones(Z1), requirement(CAPACITY_TYPE, "In", "on-demand")])
    world.provision(first)
    world.scheduled(first)
    world.provision(
        *make_pods(
            5,
            labels=LABELS,
            node_requirements=[zones(Z2), requirement(CAPACITY_TYPE, "In", "spot")],
            spread_constraints=[spread(CAPACITY_TYPE)],
        )
    )
    assert world.skew(CAPACITY_TYPE) == [1, 5]


@pytest.mark.parametrize(
    ("key", "first", "second"),
    [(CAPACITY_TYPE, "on-demand", "spot"), (ARCH, "amd64", "arm64")],
    ids=["capacity-types", "arch"],
)
def test_should_balance_pods_across_no_constraints(strategy: str, key: str, first: str, second: str) -> None:
    """CapacityType / should balance pods across capacity-types (no constraints); and "should balance pods across
    arch (no constraints)": the pods have no node selector, so the first node (of the other domain) counts."""
    world = cluster(strategy)
    pinned = make_pod(
        labels=LABELS,
        node_selector={INSTANCE_TYPE: "single-pod-instance-type"},
        node_requirements=[requirement(key, "In", first)],
    )
    world.provision(pinned)
    world.scheduled(pinned)
    world.templates = [provisioner("default", requirement(key, "In", second))]
    world.provision(*make_pods(5, cpu="2", labels=LABELS, spread_constraints=[spread(key)]))
    assert world.skew(key) == [1, 2]


# --- Combined constraints ---------------------------------------------------------------------------------------------


def test_combined_hostname_and_zonal(strategy: str) -> None:
    """Combined Hostname and Zonal Topology / should spread pods while respecting both constraints (hostname and
    zonal)"""
    constraints = [spread(ZONE), spread(HOSTNAME, max_skew=3)]
    world = cluster(strategy)
    for count, expected in ((2, [1, 1]), (3, [1, 2, 2]), (5, [3, 3, 4]), (11, [7, 7, 7])):
        world.provision(*make_pods(count, labels=LABELS, spread_constraints=constraints))
        assert world.skew(ZONE) == expected
        assert max(world.skew(HOSTNAME)) <= 3


def test_combined_should_balance_pods_across_provisioner_requirements(strategy: str) -> None:
    """Combined Hostname and Zonal Topology / should balance pods across provisioner requirements: a custom key
    spread over the values of two provisioners forces 4 spot : 1 on-demand."""
    key = "capacity.spread.4-1"
    spot = provisioner("spot", requirement(CAPACITY_TYPE, "In", "spot"), requirement(key, "In", "2", "3", "4", "5"))
    on_demand = provisioner("on-demand", requirement(CAPACITY_TYPE, "In", "on-demand"), requirement(key, "In", "1"))
    world = cluster(strategy, spot, on_demand)
    pods = make_pods(20, labels=LABELS, spread_constraints=[spread(key)])
    world.provision(*pods)
    for pod in pods:
        world.scheduled(pod)
    assert world.skew(key) == [4, 4, 4, 4, 4]
    assert world.skew(CAPACITY_TYPE) == [4, 16]


def test_combined_zone_spread_with_a_provisioner_that_cannot_provision(strategy: str) -> None:
    """Combined Hostname and Zonal Topology / should spread pods while respecting both constraints (the first of
    the two cases of that name: zone DoNotSchedule, hostname ScheduleAnyway, zone-3 only in a provisioner with a
    cpu limit of 0, which keeps zone-3 the minimum domain)"""
    constraints = [spread(ZONE), spread(HOSTNAME, when="ScheduleAnyway")]
    disabled = template(TABLE, name="b", requirements=provisioner_requirements(zones(Z3)), limits={"cpu": Decimal(0)})
    world = cluster(strategy, provisioner("default", zones(Z1, Z2)), disabled)
    world.provision(*make_pods(10, labels=LABELS, spread_constraints=constraints))
    assert world.skew(ZONE) == [1, 1]
    assert world.skew(HOSTNAME) == [1, 1]


def test_combined_capacity_type_and_hostname(strategy: str) -> None:
    """Combined Hostname and Zonal Topology / should spread pods while respecting both constraints (the second case
    of that name: capacity type maxSkew 1 and hostname maxSkew 3)"""
    constraints = [spread(CAPACITY_TYPE), spread(HOSTNAME, max_skew=3)]
    world = cluster(strategy)
    for count, expected in ((2, [1, 1]), (3, [2, 3]), (5, [5, 5]), (11, [10, 11])):
        world.provision(*make_pods(count, labels=LABELS, spread_constraints=constraints))
        assert world.skew(CAPACITY_TYPE) == expected
        assert max(world.skew(HOSTNAME)) <= 3


def test_combined_zonal_and_capacity_type(strategy: str) -> None:
    """Combined Zonal and Capacity Type Topology / should spread pods while respecting both constraints"""
    constraints = [spread(CAPACITY_TYPE), spread(ZONE)]
    world = cluster(strategy)
    for count, most_per_type, most_per_zone in ((2, 1, 1), (3, 3, 2), (3, 5, 4), (11, 11, 7)):
        world.provision(*make_pods(count, labels=LABELS, spread_constraints=constraints))
        assert max(world.skew(CAPACITY_TYPE)) <= most_per_type
        assert max(world.skew(ZONE)) <= most_per_zone


def test_combined_hostname_zonal_and_capacity_type(strategy: str) -> None:
    """Combined Hostname, Zonal, and Capacity Type Topology / should spread pods while respecting all constraints
    (over `fake.InstanceTypesAssorted`, Linux types only: our node OS is per template)"""
    table = InstanceTable(assorted_types())
    constraints = [spread(CAPACITY_TYPE), spread(ZONE, max_skew=2), spread(HOSTNAME, max_skew=3)]
    world = cluster(strategy, provisioner(table=table), table=table)
    for count in range(1, 15):
        pods = make_pods(count, labels=LABELS, spread_constraints=constraints)
        world.provision(*pods)
        assert world.max_skew(CAPACITY_TYPE) <= 1
        assert world.max_skew(ZONE) <= 2
        assert world.max_skew(HOSTNAME) <= 3
        for pod in pods:
            world.scheduled(pod)


def test_zonal_node_affinity_should_limit_spread_options_by_required_node_affinity(strategy: str) -> None:
    """Combined Zonal Topology and Node Affinity / should limit spread options by required node affinity"""
    constraint = [spread(ZONE)]
    world = cluster(strategy)
    world.provision(*make_pods(6, labels=LABELS, spread_constraints=constraint, node_requirements=[zones(Z1, Z2)]))
    assert world.skew(ZONE) == [3, 3]
    world.templates = [provisioner("default", zones(Z1, Z2, Z3))]
    world.provision(make_pod(labels=LABELS, spread_constraints=constraint, node_requirements=[zones(Z2, Z3)]))
    assert world.skew(ZONE) == [1, 3, 3]  # zone-3 although it exceeds maxSkew: it lowers the skew
    world.provision(*make_pods(5, labels=LABELS, spread_constraints=constraint))
    assert world.skew(ZONE) == [4, 4, 4]


def test_capacity_type_node_affinity_should_limit_spread_options_by_node_affinity(strategy: str) -> None:
    """Combined Capacity Type Topology and Node Affinity / should limit spread options by node affinity (capacity
    type)"""
    constraint = [spread(CAPACITY_TYPE)]
    world = cluster(strategy)
    spot_only = [requirement(CAPACITY_TYPE, "In", "spot")]
    world.provision(*make_pods(3, labels=LABELS, spread_constraints=constraint, node_requirements=spot_only))
    assert world.skew(CAPACITY_TYPE) == [3]
    both = [requirement(CAPACITY_TYPE, "In", "on-demand", "spot")]
    world.provision(make_pod(labels=LABELS, spread_constraints=constraint, node_requirements=both))
    assert world.skew(CAPACITY_TYPE) == [1, 3]
    world.provision(*make_pods(5, labels=LABELS, spread_constraints=constraint))
    assert world.skew(CAPACITY_TYPE) == [4, 5]


# --- Pod affinity / anti-affinity -------------------------------------------------------------------------------------


def hostname_spread_pods(count: int = 10) -> list[Any]:
    """The suite's filler: pods one per node (hostname spread) so that there are many nodes to choose from."""
    return make_pods(count, labels=LABELS, spread_constraints=[spread(HOSTNAME)])


def test_should_schedule_a_pod_with_empty_pod_affinity_and_anti_affinity(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should schedule a pod with empty pod affinity and anti-affinity"""
    world = cluster(strategy)
    pod = make_pod(pod_requirements=[], pod_anti_requirements=[])
    world.provision(pod)
    world.scheduled(pod)


def test_should_respect_pod_affinity_hostname(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should respect pod affinity (hostname)"""
    world = cluster(strategy)
    target = make_pod(labels=AFF)
    follower = make_pod(pod_requirements=[term(HOSTNAME, AFF)])
    world.provision(*hostname_spread_pods(), target, follower)
    assert world.scheduled(target) is world.scheduled(follower)


def test_should_respect_pod_affinity_arch(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should respect pod affinity (arch). The follower selects itself too, so it may
    open an arch of its own when it is placed first: Karpenter's queue (larger first) places the arm64 pod first;
    the cost strategy's balanced order may not, and then only the order-independent part is asserted."""
    world = cluster(strategy)
    tsc = [spread(HOSTNAME, labels=AFF)]
    first = make_pod(cpu="2", labels=AFF, spread_constraints=tsc, node_selector={ARCH: "arm64"})
    second = make_pod(cpu="1", labels=AFF, spread_constraints=tsc, pod_requirements=[term(ARCH, AFF)])
    world.provision(first, second)
    one, two = world.scheduled(first), world.scheduled(second)
    assert one is not two
    if strategy == KARPENTER:
        assert one.labels[ARCH] == two.labels[ARCH]


def test_should_not_violate_pod_anti_affinity_arch(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should not violate pod anti-affinity (arch)"""
    world = cluster(strategy)
    tsc = [spread(HOSTNAME, labels=AFF)]
    first = make_pod(cpu="2", labels=AFF, spread_constraints=tsc, node_selector={ARCH: "arm64"})
    second = make_pod(cpu="1", labels=AFF, spread_constraints=tsc, pod_anti_requirements=[term(ARCH, AFF)])
    world.provision(first, second)
    assert world.scheduled(first).labels[ARCH] != world.scheduled(second).labels[ARCH]


@pytest.mark.parametrize("key", [HOSTNAME, ZONE])
def test_should_respect_self_pod_affinity(strategy: str, key: str) -> None:
    """Pod Affinity/Anti-Affinity / should respect self pod affinity (hostname) and (zone)"""
    world = cluster(strategy)
    pods = make_pods(3, labels=AFF, pod_requirements=[term(key, AFF)])
    world.provision(*pods)
    assert len({world.scheduled(p).name for p in pods}) == 1


def test_should_respect_self_pod_affinity_zone_with_constraint(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should respect self pod affinity (zone w/ constraint)"""
    world = cluster(strategy)
    pods = make_pods(3, labels=AFF, pod_requirements=[term(ZONE, AFF)], node_requirements=[zones(Z3)])
    world.provision(*pods)
    nodes = {world.scheduled(p).name for p in pods}
    assert len(nodes) == 1
    assert all(world.scheduled(p).labels[ZONE] == Z3 for p in pods)


def test_should_respect_self_pod_affinity_for_first_empty_topology_domain_only_hostname(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should respect self pod affinity for first empty topology domain only
    (hostname): one node of 5 pods, and a later batch cannot join it (full) nor start another node."""
    world = cluster(strategy)
    pods = make_pods(10, labels=AFF, pod_requirements=[term(HOSTNAME, AFF)])
    world.provision(*pods)
    placed = [p for p in pods if p.key in world.node_of]
    assert len({world.scheduled(p).name for p in placed}) == 1
    assert len(placed) == 5
    later = make_pods(10, labels=AFF, pod_requirements=[term(HOSTNAME, AFF)])
    world.provision(*later)
    for pod in later:
        world.not_scheduled(pod)


def test_should_respect_self_pod_affinity_for_first_empty_domain_only_constrained_zones(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should respect self pod affinity for first empty topology domain only
    (hostname/constrained zones): the pod in zone-1 counts for affinity whatever the node selectors."""
    world = cluster(strategy)
    world.provision(make_pod(labels=AFF, node_selector={ZONE: Z1}, pod_requirements=[term(HOSTNAME, AFF)]))
    pods = make_pods(10, labels=AFF, node_requirements=[zones(Z2, Z3)], pod_requirements=[term(HOSTNAME, AFF)])
    world.provision(*pods)
    for pod in pods:
        world.not_scheduled(pod)


def test_should_allow_violation_of_preferred_pod_affinity(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should allow violation of preferred pod affinity"""
    world = cluster(strategy)
    pod = make_pod(pod_preferences=[weighted(50, term(HOSTNAME, AFF))])
    world.provision(*hostname_spread_pods(), pod)
    world.scheduled(pod)


def test_should_allow_violation_of_preferred_pod_anti_affinity(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should allow violation of preferred pod anti-affinity"""
    world = cluster(strategy)
    avoiding = make_pods(10, pod_anti_preferences=[weighted(50, term(ZONE, LABELS))])
    world.provision(*make_pods(3, labels=LABELS, spread_constraints=[spread(ZONE)]), *avoiding)
    for pod in avoiding:
        world.scheduled(pod)


def test_should_separate_nodes_using_simple_pod_anti_affinity_on_hostname(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should separate nodes using simple pod anti-affinity on hostname (ten rounds in
    one cluster: the nodes of earlier rounds are in flight)"""
    world = cluster(strategy)
    for _ in range(10):
        target = make_pod(labels=AFF)
        avoiding = make_pod(pod_anti_requirements=[term(HOSTNAME, AFF)])
        world.provision(avoiding, target)
        assert world.scheduled(target) is not world.scheduled(avoiding)


def zone_pods(anti: str | None = None, **options: Any) -> list[Any]:
    """Three 2-cpu pods, one per zone (node selector), with required or preferred anti-affinity to AFF on zone."""
    extra: dict[str, Any] = dict(options)
    if anti == "required":
        extra["pod_anti_requirements"] = [term(ZONE, AFF)]
    elif anti == "preferred":
        extra["pod_anti_preferences"] = [weighted(10, term(ZONE, AFF))]
    return [make_pod(cpu="2", node_selector={ZONE: z}, **extra) for z in (Z1, Z2, Z3)]


def test_should_not_violate_pod_anti_affinity_on_zone(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone"""
    world = cluster(strategy)
    targets = zone_pods(labels=AFF)
    avoiding = make_pod(pod_anti_requirements=[term(ZONE, AFF)])
    world.provision(*targets, avoiding)
    for pod in targets:
        world.scheduled(pod)
    world.not_scheduled(avoiding)


def test_should_not_violate_pod_anti_affinity_on_zone_other_schedules_first(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone (other schedules first): the pod
    placed first may land in any zone, so every zone is closed to the other. Which one is first is the queue's
    order: Karpenter's (larger first) places the target; the cost strategy may take the other order, so there only
    "exactly one of them" is asserted."""
    world = cluster(strategy)
    target = make_pod(cpu="2", labels=AFF)
    avoiding = make_pod(pod_anti_requirements=[term(ZONE, AFF)])
    world.provision(target, avoiding)
    if strategy == KARPENTER:
        world.scheduled(target)
        world.not_scheduled(avoiding)
    else:
        assert len({target.key, avoiding.key} & world.node_of.keys()) == 1


@pytest.mark.parametrize(("anti", "schedules"), [("preferred", True), ("required", False)])
def test_pod_anti_affinity_on_zone_inverse(strategy: str, anti: str, schedules: bool) -> None:
    """Pod Affinity/Anti-Affinity / should violate preferred pod anti-affinity on zone (inverse); and "should not
    violate pod anti-affinity on zone (inverse)": pods in every zone keep AFF pods away when they require it."""
    world = cluster(strategy)
    avoiding = zone_pods(anti)
    target = make_pod(labels=AFF)
    world.provision(*avoiding, target)
    for pod in avoiding:
        world.scheduled(pod)
    if schedules:
        world.scheduled(target)
    else:
        world.not_scheduled(target)


@pytest.mark.parametrize(("anti", "schedules"), [("preferred", True), ("required", False)])
def test_pod_anti_affinity_on_zone_inverse_with_existing_nodes(strategy: str, anti: str, schedules: bool) -> None:
    """Pod Affinity/Anti-Affinity / should violate preferred pod anti-affinity on zone (inverse w/existing nodes);
    and "should not violate pod anti-affinity on zone (inverse w/existing nodes)": the avoiding pods run already."""
    world = cluster(strategy)
    avoiding = zone_pods(anti)
    world.provision(*avoiding)
    for pod in avoiding:
        world.scheduled(pod)
    target = make_pod(labels=AFF)
    world.provision(target)
    if schedules:
        world.scheduled(target)
    else:
        world.not_scheduled(target)


def test_should_not_violate_pod_anti_affinity_on_zone_schrodinger(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone (Schrödinger): in the first batch
    the avoiding pod may be in any zone; once its node is launched, the target goes to another zone."""
    world = cluster(strategy)
    anywhere = make_pod(cpu="2", pod_anti_requirements=[term(ZONE, AFF)])
    target = make_pod(labels=AFF)
    world.provision(anywhere, target)
    if strategy == KARPENTER:  # the queue's order decides which one goes first (see the case above)
        world.scheduled(anywhere)
        world.not_scheduled(target)
    else:
        assert len({anywhere.key, target.key} & world.node_of.keys()) == 1
    world.provision(anywhere, target)
    assert world.scheduled(target).labels[ZONE] != world.scheduled(anywhere).labels[ZONE]


def test_should_allow_violation_of_a_pod_affinity_preference_with_a_conflicting_required_constraint(
    strategy: str,
) -> None:
    """Pod Affinity/Anti-Affinity / should allow violation of a pod affinity preference with a conflicting required
    constraint"""
    world = cluster(strategy)
    target = make_pod(labels=AFF)
    pods = make_pods(
        3,
        labels=LABELS,
        spread_constraints=[spread(HOSTNAME)],
        pod_preferences=[weighted(50, term(HOSTNAME, AFF))],
    )
    world.provision(*pods, target)
    for pod in (*pods, target):
        world.scheduled(pod)
    assert world.skew(HOSTNAME, namespace=None) == [1, 1, 1]


def test_should_support_pod_anti_affinity_with_a_zone_topology(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should support pod anti-affinity with a zone topology: one zone per batch (the
    zone of a planned node is only known once it is launched)"""
    world = cluster(strategy)
    for expected in ([1], [1, 1], [1, 1, 1], [1, 1, 1]):
        world.provision(*make_pods(3, labels=AFF, pod_anti_requirements=[term(ZONE, AFF)]))
        assert world.skew(ZONE, labels=None) == expected
        world.delete_unscheduled()


def test_should_not_schedule_pods_with_affinity_to_a_non_existent_pod(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should not schedule pods with affinity to a non-existent pod"""
    world = cluster(strategy)
    pods = make_pods(10, pod_requirements=[term(ZONE, AFF)])
    world.provision(*pods)
    for pod in pods:
        world.not_scheduled(pod)


def test_should_support_pod_affinity_with_zone_topology_unconstrained_target(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should support pod affinity with zone topology (unconstrained target)"""
    world = cluster(strategy)
    target = make_pod(labels=AFF)
    followers = make_pods(10, pod_requirements=[term(ZONE, AFF)])
    world.provision(*followers, target)
    for pod in followers:
        world.not_scheduled(pod)
    assert world.skew(ZONE, labels=None) == [1]
    world.provision(*followers)
    for pod in followers:
        world.scheduled(pod)
    assert world.skew(ZONE, labels=None) == [11]


def test_should_support_pod_affinity_with_zone_topology_constrained_target(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should support pod affinity with zone topology (constrained target)"""
    world = cluster(strategy)
    target = make_pod(labels=AFF, node_requirements=[zones(Z1)])
    followers = make_pods(10, pod_requirements=[term(ZONE, AFF)])
    world.provision(*followers, target)
    assert world.skew(ZONE, labels=None) == [11]


def test_should_handle_multiple_dependent_affinities(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should handle multiple dependent affinities (DB <- Web <- Cache <- UI on one
    host; 50 fresh clusters, the pods created in a random order each time as Go's random UIDs order them)"""
    chain = [{"type": t, "spread": "spread"} for t in ("db", "web", "cache", "ui")]
    shuffle = random.Random(31)
    for _ in range(50):
        world = cluster(strategy)
        specs: list[dict[str, Any]] = [{"labels": chain[0]}]
        for labels, previous in zip(chain[1:], chain, strict=False):
            specs.append({"labels": labels, "pod_requirements": [term(HOSTNAME, previous)]})
        shuffle.shuffle(specs)
        pods = [make_pod(**s) for s in specs]
        world.provision(*pods)
        for pod in pods:
            world.scheduled(pod)


def test_should_fail_to_schedule_pods_with_unsatisfiable_dependencies(strategy: str) -> None:
    """Pod Affinity/Anti-Affinity / should fail to schedule pods with unsatisfiable dependencies"""
    world = cluster(strategy)
    pod = make_pod(
        labels={"type": "db", "spread": "spread"},
        pod_requirements=[term(HOSTNAME, {"type": "web", "spread": "spread"})],
    )
    world.provision(pod)
    world.not_scheduled(pod)


@pytest.mark.parametrize(
    ("namespace", "extra", "together"),
    [
        ("other-ns-no-match", {}, False),
        ("other-ns-list", {"namespaces": ["other-ns-list"]}, True),
        ("empty-ns-selector", {"namespaceSelector": {}}, True),
    ],
    ids=["no matching pods", "matching pods namespace list", "empty namespace selector"],
)
def test_should_filter_pod_affinity_topologies_by_namespace(
    strategy: str, namespace: str, extra: dict[str, Any], together: bool
) -> None:
    """Pod Affinity/Anti-Affinity / should filter pod affinity topologies by namespace, no matching pods; ...,
    matching pods namespace list; ..., empty namespace selector"""
    world = cluster(strategy, namespace_labels={"empty-ns-selector": {"foo": "bar"}})
    target = make_pod(labels=AFF, namespace=namespace)
    follower = make_pod(pod_requirements=[term(HOSTNAME, AFF, **extra)])
    world.provision(*hostname_spread_pods(), target, follower)
    node = world.scheduled(target)
    if together:
        assert world.scheduled(follower) is node
    else:
        world.not_scheduled(follower)


# --- In-flight nodes (provisioner_test.go) ----------------------------------------------------------------------------


def test_in_flight_should_balance_pods_across_zones(strategy: str) -> None:
    """In-Flight Nodes / Topology / should balance pods across zones with in-flight newNodes: the nodes of the first
    round take the second round's pods, no new node."""
    labels = {"foo": "bar"}
    constraint = [spread(ZONE, labels=labels)]
    world = cluster(strategy)
    world.provision(*make_pods(4, labels=labels, spread_constraints=constraint))
    assert world.skew(ZONE, labels) == [1, 1, 2]
    nodes = len(world.nodes)
    world.provision(*make_pods(5, labels=labels, spread_constraints=constraint))
    assert world.skew(ZONE, labels) == [3, 3, 3]
    assert len(world.nodes) == nodes


def test_in_flight_should_balance_pods_across_hostnames(strategy: str) -> None:
    """In-Flight Nodes / Topology / should balance pods across hostnames with in-flight newNodes"""
    labels = {"foo": "bar"}
    constraint = [spread(HOSTNAME, labels=labels)]
    world = cluster(strategy)
    world.provision(*make_pods(4, labels=labels, spread_constraints=constraint))
    assert world.skew(HOSTNAME, labels) == [1, 1, 1, 1]
    world.provision(*make_pods(5, labels=labels, spread_constraints=constraint))
    assert world.skew(HOSTNAME, labels) == [1] * 9


# --- Taints (provisioner_topology_test.go) ----------------------------------------------------------------------------


def test_should_taint_nodes_with_provisioner_taints(strategy: str) -> None:
    """Taints / should taint nodes with provisioner taints"""
    taint = Taint("test", NO_SCHEDULE, "bar")
    world = cluster(strategy, provisioner(taints=[taint]))
    pod = make_pod(tolerations=[{"effect": NO_SCHEDULE, "operator": "Exists"}])
    world.provision(pod)
    assert taint in world.scheduled(pod).taints


def test_should_schedule_pods_that_tolerate_provisioner_constraints(strategy: str) -> None:
    """Taints / should schedule pods that tolerate provisioner constraints"""
    world = cluster(strategy, provisioner(taints=[Taint("test-key", NO_SCHEDULE, "test-value")]))
    tolerating = [
        make_pod(tolerations=[{"key": "test-key", "operator": "Exists", "effect": NO_SCHEDULE}]),
        make_pod(tolerations=[{"key": "test-key", "value": "test-value", "operator": "Equal", "effect": NO_SCHEDULE}]),
    ]
    world.provision(*tolerating)
    for pod in tolerating:
        world.scheduled(pod)
    others = [
        make_pod(),
        make_pod(tolerations=[{"key": "invalid", "operator": "Exists"}]),
        make_pod(tolerations=[{"key": "test-key", "operator": "Equal", "effect": NO_SCHEDULE}]),
    ]
    world.provision(*others)
    for pod in others:
        world.not_scheduled(pod)


def test_should_provision_nodes_with_taints_and_schedule_pods_if_the_taint_is_only_a_startup_taint(
    strategy: str,
) -> None:
    """Taints / should provision nodes with taints and schedule pods if the taint is only a startup taint"""
    startup = Taint("ignore-me", NO_SCHEDULE, "nothing-to-see-here")
    world = cluster(strategy, provisioner(startup_taints=[startup]))
    pod = make_pod()
    world.provision(pod)
    world.scheduled(pod)


def test_should_not_generate_taints_for_op_exists(strategy: str) -> None:
    """Taints / should not generate taints for OpExists (the Go node's single taint is the not-ready taint the
    kubelet adds; the node planned here has no taint)"""
    world = cluster(strategy)
    pod = make_pod(tolerations=[{"key": "test-key", "operator": "Exists", "effect": NO_EXECUTE}])
    world.provision(pod)
    assert world.scheduled(pod).taints == ()
