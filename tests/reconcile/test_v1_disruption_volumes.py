"""Disruption never moves a pod out of its volume's zone: the candidates' pods (and the pending ones) are simulated
with their claims' topology, as Karpenter's disruption simulation runs the provisioner's scheduler on them (v0.31.1
core pkg/controllers/deprovisioning/helpers.go `simulateScheduling` → provisioner.go `NewScheduler`,
`volumeTopology.Inject`; v1.14.1 pkg/controllers/disruption/helpers.go `SimulateScheduling` → provisioner.go
`getVolumeTopologyRequirements`). NodePools of tests/reconcile/data/v1consolidation (`under` consolidates at once);
a zonal EBS volume is a PersistentVolume whose required node affinity names one zone. While the volume kinds cannot
be listed, a node whose pods have claims is not disrupted, with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kube.apiserver.kinds import CLUSTER_ROLE, CLUSTER_ROLE_BINDING
from kube.conftest import FAST_BACKOFF
from kube.emulator import EmulatorThread

from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.objects import PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, STORAGE_CLASS, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller, ReconcileResult
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.nodes import ANNOTATION_HASH
from karpenter_policy.testing import Scene, compile_policies

from .support import Closing
from .volumesupport import CLASSES, WITHOUT_CLASSES

POLICIES = Path(__file__).resolve().parent / "data" / "v1consolidation"
M5 = ["m5.large", "m5.xlarge", "m5.2xlarge"]
HOUR = 3600.0


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1consolidation") / "build")


def volume(name: str, zone: str) -> Obj:
    """A zonal EBS volume (the CSI driver's PersistentVolume: required node affinity on the zone)."""
    return {"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [zone]}]}]}}}}


def bound_claim(name: str, volume_name: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "default",
                         "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                     "storageClassName": "gp3", "volumeName": volume_name},
            "status": {"phase": "Bound"}}


def gp3() -> Obj:
    return {"metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer"}


CLAIMED = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]


def _volume_in(cluster: Any, zone: str) -> None:
    cluster.create(STORAGE_CLASS, gp3())
    cluster.create(PERSISTENT_VOLUME, volume("pv-data", zone))
    cluster.create(PERSISTENT_VOLUME_CLAIM, bound_claim("data", "pv-data"))


def _run(scene: Scene, controller: Controller, seconds: float, until: str | None = None) -> list[ReconcileResult]:
    """Step the controller each second for `seconds`, or until the node `until` is gone (its replacement, launched
    first, is there then: an empty replacement would be consolidated in turn once its evicted pod is gone)."""
    results = []
    end = scene.clock.now + seconds
    while scene.clock.now <= end and (until is None or until in scene.nodes()):
        results.append(scene.step(controller))
        scene.advance(1.0)
    return results


def _decided(results: list[ReconcileResult]) -> list[str]:
    return [r.disrupted.decided for r in results if r.disrupted is not None and r.disrupted.decided]


def _zones(scene: Scene) -> dict[str, str]:
    return {name: objects.labels(node)[wk.ZONE] for name in scene.nodes() if (node := scene.node(name))}


def _two_zones(scene: Scene, with_volume: bool, age: float = HOUR) -> tuple[str, str]:
    """`big` (m5.2xlarge, us-east-1a) runs `db` — its claim's volume in us-east-1a when `with_volume` —, `other`
    (m5.xlarge, us-east-1b, do-not-disrupt) has room for it."""
    big = scene.add_node("NodePool/under", "m5.2xlarge", zone="us-east-1a", age=age)
    other = scene.add_node("NodePool/under", "m5.xlarge", zone="us-east-1b", age=age,
                           annotations={wk.DO_NOT_DISRUPT: "true"})
    volumes = {"volumes": CLAIMED} if with_volume else {}
    scene.add_pod("db", cpu="500m", node=big, nodeSelector={wk.NODEPOOL: "under"}, **volumes)
    return big, other


def test_consolidation_replaces_within_the_volumes_zone_rather_than_move_the_pod_to_another(compiled: Path) -> None:
    """`db`'s volume is in us-east-1a: its node is not deleted for the room on the us-east-1b node (where the pod
    would never start), it is replaced by a cheaper node in us-east-1a. Fails on the old code (the node was deleted,
    the pod sent to us-east-1b)."""
    scene = Scene(compiled, types=M5)
    _volume_in(scene.cluster, "us-east-1a")
    big, other = _two_zones(scene, with_volume=True)
    results = _run(scene, scene.controller(), 120, until=big)

    zones = _zones(scene)
    assert big not in zones and other in zones
    (replacement,) = [name for name in zones if name != other]
    assert zones[replacement] == "us-east-1a"
    assert objects.labels(scene.node(replacement) or {})[wk.INSTANCE_TYPE] == "m5.large"
    assert [m.split(",")[0] for m in _decided(results)] == ["deprovisioning via consolidation replace"]


def test_without_the_volume_the_same_pod_moves_to_the_other_zone(compiled: Path) -> None:
    """The control: the same pod without a claim fits on the us-east-1b node, and its node is deleted (nothing
    launched)."""
    scene = Scene(compiled, types=M5)
    _volume_in(scene.cluster, "us-east-1a")  # in the cluster, but the pod does not claim it
    big, other = _two_zones(scene, with_volume=False)
    results = _run(scene, scene.controller(), 120, until=big)

    assert set(scene.nodes()) == {other}
    assert [m.split(",")[0] for m in _decided(results)] == ["deprovisioning via consolidation delete"]


def test_a_pod_whose_volume_is_in_another_zone_than_the_room_keeps_its_node(compiled: Path) -> None:
    """`small` (m5.large, the cheapest: nothing cheaper replaces it) runs `db` with its volume in us-east-1a; the
    us-east-1b node has room. The node stays (blocked: no cheaper node), where without the claim it would go."""
    scene = Scene(compiled, types=M5)
    _volume_in(scene.cluster, "us-east-1a")
    small = scene.add_node("NodePool/under", "m5.large", zone="us-east-1a", age=HOUR)
    other = scene.add_node("NodePool/under", "m5.xlarge", zone="us-east-1b", age=HOUR,
                           annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("db", cpu="500m", node=small, nodeSelector={wk.NODEPOOL: "under"}, volumes=CLAIMED)
    results = _run(scene, scene.controller(), 120)

    assert set(scene.nodes()) == {small, other}
    blocked = [r.disrupted.blocked for r in results if r.disrupted is not None and small in r.disrupted.blocked]
    assert blocked and blocked[-1][small] == "consolidation: can't replace with a cheaper node"


def test_drift_replaces_the_node_in_its_volumes_zone(compiled: Path) -> None:
    """A drifted node whose pod's volume is in us-east-1c is replaced by a node in us-east-1c (the NodePool allows
    every zone; without the claim the replacement lands where the cheapest offering is — the control, first).
    Fails on the old code."""
    zones = {}
    for with_volume in (False, True):
        scene = Scene(compiled, types=M5)
        _volume_in(scene.cluster, "us-east-1c")
        old = scene.add_node("NodePool/under", "m5.large", zone="us-east-1c", age=HOUR, drifted=True)
        volumes = {"volumes": CLAIMED} if with_volume else {}
        scene.add_pod("db", cpu="500m", node=old, nodeSelector={wk.NODEPOOL: "under"}, **volumes)
        results = _run(scene, scene.controller(), 180, until=old)
        found = _zones(scene)
        assert old not in found and len(found) == 1, (found, _decided(results))
        assert [m.split(",")[0] for m in _decided(results)] == ["deprovisioning via drift replace"]
        zones[with_volume] = next(iter(found.values()))
    assert zones[True] == "us-east-1c"
    assert zones[False] != "us-east-1c"  # the control: the volume is what keeps the zone


def local_volume(name: str, hostname: str) -> Obj:
    """A local volume: usable on one node only (required node affinity on its hostname)."""
    return {"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "local": {"path": "/mnt/disks/a"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": wk.HOSTNAME, "operator": "In", "values": [hostname]}]}]}}}}


