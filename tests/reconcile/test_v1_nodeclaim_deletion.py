"""A NodeClaim deleted by hand (`kubectl delete nodeclaim`) is finalized as Karpenter v1.14.1's NodeClaim lifecycle
controller does (core pkg/controllers/nodeclaim/lifecycle/controller.go `finalize`): its Node is deleted and drained
through node termination, the instance terminated, and only then the claim's finalizer removed. On `Scene` (the
in-memory cluster and cloud, virtual time); the same over real HTTP with kubectl is in
test_v1_nodeclaims_kubectl.py."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from karpenter_policy.cloud.provider import STATE_SHUTTING_DOWN, STATE_TERMINATED
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1claimdeletion") / "build")


def _launched(scene: Scene) -> tuple[str, str, str]:
    """(claim, node, instance) of the one NodePool node the scene's pod landed on."""
    (name, _), = scene.nodeclaims().items()
    node = next(n for n in scene.nodes().values() if claim_of_node(n) == name)
    return name, objects.name(node), node["spec"]["providerID"].rpartition("/")[2]


def _cloud(scene: Scene) -> FakeCloudProvider:
    cloud = scene.cloud
    assert isinstance(cloud, FakeCloudProvider)
    return cloud


def test_a_deleted_claim_drains_and_deletes_its_node_then_terminates_the_instance_then_goes(compiled: Path) -> None:
    """controller.go `finalize`: the Node first (its pod evicted, so it is pending again), the instance next, the
    finalizers last — the Node and the claim stay, held, while the instance shuts down (v1.14.1's node termination
    removes the Node's finalizer only once the cloud no longer knows the instance, `awaitInstanceTermination`)."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    name, node, instance = _launched(scene)
    cloud = _cloud(scene)
    terminated: list[str] = []

    def shut_down(instance_id: str) -> None:
        terminated.append(instance_id)
        cloud.set_state(instance_id, STATE_SHUTTING_DOWN)

    cloud.delete = shut_down  # type: ignore[method-assign]
    scene.cluster.delete(objects.NODE_CLAIM, name)
    scene.run(controller, 60)
    assert terminated == [instance], "asked once: a shutting-down instance is not terminated again"
    held_node = scene.node(node)
    assert held_node is not None and objects.finalizers(held_node) == [wk.TERMINATION_FINALIZER]
    held = scene.nodeclaims()[name]
    assert objects.is_deleting(held)
    assert objects.finalizers(held) == [wk.TERMINATION_FINALIZER]
    cloud.set_state(instance, STATE_TERMINATED)
    scene.run(controller, 10, until=lambda: name not in scene.nodeclaims())
    assert scene.node(node) is None
    assert name not in scene.nodeclaims()


def test_the_pod_on_a_deleted_claims_node_is_evicted_before_the_node_goes(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    name, node, _ = _launched(scene)
    seen: list[tuple[bool, bool]] = []  # (the pod is there, the node is there), step by step
    scene.cluster.delete(objects.NODE_CLAIM, name)

    def gone() -> bool:
        seen.append((scene.cluster.get(objects.POD, "web", "default") is not None, scene.node(node) is not None))
        return name not in scene.nodeclaims()

    scene.run(controller, 120, until=gone)
    assert name not in scene.nodeclaims()
    assert seen[-1] == (False, False)
    assert (True, False) not in seen  # never the node gone under its pod


def test_a_deleted_claim_without_a_node_terminates_its_instance_and_goes(compiled: Path) -> None:
    """A claim whose Node is gone already (its finalizer removed by hand): nothing to drain, the instance is
    terminated (`CloudProvider.Delete`), then the finalizer goes."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    name, node, instance = _launched(scene)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"finalizers": None}})
    scene.cluster.delete(objects.NODE, node)
    assert scene.node(node) is None
    scene.cluster.delete(objects.NODE_CLAIM, name)
    scene.run(controller, 30, until=lambda: name not in scene.nodeclaims())
    assert name not in scene.nodeclaims()
    assert _cloud(scene).get(instance) is None


