"""Karpenter v1.14.1's `topology_test.go`, every `It`, on v1.14.1's rules (`TopologyRules.V1_14`) with NodePools.

The reference is `pkg/controllers/provisioning/scheduling/topology_test.go` (kubernetes-sigs/karpenter v1.14.1). Its
`It`s are, apart from the v1 fields and renames, the `It`s of v0.31.1's `provisioner_topology_test.go`, which
`test_karpenter_topology.py` replays. So each `It` is here as data, in one of five places (`TOPOLOGY_ITS` lists them
all, with the line each starts on, and `test_every_it_is_accounted_for` holds the partition):

* `REPLAYED` / `REPLAYED_PARAMETRIZED` / `REPLAYED_ONE_ROUND`: the v0.31 suite's test of the same `It` runs again
  with the cluster on v1.14.1's rules and its templates NodePools (their nodes labelled `karpenter.sh/nodepool`, the
  default one requiring `karpenter.sh/capacity-type Exists`, as v1.14.1's `BeforeEach`), and must assert what the
  Go case asserts (the same as v0.31's). The prebuilt templates of `ONE_ROUND` keep their v0.31 owner label, which
  no case reads.
* `test_karpenter_v1_topology.py` (`CASES`): `MatchLabelKeys`, `NodeTaintsPolicy`, `NodeAffinityPolicy`.
* `test_karpenter_v1_affinity_domains.py` (`V1_CASES`, `V1_PARAMETRIZED`): most of `Pod Affinity/Anti-Affinity`.
* the `It`s v1.14.1 adds or changes, written below (`test_l92_...`, `test_l204_...`, `test_l2178_...`).
* `NOT_PORTED`: the model cannot express the case; the reason is given, and each is reported as a skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from karpenter_policy.model import labels as wk

from . import test_karpenter_topology as v0_31_suite
from . import test_karpenter_v1_affinity_domains as v1_affinity
from . import test_karpenter_v1_topology as v1_topology
from . import v1_replay
from .cluster import LABELS, Z1, Z2, Z3, ZONE, make_pod, make_pods, requirement, spread, term, zones
from .v1_replay import v1_cluster, v1_nodepool

GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/topology_test.go"

#: Every `It` of topology_test.go at v1.14.1: the line it starts on → its `Context / It` (Describe "Topology" unless
#: it says "Taints" or "Volume").
TOPOLOGY_ITS: dict[int, str] = {
    58: "should ignore unknown topology keys",
    76: "should not spread an invalid label selector",
    92: "should not spread when a nil label selector is defined",
    108: "Zonal / should balance pods across zones (match labels)",
    121: "Zonal / should balance pods across zones (match expressions)",
    142: "Zonal / should respect NodePool zonal constraints",
    157: "Zonal / should respect NodePool zonal constraints (subset) with requirements",
    173: "Zonal / should respect NodePool zonal constraints (subset) with labels",
    188: "Zonal / should respect NodePool zonal constraints (subset) with requirements and labels",
    204: "Zonal / should respect NodePool zonal constraints (subset) with labels across NodePools",
    232: "Zonal / should respect NodePool zonal constraints (existing pod)",
    266: "Zonal / should schedule to the non-minimum domain if its all that's available",
    308: "Zonal / should only schedule to minimum domains if already violating max skew",
    347: "Zonal / should not violate max-skew when unsat = do not schedule",
    380: "Zonal / should not violate max-skew when unsat = do not schedule (discover domains)",
    412: "Zonal / should only count running/scheduled pods with matching labels scheduled to nodes with a "
         "corresponding domain",
    445: "Zonal / should match all pods when labelSelector is not specified",
    457: "Zonal / should handle interdependent selectors",
    482: "Zonal / should respect minDomains constraints",
    502: "Zonal / satisfied minDomains constraints (equal) should allow expected pod scheduling",
    522: "Zonal / satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling",
    545: "Hostname / should balance pods across nodes",
    558: "Hostname / should balance pods on the same hostname up to maxskew",
    571: "Hostname / balance multiple deployments with hostname topology spread",
    607: "Hostname / balance multiple deployments with hostname topology spread & varying arch",
    653: "CapacityType / should balance pods across capacity types",
    666: "CapacityType / should respect NodePool capacity type constraints",
    681: "CapacityType / should not violate max-skew when unsat = do not schedule (capacity type)",
    716: "CapacityType / should violate max-skew when unsat = schedule anyway (capacity type)",
    747: "CapacityType / should only count running/scheduled pods with matching labels scheduled to nodes with a "
         "corresponding domain",
    780: "CapacityType / should match all pods when labelSelector is not specified",
    792: "CapacityType / should handle interdependent selectors",
    815: "CapacityType / should balance pods across capacity-types (node required affinity constrained)",
    852: "CapacityType / should balance pods across capacity-types (no constraints)",
    895: "CapacityType / should balance pods across arch (no constraints)",
    941: "Combined Hostname and Zonal Topology / should spread pods while respecting both constraints (hostname and "
         "zonal)",
    981: "Combined Hostname and Zonal Topology / should balance pods across NodePool requirements",
    1049: "Combined Hostname and Zonal Topology / should spread pods while respecting both constraints",
    1090: "Combined Hostname and Zonal Topology / should spread pods while respecting both constraints (second)",
    1139: "MatchLabelKeys / should support matchLabelKeys",
    1168: "MatchLabelKeys / should ignore unknown labels specified in matchLabelKeys",
    1196: "NodeTaintsPolicy / should balance pods across a label (NodeTaintsPolicy=ignore)",
    1267: "NodeTaintsPolicy / should balance pods across a label (NodeTaintsPolicy=honor)",
    1336: "NodeTaintsPolicy / ... when discovered from the nodepool (NodeTaintsPolicy=ignore)",
    1392: "NodeTaintsPolicy / ... when discovered from the nodepool (NodeTaintsPolicy=honor)",
    1448: "NodeTaintsPolicy / ... when mutually exclusive NodePools (by taints) share domains (NodeTaintsPolicy=honor)",
    1529: "NodeAffinityPolicy / should balance pods across a label (NodeAffinityPolicy=ignore)",
    1596: "NodeAffinityPolicy / should balance pods across a label (NodeAffinityPolicy=honor)",
    1662: "Combined Zonal and Capacity Type Topology / should spread pods while respecting both constraints",
    1702: "Combined Hostname, Zonal, and Capacity Type Topology / should spread pods while respecting all constraints",
    1740: "Combined Zonal Topology and Node Affinity / should limit spread options by nodeSelector",
    1766: "Combined Zonal Topology and Node Affinity / should limit spread options by node requirements",
    1788: "Combined Zonal Topology and Node Affinity / should limit spread options by required node affinity",
    1832: "Combined Zonal Topology and Node Affinity / should not limit spread options by preferred node affinity",
    1857: "Combined Capacity Type Topology and Node Affinity / should limit spread options by nodeSelector",
    1881: "Combined Capacity Type Topology and Node Affinity / should limit spread options by node affinity "
          "(capacity type)",
    1926: "Pod Affinity/Anti-Affinity / should schedule a pod with empty pod affinity and anti-affinity",
    1936: "Pod Affinity/Anti-Affinity / should respect pod affinity (hostname)",
    1970: "Pod Affinity/Anti-Affinity / should respect pod affinity (arch)",
    2013: "Pod Affinity/Anti-Affinity / should respect self pod affinity (hostname)",
    2037: "Pod Affinity/Anti-Affinity / should respect self pod affinity for first empty topology domain only "
          "(hostname)",
    2079: "Pod Affinity/Anti-Affinity / ... first empty topology domain only (hostname/constrained zones)",
    2123: "Pod Affinity/Anti-Affinity / should respect self pod affinity (zone)",
    2147: "Pod Affinity/Anti-Affinity / should respect self pod affinity (zone w/ constraint)",
    2178: "Pod Affinity/Anti-Affinity / should allow two nodes to be created when two pods with matching affinities "
          "have incompatible selectors",
    2231: "Pod Affinity/Anti-Affinity / should allow violation of preferred pod affinity",
    2264: "Pod Affinity/Anti-Affinity / should allow violation of preferred pod anti-affinity",
    2297: "Pod Affinity/Anti-Affinity / should separate nodes using simple pod anti-affinity on hostname",
    2319: "Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone",
    2358: "Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone (other schedules first)",
    2380: "Pod Affinity/Anti-Affinity / should not violate pod anti-affinity (arch)",
    2423: "Pod Affinity/Anti-Affinity / should violate preferred pod anti-affinity on zone (inverse)",
    2463: "Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone (inverse)",
    2499: "Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone (Schrödinger)",
    2530: "Pod Affinity/Anti-Affinity / should not violate pod anti-affinity on zone (inverse w/existing nodes)",
    2580: "Pod Affinity/Anti-Affinity / should violate preferred pod anti-affinity on zone (inverse w/existing nodes)",
    2630: "Pod Affinity/Anti-Affinity / should allow violation of a pod affinity preference with a conflicting "
          "required constraint",
    2665: "Pod Affinity/Anti-Affinity / should support pod anti-affinity with a zone topology",
    2710: "Pod Affinity/Anti-Affinity / should not schedule pods with affinity to a non-existent pod",
    2727: "Pod Affinity/Anti-Affinity / should support pod affinity with zone topology (unconstrained target)",
    2760: "Pod Affinity/Anti-Affinity / should support pod affinity with zone topology (constrained target)",
    2789: "Pod Affinity/Anti-Affinity / should handle multiple dependent affinities",
    2824: "Pod Affinity/Anti-Affinity / should fail to schedule pods with unsatisfiable dependencies",
    2840: "Pod Affinity/Anti-Affinity / should filter pod affinity topologies by namespace, no matching pods",
    2878: "Pod Affinity/Anti-Affinity / should filter pod affinity topologies by namespace, matching pods namespace "
          "list",
    2917: "Pod Affinity/Anti-Affinity / should filter pod affinity topologies by namespace, empty namespace selector",
    2981: "Taints / should taint nodes with NodePool taints",
    2991: "Taints / should schedule pods that tolerate NodePool constraints",
    3018: "Taints / should provision nodes with taints and schedule pods if the taint is only a startup taint",
    3026: "Taints / should not generate taints for OpExists",
    3060: "Topology with Volume Requirements / should schedule pod with PVC and TSC minDomains=3 when pods are spread "
          "across 3 zones",
}  # fmt: skip

#: A v0.31 suite test without arguments → the lines of the v1.14.1 `It`s it replays.
REPLAYED: dict[str, tuple[int, ...]] = {
    "test_should_ignore_unknown_topology_keys": (58,),
    "test_zonal_should_respect_provisioner_zonal_constraints_existing_pod": (232,),
    "test_zonal_should_schedule_to_the_non_minimum_domain_if_its_all_thats_available": (266,),
    "test_zonal_should_only_schedule_to_minimum_domains_if_already_violating_max_skew": (308,),
    "test_should_handle_interdependent_selectors": (457, 792),
    "test_capacity_type_should_balance_pods_node_required_affinity_constrained": (815,),
    "test_combined_hostname_and_zonal": (941,),
    "test_combined_should_balance_pods_across_provisioner_requirements": (981,),
    "test_combined_zone_spread_with_a_provisioner_that_cannot_provision": (1049,),
    "test_combined_capacity_type_and_hostname": (1090,),
    "test_combined_zonal_and_capacity_type": (1662,),
    "test_combined_hostname_zonal_and_capacity_type": (1702,),
    "test_zonal_node_affinity_should_limit_spread_options_by_required_node_affinity": (1788,),
    "test_capacity_type_node_affinity_should_limit_spread_options_by_node_affinity": (1881,),
    "test_should_fail_to_schedule_pods_with_unsatisfiable_dependencies": (2824,),
    "test_should_taint_nodes_with_provisioner_taints": (2981,),
    "test_should_schedule_pods_that_tolerate_provisioner_constraints": (2991,),
    "test_should_provision_nodes_with_taints_and_schedule_pods_if_the_taint_is_only_a_startup_taint": (3018,),
    "test_should_not_generate_taints_for_op_exists": (3026,),
}

_ONLY_COUNT = "test_should_only_count_running_scheduled_pods_with_matching_labels_on_nodes_with_the_domain"
_BY_NAMESPACE = "test_should_filter_pod_affinity_topologies_by_namespace"
#: (the line of the v1.14.1 `It`, the v0.31 suite test replaying it, its arguments after `strategy`).
REPLAYED_PARAMETRIZED: list[tuple[int, str, tuple[Any, ...]]] = [
    (347, "test_zonal_should_not_violate_max_skew_when_unsat_do_not_schedule", (True,)),
    (380, "test_zonal_should_not_violate_max_skew_when_unsat_do_not_schedule", (False,)),
    (412, _ONLY_COUNT, (ZONE, Z1, Z2, [1, 2, 2])),
    (747, _ONLY_COUNT, (wk.CAPACITY_TYPE, "spot", "on-demand", [2, 3])),
    (445, "test_should_match_all_pods_when_label_selector_is_not_specified", (ZONE,)),
    (780, "test_should_match_all_pods_when_label_selector_is_not_specified", (wk.CAPACITY_TYPE,)),
    (571, "test_hostname_balance_multiple_deployments", ((None, None), 2)),
    (607, "test_hostname_balance_multiple_deployments", (("amd64", "arm64"), 4)),
    (681, "test_capacity_type_max_skew", ("DoNotSchedule", [1, 2])),
    (716, "test_capacity_type_max_skew", ("ScheduleAnyway", [1, 5])),
    (852, "test_should_balance_pods_across_no_constraints", (wk.CAPACITY_TYPE, "on-demand", "spot")),
    (895, "test_should_balance_pods_across_no_constraints", (wk.ARCH, "amd64", "arm64")),
    (2013, "test_should_respect_self_pod_affinity", (wk.HOSTNAME,)),
    (2123, "test_should_respect_self_pod_affinity", (ZONE,)),
    (2840, _BY_NAMESPACE, ("other-ns-no-match", {}, False)),
    (2878, _BY_NAMESPACE, ("other-ns-list", {"namespaces": ["other-ns-list"]}, True)),
    (2917, _BY_NAMESPACE, ("empty-ns-selector", {"namespaceSelector": {}}, True)),
]  # fmt: skip

#: A v0.31 `ONE_ROUND` entry (its `Context / It`) → the line of the v1.14.1 `It` asserting the same skew.
REPLAYED_ONE_ROUND: dict[str, int] = {
    "Zonal / should balance pods across zones (match labels)": 108,
    "Zonal / should balance pods across zones (match expressions)": 121,
    "Zonal / should respect provisioner zonal constraints": 142,
    "Zonal / should respect provisioner zonal constraints (subset)": 157,
    "Zonal / should respect provisioner zonal constraints (subset) with labels": 173,
    "Zonal / should respect provisioner zonal constraints (subset) with labels and requirements": 188,
    "Zonal / should respect minDomains constraints": 482,
    "Zonal / satisfied minDomains constraints (equal) should allow expected pod scheduling": 502,
    "Zonal / satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling": 522,
    "Hostname / should balance pods across nodes": 545,
    "Hostname / should balance pods on the same hostname up to maxskew": 558,
    "CapacityType / should balance pods across capacity types": 653,
    "CapacityType / should respect provisioner capacity type constraints": 666,
    "Combined Zonal Topology and Node Affinity / should limit spread options by nodeSelector": 1740,
    "Combined Zonal Topology and Node Affinity / should limit spread options by node requirements": 1766,
    "Combined Zonal Topology and Node Affinity / should not limit spread options by preferred node affinity": 1832,
    "Combined Capacity Type Topology and Node Affinity / should limit spread options by nodeSelector": 1857,
}

#: The `It`s written below, for v1.14.1 alone.
WRITTEN_HERE = (92, 204, 2178)

#: The line of an `It` the model cannot express → why.
NOT_PORTED: dict[int, str] = {
    76: "the Go case builds a label selector with an invalid operator; Kubernetes >= 1.27 admission rejects such a "
        "pod and the Go case skips itself there (as at v0.31)",
    3060: "volumes: the pod's PersistentVolume zone narrows where its NodeClaim launches but not the spread's domains "
          "(volumetopology.go); the model has no PersistentVolume, and writing the zone as node affinity would "
          "narrow the domains under nodeAffinityPolicy Honor",
}  # fmt: skip


def _v1_lines_elsewhere() -> Iterator[int]:
    """The `It`s the two other v1.14.1 topology modules replay."""
    yield from (case.line for case in v1_topology.CASES)
    yield from (line for _, line in v1_affinity.V1_CASES.values())
    yield from (line for _, line in v1_affinity.V1_PARAMETRIZED.values())


def test_every_it_is_accounted_for() -> None:
    """Each `It` of topology_test.go is ported in exactly one place or listed as not ported: the counts are what a
    reader sees (91 `It`s)."""
    places = [
        *(line for lines in REPLAYED.values() for line in lines),
        *(line for line, _, _ in REPLAYED_PARAMETRIZED),
        *REPLAYED_ONE_ROUND.values(),
        *WRITTEN_HERE,
        *_v1_lines_elsewhere(),
        *NOT_PORTED,
    ]
    assert sorted(places) == sorted(TOPOLOGY_ITS), "an It is missing or ported twice"
    assert len(TOPOLOGY_ITS) == 91
    assert all(line in TOPOLOGY_ITS for line in REPLAYED_ONE_ROUND.values())
    one_round = {entry[0] for entry in v0_31_suite.ONE_ROUND}
    assert set(REPLAYED_ONE_ROUND) <= one_round


# --- replays of the v0.31 suite on v1.14.1's rules --------------------------------------------------------------------


@pytest.fixture()
def on_v1_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    v1_replay.on_v1_rules(monkeypatch, v0_31_suite)


def _replay(name: str, *args: Any, strategy: str, line: int) -> None:
    v1_replay.replay(v0_31_suite, name, *args, strategy=strategy, where=f"{GO_FILE}:{line} {TOPOLOGY_ITS[line]}")


@pytest.mark.parametrize("name", sorted(REPLAYED), ids=lambda n: "+".join(f"L{line}" for line in REPLAYED[n]))
def test_v1_topology_replay(name: str, strategy: str, on_v1_rules: None) -> None:
    """topology_test.go (v1.14.1): the `It`s REPLAYED names, as the v0.31 suite's test asserts them."""
    _replay(name, strategy=strategy, line=REPLAYED[name][0])


