"""NodeClaims over real HTTP: the controller (on `Scene`, virtual time) writes through `KubeCluster` to the test API
server, which serves NodeClaims and NodePools as their CRDs do (tests/kube/emulator.py), and `kubectl get
nodeclaims` — a client nobody here wrote — shows them with the CRD's printer columns (Type, Capacity, Zone, Node,
Ready, Age; with -o wide ImageID, ID, NodePool, NodeClass, Drifted), as on a Karpenter v1.14.1 cluster."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from kube.conftest import Kubectl, kubectl_against

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import InformerFeed
from karpenter_policy.testing import Scene, compile_policies

from .support import WEB_POD, Closing

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"


def test_kubectl_get_nodeclaims_shows_the_controllers_claims_with_the_crds_columns(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    kubectl.cluster.create(objects.NODE_POOL, {"metadata": {"name": "default"}, "spec": {}})
    scene = closing(Scene(compiled, cluster=kubectl.cluster))  # type: ignore[arg-type]
    kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    scene.run(controller, 30)  # the kubelets' stand-in joins and initializes the node
    (claim,) = json.loads(kubectl("get", "nodeclaims", "-o", "json").stdout)["items"]
    name = objects.name(claim)
    node = claim["status"]["nodeName"]
    labels = objects.labels(claim)

    table = kubectl("get", "nodeclaims").stdout.splitlines()
    assert table[0].split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    row = table[1].split()
    assert row[:6] == [name, labels[wk.INSTANCE_TYPE], "on-demand", labels[wk.ZONE], node, "True"]

    wide = kubectl("get", "nodeclaims", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE", "IMAGEID", "ID",
                               "NODEPOOL", "NODECLASS", "DRIFTED"]
    cells = wide[1].split()
    # ImageID, ID, NodePool, NodeClass; Drifted is blank (no such condition: the node has not drifted)
    assert cells[7:] == [claim["status"]["imageID"], claim["status"]["providerID"], "default", "default"]
    owners = objects.metadata(claim)["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("NodePool", "default")]
    shown = kubectl("get", "node", node, "-o", "json").stdout
    assert [(o["kind"], o["name"]) for o in json.loads(shown)["metadata"]["ownerReferences"]] == [("NodeClaim", name)]

    kubectl("delete", "node", node, "--wait=false")
    scene.run(controller, 60, until=lambda: not kubectl("get", "nodeclaims", "-o", "name").stdout.strip())
    assert kubectl("get", "nodeclaims", "-o", "name").stdout.strip() == ""


def _registration_health(kubectl: Kubectl) -> dict[str, object]:
    nodepool = json.loads(kubectl("get", "nodepool", "default", "-o", "json").stdout)
    status = nodepool.get("status") or {}
    found = [c for c in status.get("conditions") or [] if c["type"] == "NodeRegistrationHealthy"]
    return {"generation": nodepool["metadata"]["generation"], "class": status.get("nodeClassObservedGeneration"),
            **(found[0] if found else {})}


def test_kubectl_shows_the_nodepools_registration_health_written_through_its_status(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    """NodeRegistrationHealthy over HTTP (registrationhealth/controller.go, registration.go): the NodePools and their
    EC2NodeClass applied with kubectl as GitOps applies them; the controller writes the condition through
    /status — Unknown at its first step with the class's generation observed, True once a claim registered."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "policies" / "nodepools.yaml"))  # no CRD schema served
    scene = closing(Scene(compiled, cluster=kubectl.cluster))  # type: ignore[arg-type]
    controller = scene.controller()
    scene.step(controller)
    first = _registration_health(kubectl)
    assert (first["status"], first["reason"], first["observedGeneration"]) == ("Unknown", "AwaitingReconciliation", 1)
    assert first["class"] == 1 and first["generation"] == 1
    kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
    scene.run(controller, 180, until=lambda: _registration_health(kubectl).get("status") == "True")
    healthy = _registration_health(kubectl)
    assert (healthy["status"], healthy["reason"], healthy["message"]) == ("True", "NodeRegistrationHealthy", "")
    assert scene.metric(controller, "karpenter_policy_nodepool_status_failures_total", reason="refused") is None


