"""The scenarios Karpenter's expiration and drift tests share (machine_expiration_test.go and machine_drift_test.go
mirror each other): each takes a way to add a node that is to be disrupted — expired or drifted — and the method
that disrupts it, and asserts what Karpenter's test asserts."""

from __future__ import annotations

from collections.abc import Callable

from karpenter_policy.testing import Scene

from .support import MOST_EXPENSIVE, blocked, decided, deleting, gone, replacements, run

#: Adds a node the method disrupts (`scene`, instance type, further `add_node` options): its name.
AddNode = Callable[..., str]


def continues_past_a_node_whose_pods_cannot_move(scene: Scene, add: AddNode, method: str) -> None:
    """`should continue to the next … node if the first cannot reschedule all pods`: the first node's pod can only
    run there (a label no other node has); the second, disrupted later in order, is replaced."""
    first = add(scene, MOST_EXPENSIVE, labels={"only": "here"}, first=True)
    scene.add_pod("stuck", node=first, cpu="31", nodeSelector={"only": "here"})
    second = add(scene, "m5.large")
    scene.add_pod("movable", node=second, cpu="1")
    controller = scene.controller()
    results = run(scene, controller, 120, until=lambda _: gone(scene, second))
    assert first in scene.nodes() and not deleting(scene)
    assert len(scene.nodes()) == 2 and len(replacements(results)) == 1
    assert f"{method}: pod default/stuck would not schedule" in blocked(results)[first]


def deletes_an_empty_node(scene: Scene, add: AddNode, method: str) -> None:
    """`can delete … nodes`."""
    node = add(scene, MOST_EXPENSIVE)
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: gone(scene, node))
    assert not scene.nodes() and not replacements(results)
    assert decided(results)[0].startswith(f"deprovisioning via {method} delete, terminating 1 machines")


def deletes_every_empty_node_in_one_command(scene: Scene, add: AddNode, method: str, count: int = 100) -> None:
    """`should deprovision all empty … nodes in parallel`."""
    names = [add(scene, MOST_EXPENSIVE) for _ in range(count)]
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: not scene.nodes())
    assert not scene.nodes()
    (command,) = decided(results)
    assert command.startswith(f"deprovisioning via {method} delete, terminating {count} machines")
    assert all(name in command for name in names)


def replaces_a_node(scene: Scene, add: AddNode, method: str) -> str:
    """`can replace … node(s)`: the replacement's name."""
    node = add(scene, MOST_EXPENSIVE)
    scene.add_pod("test-0", node=node, labels={"app": "test"})
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: gone(scene, node))
    (new,) = scene.nodes()
    assert new != node and replacements(results) == [new]
    assert decided(results)[0].startswith(f"deprovisioning via {method} replace")
    return new


def replaces_a_node_by_three(scene: Scene, node: str, method: str) -> str:
    """`can replace … with multiple nodes`: `node`, an m5.2xlarge whose provisioner now launches only m5.large,
    runs three 1.5-vCPU pods that need three of them. The command's message."""
    scene.add_pods("test", 3, node=node, cpu="1500m", labels={"app": "test"})
    controller = scene.controller()
    results = run(scene, controller, 60, until=lambda _: gone(scene, node))
    assert len(replacements(results)) == 3 and len(scene.nodes()) == 3
    assert decided(results)[0].startswith(f"deprovisioning via {method} replace")
    return decided(results)[0]


__all__ = [
    "AddNode",
    "continues_past_a_node_whose_pods_cannot_move",
    "deletes_an_empty_node",
    "deletes_every_empty_node_in_one_command",
    "replaces_a_node",
    "replaces_a_node_by_three",
]
