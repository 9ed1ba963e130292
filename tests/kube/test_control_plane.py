"""The control plane beside the test API server (tests/kube/apiserver/): the Deployment and ReplicaSet
controllers, the kube-scheduler stand-in and the kubelets, each driven pass by pass on an in-memory cluster (the
same code runs against the server over HTTP in test_kubectl.py and the end-to-end test)."""

from __future__ import annotations

from typing import Any

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import NODE, POD, Obj

from .apiserver.kinds import DEPLOYMENT, REPLICA_SET
from .apiserver.kubelet import Kubelets
from .apiserver.scheduler import SchedulerStandIn
from .apiserver.workloads import TEMPLATE_HASH, Workloads
from .support import names


def _node(name: str, cpu: str = "2", ready: bool = True, instance_type: str = "m5.large", **spec: Any) -> Obj:
    status: Obj = {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    return {"metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance_type,
                                                   "kubernetes.io/hostname": name}},
            "spec": spec, "status": status}


def _pod(name: str, cpu: str = "1", **spec: Any) -> Obj:
    container = {"name": "app", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [container], **spec}}


def _scheduled(pod: Obj) -> tuple[str, str]:
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    return condition["status"], condition.get("message", "")


def test_the_scheduler_binds_pods_that_fit_a_ready_node_and_marks_the_rest_unschedulable() -> None:
    cluster = MemoryCluster()
    cluster.create(NODE, _node("ready", cpu="2"))
    cluster.create(NODE, _node("starting", ready=False))
    cluster.create(NODE, _node("tainted", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]))
    for name in ("a", "b", "c"):
        cluster.create(POD, _pod(name))
    cluster.create(POD, _pod("elsewhere", cpu="10m", nodeSelector={"zone": "b"}))

    SchedulerStandIn(cluster).sync()
    pods = {objects.name(p): p for p in cluster.list(POD).items}

    assert [pods[n]["spec"].get("nodeName") for n in ("a", "b", "c")] == ["ready", "ready", None]
    status, message = _scheduled(pods["c"])
    assert status == "False" and pods["c"]["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert message.startswith("0/3 nodes are available: 1 exceeds node resources, 1 node(s) were not ready, ")
    assert "taint gpu=true:NoSchedule" in message
    assert pods["elsewhere"]["spec"].get("nodeName") is None and _scheduled(pods["elsewhere"])[0] == "False"
    events = {(e["involvedObject"]["name"], e["reason"]) for e in cluster.list(objects.EVENT).items}
    assert {("a", "Scheduled"), ("b", "Scheduled"), ("c", "FailedScheduling")} <= events


def test_the_scheduler_writes_an_unchanged_verdict_once_and_binds_when_room_appears() -> None:
    cluster = MemoryCluster()
    cluster.create(POD, _pod("web"))
    scheduler = SchedulerStandIn(cluster)
    scheduler.sync()
    version = cluster.list(POD).resource_version

    scheduler.sync()
    assert cluster.list(POD).resource_version == version  # nothing to write: the passes converge

    cluster.create(NODE, _node("new"))
    scheduler.sync()
    assert (cluster.get(POD, "web", "default") or {})["spec"]["nodeName"] == "new"


def test_kubelets_join_after_their_delay_never_for_never_join_types_and_run_bound_pods() -> None:
    cluster = MemoryCluster()
    now = [0.0]
    kubelets = Kubelets(cluster, join_after=5.0, never_join=frozenset({"c5.large"}), clock=lambda: now[0])
    cluster.create(NODE, _node("late", ready=False, instance_type="m5.large"))
    cluster.create(NODE, _node("never", ready=False, instance_type="c5.large"))
    cluster.create(POD, {**_pod("web"), "spec": {**_pod("web")["spec"], "nodeName": "late"}})
    cluster.create(POD, {**_pod("stuck"), "spec": {**_pod("stuck")["spec"], "nodeName": "never"}})
    cluster.create(POD, {**_pod("orphan"), "spec": {**_pod("orphan")["spec"], "nodeName": "gone"}})

    assert kubelets.sync() == 5.0
    now[0] = 4.0
    assert kubelets.sync() == 1.0
    ready_before = [n for n in cluster.list(NODE).items if n["status"].get("conditions")]
    now[0] = 5.0
    assert kubelets.sync() is None
    pods = {objects.name(p): p for p in cluster.list(POD).items}

    assert ready_before == []
    ready = {objects.name(n) for n in cluster.list(NODE).items if n["status"].get("conditions")}
    assert ready == {"late"}
    assert pods["web"]["status"]["phase"] == "Running"
    assert {c["type"] for c in pods["web"]["status"]["conditions"] if c["status"] == "True"} >= {"Ready"}
    assert pods["stuck"].get("status", {}).get("phase") != "Running"
    assert "orphan" not in pods  # its node is gone: the pod garbage collector deletes it


def _deployment(replicas: int, image: str = "pause:1") -> Obj:
    return {"metadata": {"name": "web", "namespace": "default", "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def _converge(workloads: Workloads, passes: int = 4) -> None:
    for _ in range(passes):
        workloads.sync()


def test_a_deployment_owns_a_replica_set_that_owns_its_replicas_and_reports_their_readiness() -> None:
    cluster = MemoryCluster()
    workloads = Workloads(cluster)
    cluster.create(DEPLOYMENT, _deployment(3))
    _converge(workloads)

    (replica_set,) = cluster.list(REPLICA_SET).items
    pods = cluster.list(POD).items
    assert len(pods) == 3 and all(objects.labels(p)[TEMPLATE_HASH] == objects.labels(replica_set)[TEMPLATE_HASH]
                                  for p in pods)
    assert all(p["metadata"]["ownerReferences"][0]["name"] == objects.name(replica_set) for p in pods)
    status = (cluster.get(DEPLOYMENT, "web", "default") or {})["status"]
    assert (status["replicas"], status["updatedReplicas"], status["availableReplicas"]) == (3, 3, 0)

    for pod in pods[:2]:
        cluster.patch(POD, objects.name(pod), {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                      "default", subresource="status")
    cluster.patch(DEPLOYMENT, "web", {"spec": {"replicas": 2}}, "default")
    _converge(workloads)

    left = cluster.list(POD).items
    status = (cluster.get(DEPLOYMENT, "web", "default") or {})["status"]
    assert sorted(names(left)) == sorted(names(pods[:2]))  # the not-ready replica went first
    assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (2, 2, 2)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Available": "True", "Progressing": "True"}


def test_a_new_template_gets_a_new_replica_set_and_deleting_the_deployment_collects_everything() -> None:
    cluster = MemoryCluster()
    workloads = Workloads(cluster)
    cluster.create(DEPLOYMENT, _deployment(2))
    _converge(workloads)
    cluster.patch(DEPLOYMENT, "web", {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "pause:2"}]}}}}, "default")
    _converge(workloads)

    sets = {objects.name(rs): rs["spec"]["replicas"] for rs in cluster.list(REPLICA_SET).items}
    images = {p["spec"]["containers"][0]["image"] for p in cluster.list(POD).items}
    assert sorted(sets.values()) == [0, 2] and images == {"pause:2"}

    cluster.delete(DEPLOYMENT, "web", "default")
    _converge(workloads)
    assert cluster.list(REPLICA_SET).items == [] and cluster.list(POD).items == []
