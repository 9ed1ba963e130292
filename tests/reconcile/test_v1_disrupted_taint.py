"""Karpenter v1's `karpenter.sh/disrupted:NoSchedule` taint on a NodePool's nodes (core pkg/apis/v1/taints.go at
v1.14.1): the disruption controller taints the nodes of a command where v0.31 cordons them and untaints them when the
command is abandoned (pkg/controllers/disruption/queue.go), a node left tainted by an earlier command is untainted
(controller.go `Reconcile`), and termination taints instead of cordoning, its drain leaving the pods that tolerate
that taint (pkg/controllers/node/termination/terminator/terminator.go `Taint`). A Provisioner's nodes are cordoned as
before. Each test names the Go test it follows (kubernetes-sigs/karpenter v1.14.1) and its line; tests/reconcile/data/
v1consolidation's NodePools."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1consolidation"
M5 = ["m5.large", "m5.xlarge", "m5.2xlarge"]
HOUR = 3600.0
DISRUPTED = {"key": wk.TAINT_DISRUPTED, "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1taint") / "build")


def _run(scene: Scene, controller: Controller, seconds: float) -> None:
    end = scene.clock.now + seconds
    while scene.clock.now <= end:
        scene.step(controller)
        scene.advance(1.0)


def _taints(scene: Scene, node: str) -> list[dict[str, str]]:
    found = scene.node(node)
    assert found is not None
    return list((found.get("spec") or {}).get("taints") or [])


def _tainted(scene: Scene, node: str) -> bool:
    return any(t.get("key") == wk.TAINT_DISRUPTED and t.get("effect") == "NoSchedule" for t in _taints(scene, node))


def test_should_remove_taints_left_from_a_previous_disruption_action(compiled: Path) -> None:
    """Disruption > should remove taints from NodeClaims that were left tainted from a previous disruption action —
    disruption/suite_test.go:598 (consolidateAfter Never: nothing disrupts the node now)."""
    scene = Scene(compiled, types=M5)
    node = scene.add_node("NodePool/never", "m5.large", age=HOUR, taints=[DISRUPTED])
    scene.add_pod("app", cpu="100m", node=node, nodeSelector={wk.NODEPOOL: "never"})
    assert _tainted(scene, node)
    _run(scene, scene.controller(), 5)
    assert not _tainted(scene, node)
    found = scene.node(node)
    assert found is not None and not (found.get("spec") or {}).get("unschedulable")


def test_should_add_and_remove_taints_from_nodes_that_fail_to_disrupt(compiled: Path) -> None:
    """Disruption > should add and remove taints from NodeClaims that fail to disrupt — disruption/suite_test.go:625;
    Drift > should untaint nodes when drift replacement fails — drift_test.go:920: an underutilized m5.2xlarge is
    replaced by an m5.large whose kubelet never joins; while the command waits the node is tainted (not cordoned),
    once the replacement times out it is untainted and kept."""
    scene = Scene(compiled, types=M5, never_join=["m5.large"])
    node = scene.add_node("NodePool/under", "m5.2xlarge", age=HOUR)
    scene.add_pod("app", cpu="100m", node=node, nodeSelector={wk.NODEPOOL: "under"})
    controller = scene.controller(consolidation_validation=0, replacement_timeout=60)
    seen_tainted = False
    for _ in range(30):
        _run(scene, controller, 1)
        if _tainted(scene, node):
            seen_tainted = True
            break
    assert seen_tainted, "the candidate is tainted while its replacement launches"
    found = scene.node(node)
    assert found is not None and not (found.get("spec") or {}).get("unschedulable"), "tainted, not cordoned"
    _run(scene, controller, 90)
    assert node in scene.nodes()
    assert not _tainted(scene, node)


def test_a_deleted_nodepool_node_is_tainted_not_cordoned_and_left_out_of_load_balancers(compiled: Path) -> None:
    """Termination > should exclude nodes from load balancers when terminating — node/termination/suite_test.go:202,
    with v1.14.1's `Terminator.Taint` (the disrupted taint where v0.31 cordoned; a PDB holds the drain so the node
    stays to be looked at)."""
    scene = Scene(compiled, types=M5)
    node = scene.add_node("NodePool/never", "m5.large", age=HOUR)
    scene.add_pod("held", cpu="100m", node=node, labels={"app": "held"}, nodeSelector={wk.NODEPOOL: "never"})
    scene.add_pdb("held", {"app": "held"}, max_unavailable=0)
    scene.cluster.delete(objects.NODE, node)
    _run(scene, scene.controller(), 3)
    found = scene.node(node)
    assert found is not None
    assert objects.labels(found)[wk.EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS] == "karpenter"
    assert _tainted(scene, node)
    assert not (found.get("spec") or {}).get("unschedulable")


@pytest.mark.parametrize(("operator", "line"), [("Equal", 225), ("Exists", 256)])
def test_should_not_evict_pods_that_tolerate_the_disruption_taint(compiled: Path, operator: str, line: int) -> None:
    """Termination > should not evict pods that tolerate karpenter disruption taint with equal / exists operator —
    node/termination/suite_test.go:225 and :256: the pod that tolerates it stays, the other is evicted, the node
    goes. A pod tolerating only the cordon (v0.31's rule) is evicted from a NodePool's node."""
    scene = Scene(compiled, types=M5)
    node = scene.add_node("NodePool/never", "m5.large", age=HOUR)
    toleration = {"key": wk.TAINT_DISRUPTED, "operator": operator, "effect": "NoSchedule"}
    scene.add_pod("skip", cpu="100m", node=node, tolerations=[toleration], nodeSelector={wk.NODEPOOL: "never"})
    scene.add_pod("evict", cpu="100m", node=node, nodeSelector={wk.NODEPOOL: "never"})
    scene.add_pod("cordon", cpu="100m", node=node, nodeSelector={wk.NODEPOOL: "never"}, tolerations=[
        {"key": wk.TAINT_UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"}])
    evictions = scene.record_evictions()
    scene.cluster.delete(objects.NODE, node)
    _run(scene, scene.controller(), 10)
    evicted = {call.name for call in evictions}
    assert evicted == {"evict", "cordon"}, line
    assert scene.node(node) is None


def test_a_provisioners_node_is_still_cordoned(compiled: Path, tmp_path: Path) -> None:
    """v1alpha5 keeps v0.31's cordon: examples/v1/controller's Provisioner `default`."""
    example = Path(__file__).resolve().parents[2] / "examples" / "v1" / "controller" / "policies"
    scene = Scene(compile_policies(example, tmp_path / "build"))
    node = scene.add_node("default", "c6a.large", age=HOUR)
    scene.add_pod("held", cpu="100m", node=node, labels={"app": "held"},
                  nodeSelector={wk.PROVISIONER_NAME: "default"})
    scene.add_pdb("held", {"app": "held"}, max_unavailable=0)
    scene.cluster.delete(objects.NODE, node)
    _run(scene, scene.controller(), 3)
    found = scene.node(node)
    assert found is not None and (found.get("spec") or {}).get("unschedulable") is True
    assert not _tainted(scene, node)
