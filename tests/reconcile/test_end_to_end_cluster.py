"""End to end in production mode, driven only by kubectl: the Helm chart's RBAC is applied to the test API server
(which authenticates by token and authorizes with RBAC), `karpenter-policy reconcile` runs as a subprocess with
the chart's own arguments (``--provision-unschedulable-only``, leader election, the constraint-set ConfigMap) and
its ServiceAccount's token, against moto's EC2 over HTTP; the server's control plane (tests/kube/apiserver/) runs
the Deployment and ReplicaSet controllers, a kube-scheduler stand-in and kubelets that join a second after their
Node shows up — except for the instance type in ``never_join``.

kubectl applies a Deployment; the scheduler stand-in marks its pods Unschedulable; the controller, started once all
three are marked (a start opens one batch window for every pod pending, so they are one batch whatever the load),
launches a node and binds them; the kubelet joins and `kubectl rollout status` completes. A second Deployment fits
the node: the scheduler stand-in binds it. A Deployment pinned to the never-joining type gets a node whose kubelet never
joins: its pods stay not Ready, and registration liveness deletes the node (`--registration-ttl`, 20 s here).
`kubectl delete node` drains a node and terminates its instance, and the Deployment gets a new one; scaling to
zero empties the nodes, whose ``ttlSecondsAfterEmpty`` deletes them and terminates their instances. Any
permission the chart does not grant fails the test: the controller's log is checked for refusals, and
`kubectl auth can-i` asks for what the controller does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube.apiserver.controlplane import ControlPlaneOptions
from kube.emulator import EmulatorThread

from karpenter_policy.kube import objects

from .conftest import CLUSTER, AwsWorkloads
from .support import POLICIES, ROOT, compile_policies, configmap_manifest
from .test_end_to_end_kubectl import GENEROUS, Kubectl, free_port, probe, until

chart = pytest.importorskip("deploy.chart", reason="helm-python-sdk (Helm's Go SDK) is not installed")

NEVER_JOINS = "m5.large"  # the kubelets of this instance type never join
REGISTRATION_TTL = "10s"  # the never-joining node waits this out: short, yet far above a join (1 s)
RELEASE_NAMESPACE = "karpenter-policy"
PROFILE = "KarpenterNodeInstanceProfile-workloads"
ROLLOUT = f"--timeout={GENEROUS - 10:g}s"  # within the time kubectl is given


@pytest.fixture()
def compiled_for_cluster(tmp_path: Path) -> Path:
    """The example policies with `default` deleting its empty nodes after 2 s and not consolidating (a node the
    test watches is not replaced meanwhile)."""
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    default = yaml.safe_load((policies / "default.yaml").read_text())
    default["spec"]["ttlSecondsAfterEmpty"] = 2
    default["spec"].pop("consolidation", None)
    (policies / "default.yaml").write_text(yaml.safe_dump(default))
    return compile_policies(policies, tmp_path / "build")


@dataclass
class Cluster:
    kubectl: Kubectl
    port: int
    log: Callable[[], str]
    service_account: str
    #: starts `karpenter-policy reconcile`: a start opens one batch window for every pod already pending
    start: Callable[[], None]


def _chart_values() -> dict[str, Any]:
    return chart.merged(chart.REQUIRED, {
        "cluster": {"name": CLUSTER, "kubernetesVersion": "1.27"},
        "controller": {"defaultInstanceProfile": PROFILE, "batchIdleDuration": "200ms", "logFormat": "text",
                       # registration liveness at a test's pace: the never-joining node goes after 10 s, not 15 min
                       "registrationTTL": REGISTRATION_TTL},
    })


def _controller_args(documents: list[dict[str, Any]], port: int) -> list[str]:
    """The controller container's arguments as the chart renders them, on a free metrics port."""
    spec = chart.pod_spec(documents, "controller")
    (container,) = [c for c in spec["containers"] if c["name"] == "controller"]
    args = [arg for arg in container["args"] if not arg.startswith("--metrics-port=")]
    return [*args, f"--metrics-port={port}", "--metrics-address=127.0.0.1"]