@pytest.mark.parametrize(
    ("line", "name", "args"), REPLAYED_PARAMETRIZED, ids=[f"L{c[0]}" for c in REPLAYED_PARAMETRIZED]
)
def test_v1_topology_parametrized_replay(
    line: int, name: str, args: tuple[Any, ...], strategy: str, on_v1_rules: None
) -> None:
    """topology_test.go (v1.14.1): the `It` at `line`, as the v0.31 suite's test asserts it with these arguments."""
    _replay(name, *args, strategy=strategy, line=line)


@pytest.mark.parametrize(
    "entry",
    [e for e in v0_31_suite.ONE_ROUND if e[0] in REPLAYED_ONE_ROUND],
    ids=lambda e: f"L{REPLAYED_ONE_ROUND[e[0]]}",
)
def test_v1_topology_one_round_replay(entry: tuple[Any, ...], strategy: str, on_v1_rules: None) -> None:
    """topology_test.go (v1.14.1): one `ExpectProvisioned` of spreading pods, then the skew the Go `It` asserts."""
    _replay("test_one_round_skew", *entry, strategy=strategy, line=REPLAYED_ONE_ROUND[entry[0]])


# --- the It's v1.14.1 adds or changes ---------------------------------------------------------------------------------


def test_l92_a_constraint_without_a_label_selector_does_not_spread(strategy: str) -> None:
    """topology_test.go:92 "should not spread when a nil label selector is defined": the constraint selects no pod,
    so it never counts one; both pods go to one node (`ExpectSkew` over all pods: 2 in one zone)."""
    world = v1_cluster(strategy)
    pods = make_pods(2, labels=LABELS, spread_constraints=[spread(ZONE, labels=None)])
    world.provision(*pods)
    assert world.skew(ZONE, labels=None) == [2], f"{GO_FILE}:92"


