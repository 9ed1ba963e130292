"""Termination through the `karpenter.sh/termination` finalizer (cordon, evictions that respect
PodDisruptionBudgets, then the instance, then the finalizer) as Karpenter v0.31.1 terminates a node, and emptiness
(`ttlSecondsAfterEmpty`), on the in-memory cluster and cloud with a virtual clock. Karpenter's own termination
suite is ported in tests/reconcile/karpenter/test_termination_suite.py; these are what it does not show: timings
(a vanished instance, a stuck pod), critical pods behind a budget, `karpenter.sh/do-not-evict` on a deletion a
user asked for, the eviction backoff, DaemonSets' pods, the threaded runner."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from karpenter_policy.cloud.provider import STATE_TERMINATED
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.termination.eviction import RETRY_MAX_SECONDS
from karpenter_policy.testing import EPOCH, Scene, VirtualClock

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


def test_a_do_not_evict_pod_does_not_stop_a_deletion_a_user_asked_for(world: World) -> None:
    """Karpenter v0.31's termination does not look at `karpenter.sh/do-not-evict` (it only keeps a node from being
    chosen for disruption): `kubectl delete node` evicts such a pod like any other."""
    controller, node = launched(world, 2)
    name = objects.name(node)
    world.cluster.patch(objects.POD, "inflate-0", {"metadata": {"annotations": {"karpenter.sh/do-not-evict": "true"}}},
                        "default")
    world.cluster.delete(objects.NODE, name)
    result = controller.reconcile_once()
    assert result.terminated is not None
    assert sorted(result.terminated.evicted) == ["default/inflate-0", "default/inflate-1"]
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is None


def test_an_empty_node_is_deleted_after_its_ttl(world: World, log: io.StringIO) -> None:
    controller, node = launched(world, 2)  # the `default` provisioner: ttlSecondsAfterEmpty 30
    name = objects.name(node)
    controller.reconcile_once()
    assert wk.EMPTINESS_TIMESTAMP not in objects.annotations(world.cluster.get(objects.NODE, name) or {})
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
    assert wk.EMPTINESS_TIMESTAMP in objects.annotations(world.cluster.get(objects.NODE, name) or {})
    create_all(world.cluster, objects.POD, inflate(5, 1))
    for _ in range(15):
        controller.reconcile_once()
        world.kubelet.sync()
        world.clock.advance(1)
    assert pods_on(world, name) == ["inflate-5"], "the new pod went to the existing node"
    assert wk.EMPTINESS_TIMESTAMP not in objects.annotations(world.cluster.get(objects.NODE, name) or {})
    world.clock.advance(120)
    controller.reconcile_once()
    assert world.cluster.get(objects.NODE, name) is not None


# --- Karpenter v0.31.1's termination, beyond its suite ---------------------------------------------------------


@pytest.fixture()
def scene(compiled: Path) -> Scene:
    return Scene(compiled, types=["m5.large", "m5.xlarge"])


def evicting(scene: Scene, pod: str) -> bool:
    found = scene.cluster.get(objects.POD, pod, "default")
    return found is not None and objects.is_deleting(found)


def test_critical_pods_stay_while_a_budget_holds_another_pod(scene: Scene) -> None:
    """Non-critical pods go first: a system-cluster-critical pod (a CoreDNS) stays as long as a budget keeps an
    ordinary pod from being evicted, and goes once it has been."""
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("web", node=node, labels={"app": "web"})
    scene.add_pod("dns", node=node, priority_class="system-cluster-critical")
    scene.add_pdb("web", {"app": "web"}, min_available=1)
    controller = scene.controller()
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 60)
    assert scene.pods_on(node) == ["dns", "web"], "the budget holds web, so dns is not evicted either"
    scene.cluster.delete(objects.POD_DISRUPTION_BUDGET, "web", "default")
    after = scene.run(controller, 15, until=lambda: scene.node(node) is None)
    evicted = [r.terminated.evicted for r in after if r.terminated is not None and r.terminated.evicted]
    assert evicted == [["default/web"], ["default/dns"]], "web first, then the critical pod"
    assert scene.node(node) is None


def test_a_node_whose_instance_vanished_is_released_within_a_second(scene: Scene) -> None:
    """A spot reclaim (or a termination from the console) while the drain waits on a budget: the finalizer goes at
    the next requeue, not at garbage collection's next interval (2 minutes)."""
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("web", node=node, labels={"app": "web"})
    scene.add_pdb("web", {"app": "web"}, min_available=1)
    controller = scene.controller()
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 5, every=0.1)
    assert scene.node(node) is not None, "the budget holds the drain"
    scene.cloud.delete(node_info.instance_id(scene.node(node) or {}))
    vanished = scene.clock.now
    results = scene.run(controller, 150, every=0.1, until=lambda: scene.node(node) is None)
    assert scene.node(node) is None
    assert scene.clock.now - vanished <= 1.1
    assert any(r.terminated is not None and r.terminated.deleted == [node] for r in results), "termination did it"
    assert all(r.garbage is None or not r.garbage.deleted for r in results)