def _rbac(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The controller's ServiceAccount, roles and bindings."""
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    return [doc for doc in documents if doc["kind"] in kinds
            and doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "controller"]


@pytest.fixture()
def cluster(compiled_for_cluster: Path, aws_workloads: AwsWorkloads, tmp_path: Path) -> Iterator[Cluster]:
    options = ControlPlaneOptions(join_after=1.0, never_join=frozenset({NEVER_JOINS}))
    crds = frozenset({objects.NODE_CLAIM, objects.NODE_POOL, objects.EC2_NODE_CLASS})  # Karpenter v1's, installed
    with EmulatorThread(seed_namespaces=True, authorize=True, control_plane=options, crds=crds) as server:
        kubectl = Kubectl(server.write_kubeconfig(tmp_path / "admin.kubeconfig"), tmp_path / "kubectl-cache", GENEROUS)
        documents = chart.render(_chart_values())
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}}))
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(_rbac(documents)))
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump(configmap_manifest(compiled_for_cluster)))
        (account,) = [doc["metadata"]["name"] for doc in _rbac(documents) if doc["kind"] == "ServiceAccount"]
        # `kubectl create token` sends protobuf, which the server does not speak: the same TokenRequest as JSON.
        request = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
        token = json.loads(kubectl("create", "--raw", f"/api/v1/namespaces/{RELEASE_NAMESPACE}/serviceaccounts/"
                                                      f"{account}/token", "-f", "-", stdin=request))["status"]["token"]
        config = server.write_kubeconfig(tmp_path / "controller.kubeconfig", RELEASE_NAMESPACE, token)
        port = free_port()
        log = tmp_path / "reconcile.log"
        command = [sys.executable, "-m", "karpenter_policy.cli", *_controller_args(documents, port),
                   "--kubeconfig", str(config), "--endpoint-url", aws_workloads.env.proxy.url]
        started: list[subprocess.Popen[str]] = []

        def logged() -> str:
            return log.read_text() if log.exists() else ""

        def start() -> None:
            with log.open("w") as stderr:
                started.append(subprocess.Popen(command, cwd=ROOT, stderr=stderr, text=True, env=dict(os.environ)))

        try:
            yield Cluster(kubectl, port, logged, f"system:serviceaccount:{RELEASE_NAMESPACE}:{account}", start)
        finally:
            for process in started:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=GENEROUS)
                finally:
                    process.kill()
            print("\n\n".join(kubectl.transcript))  # the kubectl session, for the record (pytest -s shows it)
            print(logged())  # the controller's log, for the record
        assert all(process.returncode == 0 for process in started), logged()


def deployment(name: str, replicas: int, cpu: str, **pod_spec: Any) -> str:
    container = {"name": "app", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": {"cpu": cpu}}}
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [container], **pod_spec}}},
    })


def _unschedulable(pods: list[dict[str, Any]]) -> int:
    """How many of the pods kube-scheduler marked ``PodScheduled=False``, reason ``Unschedulable``."""
    return sum(1 for pod in pods if any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []))


def _events(kubectl: Kubectl, pod: dict[str, Any]) -> list[dict[str, Any]]:
    return kubectl.items("events", "--field-selector", f"involvedObject.name={pod['metadata']['name']}")


