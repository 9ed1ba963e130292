"""Pod (anti-)affinity topology domains on Karpenter v1.14.1's rules (`TopologyRules.V1_14`).

v1.14.1 gives a pod (anti-)affinity group only the domains of the NodePools whose taints the pod that makes the group
tolerates (`topologygroup.go` `NewTopologyGroup`: the group's zero node filter has a taint policy that is not Ignore,
so `topologydomaingroup.go` `TopologyDomainGroup.ForEachDomain` filters by the pod's tolerations); a group made for a
pod being scheduled also takes every existing node's domain (`topology.go` `countDomains`: the zero filter matches
every node), an inverse group (a running pod's required anti-affinity, `updateInverseAntiAffinity`) does not. v0.31
gives every group every domain. topology_test.go at v1.14.1 has no case of its own for this (its Pod
Affinity/Anti-Affinity cases use untainted NodePools), so:

* the cases below are ours, each contrasted with v0.31's rules on the same input;
* every Pod Affinity/Anti-Affinity case of v1.14.1's topology_test.go that the v0.31 suite replays
  (`test_karpenter_topology.py`: the same `It`s, at the lines `V1_CASES` names) is run again on v1.14.1's rules
  with NodePool templates, and must assert the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.model.taints import NO_SCHEDULE, Taint
from karpenter_policy.scheduling import NodeClaimTemplate, TopologyRules

from . import test_karpenter_topology as v0_31_suite
from . import v1_replay
from .cluster import ZONE, Cluster, cluster, make_pod, requirement, term
from .test_karpenter_v1_topology import nodepool

GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/topology_test.go"
AFF = {"security": "s2"}
TAINT = Taint("example.com/dedicated", NO_SCHEDULE, "batch")
TOLERATION = {"key": "example.com/dedicated", "operator": "Equal", "value": "batch", "effect": NO_SCHEDULE}


def _two_pools() -> list[NodeClaimTemplate]:
    """`default` offers test-zone-1 only; `tainted` (example.com/dedicated=batch:NoSchedule) test-zone-2 only."""
    return [
        nodepool(
            "default", requirement(wk.CAPACITY_TYPE, "In", "spot", "on-demand"), requirement(ZONE, "In", "test-zone-1")
        ),
        nodepool(
            "tainted",
            requirement(wk.CAPACITY_TYPE, "In", "spot", "on-demand"),
            requirement(ZONE, "In", "test-zone-2"),
            taints=[TAINT],
        ),
    ]


def _inverse_world(strategy: str, rules: TopologyRules, avoiding_tolerates: bool) -> tuple[Cluster, Any]:
    """A pod running in test-zone-1 that requires no AFF pod in its zone (tolerating the taint or not), and an AFF
    pod that tolerates the taint, to schedule."""
    world = cluster(strategy, *_two_pools(), topology=rules)
    node = world.add_node({ZONE: "test-zone-1"}, allocatable={"cpu": "10", "pods": "110"})
    extra: dict[str, Any] = {"tolerations": [TOLERATION]} if avoiding_tolerates else {}
    avoiding = make_pod(cpu="100m", pod_anti_requirements=[term(ZONE, AFF)], **extra)
    world.bind(avoiding, node)
    target = make_pod(cpu="100m", labels=AFF, tolerations=[TOLERATION])
    world.provision(target)
    return world, target


def test_v1_inverse_anti_affinity_has_only_the_domains_its_running_pod_tolerates(strategy: str) -> None:
    """The running pod tolerates only `default`, so its inverse group's domains are test-zone-1 alone (where it
    is): no empty domain is left, and the AFF pod stays pending — though `tainted` could launch it in test-zone-2,
    where no avoiding pod runs. v0.31's group has both zones: the AFF pod goes to test-zone-2."""
    world, target = _inverse_world(strategy, TopologyRules.V1_14, avoiding_tolerates=False)
    world.not_scheduled(target)
    world, target = _inverse_world(strategy, TopologyRules.V0_31, avoiding_tolerates=False)
    assert world.scheduled(target).labels[ZONE] == "test-zone-2"


def test_v1_inverse_anti_affinity_keeps_the_domains_of_pools_its_running_pod_tolerates(strategy: str) -> None:
    """The same world, the running pod tolerating `tainted` too: test-zone-2 is among its group's domains, empty,
    and the AFF pod launches there on v1.14.1's rules as on v0.31's."""
    for rules in (TopologyRules.V1_14, TopologyRules.V0_31):
        world, target = _inverse_world(strategy, rules, avoiding_tolerates=True)
        assert world.scheduled(target).labels[ZONE] == "test-zone-2", rules


def test_v1_owned_anti_affinity_domains_follow_the_owners_tolerations(strategy: str) -> None:
    """An AFF pod runs in test-zone-1. A new pod requiring no AFF pod in its zone has, on v1.14.1's rules, the
    domains of the pools it tolerates plus every existing node's: tolerating `tainted`, it lands in test-zone-2;
    not tolerating it, it has nowhere to go (the same as v0.31: it could not use `tainted` anyway)."""
    for tolerates, zone in ((True, "test-zone-2"), (False, None)):
        for rules in (TopologyRules.V1_14, TopologyRules.V0_31):
            world = cluster(strategy, *_two_pools(), topology=rules)
            node = world.add_node({ZONE: "test-zone-1"}, allocatable={"cpu": "10", "pods": "110"})
            world.bind(make_pod(cpu="100m", labels=AFF), node)
            extra: dict[str, Any] = {"tolerations": [TOLERATION]} if tolerates else {}
            pod = make_pod(cpu="100m", pod_anti_requirements=[term(ZONE, AFF)], **extra)
            world.provision(pod)
            if zone is None:
                world.not_scheduled(pod)
            else:
                assert world.scheduled(pod).labels[ZONE] == zone, (tolerates, rules)


