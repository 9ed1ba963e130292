"""Ports of `Describe("Machine/Emptiness")`, pkg/controllers/deprovisioning/machine_emptiness_test.go of
kubernetes-sigs/karpenter at v0.31.1 (see support.py). A Machine's Empty condition is, here, the
`karpenter.sh/emptiness-timestamp` annotation the emptiness controller stamps on an empty initialized node of a
provisioner with `ttlSecondsAfterEmpty`; consolidation finds empty nodes itself."""

from __future__ import annotations

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import Scene

from .support import M5, MOST_EXPENSIVE, Policies, blocked, decided, deleting, gone, provisioner, run

#: The cheapest type with 64 vCPU of the scene (Karpenter's `largeCheapType`).
LARGE = "m5.16xlarge"


def test_can_delete_empty_nodes_with_ttl_seconds_after_empty(policies: Policies) -> None:
    """TTLSecondsAfterEmpty > can delete empty nodes with TTLSecondsAfterEmpty — machine_emptiness_test.go:68."""
    scene = Scene(policies(provisioner(ttl_after_empty=30)), types=M5)
    node = scene.add_node("default", MOST_EXPENSIVE)
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, node))
    assert not scene.nodes()
    assert any(node in r.emptied.deleted for r in results if r.emptied is not None)


def test_should_ignore_ttl_seconds_after_empty_nodes_without_the_empty_status_condition(policies: Policies) -> None:
    """TTLSecondsAfterEmpty > should ignore TTLSecondsAfterEmpty nodes without the empty status condition —
    machine_emptiness_test.go:87. An empty node is first stamped empty; it is not deleted before its TTL has run
    since."""
    scene = Scene(policies(provisioner(ttl_after_empty=30)), types=M5)
    node = scene.add_node("default", MOST_EXPENSIVE, age=3600)
    controller = scene.controller()
    run(scene, controller, 29)
    found = scene.node(node)
    assert found is not None and not objects.is_deleting(found)
    assert wk.EMPTINESS_TIMESTAMP in objects.annotations(found), "stamped empty, not deleted yet"
    run(scene, controller, 5, until=lambda _: gone(scene, node))
    assert gone(scene, node)


def test_should_ignore_ttl_seconds_after_empty_nodes_with_the_empty_status_condition_set_to_false(
    policies: Policies,
) -> None:
    """TTLSecondsAfterEmpty > should ignore TTLSecondsAfterEmpty nodes with the empty status condition set to false —
    machine_emptiness_test.go:101. A node with a pod is not empty."""
    scene = Scene(policies(provisioner(ttl_after_empty=30)), types=M5)
    node = scene.add_node("default", MOST_EXPENSIVE)
    scene.add_pod("test-0", node=node)
    controller = scene.controller()
    run(scene, controller, 600)
    found = scene.node(node)
    assert found is not None and not objects.is_deleting(found)
    assert wk.EMPTINESS_TIMESTAMP not in objects.annotations(found)


def test_can_delete_empty_nodes_with_consolidation(policies: Policies) -> None:
    """Consolidation > can delete empty nodes with consolidation — machine_emptiness_test.go:161."""
    scene = Scene(policies(provisioner(consolidation=True)), types=M5)
    node = scene.add_node("default", MOST_EXPENSIVE)
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: gone(scene, node))
    assert not scene.nodes()
    assert decided(results)[0].startswith("deprovisioning via consolidation delete, terminating 1 machines")


def test_can_delete_multiple_empty_nodes_with_consolidation(policies: Policies) -> None:
    """Consolidation > can delete multiple empty nodes with consolidation — machine_emptiness_test.go:182."""
    scene = Scene(policies(provisioner(consolidation=True)), types=M5)
    node1 = scene.add_node("default", MOST_EXPENSIVE)
    node2 = scene.add_node("default", MOST_EXPENSIVE)
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: gone(scene, node1, node2))
    assert not scene.nodes()
    (command,) = decided(results)
    assert "terminating 2 machines" in command and "(empty)" in command


def test_considers_pending_pods_when_consolidating(policies: Policies) -> None:
    """Consolidation > considers pending pods when consolidating — machine_emptiness_test.go:202. With
    kube-scheduler (pods provisioned only once it marks them Unschedulable), a 62-vCPU pending pod is planned
    onto the large node, which is then nominated for it: the node is not replaced by a smaller one."""
    scene = Scene(policies(provisioner(consolidation=True)), types=[*M5, LARGE])
    node = scene.add_node("default", LARGE)
    scene.add_pod("small", node=node, cpu="1")
    scene.add_pod("large", cpu="62", unschedulable=True)
    controller = scene.controller(unschedulable_only=True, bind_existing=False)
    results = run(scene, controller, 120)
    assert list(scene.nodes()) == [node] and not deleting(scene) and not decided(results)
    assert blocked(results)[node] == "nominated for a pending pod"
    assert len(scene.instances()) == 1
