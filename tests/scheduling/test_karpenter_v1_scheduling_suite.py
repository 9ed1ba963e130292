"""Karpenter v1.14.1's scheduling `suite_test.go`: its `It`s shared with v0.31 replayed on v1.14.1's rules, the ones
v1 adds that the model expresses, and the contexts it cannot express, each with its reason.

The reference is `pkg/controllers/provisioning/scheduling/suite_test.go` (kubernetes-sigs/karpenter v1.14.1; 187
`It`s and 29 table entries). `test_karpenter_v1_suite.py` ports the cases where v1 changed the semantics (`Gt`/`Lt`/
`Gte`/`Lte`, the narrower restricted labels, kubernetes.io labels on NodePools). Here:

* `REPLAYED`: an `It` that v0.31.1's `provisioner_test.go` has with the same pods and assertion is replayed from
  `test_karpenter_scheduling.py` with the cluster on v1.14.1's rules and its templates NodePools (`v1_replay.py`):
  (the line of the v1.14.1 `It`, the v0.31 test, which of its parametrized cases). The v0.31 tests whose cases mix
  `It`s that v1 changed (`CONSTRAINTS`, whose restricted-domain cases v1 inverts) are not replayed wholesale: the
  `It`s v1 changed are in `test_karpenter_v1_suite.py`.
* `test_l1694_...`, `test_l2593_...`, `test_l5197_...` ff.: `It`s new in v1.14.1.
* `NOT_PORTED`: whole contexts the model cannot express, with their line range, their count of `It`s and entries,
  and the reason (reported as skips).

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
from . import v1_replay
from .cluster import make_pod, make_pods, requirement
from .v1_replay import v1_cluster, v1_nodepool

GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go"

#: (the line of the v1.14.1 `It`, the v0.31 suite test replaying it, the index of its parametrized case).
REPLAYED: list[tuple[int, str, int]] = [
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
WRITTEN_HERE = (1694, 2593, 5197, 5242, 5273, 5302)

#: (first line, last line, `It`s, table entries, context) → why the model cannot express it.
NOT_PORTED: dict[tuple[int, int, int, int, str], str] = {
    (2891, 4059, 18, 8, "VolumeUsage"): "volumes: PersistentVolumes, StorageClasses, CSI attach limits and their "
    "zones are not in the model (a pod's shape has no volumes)",
    (4060, 4316, 5, 4, "Deleting Nodes"): "a deleting node's pods to re-schedule, PDBs and owners are cluster state "
    "the caller hands the scheduler as pods, not scheduling",
    (4317, 4675, 4, 13, "Metrics"): "Prometheus metrics of Karpenter's scheduling loop; the plan is what they count",
    (4676, 5195, 7, 0, "Reserved Instance Types"): "capacity reservations: the model has no reservation ids nor "
    "per-reservation counts to track (the ReservedCapacity feature gate's offerings)",
    (5328, 5522, 1, 4, "Dynamic Resource Allocation (DRA)"): "ResourceClaims and DeviceClasses are not in the model",
    (5523, 5745, 2, 0, "Offering Overrides"): "offerings' CapacityOverride of extended resources (the fake provider's "
    "test hook) is not in the catalog's model",
}


def _test(name: str) -> Callable[..., None]:
    found: Callable[..., None] = getattr(v0_31_suite, name)
    return found


def test_the_data_names_real_tests_and_distinct_lines() -> None:
    """Every replay names a v0.31 test and an existing parametrized case; no line is ported twice, and none falls in
    a context listed as not ported."""
    lines = [line for line, _, _ in REPLAYED] + list(WRITTEN_HERE)
    assert len(lines) == len(set(lines))
    for _, name, index in REPLAYED:
        assert index < len(v1_replay.parametrized_arguments(_test(name))), name
    for first, last, *_ in NOT_PORTED:
        assert not [line for line in lines if first <= line <= last]


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


def test_l1694_pod_slots_per_node_open_new_nodes(strategy: str) -> None:
    """suite_test.go:1694 "should create new nodes when a node is at capacity due to pod limits per node": 25 tiny
    amd64 pods, every fake type holding 5 pods: five nodes of the smallest type."""
    world = v1_cluster(strategy)
    pods = make_pods(25, cpu="1m", memory="1m", node_selector={wk.ARCH: "amd64"})
    world.provision(*pods)
    nodes = {world.scheduled(pod).name for pod in pods}
    assert len(nodes) == 5, f"{GO_FILE}:1694"
    assert {world.scheduled(pod).instance_type for pod in pods} == {"small-instance-type"}, f"{GO_FILE}:1694"


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


@pytest.mark.parametrize("context", sorted(NOT_PORTED), ids=lambda c: f"L{c[0]}-L{c[1]}")
def test_not_ported(context: tuple[int, int, int, int, str]) -> None:
    """The contexts the model cannot express, reported as skips with their reason and size."""
    first, last, its, entries, name = context
    pytest.skip(f"{GO_FILE}:{first}-{last} {name} ({its} It, {entries} entries): {NOT_PORTED[context]}")