def test_l204_zonal_labels_across_nodepools(strategy: str) -> None:
    """topology_test.go:204 "... (subset) with labels across NodePools": v1.14.1 gives the first NodePool zone
    requirements (test-zone-1, -2) besides its zone label test-zone-1 (v0.31's had the label only); the second
    labels its nodes test-zone-2. Four spreading pods: two per zone."""
    first = v1_nodepool("default", requirement(wk.CAPACITY_TYPE, "Exists"), zones(Z1, Z2), labels={ZONE: Z1})
    second = v1_nodepool("second", labels={ZONE: Z2})
    world = v1_cluster(strategy, first, second)
    world.provision(*make_pods(4, labels=LABELS, spread_constraints=[spread(ZONE)]))
    assert world.skew(ZONE) == [2, 2], f"{GO_FILE}:204"


def test_l2178_two_self_affine_pods_with_incompatible_zones_get_two_nodes(strategy: str) -> None:
    """topology_test.go:2178 "should allow two nodes to be created when two pods with matching affinities have
    incompatible selectors": each pod requires zonal affinity to the other's labels, one limited to test-zone-2,
    the other to test-zone-3. Each is the first of its group in its own zone: both schedule, on two nodes."""
    aff = {"security": "s1"}
    first = make_pod(labels=aff, pod_requirements=[term(ZONE, aff)], node_requirements=[zones(Z2)])
    second = make_pod(labels=aff, pod_requirements=[term(ZONE, aff)], node_requirements=[zones(Z3)])
    world = v1_cluster(strategy)
    world.provision(first, second)
    one, two = world.scheduled(first), world.scheduled(second)
    assert (one.labels[ZONE], two.labels[ZONE]) == (Z2, Z3), f"{GO_FILE}:2178"
    assert one.name != two.name


@pytest.mark.parametrize("line", sorted(NOT_PORTED), ids=lambda line: f"L{line}")
def test_not_ported(line: int) -> None:
    """The `It`s the model cannot express, reported as skips with their reason."""
    pytest.skip(f"{GO_FILE}:{line} {TOPOLOGY_ITS[line]}: {NOT_PORTED[line]}")