def test_consolidation_replaces_a_node_whose_pod_has_a_local_volume_ignoring_its_hostname(compiled: Path) -> None:
    """Ported: disruption/suite_test.go:374 (v1.14.1), "can replace node with a local PV (ignoring hostname
    affinity)": the pod's local volume names its node; v1.14.1 drops the hostname of a local or hostPath volume
    (volumetopology.go `getPersistentVolumeRequirements`), so the node is replaced by a cheaper one. Fails on the
    old code (the hostname kept: no other node could hold the pod, the node stayed)."""
    scene = Scene(compiled, types=M5)
    big = scene.add_node("NodePool/under", "m5.2xlarge", zone="us-east-1a", age=HOUR)
    scene.cluster.create(STORAGE_CLASS, {"metadata": {"name": "local-path"},
                                         "provisioner": "kubernetes.io/no-provisioner",
                                         "volumeBindingMode": "WaitForFirstConsumer"})
    scene.cluster.create(PERSISTENT_VOLUME, local_volume("pv-local", big))
    made = bound_claim("data", "pv-local")
    made["spec"]["storageClassName"] = "local-path"
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, made)
    scene.add_pod("db", cpu="500m", node=big, nodeSelector={wk.NODEPOOL: "under"}, volumes=CLAIMED)
    results = _run(scene, scene.controller(), 120, until=big)

    zones = _zones(scene)
    assert big not in zones and len(zones) == 1
    (replacement,) = zones
    assert objects.labels(scene.node(replacement) or {})[wk.INSTANCE_TYPE] == "m5.large"
    assert [m.split(",")[0] for m in _decided(results)] == ["deprovisioning via consolidation replace"]




