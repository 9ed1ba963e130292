"""What a Karpenter v1 NodePool's node goes through after its drain, as v1.14.1's node termination
(core pkg/controllers/node/termination/controller.go): `MinDrainTime` (its NodeClaim's `Drained` condition is
Unknown `Draining` at least 5 s before it turns True), the wait for the node's VolumeAttachments to be deleted
(`VolumesDetached`: Unknown `AwaitingVolumeDetachment` while they are left, True once gone, False
`TerminationGracePeriodElapsed` when the termination time comes first; the attachments of pods the drain leaves do
not count), then the instance's termination (`InstanceTerminating` True) — the Node's finalizer goes only once the
cloud no longer knows the instance. Each test names the Go test it follows (kubernetes-sigs/karpenter v1.14.1,
pkg/controllers/node/termination/suite_test.go) and its line; the nodes are launched by the controller (so they
have their NodeClaim) from tests/reconcile/data/v1termination: `graceful` (terminationGracePeriod 300s) and
`patient` (none)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from kube.conftest import FAST_BACKOFF
from kube.emulator import EmulatorThread

from karpenter_policy.kube import objects
from karpenter_policy.kube.attachments import InformedAttachments
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.objects import NODE_CLAIM, PERSISTENT_VOLUME_CLAIM, VOLUME_ATTACHMENT
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims import conditions as cond
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.termination.graceperiod import TERMINATION_TIMESTAMP
from karpenter_policy.reconcile.termination.terminator import MIN_DRAIN_SECONDS
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1termination"
#: A finalizer of someone else's that keeps a released NodeClaim readable after termination is done with it.
KEEP = "example.com/keep"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1steps") / "build")


def _launched(scene: Scene, pool: str = "patient") -> tuple[Controller, str, str]:
    """A node of `pool` launched by the controller for a seed pod, the seed gone; its NodeClaim held by `KEEP`
    too, so that its conditions can be read once termination has released it."""
    scene.add_pod("seed", cpu="100m", nodeSelector={wk.NODEPOOL: pool})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    scene.run(controller, 10)
    (node,) = scene.nodes()
    scene.cluster.delete(objects.POD, "seed", "default")
    (claim,) = scene.nodeclaims()
    scene.cluster.patch(NODE_CLAIM, claim, {"metadata": {"finalizers": [wk.TERMINATION_FINALIZER, KEEP]}})
    return controller, node, claim


def _condition(scene: Scene, claim: str, kind: str) -> dict[str, Any] | None:
    found = scene.cluster.get(NODE_CLAIM, claim)
    assert found is not None
    return next((c for c in found["status"]["conditions"] if c["type"] == kind), None)


def _status(scene: Scene, claim: str, kind: str) -> tuple[str, str] | None:
    found = _condition(scene, claim, kind)
    return (found["status"], found["reason"]) if found is not None else None


def _attachment(scene: Scene, name: str, node: str, volume: str | None) -> None:
    source = {"persistentVolumeName": volume} if volume is not None else {"inlineVolumeSpec": {}}
    scene.cluster.create(VOLUME_ATTACHMENT, {
        "metadata": {"name": name},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": source},
    })


def test_should_delete_nodes(compiled: Path) -> None:
    """Termination > should delete nodes — suite_test.go:112: the first step taints the node and starts the drain
    (Drained Unknown, `Draining`); 2×MinDrainTime later the node is gone, its claim Drained, VolumesDetached and
    InstanceTerminating True and its instance terminated."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene)
    (instance,) = scene.instances()
    scene.cluster.delete(objects.NODE, node)
    scene.step(controller)
    assert node in scene.nodes()
    assert {"key": wk.TAINT_DISRUPTED, "effect": "NoSchedule"} in scene.nodes()[node]["spec"]["taints"]
    assert _status(scene, claim, cond.DRAINED) == ("Unknown", "Draining")
    scene.run(controller, 2 * MIN_DRAIN_SECONDS, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    assert scene.instances() == []
    for kind in (cond.DRAINED, cond.VOLUMES_DETACHED, cond.INSTANCE_TERMINATING):
        assert _status(scene, claim, kind) == ("True", kind)
    assert objects.finalizers(scene.nodeclaims()[claim]) == [KEEP], "its finalizer released once the instance went"
    assert instance.id not in {i.id for i in scene.instances()}


def test_should_not_finish_draining_until_min_drain_time_has_passed(compiled: Path) -> None:
    """Termination > should not finish draining until minDrainTime has passed — suite_test.go:845: an empty node's
    claim stays Drained Unknown and the node stays (its instance too) for MinDrainTime after the drain began, then
    Drained turns True and the node goes."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene)
    scene.cluster.delete(objects.NODE, node)
    began = scene.clock.wall()
    scene.step(controller)
    assert _status(scene, claim, cond.DRAINED) == ("Unknown", "Draining")
    transition = objects.parse_time(_condition(scene, claim, cond.DRAINED)["lastTransitionTime"])  # type: ignore[index]
    assert abs((transition - began).total_seconds()) < 1
    scene.run(controller, MIN_DRAIN_SECONDS - 2)
    assert node in scene.nodes() and len(scene.instances()) == 1
    assert _status(scene, claim, cond.DRAINED) == ("Unknown", "Draining")
    scene.run(controller, MIN_DRAIN_SECONDS, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    assert (scene.clock.wall() - began).total_seconds() >= MIN_DRAIN_SECONDS
    assert _status(scene, claim, cond.DRAINED) == ("True", "Drained")


def test_should_delete_nodeclaims_associated_with_nodes(compiled: Path) -> None:
    """Termination > should delete nodeclaims associated with nodes — suite_test.go:152: after the drain the
    instance's termination is asked and the claim is InstanceTerminating, but the Node keeps its finalizer while
    the instance shuts down (30 s here, as EC2's `shutting-down`); once the cloud no longer knows it the Node goes
    and the claim's finalizer is removed."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene)
    scene.cloud.shutting_down = 30.0  # type: ignore[attr-defined]
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 2 * MIN_DRAIN_SECONDS)
    assert _status(scene, claim, cond.INSTANCE_TERMINATING) == ("True", "InstanceTerminating")
    assert node in scene.nodes(), "the Node stays while its instance shuts down"
    assert wk.TERMINATION_FINALIZER in objects.finalizers(scene.nodes()[node])
    assert wk.TERMINATION_FINALIZER in objects.finalizers(scene.nodeclaims()[claim])
    scene.run(controller, 40, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    scene.run(controller, 2)
    assert objects.finalizers(scene.nodeclaims()[claim]) == [KEEP]


def test_should_wait_for_volume_attachments(compiled: Path) -> None:
    """Termination > VolumeAttachments > should wait for volume attachments — suite_test.go:874: drained, the node
    stays while an attachment of it is left (VolumesDetached Unknown `AwaitingVolumeDetachment`, an
    `AwaitingVolumeDetachment` Event naming it); deleted, the node goes and VolumesDetached is True."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene)
    _attachment(scene, "csi-foo", node, "foo")
    _attachment(scene, "csi-elsewhere", "another-node", "baz")  # another node's: never waited for
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 4 * MIN_DRAIN_SECONDS)
    assert node in scene.nodes() and len(scene.instances()) == 1
    assert _status(scene, claim, cond.DRAINED) == ("True", "Drained")
    assert _status(scene, claim, cond.VOLUMES_DETACHED) == ("Unknown", "AwaitingVolumeDetachment")
    assert _status(scene, claim, cond.INSTANCE_TERMINATING) is None
    assert [e["message"] for e in scene.events("AwaitingVolumeDetachment")] == [
        "Awaiting deletion of bound volumeattachments (csi-foo)"]
    scene.cluster.delete(VOLUME_ATTACHMENT, "csi-foo")
    scene.run(controller, 3, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes() and scene.instances() == []
    assert _status(scene, claim, cond.VOLUMES_DETACHED) == ("True", "VolumesDetached")


def test_should_only_wait_for_volume_attachments_associated_with_drainable_pods(compiled: Path) -> None:
    """Termination > VolumeAttachments > should only wait for volume attachments associated with drainable pods —
    suite_test.go:900: a pod tolerating the disrupted taint stays on the node and its claim's volume (`bar`) stays
    attached; only the other attachment (`foo`) is waited for, and an inline volume's attachment not at all."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene)
    _attachment(scene, "csi-foo", node, "foo")
    _attachment(scene, "csi-bar", node, "bar")
    _attachment(scene, "csi-inline", node, None)
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, {
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"volumeName": "bar", "accessModes": ["ReadWriteOnce"]},
    })
    scene.add_pod("stays", node=node, nodeSelector={wk.NODEPOOL: "patient"},
                  tolerations=[{"key": wk.TAINT_DISRUPTED, "operator": "Exists"}],
                  volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 4 * MIN_DRAIN_SECONDS)
    assert node in scene.nodes() and "stays" in scene.pods_on(node)
    assert _status(scene, claim, cond.VOLUMES_DETACHED) == ("Unknown", "AwaitingVolumeDetachment")
    assert [e["message"] for e in scene.events("AwaitingVolumeDetachment")] == [
        "Awaiting deletion of bound volumeattachments (csi-foo)"]
    scene.cluster.delete(VOLUME_ATTACHMENT, "csi-foo")
    scene.run(controller, 3, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    assert _status(scene, claim, cond.VOLUMES_DETACHED) == ("True", "VolumesDetached")


def test_should_wait_for_volume_attachments_until_the_termination_grace_period_expires(compiled: Path) -> None:
    """Termination > VolumeAttachments > should wait for volume attachments until the nodeclaim's termination grace
    period expires — suite_test.go:943: the claim's termination time is a minute away; the attachment holds the
    node until then, then VolumesDetached is False `TerminationGracePeriodElapsed` and the node goes."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene, "graceful")
    _attachment(scene, "csi-foo", node, "foo")
    ends = scene.clock.wall() + dt.timedelta(minutes=1)
    scene.cluster.patch(NODE_CLAIM, claim, {"metadata": {"annotations": {TERMINATION_TIMESTAMP:
                                                                           objects.format_time(ends)}}})
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 4 * MIN_DRAIN_SECONDS)
    assert node in scene.nodes()
    assert _status(scene, claim, cond.VOLUMES_DETACHED) == ("Unknown", "AwaitingVolumeDetachment")
    scene.run(controller, 5 * 60, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes() and scene.instances() == []
    assert scene.clock.wall() >= ends
    assert _status(scene, claim, cond.VOLUMES_DETACHED) == ("False", "TerminationGracePeriodElapsed")


@pytest.mark.parametrize("spec", [
    {"attacher": "ebs.csi.aws.com", "nodeName": 7, "source": {"persistentVolumeName": "foo"}},
    {"attacher": "ebs.csi.aws.com", "nodeName": "<the node>", "source": "foo"},
    {"attacher": "ebs.csi.aws.com", "source": {"persistentVolumeName": ["foo"]}},
])
def test_attachments_that_cannot_be_read_hold_the_node_as_unknown_never_as_none(
    compiled: Path, spec: dict[str, Any]
) -> None:
    """An attachment of another shape than storage.k8s.io/v1's makes the node's attachments unknown (its own node's
    when its `spec.nodeName` names it, every node's when that cannot be read): the node is not terminated (an error
    says why) — until its termination time, past which v1.14.1 does not wait for attachments either."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene, "graceful")
    spec = {**spec, "nodeName": node} if spec.get("nodeName") == "<the node>" else spec
    scene.cluster.create(VOLUME_ATTACHMENT, {"metadata": {"name": "odd"}, "spec": spec})
    scene.cluster.delete(objects.NODE, node)
    results = scene.run(controller, 60)
    assert node in scene.nodes() and len(scene.instances()) == 1
    assert any("volume attachments of node" in e and "cannot be read" in e for r in results for e in r.errors)
    assert _status(scene, claim, cond.VOLUMES_DETACHED) is None
    scene.run(controller, 300, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    assert _status(scene, claim, cond.VOLUMES_DETACHED) == ("False", "TerminationGracePeriodElapsed")


def test_a_pass_over_several_terminating_nodes_lists_the_attachments_once_not_per_node_per_pass(
    compiled: Path,
) -> None:
    """Issue #26: three NodePool nodes held past their drain by an attachment each, for 20 passes: the
    VolumeAttachments are listed once (then their watch is drained at each pass), where the old code listed them
    at every pass; each node still waits for its own attachment only, and goes once it is deleted."""
    scene = Scene(compiled, types=["m5.large"])
    for i in range(3):  # 1.5 CPU each: one m5.large per pod
        scene.add_pod(f"seed-{i}", cpu="1500m", nodeSelector={wk.NODEPOOL: "patient"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    nodes = sorted(scene.nodes())
    assert len(nodes) == 3
    for i, node in enumerate(nodes):
        scene.cluster.delete(objects.POD, f"seed-{i}", "default")
        _attachment(scene, f"csi-{node}", node, f"pv-{i}")
    lists: list[str] = []
    listing = scene.cluster.list

    def counted(kind: Any, *args: Any, **kwargs: Any) -> Any:
        lists.append(kind.plural)
        return listing(kind, *args, **kwargs)

    scene.cluster.list = counted  # type: ignore[method-assign]
    for node in nodes:
        scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 20)
    assert sorted(scene.nodes()) == nodes
    assert lists.count("volumeattachments") == 1
    scene.cluster.delete(VOLUME_ATTACHMENT, f"csi-{nodes[1]}")
    scene.run(controller, 3, until=lambda: nodes[1] not in scene.nodes())
    assert sorted(scene.nodes()) == [nodes[0], nodes[2]]
    assert lists.count("volumeattachments") == 1


def test_a_step_driven_controller_over_http_stops_the_attachment_informer_it_started_when_closed(
    compiled: Path, tmp_path: Path
) -> None:
    """Issue #26: a controller driven step by step on an API server over HTTP (the scenes of the kubectl tests)
    starts the VolumeAttachment informer when a node is first past its drain, and had no way to stop it: after the
    test's server stopped, the informer's thread went on retrying "Connection refused" for the rest of the run.
    `Scene.close` (`Controller.close`) ends the thread — `Informer.stop` joins it, the signal waited on — and a
    step after the close does not start it again (the attachments read as unknown: the node is held)."""
    with EmulatorThread(seed_namespaces=True) as server:
        cluster = KubeCluster.from_kubeconfig(str(server.write_kubeconfig(tmp_path / "kubeconfig")),
                                              backoff=FAST_BACKOFF)
        try:
            scene = Scene(compiled, types=["m5.large"], cluster=cluster)  # type: ignore[arg-type]
            node = scene.add_node("NodePool/patient", "m5.large")
            controller = scene.controller()
            attachments = controller.terminator.attachments
            assert isinstance(attachments, InformedAttachments)
            scene.cluster.delete(objects.NODE, node)
            scene.run(controller, 30, until=lambda: attachments.informer.health().alive)
            assert attachments.informer.health().alive, "started when the node needed its attachments"
            scene.close()
            assert not attachments.informer.health().alive, "stopped with its controller"
            scene.step(controller)
            assert not attachments.informer.health().alive, "never started again once closed"
        finally:
            cluster.close()


def test_the_threaded_runner_reads_attachments_from_an_informer_it_starts_when_a_node_first_needs_them(
    compiled: Path,
) -> None:
    """In real time (the production runner): no VolumeAttachment informer until a NodePool node is past its drain;
    then the node waits for its attachment (the `AwaitingVolumeDetachment` Event says so) and goes once the
    informer sees it deleted."""
    scene = Scene(compiled, types=["m5.large"], real_time=True)
    node = scene.add_node("NodePool/patient", "m5.large")
    _attachment(scene, "csi-foo", node, "foo")
    with scene.runner() as runner:
        attachments = runner.controller.terminator.attachments
        assert isinstance(attachments, InformedAttachments)
        assert scene.wait(lambda: runner.health().ready, 10)
        assert not attachments.informer.health().alive, "not started before a node needs it"
        scene.cluster.delete(objects.NODE, node)
        assert scene.wait(lambda: bool(scene.events("AwaitingVolumeDetachment")), 10)
        assert attachments.informer.health().alive and node in scene.nodes()
        scene.cluster.delete(VOLUME_ATTACHMENT, "csi-foo")
        assert scene.wait(lambda: node not in scene.nodes(), 10)
    assert not attachments.informer.health().alive, "stopped with the runner"


def test_should_delete_nodes_without_nodeclaims(compiled: Path) -> None:
    """Termination > should delete nodes without nodeclaims — suite_test.go:123: a NodePool's node with no NodeClaim
    (here: registered without one, as on a cluster that did not serve the CRD) is drained and released in one step
    — no MinDrainTime, nothing written — and, as v1.14.1's `awaitInstanceTermination` does nothing without a claim,
    its instance is not terminated by termination: garbage collection terminates it once no Node names it (where
    the old code terminated it with the Node)."""
    scene = Scene(compiled, types=["m5.large"])
    node = scene.add_node("NodePool/patient", "m5.large")
    (instance,) = scene.instances()
    controller = scene.controller()
    scene.cluster.delete(objects.NODE, node)
    scene.step(controller)
    assert node not in scene.nodes()
    assert [i.id for i in scene.instances()] == [instance.id], "left to garbage collection"
    scene.run(controller, 600, until=lambda: not scene.instances())
    assert scene.instances() == []


def _with_two_pods(scene: Scene, node: str) -> None:
    for name in ("pod-0", "pod-1"):
        scene.add_pod(name, node=node, nodeSelector={wk.NODEPOOL: "patient"}, lingers=True)


def test_should_delete_nodes_with_no_underlying_instance_even_if_not_fully_drained(compiled: Path) -> None:
    """Termination > should delete nodes with no underlying instance even if not fully drained — suite_test.go:609:
    a NotReady node (its kubelet never joined) draining, one of its pods still being evicted; its instance gone,
    the node is released at the next step, whatever is left on it."""
    scene = Scene(compiled, types=["m5.large"], never_join=["m5.large"])
    controller, node, _ = _launched(scene)
    _with_two_pods(scene, node)
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 2 * MIN_DRAIN_SECONDS)
    assert node in scene.nodes()
    scene.finish_pod("pod-1")
    scene.stop_instance(node)
    scene.run(controller, 2, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()


def test_should_not_delete_nodes_with_no_underlying_instance_if_the_node_is_still_ready(compiled: Path) -> None:
    """Termination > should not delete nodes with no underlying instance if the node is still Ready —
    suite_test.go:643: the same, but the node is Ready (a kubelet still posts: something runs there), so it stays
    while a pod is being evicted (the old code released it at once); then, as v1.14.1 goes on, once its pods are
    gone it is drained and released — its instance already gone, InstanceTerminating True."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, claim = _launched(scene)
    _with_two_pods(scene, node)
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 2 * MIN_DRAIN_SECONDS)
    assert node in scene.nodes()
    scene.finish_pod("pod-1")
    scene.stop_instance(node)
    scene.run(controller, 20)
    assert node in scene.nodes() and "pod-0" in scene.pods_on(node)
    scene.finish_pod("pod-0")
    scene.run(controller, 4 * MIN_DRAIN_SECONDS, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    assert _status(scene, claim, cond.INSTANCE_TERMINATING) == ("True", "InstanceTerminating")


def test_a_provisioners_node_keeps_v0_31s_termination(tmp_path: Path) -> None:
    """A Provisioner's node (v1alpha5) is terminated as v0.31.1 does: no MinDrainTime, no wait for attachments —
    an empty node goes at the first step."""
    from .support import POLICIES as V1ALPHA5

    scene = Scene(compile_policies(V1ALPHA5, tmp_path / "build"), types=["m5.large"])
    node = scene.add_node("default", "m5.large")
    _attachment(scene, "csi-foo", node, "foo")
    controller = scene.controller()
    scene.cluster.delete(objects.NODE, node)
    scene.step(controller)
    assert node not in scene.nodes()


def _evicting(scene: Scene, pod: str) -> bool:
    found = scene.cluster.get(objects.POD, pod, "default")
    assert found is not None, f"{pod} should still exist"
    return objects.is_deleting(found)


def test_should_evict_pods_in_order_and_wait_until_pods_are_fully_deleted(compiled: Path) -> None:
    """Termination > should evict pods in order and wait until pods are fully deleted — suite_test.go:415: a NodePool
    node's drain evicts its DaemonSets' pods too, in four groups — non-critical pods, non-critical DaemonSets' pods,
    critical pods, critical DaemonSets' pods —, each only once every pod of the groups before it is gone (not merely
    terminating); then the node goes."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node, _ = _launched(scene)
    selector = {wk.NODEPOOL: "patient"}
    daemon = {"owner": ("DaemonSet", "logs")}
    scene.add_pod("evict", node=node, nodeSelector=selector, lingers=True)
    scene.add_pod("daemon-evict", node=node, lingers=True, **daemon)  # type: ignore[arg-type]
    for critical in ("system-node-critical", "system-cluster-critical"):
        scene.add_pod(f"pod-{critical}", node=node, nodeSelector=selector, priority_class=critical, lingers=True)
        scene.add_pod(f"daemon-{critical}", node=node, priority_class=critical, lingers=True,
                      **daemon)  # type: ignore[arg-type]
    groups = [["evict"], ["daemon-evict"], ["pod-system-node-critical", "pod-system-cluster-critical"],
              ["daemon-system-node-critical", "daemon-system-cluster-critical"]]
    scene.cluster.delete(objects.NODE, node)
    for index, group in enumerate(groups):
        scene.step(controller)
        scene.step(controller)
        assert node in scene.nodes()
        assert all(_evicting(scene, pod) for pod in group), group
        for later in groups[index + 1:]:
            assert not any(_evicting(scene, pod) for pod in later), (group, later)
        for pod in group:
            scene.finish_pod(pod)
    scene.run(controller, 2 * MIN_DRAIN_SECONDS, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
