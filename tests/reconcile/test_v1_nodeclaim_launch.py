"""A NodePool's NodeClaim is written before its launch, as Karpenter v1.14.1's provisioner `Create` writes it
(core pkg/controllers/provisioning/provisioner.go, scheduling/nodeclaimtemplate.go `ToNodeClaim`), and the launch
then fills it (nodeclaim/lifecycle/launch.go `PopulateNodeClaimDetails`, Launched True); a launch that fails for
capacity deletes it, any other failure records Launched Unknown `LaunchFailed` first. On `Scene` (the in-memory
cluster and cloud, virtual time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.api.v1.admission import admit
from karpenter_policy.cloud.errors import ConfigurationError, InsufficientCapacity
from karpenter_policy.cloud.provider import Instance, LaunchRequest
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.testing import Scene, compile_policies

from .support import nodes_refused

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
BATCH_TOLERATION = {"key": "example.com/batch", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1claimlaunch") / "build")


def _cloud(scene: Scene) -> FakeCloudProvider:
    cloud = scene.cloud
    assert isinstance(cloud, FakeCloudProvider)
    return cloud


def _launched(claim: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (claim.get("status") or {}).get("conditions") or [] if c["type"] == "Launched"), None)


def test_the_claim_is_written_before_the_launch_with_min_values_and_filled_after(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("report", cpu="2", nodeSelector={wk.NODEPOOL: "batch"}, tolerations=[BATCH_TOLERATION])
    cloud = _cloud(scene)
    create = cloud.create
    seen: list[dict[str, dict[str, Any]]] = []

    def launching(request: LaunchRequest) -> Instance:
        seen.append(scene.nodeclaims())  # what the cluster holds as CreateFleet is called
        return create(request)

    cloud.create = launching  # type: ignore[method-assign]
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (before,) = seen[0].values()
    name = objects.name(before)
    assert "providerID" not in before.get("status", {})
    assert (_launched(before) or {}).get("status") == "Unknown"
    labels = objects.labels(before)
    assert labels[wk.NODEPOOL] == "batch" and labels["workload"] == "batch"
    assert wk.INSTANCE_TYPE not in labels and wk.ZONE not in labels  # the instance's labels come with the launch
    requirements = {r["key"]: r for r in before["spec"]["requirements"]}
    assert requirements[wk.INSTANCE_FAMILY]["minValues"] == 3  # as ToNodeClaim writes the NodePool's minValues
    assert len(requirements[wk.INSTANCE_TYPE]["values"]) >= 3
    assert before["spec"]["resources"]["requests"]["cpu"] in ("2", "2000m")
    assert admit(before).admitted, admit(before).refusals

    after = scene.nodeclaims()[name]
    node = next(n for n in scene.nodes().values() if claim_of_node(n) == name)
    assert after["status"]["providerID"] == node["spec"]["providerID"]
    assert after["status"]["capacity"] and after["status"]["allocatable"] and after["status"]["imageID"]
    assert (_launched(after) or {}).get("status") == "True"
    assert objects.labels(after)[wk.INSTANCE_TYPE] == objects.labels(node)[wk.INSTANCE_TYPE]
    assert objects.labels(after)[wk.ZONE] == objects.labels(node)[wk.ZONE]
    assert admit(after).admitted, admit(after).refusals


def test_a_launch_without_capacity_deletes_its_claim(compiled: Path) -> None:
    """launch.go: `IsInsufficientCapacityError` → the NodeClaim is deleted (and, without a providerID, finalized
    at once); the pods are planned again and land on a new claim's launch."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    cloud = _cloud(scene)
    create = cloud.create
    refused: list[str] = []

    def short(request: LaunchRequest) -> Instance:
        if not refused:
            refused.extend(objects.uid(c) for c in scene.nodeclaims().values())
            raise InsufficientCapacity("fake", [])
        return create(request)

    cloud.create = short  # type: ignore[method-assign]
    controller = scene.controller()
    scene.run(controller, 180, until=lambda: not scene.unbound())
    assert len(refused) == 1
    assert scene.unbound() == []
    (claim,) = scene.nodeclaims().values()  # the retried pass's claim (the same pods: the same name), a new object
    assert objects.uid(claim) != refused[0]
    assert (_launched(claim) or {}).get("status") == "True"