def test_a_node_whose_pod_has_a_claim_is_blocked_while_the_classes_cannot_be_listed(
    compiled: Path, tmp_path: Path, closing: Closing,
) -> None:
    """A role that may not list StorageClasses (403): the node running a pod with a claim is not disrupted — its
    pods' volumes are unknown, never "none" — and says why; once the role allows the list, the node's replacement
    is launched within its volume's zone. Fails on the old code (the node was deleted)."""
    with EmulatorThread(seed_namespaces=True, authorize=True) as server:
        admin = KubeCluster.from_kubeconfig(str(server.write_kubeconfig(tmp_path / "admin")), backoff=FAST_BACKOFF)
        token = server.emulator._bearer_tokens.issue("karpenter", "controller")
        role = admin.create(CLUSTER_ROLE, {"metadata": {"name": "controller"}, "rules": WITHOUT_CLASSES})
        admin.create(CLUSTER_ROLE_BINDING, {
            "metadata": {"name": "controller"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                            "kind": "ClusterRole", "name": "controller"},
            "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": "karpenter"}]})
        admin.create(STORAGE_CLASS, gp3())
        admin.create(PERSISTENT_VOLUME, volume("pv-data", "us-east-1a"))
        made = admin.create(PERSISTENT_VOLUME_CLAIM, bound_claim("data", "pv-data"))
        made["status"] = {"phase": "Bound"}
        admin.update(PERSISTENT_VOLUME_CLAIM, made, "status")
        controller_cluster = KubeCluster.from_kubeconfig(
            str(server.write_kubeconfig(tmp_path / "controller", token=token)), backoff=FAST_BACKOFF)
        try:
            scene = closing(Scene(compiled, cluster=controller_cluster, types=M5))  # type: ignore[arg-type]
            big, other = _two_zones(scene, with_volume=True, age=0.0)  # the API server stamps its own time
            controller = scene.controller()
            results = _run(scene, controller, 60)
            assert big in scene.nodes()
            reasons = [r.disrupted.blocked[big] for r in results
                       if r.disrupted is not None and big in r.disrupted.blocked]
            assert reasons and reasons[-1].startswith("cannot read its pods' volumes: cannot list storageclasses:")
            assert "403" in reasons[-1]

            role["rules"] = [*WITHOUT_CLASSES, CLASSES]
            admin.update(CLUSTER_ROLE, role)
            results = []
            for _ in range(180):
                results.append(scene.step(controller))
                scene.advance(1.0)
                if len(scene.nodes()) == 3:
                    break
            zones = _zones(scene)
            (replacement,) = set(zones) - {big, other}
            assert zones[replacement] == "us-east-1a"
            assert [m.split(",")[0] for m in _decided(results)] == ["deprovisioning via consolidation replace"]
        finally:
            controller_cluster.close()
            admin.close()


def _bound_pod(name: str, node: str | None) -> Obj:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "pause"}], "volumes": CLAIMED}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


@pytest.mark.parametrize(("node", "ours", "wanted"), [
    (None, False, True),  # pending: provisioning reads its claims
    ("ip-ours", True, True),  # on a node of ours: disruption may move it
    ("ip-unseen", None, True),  # its node not seen yet (at start pods are listed before nodes)
    ("ip-theirs", False, False),  # on a node we never disrupt: nothing reads its claims
], ids=["pending", "on a node of ours", "on a node not seen yet", "on another's node"])
def test_the_volume_kinds_are_wanted_for_a_pod_with_a_claim_pending_or_on_a_node_of_ours(
    node: str | None, ours: bool | None, wanted: bool
) -> None:
    """What starts the volume informers (`ClusterState.wants_volumes`, one dictionary look-up a pod event). The
    running cases fail on the old code (only a pending pod's claim started them)."""
    state = ClusterState()
    if node is not None and ours is not None:
        annotations = {ANNOTATION_HASH: "h"} if ours else {}
        state.apply(objects.NODE, "ADDED", {"metadata": {"name": node, "uid": f"uid-{node}",
                                                         "annotations": annotations}})
    state.apply(objects.POD, "ADDED", _bound_pod("db", node))
    assert state.wants_volumes.is_set() is wanted
