"""Karpenter v1.14.1's scheduling `suite_test.go`, every `It`: those shared with v0.31 replayed on v1.14.1's rules,
the ones v1 adds that the model expresses, and those it cannot express, each with its reason.

The reference is `pkg/controllers/provisioning/scheduling/suite_test.go` (kubernetes-sigs/karpenter v1.14.1; 182
`It`s, `SUITE_IT_LINES`, and 29 table entries). `test_every_it_is_accounted_for` holds that each `It` is in exactly
one of:

* `REPLAYED`: an `It` that v0.31.1's `provisioner_test.go` has with the same pods and assertion, replayed from
  `test_karpenter_scheduling.py` with the cluster on v1.14.1's rules and its templates NodePools (`v1_replay.py`):
  (the line of the v1.14.1 `It`, the v0.31 test, which of its parametrized cases). v1.14.1 repeats its "Well Known
  Labels", "Constraints Validation" and "Scheduling Logic" contexts (lines 204-677 again at 678-1125, as v0.31
  did): both copies name the same case. `REPLAYED_TOPOLOGY`: the in-flight topology `It`s, from
  `test_karpenter_topology.py`.
* `IN_V1_SUITE` and its copies `COPIES_OF_V1_SUITE`: the `It`s v1 changed (`Gt`/`Lt`/`Gte`/`Lte`, the narrower
  restricted labels, kubernetes.io labels on NodePools), ported in `test_karpenter_v1_suite.py`.
* `WRITTEN_HERE`: `It`s new in v1.14.1 (host ports; NodePool requirements that filter out every instance type).
* `NOT_PORTED_ITS` and `NOT_PORTED` (whole contexts, with their line range and size): what the model cannot
  express, with the reason, reported as skips.

Adaptation: "NodePool requirements instance filtering" asserts Karpenter's error "nodepool requirements filtered
out all available instance types"; ours is the refusal of kind `unavailable` ("its requirements admit no instance
type"), the same fact in our words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import COST, KARPENTER

from . import test_karpenter_scheduling as v0_31_suite
from . import test_karpenter_topology as v0_31_topology
from . import v1_replay
from .cluster import make_pod, make_pods, requirement
from .v1_replay import v1_cluster, v1_nodepool

GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go"

_CONSTRAINTS = "test_custom_and_well_known_constraints"
_NEGATIVE = "test_should_schedule_pods_with_negative_operators_and_undefined_key"
_ONE_POD = "test_binpacking_one_pod_instance_type"
_TOO_LARGE = "test_binpacking_too_large"
_BATCHES = "test_binpacking_batches"

#: Every `It` of suite_test.go at v1.14.1, by the line it starts on (182; its 29 table entries are all in contexts
#: `NOT_PORTED` lists).
SUITE_IT_LINES = (
    155,
    163,
    172,
    180,
    192,
    205,
    214,
    225,
    233,
    243,
    253,
    264,
    273,
    282,
    291,
    300,
    310,
    321,
    332,
    346,
    359,
    373,
    386,
    401,
    426,
    442,
    453,
    467,
    481,
    502,
    509,
    518,
    528,
    537,
    547,
    556,
    568,
    579,
    591,
    603,
    614,
    626,
    646,
    666,
    679,
    688,
    699,
    707,
    717,
    727,
    738,
    747,
    756,
    766,
    777,
    788,
    802,
    815,
    829,
    842,
    857,
    882,
    893,
    904,
    918,
    932,
    953,
    962,
    972,
    981,
    991,
    1000,
    1012,
    1023,
    1035,
    1047,
    1058,
    1070,
    1090,
    1111,
    1128,
    1144,
    1168,
    1187,
    1214,
    1235,
    1248,
    1259,
    1284,
    1305,
    1327,
    1342,
    1367,
    1392,
    1417,
    1446,
    1465,
    1478,
    1495,
    1507,
    1522,
    1534,
    1546,
    1574,
    1593,
    1613,
    1645,
    1671,
    1683,
    1694,
    1716,
    1741,
    1763,
    1830,
    1847,
    1896,
    1915,
    1932,
    1959,
    1990,
    2018,
    2040,
    2078,
    2110,
    2143,
    2174,
    2203,
    2275,
    2364,
    2492,
    2531,
    2553,
    2593,
    2607,
    2633,
    2662,
    2695,
    2729,
    2788,
    2818,
    2860,
    2903,
    2955,
    3009,
    3047,
    3118,
    3165,
    3204,
    3318,
    3414,
    3534,
    3586,
    3629,
    3662,
    3684,
    3707,
    3749,
    3899,
    3958,
    4061,
    4087,
    4114,
    4171,
    4215,
    4318,
    4355,
    4390,
    4419,
    4715,
    4767,
    4824,
    4894,
    4976,
    5059,
    5142,
    5197,
    5242,
    5273,
    5302,
    5469,
    5524,
    5568,
)

#: The `It`s `test_karpenter_v1_suite.py` ports (v1 changed them), and their verbatim copies in the second "Well
#: Known Labels" / "Constraints Validation" contexts (v1.14.1 repeats lines 204-677 at 678-1125, as v0.31 did).
IN_V1_SUITE = (264, 273, 282, 291, 426, 442, 453, 467)
COPIES_OF_V1_SUITE = {738: 264, 747: 273, 882: 426, 893: 442, 904: 453, 918: 467}

#: (the line of the v1.14.1 `It`, the v0.31 topology suite's test replaying it): the in-flight topology cases.
REPLAYED_TOPOLOGY: list[tuple[int, str]] = [
    (1959, "test_in_flight_should_balance_pods_across_zones"),
    (1990, "test_in_flight_should_balance_pods_across_hostnames"),
]

_CLUSTER_STATE = (
    "what a node offers before it initializes (ephemeral and startup taints, DaemonSet pods still to come, "
    "allocatable the kubelet reports, a terminating node) is cluster state the caller hands the scheduler "
    "(ExistingNode), not scheduling (as for the v0.31 port)"
)
#: The line of a single `It` the model cannot express → why.
NOT_PORTED_ITS: dict[int, str] = {
    502: "a NodePool that is not ready (its status conditions): the templates are the NodePools the caller hands "
    "the scheduler, ready ones",
    1342: "a node's operating system is its template's (the EC2NodeClass's AMI), not the instance type's",
    1932: _CLUSTER_STATE,
    2040: _CLUSTER_STATE,
    2110: _CLUSTER_STATE,
    2143: _CLUSTER_STATE,
    2174: _CLUSTER_STATE,
    2203: _CLUSTER_STATE,
    2275: _CLUSTER_STATE,
    2364: _CLUSTER_STATE,
    2531: _CLUSTER_STATE,
    2818: _CLUSTER_STATE,
}

#: (the line of the v1.14.1 `It`, the v0.31 suite test replaying it, the index of its parametrized case).
REPLAYED: list[tuple[int, str, int]] = [
    (155, _CONSTRAINTS, 0),
    (163, _CONSTRAINTS, 1),
    (172, _CONSTRAINTS, 2),
    (180, _CONSTRAINTS, 3),
    (192, _CONSTRAINTS, 4),
    (205, _CONSTRAINTS, 5),
    (214, _CONSTRAINTS, 6),
    (225, _CONSTRAINTS, 7),
    (233, _CONSTRAINTS, 8),
    (243, _CONSTRAINTS, 9),
    (253, _CONSTRAINTS, 10),
    (300, _CONSTRAINTS, 13),
    (310, _CONSTRAINTS, 14),
    (321, _CONSTRAINTS, 15),
    (332, _CONSTRAINTS, 16),
    (346, _CONSTRAINTS, 17),
    (359, _CONSTRAINTS, 18),
    (373, _CONSTRAINTS, 19),
    (386, _CONSTRAINTS, 20),
    (509, _CONSTRAINTS, 21),
    (528, _CONSTRAINTS, 22),
    (547, _CONSTRAINTS, 23),
    (556, _CONSTRAINTS, 24),
    (568, _CONSTRAINTS, 25),
    (579, _CONSTRAINTS, 26),
    (591, _CONSTRAINTS, 27),
    (603, _CONSTRAINTS, 28),
    (614, _CONSTRAINTS, 29),
    (666, _CONSTRAINTS, 30),
    (679, _CONSTRAINTS, 5),
    (688, _CONSTRAINTS, 6),
    (699, _CONSTRAINTS, 7),
    (707, _CONSTRAINTS, 8),
    (717, _CONSTRAINTS, 9),
    (727, _CONSTRAINTS, 10),
    (756, _CONSTRAINTS, 13),
    (766, _CONSTRAINTS, 14),
    (777, _CONSTRAINTS, 15),
    (788, _CONSTRAINTS, 16),
    (802, _CONSTRAINTS, 17),
    (815, _CONSTRAINTS, 18),
    (829, _CONSTRAINTS, 19),
    (842, _CONSTRAINTS, 20),
    (953, _CONSTRAINTS, 21),
    (972, _CONSTRAINTS, 22),
    (991, _CONSTRAINTS, 23),
    (1000, _CONSTRAINTS, 24),
    (1012, _CONSTRAINTS, 25),
    (1023, _CONSTRAINTS, 26),
    (1035, _CONSTRAINTS, 27),
    (1047, _CONSTRAINTS, 28),
    (1058, _CONSTRAINTS, 29),
    (1111, _CONSTRAINTS, 30),
    (518, _NEGATIVE, 0),
    (962, _NEGATIVE, 0),
    (537, _NEGATIVE, 1),
    (981, _NEGATIVE, 1),
    (1522, _ONE_POD, 0),
    (1534, _ONE_POD, 1),
    (1546, _ONE_POD, 2),
    (1716, _ONE_POD, 3),
    (1683, _TOO_LARGE, 0),
    (1741, _TOO_LARGE, 1),
    (1574, _BATCHES, 0),
    (1593, _BATCHES, 1),
    (1613, _BATCHES, 2),
    (1694, _BATCHES, 3),
    (401, "test_should_combine_multidimensional_node_selectors_preferences_and_requirements", 0),
    (857, "test_should_combine_multidimensional_node_selectors_preferences_and_requirements", 0),
    (481, "test_should_schedule_pods_that_have_node_selectors_with_label_in_wellknown_label_list", 0),
    (932, "test_should_schedule_pods_that_have_node_selectors_with_label_in_wellknown_label_list", 0),
    (626, "test_scheduling_logic_compatible_pods", 0),
    (1070, "test_scheduling_logic_compatible_pods", 0),
    (646, "test_scheduling_logic_compatible_pods", 1),
    (1090, "test_scheduling_logic_compatible_pods", 1),
    (1128, "test_required_should_not_relax_the_final_term", 0),
    (1144, "test_required_should_relax_multiple_terms", 0),
    (1168, "test_preferred_should_relax_all_terms", 0),
    (1187, "test_preferred_should_relax_to_use_lighter_weights", 0),
    (1214, "test_preferred_should_schedule_even_if_preference_is_conflicting_with_requirement", 0),
    (1235, "test_preferred_should_schedule_even_if_preference_requirements_are_conflicting", 0),
    (1248, "test_should_not_schedule_if_requesting_more_resources_than_any_instance_type_has", 0),
    (1259, "test_should_launch_pods_with_different_selectors_on_different_instances", 0),
    (1367, "test_should_launch_pods_with_different_selectors_on_different_instances", 1),
    (1392, "test_should_launch_pods_with_different_selectors_on_different_instances", 2),
    (1284, "test_should_exclude_instance_types_not_supported", 0),
    (1305, "test_should_exclude_instance_types_not_supported", 1),
    (1327, "test_should_exclude_instance_types_not_supported", 2),
    (1417, "test_should_launch_pods_with_resources_that_arent_on_any_single_instance_type_on_different_instances", 0),
    (1446, "test_should_fail_to_schedule_a_pod_with_resources_requests_that_arent_on_a_single_instance_type", 0),
    (1465, "test_provider_specific_labels_should_filter_instance_types_that_match_labels", 0),
    (1478, "test_provider_specific_labels_should_not_schedule_with_incompatible_labels", 0),
    (1495, "test_provider_specific_labels_optional_labels", 0),
    (1507, "test_provider_specific_labels_optional_labels", 1),
    (1645, "test_should_pack_new_nodes_tightly", 0),
    (1671, "test_should_handle_zero_quantity_resource_requests", 0),
    (1763, "test_should_select_for_valid_instance_types_regardless_of_price", 0),
    (1830, "test_should_not_launch_a_second_node_if_there_is_an_in_flight_node_that_can_support_the_pod", 0),
    (1847, "test_should_not_launch_a_second_node_if_an_in_flight_node_can_support_the_pod_node_selectors", 0),
    (1896, "test_should_launch_a_second_node", 0),
    (1915, "test_should_launch_a_second_node", 1),
    (2018, "test_in_flight_taints", 0),
    (2078, "test_in_flight_taints", 1),
    (2492, "test_should_pack_in_flight_nodes_before_launching_new_nodes", 0),
    (2553, "test_should_order_initialized_nodes_before_uninitialized_nodes", 0),
    (2662, "test_should_order_initialized_nodes_before_uninitialized_nodes", 1),
    (2607, "test_should_schedule_pods_to_an_existing_node_unowned_by_karpenter", 0),
    (2633, "test_should_schedule_pods_to_an_existing_node_unowned_by_karpenter", 1),
    (2695, "test_should_consider_a_pod_incompatible_with_an_existing_node_but_compatible_with_provisioner", 0),
    (2729, "test_should_not_subtract_daemonset_overhead_that_is_not_strictly_compatible_with_an_existing_node", 0),
    (2788, "test_should_not_bind_pods_to_new_nodes", 0),
    (2860, "test_should_respect_self_pod_affinity_without_pod_binding_zone", 0),
]

#: The `It`s new in v1.14.1 written below.
WRITTEN_HERE = (2593, 5197, 5242, 5273, 5302)

#: (first line, last line, `It`s, table entries, context) → why the model cannot express it.
NOT_PORTED: dict[tuple[int, int, int, int, str], str] = {
    (2891, 4059, 18, 8, "VolumeUsage"): "volumes: PersistentVolumes, StorageClasses, CSI attach limits and their "
    "zones are not in the model (a pod's shape has no volumes)",
    (4060, 4316, 5, 4, "Deleting Nodes"): "a deleting node's pods to re-schedule, PDBs and owners are cluster state "
    "the caller hands the scheduler as pods, not scheduling",
    (4317, 4675, 4, 13, "Metrics"): "Prometheus metrics of Karpenter's scheduling loop; the plan is what they count",
    (4676, 5195, 7, 0, "Reserved Instance Types"): "capacity reservations: the context's passes need the fake cloud "
    "to launch into and use up reservations, which this world's launch does not model; :4715 and :4767 are ported "
    "over the scheduler pass by pass in tests/scheduling/test_reserved_claims.py (docs/scheduling.md)",
    (5328, 5522, 1, 4, "Dynamic Resource Allocation (DRA)"): "ResourceClaims and DeviceClasses are not in the model",
    (5523, 5745, 2, 0, "Offering Overrides"): "offerings' CapacityOverride of extended resources (the fake provider's "
    "test hook) is not in the catalog's model",
}


def _test(name: str) -> Callable[..., None]:
    found: Callable[..., None] = getattr(v0_31_suite, name)
    return found


def test_every_it_is_accounted_for() -> None:
    """Each `It` of suite_test.go is replayed, written here, ported in test_karpenter_v1_suite.py (or a copy of
    one that is), or not ported (alone or in a context) — exactly once; every replay names a real parametrized
    case."""
    contexts = [(first, last) for first, last, *_ in NOT_PORTED]
    in_contexts = [line for line in SUITE_IT_LINES if any(first <= line <= last for first, last in contexts)]
    places = [
        *(line for line, _, _ in REPLAYED),
        *(line for line, _ in REPLAYED_TOPOLOGY),
        *WRITTEN_HERE,
        *IN_V1_SUITE,
        *COPIES_OF_V1_SUITE,
        *NOT_PORTED_ITS,
        *in_contexts,
    ]
    assert sorted(places) == sorted(SUITE_IT_LINES), "an It is missing or accounted for twice"
    assert len(SUITE_IT_LINES) == 182
    assert len(in_contexts) == sum(its for _, _, its, _, _ in NOT_PORTED)
    for _, name, index in REPLAYED:
        assert index < len(v1_replay.parametrized_arguments(_test(name))), name
    for _, name in REPLAYED_TOPOLOGY:
        assert callable(getattr(v0_31_topology, name))


@pytest.fixture()
def on_v1_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    v1_replay.on_v1_rules(monkeypatch, v0_31_suite)


def _replays() -> list[Any]:
    """Each replay under each packing strategy its v0.31 test holds under (`KARPENTER_ONLY`: Karpenter's alone)."""
    cases = []
    for line, name, index in REPLAYED:
        for strategy in v1_replay.strategies_of(_test(name)) or (KARPENTER, COST):
            cases.append(pytest.param(line, name, index, strategy, id=f"L{line}-{strategy}"))
    return cases


@pytest.mark.parametrize(("line", "name", "index", "strategy"), _replays())
def test_v1_scheduling_replay(line: int, name: str, index: int, strategy: str, on_v1_rules: None) -> None:
    """suite_test.go (v1.14.1), the `It` at `line`, as the v0.31 suite's test asserts it."""
    arguments = v1_replay.parametrized_arguments(_test(name))[index]
    v1_replay.replay(v0_31_suite, name, *arguments, strategy=strategy, where=f"{GO_FILE}:{line}")


# --- It's new in v1.14.1 ----------------------------------------------------------------------------------------------


def test_l2593_pods_with_the_same_host_port_go_to_different_nodes(strategy: str) -> None:
    """suite_test.go:2593 "should schedule pods with the same host port to different nodes"."""
    world = v1_cluster(strategy)
    first, second = make_pods(2, host_ports=[8080])
    world.provision(first, second)
    assert world.scheduled(first).name != world.scheduled(second).name, f"{GO_FILE}:2593"


#: (line, the NodePool's requirements, the pods' options): NodePool requirements that leave no instance type.
FILTERED: list[tuple[int, list[dict[str, Any]], list[dict[str, Any]]]] = [
    (5197, [requirement(wk.INSTANCE_TYPE, "In", "non-existent-instance-type")], [{"cpu": "32", "memory": "256Gi"}]),
    (5242, [requirement(wk.ARCH, "In", "non-existent-arch")], [{"cpu": "1"}] * 3),
    (5273, [requirement(wk.ARCH, "In", "amd64"), requirement(wk.ARCH, "In", "arm64")], [{"cpu": "1"}]),
    (5302, [requirement(wk.ZONE, "In", "non-existent-zone-1", "non-existent-zone-2")], [{"cpu": "1"}]),
]


@pytest.mark.parametrize(("line", "name"), REPLAYED_TOPOLOGY, ids=[f"L{c[0]}" for c in REPLAYED_TOPOLOGY])
def test_v1_in_flight_topology_replay(line: int, name: str, strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """suite_test.go (v1.14.1), In-Flight Nodes / Topology: the `It` at `line`, as the v0.31 topology suite asserts
    it."""
    v1_replay.on_v1_rules(monkeypatch, v0_31_topology)
    v1_replay.replay(v0_31_topology, name, strategy=strategy, where=f"{GO_FILE}:{line}")


@pytest.mark.parametrize(("line", "terms", "pods"), FILTERED, ids=[f"L{c[0]}" for c in FILTERED])
def test_nodepool_requirements_filtering_out_every_instance_type(
    line: int, terms: list[dict[str, Any]], pods: list[dict[str, Any]], strategy: str
) -> None:
    """suite_test.go, "NodePool requirements instance filtering": a NodePool whose requirements admit no instance
    type schedules none of the pods, and each pod's failure says so for that NodePool (kind `unavailable`). Line
    5197 first schedules a pod while the NodePool is unconstrained."""
    world = v1_cluster(strategy)
    if line == 5197:
        normal = make_pod()
        world.provision(normal)
        world.scheduled(normal)
    world.templates = [v1_nodepool("default", requirement(wk.CAPACITY_TYPE, "Exists"), *terms)]
    pending = [make_pod(**options) for options in pods]
    plan = world.provision(*pending)
    for pod in pending:
        world.not_scheduled(pod)
        refusal = plan.failures[pod.key].reasons["default"]
        assert refusal.kind == "unavailable", f"{GO_FILE}:{line}: {refusal}"


@pytest.mark.parametrize("line", sorted(NOT_PORTED_ITS), ids=lambda line: f"L{line}")
def test_not_ported_it(line: int) -> None:
    """The single `It`s the model cannot express, reported as skips with their reason."""
    pytest.skip(f"{GO_FILE}:{line}: {NOT_PORTED_ITS[line]}")


@pytest.mark.parametrize("context", sorted(NOT_PORTED), ids=lambda c: f"L{c[0]}-L{c[1]}")
def test_not_ported(context: tuple[int, int, int, int, str]) -> None:
    """The contexts the model cannot express, reported as skips with their reason and size."""
    first, last, its, entries, name = context
    pytest.skip(f"{GO_FILE}:{first}-{last} {name} ({its} It, {entries} entries): {NOT_PORTED[context]}")