def test_a_cluster_without_the_nodeclaim_crd_still_gets_the_nodepools_nodes(tmp_path: Path, closing: Closing) -> None:
    """A cluster that does not serve NodeClaims (404 on create): the node is registered and its pod bound, without a
    claim — never a launch left hanging for want of one."""
    with kubectl_against(tmp_path) as kubectl:
        scene = closing(Scene(compile_policies(EXAMPLE / "policies", tmp_path / "build"), cluster=kubectl.cluster))  # type: ignore[arg-type]
        kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
        controller = scene.controller()
        scene.run(controller, 120, until=lambda: not scene.unbound())
        assert scene.unbound() == []
        (node,) = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
        assert objects.labels(node)[wk.NODEPOOL] == "default"
        assert "ownerReferences" not in objects.metadata(node)
        assert kubectl("get", "nodeclaims", check=False).returncode != 0


def test_kubectl_delete_nodeclaim_drains_and_deletes_its_node_and_terminates_its_instance(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    """`kubectl delete nodeclaim X --wait=false`, as on a Karpenter v1.14.1 cluster (lifecycle controller.go
    `finalize`): the Node goes (drained through termination), the instance is terminated, then the claim."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    scene = closing(Scene(compiled, cluster=kubectl.cluster))  # type: ignore[arg-type]
    kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (claim,) = json.loads(kubectl("get", "nodeclaims", "-o", "json").stdout)["items"]
    name = objects.name(claim)
    instance = claim["status"]["providerID"].rpartition("/")[2]
    (node,) = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert scene.cloud.get(instance) is not None

    kubectl("delete", "nodeclaim", name, "--wait=false")
    scene.run(controller, 120, until=lambda: not kubectl("get", "nodeclaims", "-o", "name").stdout.strip())
    assert kubectl("get", "nodeclaims", "-o", "name").stdout.strip() == ""
    assert kubectl("get", "node", objects.name(node), check=False).returncode != 0
    assert kubectl("get", "nodes", "-o", "name").stdout.strip() == ""
    assert scene.cloud.get(instance) is None
    assert kubectl("get", "pod", "web", check=False).returncode != 0  # evicted on the way


def _condition(kubectl: Kubectl, kind: str) -> tuple[str, str]:
    nodepool = json.loads(kubectl("get", "nodepool", "default", "-o", "json").stdout)
    found = [c for c in (nodepool.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return (found[0]["status"], found[0]["reason"]) if found else ("", "")


def test_a_nodepool_edited_with_kubectl_becomes_not_ready_and_provisioning_stops_for_it(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    """provisioner.go's `StatusConditions().IsTrue(Ready)` filter over HTTP: the NodePools applied with kubectl are
    Ready (written through /status) and provision; `kubectl patch` gives `default` a label v1.14.1's RuntimeValidate
    refuses (`karpenter.sh/nodepool` in its template): the controller's watch sees it, writes ValidationSucceeded and
    Ready False, and a new pod of that NodePool stays pending."""
    compiled = compile_policies(EXAMPLE / "policies", tmp_path / "build")
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "policies" / "nodepools.yaml"))
    scene = closing(Scene(compiled, cluster=kubectl.cluster))  # type: ignore[arg-type]
    controller = scene.controller()
    kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
    scene.run(controller, 120, until=lambda: not scene.unbound())
    assert _condition(kubectl, "Ready") == ("True", "Ready")
    kubectl("patch", "nodepool", "default", "--type=merge", "-p",
            json.dumps({"spec": {"template": {"metadata": {"labels": {wk.NODEPOOL: "other"}}}}}))
    scene.step(controller)
    assert _condition(kubectl, "ValidationSucceeded") == ("False", "NodePoolValidationFailed")
    assert _condition(kubectl, "Ready") == ("False", "UnhealthyDependents")
    kubectl("apply", "-f", "-", stdin=json.dumps({**WEB_POD, "metadata": {"name": "second", "namespace": "default"}}))
    scene.run(controller, 60)
    assert scene.unbound() == ["default/second"]


def test_the_informers_see_a_nodepool_edited_with_kubectl_within_a_second(kubectl: Kubectl) -> None:
    """The watch through the kube adapter (`InformerFeed`, as the threaded controller runs it): an edit of a NodePool
    reaches the state's listeners within a second of `kubectl patch` returning."""
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "policies" / "nodepools.yaml"))
    state = ClusterState()
    edited = threading.Event()
    state.subscribe(lambda change: edited.set() if change.kind == "nodepool" and change.name == "default" else None)
    feed = InformerFeed(kubectl.cluster, state, kinds=(objects.NODE_POOL, objects.EC2_NODE_CLASS)).start()
    try:
        assert all(informer.wait_synced(10) for informer in feed.informers.values())
        edited.clear()
        kubectl("patch", "nodepool", "default", "--type=merge", "-p", json.dumps({"spec": {"weight": 7}}))
        assert edited.wait(1.0), "the NodePool's change did not reach the state within a second"
    finally:
        feed.stop()