@pytest.mark.slow
def test_kubectl_drives_the_chart_rbac_controller_in_production_mode_through_deployments(
    cluster: Cluster, aws_workloads: AwsWorkloads
) -> None:
    kubectl, log = cluster.kubectl, cluster.log
    asked = {verb: kubectl.run("auth", "can-i", *verb.split(), f"--as={cluster.service_account}").stdout.strip()
             for verb in ("list pods", "create pods --subresource=binding", "create pods --subresource=eviction",
                          "delete nodes", "list volumeattachments.storage.k8s.io", "get persistentvolumeclaims",
                          "create pods", "delete deployments.apps", "watch volumeattachments.storage.k8s.io",
                          "delete volumeattachments.storage.k8s.io", "watch nodepools.karpenter.sh",
                          "watch ec2nodeclasses.karpenter.k8s.aws", "patch ec2nodeclasses.karpenter.k8s.aws",
                          "delete ec2nodeclasses.karpenter.k8s.aws", "patch nodeclaims.karpenter.sh",
                          "list persistentvolumeclaims", "watch persistentvolumeclaims", "watch persistentvolumes",
                          "list storageclasses.storage.k8s.io", "watch storageclasses.storage.k8s.io",
                          "delete persistentvolumeclaims")}
    assert asked == {"list pods": "yes", "create pods --subresource=binding": "yes",
                     "create pods --subresource=eviction": "yes", "delete nodes": "yes",
                     "list volumeattachments.storage.k8s.io": "yes", "get persistentvolumeclaims": "yes",
                     "create pods": "no", "delete deployments.apps": "no",
                     "watch volumeattachments.storage.k8s.io": "yes",
                     "delete volumeattachments.storage.k8s.io": "no", "watch nodepools.karpenter.sh": "yes",
                     "watch ec2nodeclasses.karpenter.k8s.aws": "yes", "patch ec2nodeclasses.karpenter.k8s.aws": "yes",
                     "delete ec2nodeclasses.karpenter.k8s.aws": "no", "patch nodeclaims.karpenter.sh": "yes",
                     "list persistentvolumeclaims": "yes", "watch persistentvolumeclaims": "yes",
                     "watch persistentvolumes": "yes", "list storageclasses.storage.k8s.io": "yes",
                     "watch storageclasses.storage.k8s.io": "yes", "delete persistentvolumeclaims": "no"}

    # A Deployment: the scheduler marks its pods Unschedulable, the controller launches a node and binds them,
    # the kubelet joins, the rollout completes. The controller starts once all three are marked: a start opens one
    # batch window for every pod pending (`took_over`), so they are one batch and one node, whatever the load. Were
    # it running, the marks reach it one by one over its watch, and on a loaded machine they can be more than the
    # batch window (200 ms here) apart: then the pods are two batches and two nodes, as Karpenter v0.31.1's batcher
    # (idle timer) would make them too (#26).
    kubectl("apply", "-f", "-", stdin=deployment("inflate", 3, "1"))
    until(lambda: _unschedulable(kubectl.items("pods", "-l", "app=inflate")) == 3,
          "the scheduler marking the 3 pods Unschedulable", log)
    cluster.start()
    until(lambda: probe(cluster.port, "/readyz") == 200, "readiness", log)
    kubectl("rollout", "status", "deployment/inflate", ROLLOUT)
    pods = kubectl.items("pods", "-l", "app=inflate")
    assert len(pods) == 3 and all(p["status"]["phase"] == "Running" for p in pods)
    (first,) = {p["spec"]["nodeName"] for p in pods}
    assert any(e["reason"] == "FailedScheduling" and e["source"].get("component") == "default-scheduler"
               for e in _events(kubectl, pods[0]))
    kubectl("wait", "--for=condition=Ready", f"node/{first}", "--timeout=30s")
    (instance,) = aws_workloads.instances()
    node = kubectl.items("nodes")[0]
    assert node["spec"]["providerID"].endswith(instance["InstanceId"])
    assert node["metadata"]["labels"]["karpenter.sh/provisioner-name"] == "default"

    # A Deployment that fits the Ready node: kube-scheduler's work, never a launch.
    kubectl("apply", "-f", "-", stdin=deployment("small", 2, "10m"))
    kubectl("rollout", "status", "deployment/small", ROLLOUT)
    small = kubectl.items("pods", "-l", "app=small")
    assert {p["spec"]["nodeName"] for p in small} == {first}
    assert all(any(e["reason"] == "Scheduled" and e["source"].get("component") == "default-scheduler"
                   for e in _events(kubectl, p)) for p in small)
    assert len(aws_workloads.instances()) == 1

    # A Deployment pinned to the type whose kubelet never joins: its node is launched and stays NotReady.
    kubectl("apply", "-f", "-", stdin=deployment(
        "stuck", 1, "1", nodeSelector={"node.kubernetes.io/instance-type": NEVER_JOINS}))
    until(lambda: len(kubectl.items("nodes")) == 2, "a node for the never-joining type", log)
    stuck_node = next(n for n in kubectl.items("nodes") if n["metadata"]["name"] != first)
    assert stuck_node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == NEVER_JOINS
    waited = kubectl.run("wait", "--for=condition=Ready", "pod", "-l", "app=stuck", "--timeout=3s")
    assert waited.returncode != 0
    assert kubectl.items("pods", "-l", "app=stuck")[0]["status"].get("phase") != "Running"
    kubectl("delete", "deployment", "stuck")
    # Registration liveness, not the test, removes it: the controller deletes the node its kubelet never joined
    # (Warning RegistrationTimeout) and terminates its instance.
    until(lambda: len(kubectl.items("nodes")) == 1 and len(aws_workloads.instances()) == 1,
          "the never-joined node deleted by liveness and its instance terminated", log)
    timeouts = kubectl.items("events", "-A", "--field-selector",
                             f"involvedObject.name={stuck_node['metadata']['name']},reason=RegistrationTimeout")
    assert [event["type"] for event in timeouts] == ["Warning"], log()

    # kubectl delete node: drained through evictions, its instance terminated; the pods come back on a new node.
    kubectl("scale", "deployment/inflate", "--replicas=2")
    kubectl("delete", "node", first, "--wait=false")
    until(lambda: first not in {n["metadata"]["name"] for n in kubectl.items("nodes")}, "the node drained", log)
    until(lambda: instance["InstanceId"] not in {i["InstanceId"] for i in aws_workloads.instances()},
          "its instance terminated", log)
    kubectl("rollout", "status", "deployment/inflate", ROLLOUT)
    kubectl("rollout", "status", "deployment/small", ROLLOUT)
    kubectl.run("get", "nodes,deployments,pods", "-o", "wide")  # for the transcript

    # Scale to zero: the nodes empty, their ttlSecondsAfterEmpty (2 s) deletes them and their instances.
    kubectl("scale", "deployment/inflate", "deployment/small", "--replicas=0")
    until(lambda: not kubectl.items("nodes"), "the empty nodes deleted", log)
    until(lambda: not aws_workloads.instances(), "their instances terminated", log)
    kubectl.run("get", "nodes,deployments,pods")  # for the transcript
    refused = [line for line in log().splitlines() if "forbidden" in line.lower() or " 403" in line]
    assert not refused, "\n".join(refused)
