"""Ports of `Describe("Machine/Drift")`, pkg/controllers/deprovisioning/machine_drift_test.go of
kubernetes-sigs/karpenter at v0.31.1 (see support.py). A Machine marked Drifted becomes a node this controller finds
drifted: stamped with a node hash its provisioner no longer has (`add_node(drifted=True)`: the provisioner's labels,
taints, kubelet or node template changed since it was launched), or of an instance type its provisioner no longer
admits. `It("should ignore drifted nodes if the feature flag is disabled")` (machine_drift_test.go:66) is not
ported: drift has no feature gate here (docs/reconcile.md)."""

from __future__ import annotations

from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import Scene

from . import scenarios
from .support import (
    M5,
    MOST_EXPENSIVE,
    ONLY_LARGE,
    Policies,
    blocked,
    decided,
    deleting,
    gone,
    provisioner,
    run,
)

APP = {"app": "test"}


def drifting(policies: Policies, requirements: str = "") -> Scene:
    return Scene(policies(provisioner(requirements=requirements)), types=M5)


def drifted(scene: Scene, instance_type: str, first: bool = False, **options: Any) -> str:
    """A drifted node (`first`: created a minute before the others, so it is tried first)."""
    return scene.add_node("default", instance_type, drifted=True, age=60 if first else 0, **options)


def test_should_continue_to_the_next_drifted_node_if_the_first_cannot_reschedule_all_pods(policies: Policies) -> None:
    """should continue to the next drifted node if the first cannot reschedule all pods — machine_drift_test.go:84."""
    scenarios.continues_past_a_node_whose_pods_cannot_move(drifting(policies), drifted, "drift")


def test_should_ignore_nodes_without_the_drifted_status_condition(policies: Policies) -> None:
    """should ignore nodes without the drifted status condition — machine_drift_test.go:143. A node whose node hash
    is its provisioner's, of a type it admits, has not drifted."""
    scene = drifting(policies)
    node = scene.add_node("default", MOST_EXPENSIVE)
    controller = scene.controller()
    results = run(scene, controller, 600)
    assert list(scene.nodes()) == [node] and not decided(results)


def test_should_ignore_nodes_with_the_drifted_status_condition_set_to_false(policies: Policies) -> None:
    """should ignore nodes with the drifted status condition set to false — machine_drift_test.go:158. Drift is
    evaluated again after a policy change and found false: the provisioner's weight changed, nothing its nodes
    are made of."""
    before = policies(provisioner())
    after = policies(provisioner(weight=50))
    scene = Scene(before, types=M5)
    node = scene.add_node("default", MOST_EXPENSIVE)
    controller = scene.controller()
    controller.constraints = DirectorySource(after)
    results = run(scene, controller, 600)
    assert results[0].loaded is not None, "the new version was taken"
    assert list(scene.nodes()) == [node] and not decided(results)


def test_can_delete_drifted_nodes(policies: Policies) -> None:
    """can delete drifted nodes — machine_drift_test.go:173."""
    scenarios.deletes_an_empty_node(drifting(policies), drifted, "drift")


def test_should_deprovision_all_empty_drifted_nodes_in_parallel(policies: Policies) -> None:
    """should deprovision all empty drifted nodes in parallel — machine_drift_test.go:194."""
    scenarios.deletes_every_empty_node_in_one_command(drifting(policies), drifted, "drift")


def test_can_replace_drifted_nodes(policies: Policies) -> None:
    """can replace drifted nodes — machine_drift_test.go:235."""
    scene = drifting(policies)
    new = scenarios.replaces_a_node(scene, drifted, "drift")
    found = scene.node(new)
    assert found is not None and objects.annotations(found)[node_info.ANNOTATION_NODE_HASH] != "drifted"


def test_can_replace_drifted_nodes_with_multiple_nodes(policies: Policies) -> None:
    """can replace drifted nodes with multiple nodes — machine_drift_test.go:287. The provisioner now admits only
    m5.large: the m5.2xlarge has drifted."""
    scene = drifting(policies, requirements=ONLY_LARGE)
    command = scenarios.replaces_a_node_by_three(scene, scene.add_node("default", "m5.2xlarge"), "drift")
    assert "(instance type m5.2xlarge is no longer admitted by provisioner default)" in command


def test_should_drift_one_non_empty_node_at_a_time_starting_with_the_earliest_drift(policies: Policies) -> None:
    """should drift one non-empty node at a time, starting with the earliest drift — machine_drift_test.go:382.
    The second node drifted an hour before the first (while a do-not-evict pod kept it); the first is older and
    first by name: only the time each was first seen drifted puts the second first."""
    scene = drifting(policies)
    node = scene.add_node("default", MOST_EXPENSIVE, age=60)
    node2 = scene.add_node("default", MOST_EXPENSIVE, drifted=True)
    scene.add_pod("a", node=node, cpu="30", labels=APP)
    scene.add_pod("b", node=node2, cpu="30", labels=APP, annotations={"karpenter.sh/do-not-evict": "true"})
    controller = scene.controller()
    results = run(scene, controller, 30)
    assert "do-not-evict" in blocked(results)[node2] and not decided(results)
    scene.advance(3600)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"annotations": {node_info.ANNOTATION_NODE_HASH: "drifted"}}})
    scene.cluster.patch(objects.POD, "b", {"metadata": {"annotations": {"karpenter.sh/do-not-evict": None}}},
                        "default")
    results = run(scene, controller, 120, until=lambda _: gone(scene, node2))
    (command,) = decided(results)
    assert f"terminating 1 machines {node2}/" in command
    assert node in scene.nodes() and not deleting(scene)