def test_a_claim_without_the_finalizer_is_left_to_the_api_server(compiled: Path) -> None:
    """Only a claim held by `karpenter.sh/termination` is this controller's to finalize: another finalizer keeps the
    claim, and its Node and instance are not touched."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    name, node, instance = _launched(scene)
    scene.cluster.patch(objects.NODE_CLAIM, name, {"metadata": {"finalizers": ["example.com/keep"]}})
    scene.cluster.delete(objects.NODE_CLAIM, name)
    scene.run(controller, 30)
    assert scene.node(node) is not None
    assert _cloud(scene).get(instance) is not None
    assert objects.finalizers(scene.nodeclaims()[name]) == ["example.com/keep"]


def test_a_claim_of_another_shape_is_counted_and_skipped_and_the_controller_goes_on(
    compiled: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    name, node, _ = _launched(scene)
    odd = scene.cluster.create(objects.NODE_CLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "odd"}, "spec": {},
    })
    scene.cluster.update(objects.NODE_CLAIM, {**odd, "status": {"nodeName": 7}}, subresource="status")
    with caplog.at_level(logging.WARNING):
        scene.run(controller, 10)
    assert controller.state.malformed[("nodeclaims", "status.nodeName is not a string")] >= 1
    assert any("malformed NodeClaim" in r.getMessage() for r in caplog.records)
    scene.cluster.delete(objects.NODE_CLAIM, name)  # the controller still finalizes the others
    scene.run(controller, 60, until=lambda: name not in scene.nodeclaims())
    assert name not in scene.nodeclaims()
    assert scene.node(node) is None


def test_a_deleted_claim_naming_an_instance_of_another_cluster_never_terminates_it(compiled: Path) -> None:
    """What a claim names is not proof the instance is ours: one not tagged for this cluster is left running, and
    the claim released."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    _, _, instance = _launched(scene)
    cloud = _cloud(scene)
    foreign = cloud.get(instance)
    assert foreign is not None
    claim = scene.cluster.create(objects.NODE_CLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-zzzzz", "labels": {wk.NODEPOOL: "default"},
                     "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                      "name": "default"}},
    })
    scene.cluster.update(objects.NODE_CLAIM, {**claim, "status": {"providerID": "aws:///us-east-1a/i-0ffffffffffffffff"}},
                         subresource="status")
    other = dataclasses.replace(foreign, id="i-0ffffffffffffffff", tags={"kubernetes.io/cluster/other": "owned"})
    cloud._instances[other.id] = other  # an instance of another cluster
    scene.cluster.delete(objects.NODE_CLAIM, "default-zzzzz")
    scene.run(controller, 30, until=lambda: "default-zzzzz" not in scene.nodeclaims())
    assert "default-zzzzz" not in scene.nodeclaims()
    assert cloud.get(other.id) is not None  # still running


def test_a_deleted_claim_naming_another_claims_instance_touches_neither_node_nor_instance(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    name, node, instance = _launched(scene)
    impostor = scene.cluster.create(objects.NODE_CLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-yyyyy", "labels": {wk.NODEPOOL: "default"},
                     "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                      "name": "default"}},
    })
    status = {"providerID": scene.nodeclaims()[name]["status"]["providerID"], "nodeName": node}
    scene.cluster.update(objects.NODE_CLAIM, {**impostor, "status": status}, subresource="status")
    scene.cluster.delete(objects.NODE_CLAIM, "default-yyyyy")
    scene.run(controller, 30, until=lambda: "default-yyyyy" not in scene.nodeclaims())
    assert "default-yyyyy" not in scene.nodeclaims()
    assert scene.node(node) is not None and not objects.is_deleting(scene.node(node) or {})
    assert _cloud(scene).get(instance) is not None
    assert name in scene.nodeclaims()
