"""A pending pod's claims in the controller, as Karpenter v1.14.1's provisioner reads them: the pods its
`ValidatePersistentVolumeClaims` ignores are not provisioned for on a NodePool (and get its `FailedScheduling` Event
in its words), and the zone of a bound claim's PersistentVolume or of an unbound claim's WaitForFirstConsumer
StorageClass pins the new node's zone (`volumetopology.go`) — the reading `check --workloads` uses
(`model/volumes.py`), on the cluster's claims, volumes and classes. Over HTTP (the test API server, `KubeCluster`)
where the Go test reads a cluster, on the in-memory cluster for the rest; a claim that cannot be read holds the pod,
never reads as none."""

from __future__ import annotations

from collections.abc import Iterator
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
from karpenter_policy.testing import Scene

from .support import Closing
from .volumesupport import BIND_COMPLETED, CLASSES, WITHOUT_CLASSES, example_nodepools


@pytest.fixture(scope="module")
def nodepools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's NodePools alone (no Provisioner beside them): what v1.14.1 alone provisions for."""
    return example_nodepools(tmp_path_factory.mktemp("policies"), tmp_path_factory.mktemp("build") / "build")


@pytest.fixture()
def api(tmp_path: Path) -> Iterator[KubeCluster]:
    with EmulatorThread(seed_namespaces=True) as server:
        cluster = KubeCluster.from_kubeconfig(str(server.write_kubeconfig(tmp_path / "kubeconfig")),
                                              backoff=FAST_BACKOFF)
        try:
            yield cluster
        finally:
            cluster.close()


def storage_class(name: str, zones: list[str], binding: str = "WaitForFirstConsumer") -> Obj:
    return {"metadata": {"name": name}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": binding,
            "allowedTopologies": [{"matchLabelExpressions": [{"key": wk.ZONE, "values": zones}]}]}


def volume(name: str, zone: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "csi": {"driver": "ebs.csi.aws.com",
                                                                                   "volumeHandle": f"vol-{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [zone]}]}]}}}}


def claim(name: str, *, storage_class_name: str | None = None, volume_name: str | None = None,
          bound: bool = False) -> Obj:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    if volume_name is not None:
        spec["volumeName"] = volume_name
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if bound:
        meta["annotations"] = {BIND_COMPLETED: "yes"}
    return {"metadata": meta, "spec": spec}


def with_status(cluster: Any, made: Obj, phase: str) -> None:
    """The claim's status as the PersistentVolume controller writes it (through /status)."""
    made["status"] = {"phase": phase}
    cluster.update(PERSISTENT_VOLUME_CLAIM, made, "status")


def pod(name: str, volumes: list[Obj] | None = None) -> Obj:
    """A pending pod asking for one cpu (created as a user creates it: no Scene builder over HTTP)."""
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "pause",
                                            "resources": {"requests": {"cpu": "1"}}}]}
    if volumes:
        spec["volumes"] = volumes
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def claims(*names: str) -> list[Obj]:
    return [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": name}} for i, name in enumerate(names)]


def node_of(scene: Scene, pod: str) -> Obj | None:
    found = next(p for p in scene.pods() if objects.name(p) == pod)
    name = (found.get("spec") or {}).get("nodeName")
    return scene.node(name) if name else None


def test_a_pod_whose_claim_is_lost_gets_no_node_and_v1_14_1s_event(
    nodepools: Path, api: KubeCluster, closing: Closing
) -> None:
    """Ported: provisioning/scheduling/suite_test.go:3749, "should not launch nodes for pod with Lost
    persistentVolumeClaim" (a WaitForFirstConsumer class, its claim `Lost`); with :2066's valid pod beside it,
    which gets its node. The Event is v1.14.1's `PodFailedToScheduleEvent` of the `Validate` error."""
    api.create(STORAGE_CLASS, storage_class("default-storage-class", ["us-east-1a"]))
    made = api.create(PERSISTENT_VOLUME_CLAIM, claim("tmp-ephemeral", storage_class_name="default-storage-class"))
    with_status(api, made, "Lost")
    scene = closing(Scene(nodepools, cluster=api))  # type: ignore[arg-type]
    api.create(objects.POD, pod("lost", claims("tmp-ephemeral")))
    api.create(objects.POD, pod("valid"))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "valid") is not None)
    scene.run(controller, 30)

    assert node_of(scene, "lost") is None and len(scene.nodes()) == 1
    (event,) = [e for e in scene.events("FailedScheduling") if e["involvedObject"]["name"] == "lost"]
    assert event["type"] == "Warning"
    assert event["message"] == ("Failed to schedule pod, persistentvolumeclaim bound to non-existent persistentvolume "
                                "(PersistentVolumeClaim default/tmp-ephemeral)")


