"""A pending pod's volumes in the controller, per kind of pool (issue #25): a NodePool reads them as Karpenter v1.14.1
does — each term of a PersistentVolume's required node affinity or of a StorageClass's allowedTopologies an
alternative, tried in turn at each node and claim, a local or hostPath volume's hostname ignored (core
pkg/controllers/provisioning/scheduling/volumetopology.go `GetRequirements`; nodeclaim.go and existingnode.go
`CanAdd`) —, a Provisioner as v0.31.1 does: the first term, the hostname kept, and its `ValidatePersistentVolumeClaims`
(a claim, its class or its volume missing: the pod is left out, "ignoring pod, …"). On the in-memory cluster, with
the example NodePools alone (v1.14.1) or the example Provisioners (examples/workloads/policies, v0.31.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, STORAGE_CLASS, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import Scene

from .volumesupport import BIND_COMPLETED, example_nodepools

SCHEDULING = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go"


@pytest.fixture(scope="module")
def nodepools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's NodePools alone (no Provisioner beside them): what v1.14.1 alone provisions for."""
    return example_nodepools(tmp_path_factory.mktemp("policies"), tmp_path_factory.mktemp("build") / "build")


def zone_term(zone: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [zone]}]}


HOST_TERM = {"matchExpressions": [{"key": wk.HOSTNAME, "operator": "In", "values": ["ip-10-0-0-1.ec2.internal"]}]}


def volume(name: str, terms: list[dict[str, Any]], source: str = "csi") -> Obj:
    sources = {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"}, "local": {"path": "/mnt/a"},
               "hostPath": {"path": "/mnt/a"}}  # fmt: skip
    return {"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], source: sources[source],
        "nodeAffinity": {"required": {"nodeSelectorTerms": terms}}}}


def storage_class(name: str, zones: list[str]) -> Obj:
    """A WaitForFirstConsumer class whose allowedTopologies has one term per zone (ORed)."""
    return {"metadata": {"name": name}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": wk.ZONE, "values": [z]}]} for z in zones]}


def claim(name: str, *, storage_class_name: str | None = None, volume_name: str | None = None) -> Obj:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    if volume_name is not None:
        spec["volumeName"] = volume_name
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume_name:
        meta["annotations"] = {BIND_COMPLETED: "yes"}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Bound" if volume_name else "Pending"}}


def claims(*names: str) -> list[Obj]:
    return [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": name}} for i, name in enumerate(names)]


def node_of(scene: Scene, pod: str) -> Obj | None:
    found = next(p for p in scene.pods() if objects.name(p) == pod)
    name = (found.get("spec") or {}).get("nodeName")
    return scene.node(name) if name else None


def zone_of(scene: Scene, pod: str) -> str | None:
    found = node_of(scene, pod)
    return None if found is None else objects.labels(found)[wk.ZONE]


ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "multi-zone-app"}}, "topologyKey": wk.ZONE}]}}


@pytest.mark.parametrize("through", ["PersistentVolume", "StorageClass"])
def test_two_pods_kept_apart_by_zone_use_both_terms_of_their_volumes(nodepools: Path, through: str) -> None:
    """Ported: scheduling/suite_test.go:3047, "should schedule pods using a PV with multiple zones", and :3118, "…
    using a StorageClass with multiple zones in AllowedTopologies": each pod's volume allows us-east-1a or
    us-east-1b (two terms), a zone anti-affinity keeps the pods apart — both get a node, in different zones of the
    two. Fails on the old code (both read as us-east-1a: the second pod was left pending)."""
    scene = Scene(nodepools)
    if through == "StorageClass":
        scene.cluster.create(STORAGE_CLASS, storage_class("multi-zone-sc", ["us-east-1a", "us-east-1b"]))
    for i in range(2):
        if through == "PersistentVolume":
            scene.cluster.create(PERSISTENT_VOLUME, volume(f"multi-zone-pv-{i}", [zone_term("us-east-1a"),
                                                                                  zone_term("us-east-1b")]))
            scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim(f"multi-zone-pvc-{i}",
                                                                volume_name=f"multi-zone-pv-{i}"))
        else:
            scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim(f"multi-zone-pvc-{i}",
                                                                storage_class_name="multi-zone-sc"))
        scene.add_pod(f"pod-{i}", cpu="1", labels={"app": "multi-zone-app"}, affinity=ANTI,
                      volumes=claims(f"multi-zone-pvc-{i}"))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: all(node_of(scene, f"pod-{i}") is not None for i in range(2)))

    zones = [zone_of(scene, f"pod-{i}") for i in range(2)]
    assert set(zones) == {"us-east-1a", "us-east-1b"}, zones


