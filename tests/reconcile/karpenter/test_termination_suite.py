"""Karpenter v0.31.1's termination suite (kubernetes-sigs/karpenter, `pkg/controllers/termination/suite_test.go`),
ported through the testing API: every `It` of `Describe("Termination")`, in the file's order, each naming its Go
test and line. Two (`should delete machines/nodeclaims associated with nodes`) cannot apply — the project has no
Machine or NodeClaim objects — and are listed in docs/reconcile.md with the reason.

How the Go expectations read here:

* the suite's node (`BeforeEach`: a Node with the termination finalizer and its instance in the fake cloud) is
  a node of ours the scene registers as the controller does (`scene.add_node`), its instance in the in-memory
  cloud;
* `ExpectReconcileSucceeded` is one step of the controller (`scene.step`): termination takes every node being
  deleted one step further;
* envtest has no kubelet: an evicted pod stays, terminating, until the test deletes it (`ExpectEvicted`, then
  `ExpectDeleted`). Pods built with `lingers=True` behave so on the in-memory cluster; `scene.finish_pod` is
  `ExpectDeleted`;
* the eviction queue's `NumRequeues` and `Contains` are the step's result (`blocked`, `evicted`) and the pod's
  deletionTimestamp.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from karpenter_policy.cloud.provider import STATE_TERMINATED
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.testing import Scene

#: `v1.TaintNodeUnschedulable` tolerated as the Go test tolerates it.
TOLERATES_UNSCHEDULABLE = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
EXCLUDE_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"


@pytest.fixture()
def scene(compiled: Path) -> Scene:
    return Scene(compiled, types=["m5.large", "m5.xlarge"])


@pytest.fixture()
def node(scene: Scene) -> str:
    """The suite's node: ours, with the termination finalizer, its instance running."""
    return scene.add_node("default", "m5.xlarge")


@pytest.fixture()
def controller(scene: Scene) -> Controller:
    return scene.controller()


def delete(scene: Scene, name: str) -> None:
    """`env.Client.Delete(ctx, node)` then `ExpectNodeExists`: the finalizer holds it."""
    scene.cluster.delete(objects.NODE, name)
    assert scene.node(name) is not None


def expect_draining(scene: Scene, name: str) -> None:
    """`ExpectNodeDraining`: unschedulable, the finalizer, a deletionTimestamp."""
    found = scene.node(name)
    assert found is not None, f"{name} should still exist"
    assert found["spec"].get("unschedulable") is True
    assert wk.TERMINATION_FINALIZER in objects.finalizers(found)
    assert objects.is_deleting(found)


def evicting(scene: Scene, pod: str, namespace: str = "default") -> bool:
    """`ExpectEvicted`'s test: the pod exists with a deletionTimestamp."""
    found = scene.cluster.get(objects.POD, pod, namespace)
    assert found is not None, f"{namespace}/{pod} should still exist"
    return objects.is_deleting(found)


def expect_released_once_finished(scene: Scene, controller: Controller, node: str, *pods: str) -> None:
    """`ExpectDeleted(pods)`, a reconcile, then `ExpectNotFound(node)`: the last pods gone, the node goes."""
    for pod in pods:
        scene.finish_pod(pod)
    scene.step(controller)
    assert scene.node(node) is None


def two_pods_evicting(scene: Scene, controller: Controller, node: str) -> None:
    """Two pods on the node, the node deleted and reconciled: both evicting (`ExpectEvicted`); reconciled again,
    still draining (`ExpectNodeDraining`)."""
    scene.add_pods("pod", 2, node=node, lingers=True)
    delete(scene, node)
    scene.step(controller)
    assert evicting(scene, "pod-0") and evicting(scene, "pod-1")
    scene.step(controller)
    expect_draining(scene, node)


def test_should_delete_nodes(scene: Scene, node: str, controller: Controller) -> None:
    """Termination / Reconciliation / should delete nodes — suite_test.go:101."""
    instance = node_info.instance_id(scene.node(node) or {})
    delete(scene, node)
    scene.step(controller)
    assert scene.node(node) is None
    found = scene.cloud.get(instance)
    assert found is None or found.state == STATE_TERMINATED, "its instance is terminated"