def test_a_bound_claims_volume_zone_pins_the_new_nodes_zone(
    nodepools: Path, api: KubeCluster, closing: Closing
) -> None:
    """Ported: provisioning/suite_test.go:2171, "should schedule to volume zones if volume already bound": the
    claim bound (and annotated so) to a PersistentVolume in one zone; the node is launched there."""
    api.create(STORAGE_CLASS, storage_class("gp3", ["us-east-1b", "us-east-1c", "us-east-1d"]))
    api.create(PERSISTENT_VOLUME, volume("pv-data", "us-east-1d"))
    made = api.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="gp3", volume_name="pv-data",
                                                     bound=True))
    with_status(api, made, "Bound")
    scene = closing(Scene(nodepools, cluster=api))  # type: ignore[arg-type]
    api.create(objects.POD, pod("db", claims("data")))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "db") is not None)

    found = node_of(scene, "db")
    assert found is not None and objects.labels(found)[wk.ZONE] == "us-east-1d"


def test_an_unbound_claim_lands_in_its_classs_zones_and_the_pods_own(nodepools: Path) -> None:
    """Ported: provisioning/suite_test.go:2103, "should schedule to storage class zones if volume does not exist":
    the class allows two zones, the pod asks for two, one is common."""
    scene = Scene(nodepools)
    scene.cluster.create(STORAGE_CLASS, storage_class("wffc", ["us-east-1b", "us-east-1c"]))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="wffc"))
    term = {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1c"]}]}
    scene.add_pod("db", cpu="1", volumes=claims("data"),
                  affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                      "nodeSelectorTerms": [term]}}})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "db") is not None)

    found = node_of(scene, "db")
    assert found is not None and objects.labels(found)[wk.ZONE] == "us-east-1c"


def test_an_ephemeral_volumes_bound_claim_pins_the_zone(nodepools: Path) -> None:
    """Ported: provisioning/suite_test.go:2182, "should schedule to volume zones if volume already bound
    (ephemeral volume)": the claim `<pod>-<volume>` Kubernetes made, bound to a volume in one zone."""
    scene = Scene(nodepools)
    scene.cluster.create(STORAGE_CLASS, storage_class("wffc", ["us-east-1b", "us-east-1f"]))
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-scratch", "us-east-1f"))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("job-scratch", storage_class_name="wffc",
                                                        volume_name="pv-scratch", bound=True))
    ephemeral = {"volumeClaimTemplate": {"spec": {"storageClassName": "wffc", "accessModes": ["ReadWriteOnce"],
                                                  "resources": {"requests": {"storage": "1Gi"}}}}}
    scene.add_pod("job", cpu="1", volumes=[{"name": "scratch", "ephemeral": ephemeral}])
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "job") is not None)

    found = node_of(scene, "job")
    assert found is not None and objects.labels(found)[wk.ZONE] == "us-east-1f"