#: v0.31 suite test → (its Go `It` in v1.14.1's topology_test.go, the line the `It` starts on).
V1_CASES: dict[str, tuple[str, int]] = {
    "test_should_schedule_a_pod_with_empty_pod_affinity_and_anti_affinity": (
        "should schedule a pod with empty pod affinity and anti-affinity", 1926),
    "test_should_respect_pod_affinity_hostname": ("should respect pod affinity (hostname)", 1936),
    "test_should_respect_pod_affinity_arch": ("should respect pod affinity (arch)", 1970),
    "test_should_respect_self_pod_affinity_for_first_empty_topology_domain_only_hostname": (
        "should respect self pod affinity for first empty topology domain only (hostname)", 2037),
    "test_should_respect_self_pod_affinity_for_first_empty_domain_only_constrained_zones": (
        "should respect self pod affinity for first empty topology domain only (hostname/constrained zones)", 2079),
    "test_should_respect_self_pod_affinity_zone_with_constraint": (
        "should respect self pod affinity (zone w/ constraint)", 2147),
    "test_should_allow_violation_of_preferred_pod_affinity": ("should allow violation of preferred pod affinity", 2231),
    "test_should_allow_violation_of_preferred_pod_anti_affinity": (
        "should allow violation of preferred pod anti-affinity", 2264),
    "test_should_separate_nodes_using_simple_pod_anti_affinity_on_hostname": (
        "should separate nodes using simple pod anti-affinity on hostname", 2297),
    "test_should_not_violate_pod_anti_affinity_on_zone": ("should not violate pod anti-affinity on zone", 2319),
    "test_should_not_violate_pod_anti_affinity_on_zone_other_schedules_first": (
        "should not violate pod anti-affinity on zone (other schedules first)", 2358),
    "test_should_not_violate_pod_anti_affinity_arch": ("should not violate pod anti-affinity (arch)", 2380),
    "test_should_not_violate_pod_anti_affinity_on_zone_schrodinger": (
        "should not violate pod anti-affinity on zone (Schrödinger)", 2499),
    "test_should_allow_violation_of_a_pod_affinity_preference_with_a_conflicting_required_constraint": (
        "should allow violation of a pod affinity preference with a conflicting required constraint", 2630),
    "test_should_support_pod_anti_affinity_with_a_zone_topology": (
        "should support pod anti-affinity with a zone topology", 2665),
    "test_should_not_schedule_pods_with_affinity_to_a_non_existent_pod": (
        "should not schedule pods with affinity to a non-existent pod", 2710),
    "test_should_support_pod_affinity_with_zone_topology_unconstrained_target": (
        "should support pod affinity with zone topology (unconstrained target)", 2727),
    "test_should_support_pod_affinity_with_zone_topology_constrained_target": (
        "should support pod affinity with zone topology (constrained target)", 2760),
    "test_should_handle_multiple_dependent_affinities": ("should handle multiple dependent affinities", 2789),
}  # fmt: skip
#: The parametrized ones: (v0.31 suite test, its arguments) → (Go `It`, line).
V1_PARAMETRIZED: dict[tuple[str, tuple[Any, ...]], tuple[str, int]] = {
    ("test_pod_anti_affinity_on_zone_inverse", ("preferred", True)): (
        "should violate preferred pod anti-affinity on zone (inverse)", 2423),
    ("test_pod_anti_affinity_on_zone_inverse", ("required", False)): (
        "should not violate pod anti-affinity on zone (inverse)", 2463),
    ("test_pod_anti_affinity_on_zone_inverse_with_existing_nodes", ("required", False)): (
        "should not violate pod anti-affinity on zone (inverse w/existing nodes)", 2530),
    ("test_pod_anti_affinity_on_zone_inverse_with_existing_nodes", ("preferred", True)): (
        "should violate preferred pod anti-affinity on zone (inverse w/existing nodes)", 2580),
}  # fmt: skip


@pytest.fixture()
def on_v1_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    v1_replay.on_v1_rules(monkeypatch, v0_31_suite)


def _run(name: str, *args: Any, strategy: str, it: tuple[str, int]) -> None:
    v1_replay.replay(v0_31_suite, name, *args, strategy=strategy, where=f"{GO_FILE}:{it[1]} {it[0]}")


@pytest.mark.parametrize("name", sorted(V1_CASES), ids=lambda n: f"L{V1_CASES[n][1]}")
def test_v1_pod_affinity_case(name: str, strategy: str, on_v1_rules: None) -> None:
    """topology_test.go (v1.14.1), `Context("Pod Affinity/Anti-Affinity")`, the `It` V1_CASES names."""
    _run(name, strategy=strategy, it=V1_CASES[name])


@pytest.mark.parametrize("key", sorted(V1_PARAMETRIZED), ids=lambda k: f"L{V1_PARAMETRIZED[k][1]}")
def test_v1_pod_anti_affinity_inverse_case(key: tuple[str, tuple[Any, ...]], strategy: str, on_v1_rules: None) -> None:
    """topology_test.go (v1.14.1), the inverse anti-affinity `It`s V1_PARAMETRIZED names."""
    name, args = key
    _run(name, *args, strategy=strategy, it=V1_PARAMETRIZED[key])
