"""kubectl's everyday use against the test API server with its control plane (tests/kube/apiserver/): `apply`
validated against the served OpenAPI (and refused for an unknown field), `explain`, Deployments with `scale`,
`rollout status` and `wait --for=condition=Ready` once the kubelet joined, `logs`' honest error, streaming lists;
and RBAC — a ServiceAccount's token allowed what its Role grants, refused the rest with the API server's message,
`kubectl auth can-i` answering for it."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from karpenter_policy.kube.client import KubeCluster

from .apiserver.controlplane import ControlPlaneOptions
from .conftest import Kubectl, kubectl_binary
from .emulator import EmulatorThread


def _deployment(replicas: int, **spec: object) -> str:
    return yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, **spec,
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "pause",
                                                       "resources": {"requests": {"cpu": "100m"}}}]}}},
    })


NODE = yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Kubectl]:
    """kubectl against a server with a control plane whose kubelets join 0.2 s after their Node appears."""
    with EmulatorThread(seed_namespaces=True, authorize=True,
                        control_plane=ControlPlaneOptions(join_after=0.2, resync=0.2)) as server:
        config = server.write_kubeconfig(tmp_path / "kubeconfig")
        client = KubeCluster.from_kubeconfig(str(config))
        try:
            yield Kubectl(kubectl_binary(), config, tmp_path / "cache", server, client)
        finally:
            client.close()


def test_apply_is_validated_against_the_served_schemas_and_explain_reads_them(cluster: Kubectl) -> None:
    created = cluster("apply", "-f", "-", stdin=_deployment(2))
    refused = cluster("apply", "-f", "-", stdin=_deployment(2, replicaz=3), check=False)
    explained = cluster("explain", "deployment.spec.replicas").stdout
    v2 = json.loads(cluster("get", "--raw", "/openapi/v2").stdout)

    assert created.stdout.strip() == "deployment.apps/web created"
    assert refused.returncode != 0 and 'unknown field "spec.replicaz"' in refused.stderr
    assert "FIELD: replicas <integer>" in explained and "Number of desired pods" in explained
    assert v2["swagger"] == "2.0" and "io.k8s.api.apps.v1.Deployment" in v2["definitions"]


def test_a_deployment_rolls_out_once_a_kubelet_joins_and_scales(cluster: Kubectl) -> None:
    cluster("apply", "-f", "-", stdin=_deployment(3))
    waiting = cluster("rollout", "status", "deployment/web", "--timeout=1s", check=False)
    pending = json.loads(cluster("get", "pods", "-o", "json").stdout)["items"]
    cluster("apply", "-f", "-", stdin=NODE)

    cluster("rollout", "status", "deployment/web", "--timeout=30s")
    cluster("wait", "--for=condition=Ready", "pods", "-l", "app=web", "--timeout=30s")
    cluster("scale", "deployment/web", "--replicas=1")
    cluster("rollout", "status", "deployment/web", "--timeout=30s")
    shown = cluster("get", "deployment", "web").stdout.split()
    pods = json.loads(cluster("get", "pods", "-o", "json").stdout)["items"]
    logs = cluster("logs", "deployment/web", check=False)

    assert waiting.returncode != 0  # no node yet: the pods are Unschedulable
    conditions = [c for p in pending for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [c["reason"] for c in conditions] == ["Unschedulable"] * 3
    assert shown[5:9] == ["web", "1/1", "1", "1"]  # NAME READY UP-TO-DATE AVAILABLE
    assert [(p["spec"]["nodeName"], p["status"]["phase"]) for p in pods] == [("node-1", "Running")]
    assert logs.returncode != 0 and "runs no containers" in logs.stderr


def test_a_service_accounts_token_is_allowed_what_its_role_grants_and_nothing_else(
    cluster: Kubectl, tmp_path: Path
) -> None:
    rbac = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader", "namespace": "default"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "pod-reader", "namespace": "default"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "pod-reader", "namespace": "default"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]},
    ]
    cluster("apply", "-f", "-", stdin=yaml.safe_dump_all(rbac))
    request = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    token = json.loads(cluster("create", "--raw", "/api/v1/namespaces/default/serviceaccounts/reader/token", "-f",
                               "-", stdin=request).stdout)["status"]["token"]
    reader = Kubectl(cluster.binary, cluster.server.write_kubeconfig(tmp_path / "reader", token=token),
                     cluster.cache, cluster.server, cluster.cluster)
    stranger = Kubectl(cluster.binary, cluster.server.write_kubeconfig(tmp_path / "stranger", token="forged"),
                       cluster.cache, cluster.server, cluster.cluster)

    listed = reader("get", "pods")
    nodes = reader("get", "nodes", check=False)
    elsewhere = reader("get", "pods", "-n", "kube-system", check=False)
    can = {verb: reader("auth", "can-i", verb, "pods", check=False).stdout.strip() for verb in ("list", "delete")}
    on_behalf = cluster("auth", "can-i", "watch", "pods", "--as=system:serviceaccount:default:reader").stdout
    unknown = stranger("get", "pods", check=False)

    assert listed.returncode == 0
    assert nodes.returncode != 0 and ('nodes is forbidden: User "system:serviceaccount:default:reader" cannot list '
                                      'resource "nodes" in API group "" at the cluster scope') in nodes.stderr
    assert elsewhere.returncode != 0 and 'in the namespace "kube-system"' in elsewhere.stderr
    assert can == {"list": "yes", "delete": "no"} and on_behalf.strip() == "yes"
    assert unknown.returncode != 0 and "Unauthorized" in unknown.stderr


def test_a_streaming_list_ends_its_initial_events_with_the_annotated_bookmark(cluster: Kubectl) -> None:
    cluster("apply", "-f", "-", stdin=NODE)
    certificate = cluster.server.certificate
    assert certificate is not None
    url = (f"{cluster.server.url}/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
           "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
    request = urllib.request.Request(url, headers={"Authorization": "Bearer emulated"})
    context = ssl.create_default_context(cafile=str(certificate.path))
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        events = [json.loads(line) for line in answer.read().splitlines() if line.strip()]

    assert [e["type"] for e in events[:2]] == ["ADDED", "BOOKMARK"]
    assert events[0]["object"]["metadata"]["name"] == "node-1"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_the_standalone_server_runs_a_local_cluster_with_rbac(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    tests = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "kube.emulator", "--kubeconfig", str(config), "--rbac", "--control-plane",
         "--join-after", "0.2", "--never-join", "c5.large"],
        cwd=tests, env={**os.environ, "PYTHONPATH": str(tests)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert process.stdout is not None
        assert "serving the Kubernetes API emulator on https://127.0.0.1:" in process.stdout.readline()

        def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
            return subprocess.run([kubectl_binary(), f"--kubeconfig={config}", f"--cache-dir={tmp_path / 'cache'}",
                                   *args], input=stdin, capture_output=True, text=True, timeout=60, check=False)

        never = yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "node-2", "labels": {"node.kubernetes.io/instance-type": "c5.large"}}})
        assert kubectl("apply", "-f", "-", stdin=NODE).returncode == 0
        assert kubectl("apply", "-f", "-", stdin=never).returncode == 0
        joined = kubectl("wait", "--for=condition=Ready", "node/node-1", "--timeout=30s")
        stranded = kubectl("wait", "--for=condition=Ready", "node/node-2", "--timeout=2s")

        assert joined.returncode == 0 and stranded.returncode != 0
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            returncode = process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert returncode == 0