def test_a_pod_joins_a_running_node_in_its_volumes_second_term(nodepools: Path) -> None:
    """v1.14.1's `ExistingNode.CanAdd` tries each alternative at each node before a new claim is made: the pod
    whose volume allows us-east-1a or us-east-1b joins the NodePool's running node in us-east-1b with room, and
    nothing is launched. Fails on the old code (the first term alone: a new node in us-east-1a)."""
    scene = Scene(nodepools)
    running = scene.add_node("NodePool/default", "m6i.xlarge", zone="us-east-1b")
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-a", [zone_term("us-east-1a"), zone_term("us-east-1b")]))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", volume_name="pv-a"))
    scene.add_pod("db", cpu="1", volumes=claims("data"))
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: node_of(scene, "db") is not None)

    found = node_of(scene, "db")
    assert found is not None and objects.name(found) == running
    assert list(scene.nodes()) == [running]


@pytest.mark.parametrize("source", ["local", "hostPath"])
def test_a_local_volumes_hostname_is_ignored_by_a_nodepool(nodepools: Path, source: str) -> None:
    """Ported: provisioning/suite_test.go:2203, "should ignore hostname affinity scheduling when using local path
    volumes" (both entries): the volume names a node that does not exist; the NodePool launches one anyway. Fails
    on the old code (the hostname kept: never scheduled)."""
    scene = Scene(nodepools)
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-local", [HOST_TERM], source))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="local-path",
                                                        volume_name="pv-local"))
    scene.add_pod("db", cpu="1", volumes=claims("data"))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "db") is not None)

    assert node_of(scene, "db") is not None


def test_a_csi_volumes_hostname_is_kept(nodepools: Path) -> None:
    """Ported: provisioning/suite_test.go:2290, "should not ignore hostname affinity when using non-local path
    volumes": the pod is never scheduled (the guard: only local and hostPath volumes lose their hostname)."""
    scene = Scene(nodepools)
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-csi", [HOST_TERM]))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="gp3", volume_name="pv-csi"))
    scene.add_pod("db", cpu="1", volumes=claims("data"))
    scene.run(scene.controller(), 60)

    assert node_of(scene, "db") is None and not scene.nodes()


# --- Provisioners: v0.31.1 -------------------------------------------------------------------------------------


def test_a_provisioner_keeps_v031s_first_term_and_a_local_volumes_hostname(compiled: Path) -> None:
    """v0.31.1's `getPersistentVolumeRequirements` takes the first term ("Terms are ORed, only use the first term")
    and keeps the hostname: on the example Provisioners the pod whose volume allows us-east-1a or us-east-1b lands
    in us-east-1a, and the one on a local volume naming another node is never scheduled."""
    scene = Scene(compiled)
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-a", [zone_term("us-east-1a"), zone_term("us-east-1b")]))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", volume_name="pv-a"))
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-local", [HOST_TERM], "local"))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("local", volume_name="pv-local"))
    scene.add_pod("db", cpu="1", volumes=claims("data"))
    scene.add_pod("cache", cpu="1", volumes=claims("local"))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "db") is not None)
    scene.run(controller, 30)

    assert zone_of(scene, "db") == "us-east-1a"
    assert node_of(scene, "cache") is None


V031 = "kubernetes-sigs/karpenter v0.31.1 pkg/controllers/provisioning/provisioner_test.go"