def test_another_launch_failure_is_recorded_launch_failed_then_the_claim_goes(compiled: Path) -> None:
    """launch.go: any other error sets Launched Unknown with reason `LaunchFailed` and the error as message."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    cloud = _cloud(scene)
    cloud.create = lambda request: (_ for _ in ()).throw(  # type: ignore[method-assign]
        ConfigurationError("fake", "no subnet matches"))
    writes: list[dict[str, Any]] = []
    update = scene.cluster.update

    def recording(kind: Any, obj: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        if kind == objects.NODE_CLAIM:
            writes.append(obj)
        return update(kind, obj, *args, **kwargs)

    scene.cluster.update = recording  # type: ignore[method-assign]
    controller = scene.controller()
    scene.run(controller, 30, until=lambda: any(_launched(w) and _launched(w)["reason"] == "LaunchFailed"
                                                for w in writes))
    failed = next(_launched(w) for w in writes if (_launched(w) or {}).get("reason") == "LaunchFailed")
    assert failed is not None and failed["status"] == "Unknown" and "no subnet matches" in failed["message"]
    scene.run(controller, 5)
    assert all(objects.is_deleting(c) for c in scene.nodeclaims().values()) or scene.nodeclaims() == {}
    assert scene.nodes() == {}


def _orphan_claim(scene: Scene, name: str) -> dict[str, Any]:
    """A claim as a controller that stopped right after writing it (before its launch) left it."""
    return scene.cluster.create(objects.NODE_CLAIM, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "default"}, "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                      "name": "default"}},
    })


def test_a_claim_never_launched_is_deleted_after_the_launch_timeout(compiled: Path) -> None:
    """liveness.go: a NodeClaim not Launched within `LaunchTimeout` (5 minutes) is deleted; without an instance or a
    Node, its finalizer goes at once."""
    scene = Scene(compiled)
    _orphan_claim(scene, "default-bbbbb")
    controller = scene.controller()
    scene.run(controller, 240)
    assert "default-bbbbb" in scene.nodeclaims()  # not before its time
    scene.run(controller, 120, until=lambda: "default-bbbbb" not in scene.nodeclaims())
    assert "default-bbbbb" not in scene.nodeclaims()


def test_a_claim_whose_node_names_it_is_never_deleted_for_want_of_a_status(compiled: Path) -> None:
    """A claim whose launch happened but whose status write was lost (its Node names it as owner): the instance has
    a Node, so the claim is kept, and with it the node."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (name, claim), = scene.nodeclaims().items()
    node = next(objects.name(n) for n in scene.nodes().values() if claim_of_node(n) == name)
    scene.cluster.update(objects.NODE_CLAIM, {**claim, "status": {}}, subresource="status")
    scene.run(controller, 600)
    assert name in scene.nodeclaims() and not objects.is_deleting(scene.nodeclaims()[name])
    assert node in scene.nodes()


def test_a_claim_whose_instance_is_gone_without_a_node_is_garbage_collected(compiled: Path) -> None:
    """nodeclaim/garbagecollection/controller.go: a launched NodeClaim whose instance the cloud no longer lists is
    deleted — here once its instance was missing from three reads over five minutes, and only without a Node."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (name, claim), = scene.nodeclaims().items()
    node = next(objects.name(n) for n in scene.nodes().values() if claim_of_node(n) == name)
    instance = claim["status"]["providerID"].rpartition("/")[2]
    scene.cluster.patch(objects.NODE, node, {"metadata": {"finalizers": None}})
    scene.cluster.delete(objects.NODE, node)
    _cloud(scene).set_state(instance, "terminated")  # the instance went from the console
    scene.run(controller, 120)
    assert name in scene.nodeclaims()  # one read is no proof
    scene.run(controller, 900, until=lambda: name not in scene.nodeclaims())
    assert name not in scene.nodeclaims()


def test_after_a_restart_between_the_launch_and_the_node_the_launched_claim_is_the_nodes(compiled: Path) -> None:
    """The controller stopped after filling the claim and before its Node was written: the next one adopts the
    instance with a Node that names that claim — one claim, never a second for the same instance."""
    scene = Scene(compiled)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    with nodes_refused(scene):
        first = scene.controller()
        launched_claim = lambda: any(c.get("status", {}).get("providerID") for c in scene.nodeclaims().values())  # noqa: E731
        scene.run(first, 5, until=launched_claim)
        (name, claim), = scene.nodeclaims().items()
        assert claim["status"]["providerID"] and scene.nodes() == {}
    scene.source = DirectorySource(compiled)  # a new process reads the constraint sets afresh
    restarted = scene.controller()
    scene.run(restarted, 120, until=lambda: bool(scene.nodes()))
    (node,) = scene.nodes().values()
    assert claim_of_node(node) == name
    assert node["spec"]["providerID"] == claim["status"]["providerID"]
    scene.run(restarted, 60)
    assert list(scene.nodeclaims()) == [name]