def test_should_not_race_if_deleting_nodes_in_parallel(compiled: Path) -> None:
    """Termination / Reconciliation / should not race if deleting nodes in parallel — suite_test.go:126.

    Go reconciles the ten nodes from ten goroutines; here ten threads delete them while the threaded runner's
    termination works, in real time."""
    scene = Scene(compiled, types=["m5.large"], real_time=True)
    nodes = [scene.add_node("default", "m5.large") for _ in range(10)]
    with scene.runner():
        threads = [threading.Thread(target=scene.cluster.delete, args=(objects.NODE, n)) for n in nodes]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert scene.wait(lambda: not scene.nodes(), 30), f"left: {sorted(scene.nodes())}"
    assert scene.instances() == []


def test_should_exclude_nodes_from_load_balancers_when_terminating(
    scene: Scene, node: str, controller: Controller
) -> None:
    """Termination / Reconciliation / should exclude nodes from load balancers when terminating —
    suite_test.go:153. (The do-not-evict pod is the Go test's "kludge" that keeps the node while it drains: an
    evicted pod stays on envtest, as a lingering one does here — v0.31 evicts it all the same.)"""
    scene.add_pod("no-evict", node=node, annotations={"karpenter.sh/do-not-evict": "true"}, lingers=True)
    delete(scene, node)
    scene.step(controller)
    found = scene.node(node)
    assert found is not None
    assert objects.labels(found)[EXCLUDE_BALANCERS] == "karpenter"


def test_should_not_evict_pods_that_tolerate_unschedulable_taint(
    scene: Scene, node: str, controller: Controller
) -> None:
    """Termination / Reconciliation / should not evict pods that tolerate unschedulable taint — suite_test.go:172."""
    scene.add_pod("evict", node=node, lingers=True)
    scene.add_pod("skip", node=node, tolerations=TOLERATES_UNSCHEDULABLE, lingers=True)
    delete(scene, node)
    scene.step(controller)
    expect_draining(scene, node)
    assert evicting(scene, "evict")
    assert not evicting(scene, "skip"), "it would only be put back on the node"
    expect_released_once_finished(scene, controller, node, "evict")


def test_should_delete_nodes_that_have_pods_without_an_owner_ref(
    scene: Scene, node: str, controller: Controller
) -> None:
    """Termination / Reconciliation / should delete nodes that have pods without an ownerRef — suite_test.go:198."""
    scene.add_pod("orphan", node=node, owner=None, lingers=True)
    delete(scene, node)
    scene.step(controller)
    assert evicting(scene, "orphan")
    expect_draining(scene, node)
    expect_released_once_finished(scene, controller, node, "orphan")


def test_should_delete_nodes_with_terminal_pods(scene: Scene, node: str, controller: Controller) -> None:
    """Termination / Reconciliation / should delete nodes with terminal pods — suite_test.go:227."""
    scene.add_pod("succeeded", node=node, phase="Succeeded", lingers=True)
    scene.add_pod("failed", node=node, phase="Failed", lingers=True)
    delete(scene, node)
    scene.step(controller)
    assert scene.node(node) is None
    assert not evicting(scene, "succeeded") and not evicting(scene, "failed"), "finished pods are not evicted"


def test_should_fail_to_evict_pods_that_violate_a_pdb(scene: Scene, node: str, controller: Controller) -> None:
    """Termination / Reconciliation / should fail to evict pods that violate a PDB — suite_test.go:244."""
    scene.add_pdb("no-evict", {"app": "guarded"}, min_available=1)
    scene.add_pod("guarded", node=node, labels={"app": "guarded"}, lingers=True)
    delete(scene, node)
    first = scene.step(controller)
    expect_draining(scene, node)
    assert first.terminated is not None and "default/guarded" in first.terminated.blocked
    scene.advance(1)
    again = scene.step(controller)  # the refused eviction is tried again (Go: NumRequeues >= 1)
    assert again.terminated is not None
    assert again.terminated.blocked["default/guarded"].startswith("eviction refused")
    assert not evicting(scene, "guarded")
    scene.finish_pod("guarded")  # deleted, as if its eviction had gone through
    assert scene.cluster.get(objects.POD, "guarded", "default") is None
    scene.step(controller)
    assert scene.node(node) is None