@pytest.mark.parametrize(("made", "reason"), [
    # :979 "should not schedule if invalid pvc" and :997 "… (pvc)", beside a valid pod
    ((), 'getting persistent volume claim "data", persistentvolumeclaims "data" not found'),
    # :1008 "… (storage class)": the claim's class the cluster lacks
    ((claim("data", storage_class_name="invalid-storage-class"),),
     'storageclasses.storage.k8s.io "invalid-storage-class" not found'),
    # :1021 "… (volume name)": bound to a volume the cluster lacks
    ((claim("data", volume_name="invalid-volume-name"),), 'persistentvolumes "invalid-volume-name" not found'),
], ids=["no claim", "no class", "no volume"])  # fmt: skip
def test_a_provisioner_leaves_out_a_pod_whose_claim_class_or_volume_is_missing(
    compiled: Path, made: tuple[Obj, ...], reason: str
) -> None:
    """Ported: provisioner_test.go (v0.31.1) :979, :997, :1008, :1021 — v0.31.1's `ValidatePersistentVolumeClaims`:
    the pod is left out ("ignoring pod, …", here its `FailedScheduling` Event), the valid one beside it gets its
    node. Fails on the old code (a Provisioner provisioned for the pod without the missing object's topology)."""
    scene = Scene(compiled)
    for obj in made:
        scene.cluster.create(PERSISTENT_VOLUME_CLAIM, obj)
    scene.add_pod("invalid", cpu="1", volumes=claims("data"))
    scene.add_pod("valid", cpu="1")
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: node_of(scene, "valid") is not None)
    scene.run(controller, 30)

    assert node_of(scene, "invalid") is None, f"{V031}: {reason}"
    (event,) = [e for e in scene.events("FailedScheduling") if e["involvedObject"]["name"] == "invalid"]
    assert reason in event["message"]


def test_a_provisioner_schedules_a_pod_whose_unbound_claim_has_an_empty_class(compiled: Path) -> None:
    """Ported: provisioner_test.go (v0.31.1) :987, "should schedule with an empty storage class": class `""`
    unbound, no default class — v0.31.1 validates nothing of it and reads no topology; the pod gets its node (a
    NodePool ignores it: "unbound pvc must define a storage class")."""
    scene = Scene(compiled)
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name=""))
    scene.add_pod("db", cpu="1", volumes=claims("data"))
    scene.run(scene.controller(), 120, until=lambda: node_of(scene, "db") is not None)

    assert node_of(scene, "db") is not None


def test_a_pod_with_zone_affinity_joins_a_claim_in_its_volumes_second_term(nodepools: Path) -> None:
    """v1.14.1's `NodeClaim.CanAdd` tries each alternative at each open claim, topology checked with the pod's own
    affinity: `web` (us-east-1b) opens a claim; `db`, whose volume allows us-east-1a or us-east-1b and which must
    share a zone with `web`, joins that claim — one node. Fails without the guard on the claims' quick topology
    refusal, which read the first term's zone and launched a second node."""
    scene = Scene(nodepools)
    scene.cluster.create(STORAGE_CLASS, storage_class("multi-zone-sc", ["us-east-1a", "us-east-1b"]))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", storage_class_name="multi-zone-sc"))
    scene.add_pod("web", cpu="1", labels={"app": "web"}, nodeSelector={wk.ZONE: "us-east-1b"})
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": wk.ZONE}]}}
    scene.add_pod("db", cpu="1", affinity=affinity, volumes=claims("data"))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: all(node_of(scene, p) is not None for p in ("web", "db")))

    assert zone_of(scene, "db") == "us-east-1b"
    assert len(scene.nodes()) == 1