def test_a_pod_stuck_terminating_holds_its_node_a_minute_at_most(scene: Scene) -> None:
    """A pod whose kubelet no longer answers stays terminating for ever; the node is released (its instance
    terminated) a minute after the pod was evicted, not left draining."""
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("stuck", node=node, lingers=True)  # never finished
    controller = scene.controller()
    scene.cluster.delete(objects.NODE, node)
    scene.step(controller)
    assert evicting(scene, "stuck")
    evicted = scene.clock.now
    scene.run(controller, 300, until=lambda: scene.node(node) is None)
    assert scene.node(node) is None and scene.instances() == []
    assert 60 < scene.clock.now - evicted <= 62


def test_a_refused_eviction_is_retried_with_backoff_up_to_ten_seconds(compiled: Path) -> None:
    """A budget that blocks a drain costs one eviction call per pod every 10 s at most once the backoff has grown
    (100 ms, doubling), and the pod goes within 10 s of the budget allowing it."""
    clock = VirtualClock(EPOCH)
    calls: list[float] = []

    class Counting(MemoryCluster):
        def evict(self, namespace: str, pod_name: str) -> None:
            calls.append(clock.now)
            super().evict(namespace, pod_name)

    scene = Scene(compiled, types=["m5.xlarge"], clock=clock, cluster=Counting(clock=clock.wall))
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("web", node=node, labels={"app": "web"})
    scene.add_pdb("web", {"app": "web"}, min_available=1)
    controller = scene.controller()
    scene.cluster.delete(objects.NODE, node)
    start = clock.now
    scene.run(controller, 60, every=0.1)
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert 10 <= len(calls) <= 13, calls
    assert gaps == sorted(gaps) and gaps[-1] <= RETRY_MAX_SECONDS + 0.15 and gaps[0] < 0.25, gaps
    assert calls[0] - start < 0.01
    scene.cluster.delete(objects.POD_DISRUPTION_BUDGET, "web", "default")
    allowed = clock.now
    scene.run(controller, 30, every=0.1, until=lambda: scene.node(node) is None)
    assert scene.node(node) is None and clock.now - allowed <= RETRY_MAX_SECONDS + 0.2


def test_daemon_set_pods_and_pods_content_to_stay_are_left_on_the_node(scene: Scene) -> None:
    """DaemonSets' pods (the DaemonSet controller gives them the unschedulable toleration) and pods that tolerate
    a cordoned node are not evicted: the node is released with them on it."""
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("agent", node=node, namespace="default", owner=("DaemonSet", "agent"))
    scene.add_pod("tolerant", node=node, tolerations=[{"operator": "Exists"}])
    controller = scene.controller()
    scene.cluster.delete(objects.NODE, node)
    result = scene.step(controller)
    assert result.terminated is not None and result.terminated.evicted == []
    assert scene.node(node) is None


def test_the_threaded_runner_releases_a_node_whose_instance_vanished(compiled: Path) -> None:
    """In real time, with no event to wake it: termination comes back on its own while a node drains."""
    scene = Scene(compiled, types=["m5.xlarge"], real_time=True)
    node = scene.add_node("default", "m5.xlarge")
    scene.add_pod("web", node=node, labels={"app": "web"})
    scene.add_pdb("web", {"app": "web"}, min_available=1)
    instance = node_info.instance_id(scene.node(node) or {})
    with scene.runner():
        scene.cluster.delete(objects.NODE, node)
        assert scene.wait(lambda: (scene.node(node) or {}).get("spec", {}).get("unschedulable") is True, 10)
        scene.cloud.delete(instance)
        assert scene.wait(lambda: scene.node(node) is None, 10)
