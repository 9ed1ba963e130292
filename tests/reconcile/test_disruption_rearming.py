"""When a disruption decision is taken again (`disruption/controller.py`), as Karpenter v0.31's cluster state
decides it (`MarkUnconsolidated`): not for a status update of a bound pod, which is most of what a busy cluster
sends; again for a pod that leaves or joins a node, once the changes have settled; and under steady churn once an
interval, not after every change. On the in-memory cluster and cloud, in virtual time."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from karpenter_policy.kube import objects
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.disruption.controller import SETTLE_SECONDS, marks_unconsolidated
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.records import node_record, pod_record

from .lifecycle import Deployment, World, run, start
from .test_disruption import consolidating, policies

INTERVAL = 10.0


def decisions(controller: Controller) -> list[float]:
    """The virtual times at which the controller's decider decided (recorded from now on)."""
    decider = controller.disruption.deprovisioner.decider
    taken: list[float] = []
    original = decider.decide

    def recorded(*args: Any, **kwargs: Any) -> Any:
        taken.append(controller.clock())
        return original(*args, **kwargs)

    decider.decide = recorded  # type: ignore[method-assign]
    return taken


def full_cluster(tmp_path: Path) -> tuple[World, Controller, Deployment]:
    """Two m5.xlarge nodes, full with three one-vCPU pods each: nothing to consolidate."""
    world = World(policies(tmp_path, consolidating), types=["m5.xlarge"])
    controller, deployment = start(world, 6, disruption_interval=INTERVAL)
    run(world, controller, deployment, 30)  # the first decisions (nothing to do) are behind us
    return world, controller, deployment


def bound_pods(world: World) -> list[dict[str, Any]]:
    return [p for p in world.cluster.list(objects.POD).items if p["spec"].get("nodeName")]


def replace_bound(world: World, number: int) -> None:
    """A bound pod replaced by a copy bound to the same node (as a ReplicaSet and kube-scheduler do at once)."""
    old = bound_pods(world)[0]
    new = copy.deepcopy(old)
    new["metadata"] = {k: v for k, v in old["metadata"].items() if k not in ("uid", "resourceVersion", "name")}
    new["metadata"]["name"] = f"inflate-{1000 + number}"
    world.cluster.create(objects.POD, new)
    world.cluster.delete(objects.POD, objects.name(old), namespace=objects.namespace(old))


def test_status_updates_of_bound_pods_do_not_take_a_decision_again(tmp_path: Path) -> None:
    world, controller, deployment = full_cluster(tmp_path)
    taken = decisions(controller)
    for second in range(40):
        for pod in bound_pods(world):
            world.cluster.patch(objects.POD, objects.name(pod), {"metadata": {"annotations": {"tick": str(second)}}},
                                namespace=objects.namespace(pod))
        run(world, controller, deployment, 1)
    assert taken == []


def test_a_pod_that_leaves_its_node_takes_a_decision_again_once_changes_settle(tmp_path: Path) -> None:
    world, controller, deployment = full_cluster(tmp_path)
    taken = decisions(controller)
    pod = bound_pods(world)[0]
    changed = controller.clock()
    world.cluster.delete(objects.POD, objects.name(pod), namespace=objects.namespace(pod))
    run(world, controller, deployment, 30, lambda: bool(taken))
    assert taken, "a pod deleted from a node is a change a decision must see"
    assert taken[0] - changed >= SETTLE_SECONDS


def test_under_steady_churn_a_decision_is_taken_once_an_interval(tmp_path: Path) -> None:
    world, controller, deployment = full_cluster(tmp_path)
    taken = decisions(controller)
    began = controller.clock()
    for number in range(60):  # a bound pod replaced every second: the changes never settle
        replace_bound(world, number)
        run(world, controller, deployment, 1)
    assert 60 / INTERVAL - 2 <= len(taken) <= 60 / INTERVAL + 1, taken
    assert all(b - a >= INTERVAL - 1 for a, b in zip([began, *taken], taken, strict=False)), taken


def _pod(node: str, phase: str = "Running", annotation: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web-1", "namespace": "default", "uid": "u-1"}
    if annotation:
        metadata["annotations"] = {"tick": annotation}
    return {"metadata": metadata, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": phase}}


def test_what_counts_as_a_change_a_decision_must_see() -> None:
    on_a, on_b = pod_record(_pod("a")), pod_record(_pod("b"))
    assert not marks_unconsolidated(Change("pod", on_a, pod_record(_pod("a", annotation="x"))))  # status update
    assert marks_unconsolidated(Change("pod", on_a, None))  # deleted
    assert marks_unconsolidated(Change("pod", None, on_a))  # created bound
    assert marks_unconsolidated(Change("pod", on_a, on_b))  # moved
    assert marks_unconsolidated(Change("pod", on_a, pod_record(_pod("a", phase="Succeeded"))))  # finished: room freed
    assert marks_unconsolidated(Change("pod", pod_record(_pod("")), on_a))  # a pending pod bound
    assert not marks_unconsolidated(Change("pod", None, pod_record(_pod(""))))  # a pending pod: provisioning's
    node = node_record(_node())
    heartbeat = _node()
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-29T08:00:10Z"
    assert not marks_unconsolidated(Change("node", node, node_record(heartbeat)))
    cordoned = _node()
    cordoned["spec"]["unschedulable"] = True
    assert marks_unconsolidated(Change("node", node, node_record(cordoned)))
    assert marks_unconsolidated(Change("node", None, node)) and marks_unconsolidated(Change("node", node, None))


def _node() -> dict[str, Any]:
    return {"metadata": {"name": "a", "uid": "n-1", "labels": {"karpenter.sh/provisioner-name": "default"}},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                       "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": "2026-11-29T08:00:00Z"}]}}