def test_a_pod_whose_volumes_cross_into_too_many_alternatives_is_refused_in_bounded_time(nodepools: Path) -> None:
    """A hostile probe's finding: eight claims whose PersistentVolumes each have eight terms (on keys of their own)
    cross into 8⁸ = 16,777,216 alternatives — v1.14.1 would try them all, and every provisioning pass held the
    controller for minutes (six such volumes: 23 CPU s over 30 passes). Past `MAX_VOLUME_ALTERNATIVES` the pod is
    refused on NodePools, saying why, in bounded time; a pod beside it gets its node."""
    scene = Scene(nodepools)
    for v in range(8):
        terms = [{"matchExpressions": [{"key": f"example.com/k{v}", "operator": "In", "values": [f"x{j}"]}]}
                 for j in range(8)]  # fmt: skip
        scene.cluster.create(PERSISTENT_VOLUME, volume(f"pv{v}", terms))
        scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim(f"pvc{v}", volume_name=f"pv{v}"))
    scene.add_pod("victim", cpu="1", volumes=claims(*[f"pvc{v}" for v in range(8)]))
    scene.add_pod("bystander", cpu="1")
    controller = scene.controller()
    scene.run(controller, 30, until=lambda: node_of(scene, "bystander") is not None and bool(
        scene.events("FailedScheduling")))
    assert node_of(scene, "bystander") is not None and node_of(scene, "victim") is None
    messages = [e["message"] for e in scene.events("FailedScheduling")]
    assert any("cross into 16777216 alternatives, more than the 256" in m for m in messages), messages


def test_a_pod_joins_a_node_of_no_pool_in_its_volumes_second_term_when_only_nodepools_run(nodepools: Path) -> None:
    """v1.14.1 schedules onto every active node (provisioner.go `nodes.Active()`), a node no Karpenter launched (a
    managed node group's) included, and its `ExistingNode.CanAdd` tries each volume alternative: with NodePools alone,
    the pod whose volume allows us-east-1a or us-east-1b joins that node in us-east-1b and nothing is launched. Fails
    on the old code (a node of no pool was read with v0.31.1's first term: a new node in us-east-1a)."""
    scene = Scene(nodepools)
    static = scene.add_unmanaged_node("static-b", zone="us-east-1b")
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-a", [zone_term("us-east-1a"), zone_term("us-east-1b")]))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", volume_name="pv-a"))
    scene.add_pod("db", cpu="1", volumes=claims("data"))
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: node_of(scene, "db") is not None)

    found = node_of(scene, "db")
    assert found is not None and objects.name(found) == static
    assert list(scene.nodes()) == [static]


def test_a_spread_counts_nodes_by_the_pods_own_affinity_not_its_volumes_first_term(nodepools: Path) -> None:
    """v1.14.1's `MakeTopologyNodeFilter` (scheduling/topologynodefilter.go:38) builds a spread group's node filter
    from the pod's nodeSelector and node affinity alone; its volumes' topology goes to the claim. A zone spread of
    maxSkew 1 with one `web` pod in each zone the NodePool allows: the next pod, whose volume allows 1a or 1b, may
    take its first alternative, 1a (a skew of 2 − 1 = 1). Fails on the old code, whose filter held the volume's first
    term (1a): the group counted the pods in 1a only, read the other zones as empty and refused 1a (2 − 0)."""
    scene = Scene(nodepools)
    zones = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"]
    spread = [{"maxSkew": 1, "topologyKey": wk.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    nodes = {}
    for index, zone in enumerate(zones):
        nodes[zone] = scene.add_node("NodePool/default", "m6i.xlarge", zone=zone)
        scene.add_pod(f"web-{index}", cpu="100m", node=nodes[zone], labels={"app": "web"},
                      topologySpreadConstraints=spread)
    scene.cluster.create(PERSISTENT_VOLUME, volume("pv-a", [zone_term("us-east-1a"), zone_term("us-east-1b")]))
    scene.cluster.create(PERSISTENT_VOLUME_CLAIM, claim("data", volume_name="pv-a"))
    scene.add_pod("web-new", cpu="100m", labels={"app": "web"}, topologySpreadConstraints=spread,
                  volumes=claims("data"))
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: node_of(scene, "web-new") is not None)

    found = node_of(scene, "web-new")
    assert found is not None and objects.name(found) == nodes["us-east-1a"]
    assert sorted(scene.nodes()) == sorted(nodes.values())
