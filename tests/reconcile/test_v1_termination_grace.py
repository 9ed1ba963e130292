"""`terminationGracePeriod` of a Karpenter v1 NodePool's nodes (`reconcile/termination/graceperiod.py`): the drain of a
node whose NodeClaim has one stops waiting on PodDisruptionBudgets and `karpenter.sh/do-not-disrupt` when each pod's
time before the node's termination time comes — the pod is deleted with its grace shortened to end by then. Each
test names the Go test it follows (kubernetes-sigs/karpenter v1.14.1, pkg/controllers/node/termination/
suite_test.go) and its line; the nodes are launched by the controller (so they have their NodeClaim) from
tests/reconcile/data/v1termination: `graceful` (terminationGracePeriod 300s) and `patient` (none)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.termination.graceperiod import TERMINATION_TIMESTAMP
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1termination"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1grace") / "build")


def _launched(scene: Scene, pool: str) -> tuple[Controller, str]:
    """A node of `pool` launched by the controller for a seed pod (its NodeClaim made with it), the seed gone."""
    scene.add_pod("seed", cpu="100m", nodeSelector={wk.NODEPOOL: pool})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    scene.run(controller, 10)
    (node,) = scene.nodes()
    scene.cluster.delete(objects.POD, "seed", "default")
    return controller, node


def _pod(scene: Scene, name: str, node: str, pool: str, grace: int, **options: object) -> None:
    scene.add_pod(name, node=node, nodeSelector={wk.NODEPOOL: pool}, terminationGracePeriodSeconds=grace,
                  **options)  # type: ignore[arg-type]


def _deleting(scene: Scene, name: str) -> dict[str, object] | None:
    pod = next((p for p in scene.pods() if objects.name(p) == name), None)
    return objects.metadata(pod) if pod is not None and objects.is_deleting(pod) else None


def test_should_preemptively_delete_pods_to_satisfy_their_termination_grace_period_seconds(compiled: Path) -> None:
    """Termination > should preemptively delete pods to satisfy their terminationGracePeriodSeconds —
    suite_test.go:751: a do-not-disrupt pod whose own grace (300 s) is the node's whole period is deleted at the
    first step, with ~300 s of grace; the node stays while it terminates."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node = _launched(scene, "graceful")
    _pod(scene, "blocker", node, "graceful", 300, annotations={wk.DO_NOT_DISRUPT: "true"}, lingers=True)
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 2)
    deleting = _deleting(scene, "blocker")
    assert deleting is not None
    assert 295 <= int(deleting["deletionGracePeriodSeconds"]) <= 300  # type: ignore[call-overload]
    assert node in scene.nodes()
    assert [e["message"] for e in scene.events("Disrupted")][0].startswith(
        "Deleting the pod to accommodate the terminationTime")


def test_should_only_delete_pods_when_their_grace_is_less_than_the_nodes_remaining_period(compiled: Path) -> None:
    """Termination > should only delete pods when their terminationGracePeriodSeconds is less than the the node's
    remaining terminationGracePeriod — suite_test.go:777: a do-not-disrupt pod with 60 s of grace is still there
    (not evicted, not deleted) 90 s into the node's 300 s, and deleted 60 s before they end."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node = _launched(scene, "graceful")
    _pod(scene, "blocker", node, "graceful", 60, annotations={wk.DO_NOT_DISRUPT: "true"}, lingers=True)
    evictions = scene.record_evictions()
    scene.cluster.delete(objects.NODE, node)
    deleted_at = scene.clock.wall()
    scene.run(controller, 90)
    assert _deleting(scene, "blocker") is None
    assert evictions == [], "a do-not-disrupt pod on a NodePool's node is not evicted"
    scene.run(controller, 175, until=lambda: _deleting(scene, "blocker") is not None)
    deleting = _deleting(scene, "blocker")
    assert deleting is not None
    waited = (scene.clock.wall() - deleted_at).total_seconds()
    assert 240 <= waited <= 242, waited
    assert 57 <= int(deleting["deletionGracePeriodSeconds"]) <= 60  # type: ignore[call-overload]


def test_a_pdb_holds_the_drain_only_until_the_termination_time(compiled: Path) -> None:
    """Termination > should fail to evict pods that violate a PDB — suite_test.go:368, bounded by the NodeClaim's
    terminationGracePeriod: the PDB refuses every eviction, yet the pod is deleted 30 s (its default grace) before
    the node's 300 s end and the node goes; the claim carries the termination time, the node a
    TerminationGracePeriodExpiring Event. On `patient` (no terminationGracePeriod) the same PDB holds it for ever."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node = _launched(scene, "graceful")
    (claim,) = scene.nodeclaims()
    scene.add_pod("held", node=node, labels={"app": "held"}, nodeSelector={wk.NODEPOOL: "graceful"})
    scene.add_pdb("held", {"app": "held"}, max_unavailable=0)
    scene.cluster.delete(objects.NODE, node)
    deleted_at = scene.clock.wall()
    scene.run(controller, 5)
    annotated = objects.annotations(scene.nodeclaims()[claim])[TERMINATION_TIMESTAMP]
    assert objects.parse_time(annotated) - deleted_at.replace(microsecond=0) == dt.timedelta(seconds=300)
    assert scene.events("TerminationGracePeriodExpiring")
    scene.run(controller, 200)
    assert node in scene.nodes() and "held" in scene.pods_on(node)
    scene.run(controller, 120, until=lambda: node not in scene.nodes())
    assert node not in scene.nodes()
    assert (scene.clock.wall() - deleted_at).total_seconds() <= 300

    patient = Scene(compiled, types=["m5.large"])
    controller, node = _launched(patient, "patient")
    patient.add_pod("held", node=node, labels={"app": "held"}, nodeSelector={wk.NODEPOOL: "patient"})
    patient.add_pdb("held", {"app": "held"}, max_unavailable=0)
    patient.cluster.delete(objects.NODE, node)
    patient.run(controller, 400)
    assert node in patient.nodes() and "held" in patient.pods_on(node)
    assert claim_of_node(patient.nodes()[node]) is not None


def test_a_do_not_disrupt_duration_holds_the_drain_until_it_runs_out(compiled: Path) -> None:
    """v1.14.1's `IsEvictable` reads `IsDoNotDisruptActive` (pkg/utils/pod/scheduling.go:58, :210): on a node of
    `patient` (no terminationGracePeriod) a pod annotated `do-not-disrupt: "10m"`, started 540 s ago, is not evicted
    for the 60 s left, then evicted, and the node goes."""
    scene = Scene(compiled, types=["m5.large"])
    controller, node = _launched(scene, "patient")
    _pod(scene, "guarded", node, "patient", 30, annotations={wk.DO_NOT_DISRUPT: "10m"}, started=540)
    evictions = scene.record_evictions()
    scene.cluster.delete(objects.NODE, node)
    scene.run(controller, 50)
    assert evictions == [] and node in scene.nodes()
    scene.run(controller, 60, until=lambda: node not in scene.nodes())
    assert [call.name for call in evictions] == ["guarded"] and node not in scene.nodes()