@pytest.mark.parametrize(("objects_", "volume_name", "reason"), [
    # provisioning/suite_test.go:1995 "should not schedule if invalid pvc" (and :2066 beside a valid pod)
    ((), None, 'getting persistent volume claim, persistentvolumeclaims "data" not found'),
    # :2077 "… (storage class)": an unbound claim of a class the cluster lacks
    (("claim",), None, "failed to validate pvc, failed to get storage class"),
    # :2090 "… (volume name)": bound to a volume the cluster lacks
    (("claim",), "pv-gone", 'failed to validate pvc, persistentvolumes "pv-gone" not found'),
], ids=["no claim", "no class", "no volume"])
def test_a_pod_whose_claim_class_or_volume_is_missing_is_ignored_and_the_valid_one_provisioned(
    nodepools: Path, objects_: tuple[str, ...], volume_name: str | None, reason: str
) -> None:
    """Ported: provisioning/suite_test.go:1995, :2066, :2077, :2090 — what the cluster lacks is missing (unlike
    `check --workloads`, whose files are not the cluster)."""
    scene = Scene(nodepools)
    if objects_:
        made = scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="invalid-storage-class",
                                                                   volume_name=volume_name, bound=True))
        with_status(scene.cluster, made, "Bound" if volume_name else "Pending")
    scene.add_pod("invalid", cpu="1", volumes=claims("data"))
    scene.add_pod("valid", cpu="1")
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "valid") is not None)
    scene.run(controller, 30)

    assert node_of(scene, "invalid") is None
    (event,) = [e for e in scene.events("FailedScheduling") if e["involvedObject"]["name"] == "invalid"]
    assert event["message"].startswith(f"Failed to schedule pod, {reason}")


def test_a_claim_made_later_lets_the_pod_be_provisioned(nodepools: Path) -> None:
    """An ignored pod is looked at again: once its claim exists (an operator made it late) it gets its node."""
    scene = Scene(nodepools)
    scene.add_pod("late", cpu="1", volumes=claims("data"))
    controller = scene.controller()
    scene.run(controller, 30)
    assert node_of(scene, "late") is None
    made = scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="wffc"))
    with_status(scene.cluster, made, "Pending")
    scene.cluster.create(STORAGE_CLASS, storage_class("wffc", ["us-east-1c"]))
    scene.run(controller, 120, until=lambda: node_of(scene, "late") is not None)

    found = node_of(scene, "late")
    assert found is not None and objects.labels(found)[wk.ZONE] == "us-east-1c"




def test_a_pod_with_a_claim_is_held_while_the_classes_cannot_be_listed_never_read_as_none(
    nodepools: Path, tmp_path: Path, closing: Closing,
) -> None:
    """A role that may not list StorageClasses (403): the pod with a claim is held — an error naming the cause in
    the step's result — while the pod without one gets its node; once the role allows it, the held pod is
    provisioned in its class's zone."""
    with EmulatorThread(seed_namespaces=True, authorize=True) as server:
        admin = KubeCluster.from_kubeconfig(str(server.write_kubeconfig(tmp_path / "admin")), backoff=FAST_BACKOFF)
        token = server.emulator._bearer_tokens.issue("karpenter", "controller")
        role = admin.create(CLUSTER_ROLE, {"metadata": {"name": "controller"}, "rules": WITHOUT_CLASSES})
        admin.create(CLUSTER_ROLE_BINDING, {
            "metadata": {"name": "controller"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                            "kind": "ClusterRole", "name": "controller"},
            "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": "karpenter"}]})
        admin.create(STORAGE_CLASS, storage_class("wffc", ["us-east-1c"]))
        made = admin.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="wffc"))
        with_status(admin, made, "Pending")
        admin.create(objects.POD, pod("db", claims("data")))
        admin.create(objects.POD, pod("web"))
        controller_cluster = KubeCluster.from_kubeconfig(
            str(server.write_kubeconfig(tmp_path / "controller", token=token)), backoff=FAST_BACKOFF)
        try:
            scene = closing(Scene(nodepools, cluster=controller_cluster))  # type: ignore[arg-type]
            controller = scene.controller()
            errors: list[str] = []
            for _ in range(40):
                errors += scene.step(controller).errors
                scene.advance(1.0)
                if node_of(scene, "web") is not None:
                    break
            assert node_of(scene, "web") is not None and node_of(scene, "db") is None
            assert any(e.startswith("holding 1 pod(s) with claims (default/db): cannot list storageclasses:")
                       and "403" in e for e in errors), errors

            role["rules"] = [*WITHOUT_CLASSES, CLASSES]
            admin.update(CLUSTER_ROLE, role)
            scene.run(controller, 120, until=lambda: node_of(scene, "db") is not None)
            found = node_of(scene, "db")
            assert found is not None and objects.labels(found)[wk.ZONE] == "us-east-1c"
        finally:
            controller_cluster.close()
            admin.close()
