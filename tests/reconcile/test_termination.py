"""Termination through the `karpenter.sh/termination` finalizer (cordon, evictions that respect
PodDisruptionBudgets and `karpenter.sh/do-not-evict`, then the instance, then the finalizer) and emptiness
(`ttlSecondsAfterEmpty`), on the in-memory cluster and cloud with a fake clock."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from karpenter_policy.cloud.provider import STATE_TERMINATED
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.disruption.emptiness import EMPTINESS_TIMESTAMP
from karpenter_policy.reconcile.state import nodes as node_info

from .lifecycle import World
from .support import create_all, inflate


@pytest.fixture()
def world(compiled: Path, log: io.StringIO) -> World:
    return World(compiled, types=["m5.xlarge", "m5.2xlarge"])


def launched(world: World, pods: int) -> tuple[Controller, dict[str, object]]:
    """`pods` inflate pods provisioned onto one node of the spot `default` provisioner, Running and initialized."""
    controller = world.controller(batch_max=5.0)
    create_all(world.cluster, objects.POD, inflate(0, pods))
    for _ in range(30):
        controller.reconcile_once()
        world.kubelet.sync()
        if not world.unbound():
            break
        world.clock.advance(1)
    world.clock.advance(60)  # Ready, startup taints gone
    world.kubelet.sync()
    controller.reconcile_once()
    (node,) = world.cluster.list(objects.NODE).items
    return controller, node


def instance_state(world: World, node: dict[str, object]) -> str | None:
    instance = world.inner.get(node_info.instance_id(node))
    return None if instance is None else instance.state


def pods_on(world: World, name: str) -> list[str]:
    return sorted(objects.name(p) for p in world.cluster.list(objects.POD).items if p["spec"].get("nodeName") == name)


def test_a_deleted_node_is_cordoned_drained_terminated_and_released(world: World, log: io.StringIO) -> None:
    controller, node = launched(world, 3)
    name = objects.name(node)
    world.cluster.delete(objects.NODE, name)  # kubectl delete node: the finalizer holds it
    first = controller.reconcile_once()
    assert first.terminated is not None and first.terminated.cordoned == [name]
    assert sorted(first.terminated.evicted) == ["default/inflate-0", "default/inflate-1", "default/inflate-2"]
    assert world.cluster.get(objects.NODE, name) is not None, "held until drained"
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is None
    assert instance_state(world, node) in (None, STATE_TERMINATED)
    text = log.getvalue()
    assert "Cordoned node" in text and "Deleted node" in text


def test_a_disruption_budget_blocks_the_drain_until_it_allows(world: World) -> None:
    controller, node = launched(world, 3)
    name = objects.name(node)
    world.cluster.create(objects.POD_DISRUPTION_BUDGET, {
        "metadata": {"name": "inflate", "namespace": "default"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "inflate"}}},
    })
    world.cluster.delete(objects.NODE, name)
    for _ in range(3):
        result = controller.reconcile_once()
        world.clock.advance(10)
    assert result.terminated is not None and result.terminated.evicted == []
    assert set(result.terminated.blocked) == {"default/inflate-0", "default/inflate-1", "default/inflate-2"}
    assert pods_on(world, name) == ["inflate-0", "inflate-1", "inflate-2"]
    assert instance_state(world, node) not in (None, STATE_TERMINATED), "nothing terminated under the budget"

    world.cluster.delete(objects.POD_DISRUPTION_BUDGET, "inflate", "default")
    controller.reconcile_once()
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is None


def test_a_do_not_evict_pod_holds_its_node_until_it_finishes(world: World) -> None:
    controller, node = launched(world, 2)
    name = objects.name(node)
    world.cluster.patch(objects.POD, "inflate-0", {"metadata": {"annotations": {"karpenter.sh/do-not-evict": "true"}}},
                        "default")
    world.cluster.delete(objects.NODE, name)
    for _ in range(3):
        result = controller.reconcile_once()
    assert result.terminated is not None and "default/inflate-0" in result.terminated.blocked
    assert pods_on(world, name) == ["inflate-0"], "the other pod was evicted, this one never"
    assert world.cluster.get(objects.NODE, name) is not None

    world.cluster.delete(objects.POD, "inflate-0", "default")  # it finished
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is None


def test_an_empty_node_is_deleted_after_its_ttl(world: World, log: io.StringIO) -> None:
    controller, node = launched(world, 2)  # the `default` provisioner: ttlSecondsAfterEmpty 30
    name = objects.name(node)
    controller.reconcile_once()
    assert EMPTINESS_TIMESTAMP not in objects.annotations(world.cluster.get(objects.NODE, name) or {})
    for pod in ("inflate-0", "inflate-1"):
        world.cluster.delete(objects.POD, pod, "default")  # scaled to 0
    marked = controller.reconcile_once()
    assert marked.emptied is not None and marked.emptied.marked == [name]
    assert marked.due is not None and marked.due <= world.clock.now + 30  # the runner wakes for it
    world.clock.advance(29)
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is not None, "not before the TTL"
    world.clock.advance(2)
    deleted = controller.reconcile_once()
    assert deleted.emptied is not None and deleted.emptied.deleted == [name]
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is None
    assert instance_state(world, node) in (None, STATE_TERMINATED)
    text = log.getvalue()
    assert text.index("Added TTL to empty node") < text.index("Triggering termination after 30s for empty node")
    assert text.index("Triggering termination") < text.index("Cordoned node") < text.index("Deleted node")


def test_a_node_that_gets_a_pod_again_loses_its_ttl(world: World) -> None:
    controller, node = launched(world, 1)
    name = objects.name(node)
    world.cluster.delete(objects.POD, "inflate-0", "default")
    controller.reconcile_once()
    assert EMPTINESS_TIMESTAMP in objects.annotations(world.cluster.get(objects.NODE, name) or {})
    create_all(world.cluster, objects.POD, inflate(5, 1))
    for _ in range(15):
        controller.reconcile_once()
        world.kubelet.sync()
        world.clock.advance(1)
    assert pods_on(world, name) == ["inflate-5"], "the new pod went to the existing node"
    assert EMPTINESS_TIMESTAMP not in objects.annotations(world.cluster.get(objects.NODE, name) or {})
    world.clock.advance(120)
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is not None
