"""NodeClaims of a Karpenter v1 NodePool's nodes (`reconcile/claims/`), on `Scene` (the in-memory cluster and cloud,
virtual time): one per launch, named `<nodepool>-<suffix>`, labelled, with the `karpenter.sh/termination`
finalizer, the NodePool as owner, the template's spec, the launch's status and the Launched / Registered /
Initialized / Ready conditions as Karpenter v1.14.1's lifecycle sets them (core pkg/controllers/nodeclaim/lifecycle/
launch.go, registration.go, initialization.go); deleted with their Node, the finalizer removed only once the
instance is gone (controller.go `finalize`). A Provisioner's nodes get none (v0.31 has no NodeClaims)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from karpenter_policy.api.v1.admission import admit
from karpenter_policy.cloud.provider import STATE_SHUTTING_DOWN, STATE_TERMINATED
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.objects import NAME_ALPHABET, claim_of_node
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
BATCH_TOLERATION = {"key": "example.com/batch", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1claims") / "build")


def _conditions(claim: dict[str, object]) -> dict[str, str]:
    status = claim.get("status") or {}
    assert isinstance(status, dict)
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def _nodepool(scene: Scene, name: str) -> dict[str, object]:
    """The NodePool object, as GitOps would have applied it (the claim's owner needs its uid)."""
    return scene.cluster.create(objects.NODE_POOL, {"metadata": {"name": name}, "spec": {}})


def test_a_nodepool_launch_makes_a_nodeclaim_that_follows_its_node_to_ready(compiled: Path) -> None:
    scene = Scene(compiled)
    batch = _nodepool(scene, "batch")
    scene.add_pod("report", cpu="2", nodeSelector={wk.NODEPOOL: "batch"}, tolerations=[BATCH_TOLERATION])
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    claims = scene.nodeclaims()
    assert len(claims) == 1
    (name, claim), = claims.items()
    assert re.fullmatch(rf"batch-[{NAME_ALPHABET}]{{5}}", name)
    meta = objects.metadata(claim)
    assert meta["labels"][wk.NODEPOOL] == "batch"
    assert meta["labels"]["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert meta["labels"]["workload"] == "batch"
    assert wk.HOSTNAME not in meta["labels"]
    assert meta["finalizers"] == [wk.TERMINATION_FINALIZER]
    assert meta["ownerReferences"] == [{
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "batch", "uid": objects.uid(batch),
        "blockOwnerDeletion": True,
    }]
    spec = claim["spec"]
    assert spec["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["taints"] == [{"key": "example.com/batch", "effect": "NoSchedule"}]
    assert spec["startupTaints"] == [{"key": "example.com/agent-not-ready", "effect": "NoSchedule"}]
    assert spec["expireAfter"] == "720h"
    families = next(r for r in spec["requirements"] if r["key"] == wk.INSTANCE_FAMILY)
    assert set(families["values"]) <= {"c6a", "c6i", "c7a", "c7i", "m6a", "m6i"}
    assert spec["resources"]["requests"]["cpu"] in ("2", "2000m")
    node_name = next(objects.name(n) for n in scene.nodes().values() if claim_of_node(n) == name)
    node = scene.node(node_name)
    assert node is not None
    assert claim["status"]["providerID"] == node["spec"]["providerID"]
    assert claim["status"]["allocatable"] == node["status"]["allocatable"]
    assert _conditions(claim)["Launched"] == "True"
    scene.run(controller, 60)  # the kubelets' stand-in joins and initializes the node
    claim = scene.nodeclaims()[name]
    assert claim["status"]["nodeName"] == node_name
    lifecycle = {k: v for k, v in _conditions(claim).items() if k in ("Launched", "Registered", "Initialized", "Ready")}
    assert lifecycle == {"Launched": "True", "Registered": "True", "Initialized": "True", "Ready": "True"}
    admission = admit(claim)  # as Karpenter v1.14.1's CRD admits it: its schema and CEL rules
    assert admission.admitted, admission.refusals
    assert {r["key"] for r in spec["requirements"]}.isdisjoint({wk.PROVISIONER_NAME, wk.HOSTNAME})


def test_a_provisioners_nodes_have_no_nodeclaim(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("legacy", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    assert scene.unbound() == []
    assert scene.nodeclaims() == {}
    assert all(claim_of_node(n) is None for n in scene.nodes().values())


def test_without_the_nodepool_object_the_claim_has_no_owner(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    scene.run(scene.controller(), 120, until=lambda: not scene.unbound())
    (claim,) = scene.nodeclaims().values()
    assert "ownerReferences" not in objects.metadata(claim)
    assert objects.labels(claim)[wk.NODEPOOL] == "default"


def test_deleting_the_node_deletes_its_claim_and_the_finalizer_waits_for_the_instance(compiled: Path) -> None:
    """TerminateInstances leaves an EC2 instance shutting-down for a while: the Node and the claim stay deleting,
    held by their finalizers, until the instance is terminated (v1.14.1's node termination, controller.go
    `awaitInstanceTermination`); then both go."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (name, _), = scene.nodeclaims().items()
    node = next(n for n in scene.nodes().values() if claim_of_node(n) == name)
    instance = node["spec"]["providerID"].rpartition("/")[2]
    cloud = scene.cloud
    assert isinstance(cloud, FakeCloudProvider)
    cloud.delete = lambda instance_id: cloud.set_state(instance_id, STATE_SHUTTING_DOWN)  # type: ignore[method-assign]
    scene.cluster.delete(objects.NODE, objects.name(node))
    scene.run(controller, 60)
    held_node = scene.node(objects.name(node))
    assert held_node is not None and objects.finalizers(held_node) == [wk.TERMINATION_FINALIZER]
    held = scene.nodeclaims()[name]
    assert objects.is_deleting(held)
    assert objects.finalizers(held) == [wk.TERMINATION_FINALIZER]
    cloud.set_state(instance, STATE_TERMINATED)
    scene.run(controller, 10, until=lambda: name not in scene.nodeclaims())
    assert scene.node(objects.name(node)) is None
    assert name not in scene.nodeclaims()


def test_a_claim_of_unexpected_shape_is_skipped_with_a_log_line(
    compiled: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 10, until=lambda: bool(scene.nodeclaims()))
    (name, claim), = scene.nodeclaims().items()
    claim["status"] = {"conditions": "broken"}
    scene.cluster.update(objects.NODE_CLAIM, claim, subresource="status")
    with caplog.at_level("WARNING"):
        scene.run(controller, 60)
    assert scene.unbound() == []
    assert scene.nodeclaims()[name]["status"] == {"conditions": "broken"}
    assert any(f"nodeclaim {name} skipped: status.conditions is not a list of objects" in r.getMessage()
               for r in caplog.records)


def _condition(claim: dict[str, object], kind: str) -> dict[str, str] | None:
    status = claim.get("status") or {}
    assert isinstance(status, dict)
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


def test_a_claim_is_marked_consolidatable_and_drifted_as_the_disruption_controller_decides(
    compiled: Path, tmp_path: Path
) -> None:
    """nodeclaim/disruption/consolidation_test.go:85 (should mark NodeClaims as consolidatable) and drift_test.go
    (Drifted set while the NodeClaim has drifted): `default` consolidates after 0s, so its node's claim is
    Consolidatable once a decision looked at it; when the NodePool's template labels change, the next decision marks
    it Drifted with why (the node is do-not-disrupt: it stays to be looked at); when the change is undone, Drifted
    goes."""
    policies = tmp_path / "policies"
    shutil.copytree(EXAMPLE / "policies", policies)
    build = compile_policies(policies, tmp_path / "build")
    scene = Scene(build)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (name, _), = scene.nodeclaims().items()
    node = next(n for n, obj in scene.nodes().items() if claim_of_node(obj) == name)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}})
    scene.run(controller, 60, until=lambda: _condition(scene.nodeclaims()[name], "Consolidatable") is not None)
    assert (_condition(scene.nodeclaims()[name], "Consolidatable") or {}).get("status") == "True"
    assert _condition(scene.nodeclaims()[name], "Drifted") is None

    source = (policies / "nodepools.yaml").read_text()
    (policies / "nodepools.yaml").write_text(source.replace("team: web", "team: shop", 1))
    compile_policies(policies, build)
    scene.run(controller, 60, until=lambda: _condition(scene.nodeclaims()[name], "Drifted") is not None)
    drifted = _condition(scene.nodeclaims()[name], "Drifted")
    assert drifted is not None and drifted["status"] == "True" and drifted["message"]
    assert drifted["reason"] == "NodePoolDrifted"  # drift.go `areStaticFieldsDrifted`: the template's labels
    assert node in scene.nodes()

    (policies / "nodepools.yaml").write_text(source)
    compile_policies(policies, build)
    scene.run(controller, 60, until=lambda: _condition(scene.nodeclaims()[name], "Drifted") is None)
    assert _condition(scene.nodeclaims()[name], "Drifted") is None
