"""The first-fit index over existing nodes (`scheduling/firstfit.py`): the same node as the plain scan, always.

Karpenter offers a pod to the existing nodes in their order and takes the first that accepts it. The index skips
nodes whose free cpu, memory or pod slots cannot hold the pod; these properties check that placements are
identical to asking every node in turn — on the index alone, and on whole scheduling runs (both strategies) with
zones, taints, host ports and zone spreads in play — and that a cluster of full nodes is not asked node by node.
"""

from __future__ import annotations

from collections.abc import Iterator
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.model.taints import NO_SCHEDULE, Taint
from karpenter_policy.scheduling import KARPENTER, STRATEGIES, ExistingNode, Pod, Scheduler, SchedulerOptions
from karpenter_policy.scheduling import nodes as nodes_module
from karpenter_policy.scheduling.firstfit import FirstFit
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, RESOURCES, Vector, add, fits

from .cluster import FAKE_TABLE, ZONE, make_pod, spread
from .support import ZONES, template

PROPERTIES = deterministic(200)
GIB = 2**30


def vector(cpu: int, memory: int, pods: int) -> Vector:
    values = [0] * len(RESOURCES)
    values[CPU_I], values[MEMORY_I], values[PODS_I] = cpu, memory, pods
    return tuple(values)


def plain_first_fit(capacities: list[tuple[Vector, Vector]], requests: Vector) -> int | None:
    for position, (allocatable, requested) in enumerate(capacities):
        if fits(add(requested, requests), allocatable):
            return position
    return None


# small ranges, so that a request equal to a node's free capacity (the edge an index can get wrong) is common
amounts = st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 3))
node_capacity = st.tuples(amounts, amounts).map(lambda pair: (vector(*pair[0]), vector(*pair[1])))


@PROPERTIES
@given(nodes=st.lists(node_capacity, max_size=40), pods=st.lists(amounts, max_size=60))
def test_the_index_finds_the_first_node_with_room_as_a_plain_scan_does(
    nodes: list[tuple[Vector, Vector]], pods: list[tuple[int, int, int]]
) -> None:
    index = FirstFit(nodes)
    capacities = list(nodes)
    for cpu, memory, slots in pods:
        requests = vector(cpu, memory, slots)
        expected = plain_first_fit(capacities, requests)
        found = next((p for p in index.candidates(requests) if fits(add(capacities[p][1], requests),
                                                                    capacities[p][0])), None)
        assert found == expected
        if found is not None:
            allocatable, requested = capacities[found]
            capacities[found] = (allocatable, add(requested, requests))
            index.update(found, allocatable, capacities[found][1])


def existing_node(index: int, cpu: int, memory_gib: int, used_cpu: int, used_gib: int, tainted: bool) -> ExistingNode:
    return ExistingNode(
        name=f"node-{index:03d}",
        labels={ZONE: ZONES[index % len(ZONES)], wk.ARCH: "amd64", wk.OS: "linux", wk.CAPACITY_TYPE: "on-demand"},
        taints=(Taint("dedicated", "batch", NO_SCHEDULE),) if tainted else (),
        allocatable=vector(cpu, memory_gib * GIB, 110),
        requested=vector(used_cpu, used_gib * GIB, 3),
        initialized=index % 7 != 0,
    )


@st.composite
def scenes(draw: st.DrawFn) -> tuple[list[ExistingNode], list[Pod]]:
    nodes = [
        existing_node(i, draw(st.sampled_from((2000, 4000, 8000))), draw(st.sampled_from((4, 8, 16))),
                      draw(st.integers(0, 8000)), draw(st.integers(0, 16)), draw(st.integers(0, 5)) == 0)
        for i in range(draw(st.integers(0, 30)))
    ]
    pods = []
    for app in range(draw(st.integers(1, 4))):
        labels = {"app": f"app-{app}"}
        options: dict[str, object] = {}
        if draw(st.booleans()):
            options["node_selector"] = {ZONE: draw(st.sampled_from(ZONES))}
        if draw(st.integers(0, 3)) == 0:
            options["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if draw(st.integers(0, 3)) == 0:
            options["spread_constraints"] = [spread(ZONE, labels=labels)]
        if draw(st.integers(0, 5)) == 0:
            options["host_ports"] = [8080]
        cpu = draw(st.sampled_from(("100m", "350m", "1", "3")))
        memory = draw(st.sampled_from(("128Mi", "1Gi", "3Gi")))
        pods += [make_pod(cpu, memory, labels, **options) for _ in range(draw(st.integers(1, 25)))]
    return nodes, pods


def every_node(self: FirstFit, requests: Vector) -> Iterator[int]:
    """The plain scan: every node, in order."""
    return iter(range(self.size))


@PROPERTIES
@given(scene=scenes(), strategy=st.sampled_from(STRATEGIES))
def test_a_scheduling_run_places_pods_on_the_same_existing_nodes_as_the_plain_scan(
    scene: tuple[list[ExistingNode], list[Pod]], strategy: str
) -> None:
    nodes, pods = scene
    templates = [template(FAKE_TABLE, "default")]

    def run() -> dict[str, list[str]]:
        plan = Scheduler(templates, nodes, options=SchedulerOptions(strategy)).solve(pods)
        return {node: [p.key for p in placed] for node, placed in plan.existing.items()}

    indexed = run()
    with mock.patch.object(FirstFit, "candidates", every_node):
        scanned = run()
    assert indexed == scanned


def test_a_cluster_of_full_nodes_is_not_asked_node_by_node() -> None:
    """300 full nodes, 200 pods that fit on none: no node is asked (a plain scan asked 60,000 times)."""
    nodes = [existing_node(i, 8000, 32, 7900, 31, False) for i in range(300)]
    pods = [make_pod("1", "1Gi", {"app": "web"}) for _ in range(200)]
    asked = 0
    original = nodes_module.ExistingNode.try_add

    def counted(self: ExistingNode, *args: object) -> object:
        nonlocal asked
        asked += 1
        return original(self, *args)  # type: ignore[arg-type]

    with mock.patch.object(nodes_module.ExistingNode, "try_add", counted):
        plan = Scheduler([template(FAKE_TABLE, "default")], nodes, options=SchedulerOptions(KARPENTER)).solve(pods)
    assert not plan.existing and not plan.failures
    assert asked == 0