def test_should_evict_non_critical_pods_first(scene: Scene, node: str, controller: Controller) -> None:
    """Termination / Reconciliation / should evict non-critical pods first — suite_test.go:285."""
    scene.add_pod("evict", node=node, lingers=True)
    scene.add_pod("node-critical", node=node, priority_class="system-node-critical", lingers=True)
    scene.add_pod("cluster-critical", node=node, priority_class="system-cluster-critical", lingers=True)
    delete(scene, node)
    scene.step(controller)
    expect_draining(scene, node)
    assert evicting(scene, "evict")
    assert not evicting(scene, "node-critical") and not evicting(scene, "cluster-critical"), "not before the others"
    scene.finish_pod("evict")
    scene.step(controller)
    assert evicting(scene, "node-critical") and evicting(scene, "cluster-critical")
    expect_released_once_finished(scene, controller, node, "node-critical", "cluster-critical")


def test_should_not_evict_static_pods(scene: Scene, node: str, controller: Controller) -> None:
    """Termination / Reconciliation / should not evict static pods — suite_test.go:317."""
    scene.add_pod("evict", node=node, lingers=True)
    scene.add_static_pod("mirror", node, namespace="default", lingers=True)
    delete(scene, node)
    first = scene.step(controller)
    assert first.terminated is not None and "default/mirror" not in first.terminated.evicted
    assert not evicting(scene, "mirror"), "a mirror pod is never evicted"
    assert evicting(scene, "evict")
    expect_draining(scene, node)
    scene.step(controller)
    expect_released_once_finished(scene, controller, node, "evict")


def test_should_not_delete_nodes_until_all_pods_are_deleted(scene: Scene, node: str, controller: Controller) -> None:
    """Termination / Reconciliation / should not delete nodes until all pods are deleted — suite_test.go:361."""
    two_pods_evicting(scene, controller, node)
    scene.finish_pod("pod-1")
    scene.step(controller)
    expect_draining(scene, node)
    expect_released_once_finished(scene, controller, node, "pod-0")


def test_should_delete_nodes_with_no_underlying_instance_even_if_not_fully_drained(
    scene: Scene, node: str, controller: Controller
) -> None:
    """Termination / Reconciliation / should delete nodes with no underlying instance even if not fully drained —
    suite_test.go:395. (Go's reconciles run a moment apart; here the instance is looked up again at the next
    requeue, a virtual second later.)"""
    two_pods_evicting(scene, controller, node)
    scene.finish_pod("pod-1")  # the node still has one pod that is evicting
    scene.cloud.delete(node_info.instance_id(scene.node(node) or {}))  # the cloud no longer has the instance
    scene.run(controller, 2, until=lambda: scene.node(node) is None)
    assert scene.node(node) is None


def test_should_wait_for_pods_to_terminate(scene: Scene, node: str, controller: Controller) -> None:
    """Termination / Reconciliation / should wait for pods to terminate — suite_test.go:426."""
    scene.add_pod("slow", node=node, lingers=True)
    delete(scene, node)
    scene.step(controller)
    assert scene.node(node) is not None, "before the pod's grace period"
    assert evicting(scene, "slow")
    scene.advance(90)
    scene.step(controller)
    assert scene.node(node) is None


def metric_value(controller: Controller, name: str, **labels: str) -> float | None:
    """The value of the sample of the controller's scrape named exactly `name` whose labels include `labels`
    (Go's `FindMetricWithLabelValues`), None when there is none."""
    from prometheus_client.parser import text_string_to_metric_families

    text = generate_latest(controller.metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    return None


def test_should_fire_the_termination_summary_metric_when_deleting_nodes(
    scene: Scene, node: str, controller: Controller
) -> None:
    """Termination / Metrics / should fire the terminationSummary metric when deleting nodes — suite_test.go:446."""
    delete(scene, node)
    scene.step(controller)
    assert metric_value(controller, "karpenter_nodes_termination_time_seconds_count", provisioner="default") == 1


def test_should_fire_the_nodes_terminated_counter_metric_when_deleting_nodes(
    scene: Scene, node: str, controller: Controller
) -> None:
    """Termination / Metrics / should fire the nodesTerminated counter metric when deleting nodes —
    suite_test.go:456."""
    delete(scene, node)
    scene.step(controller)
    assert metric_value(controller, "karpenter_nodes_terminated", provisioner="default") == 1
