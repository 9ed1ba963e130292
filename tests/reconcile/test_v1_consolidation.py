"""Consolidation of a Karpenter v1 NodePool's nodes with v1.14.1's rules (tests/reconcile/data/v1consolidation: three
NodePools differing only in `spec.disruption`): `consolidationPolicy` WhenEmpty / WhenEmptyOrUnderutilized,
`consolidateAfter` counted from the node's last pod event (or its creation), `Never`, and the v1 reading of the
node's `karpenter.sh/do-not-disrupt` (only "true"). Each test names the Go test it follows (kubernetes-sigs/karpenter
v1.14.1) and its line; envtest's NodeClaim conditions become what they stand for (Consolidatable: consolidateAfter
has passed; an empty node: no pod but DaemonSets')."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller, ReconcileResult
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1consolidation"
M5 = ["m5.large", "m5.xlarge", "m5.2xlarge"]
HOUR = 3600.0


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1consolidation") / "build")


def _run(scene: Scene, controller: Controller, seconds: float) -> list[ReconcileResult]:
    results = []
    end = scene.clock.now + seconds
    while scene.clock.now <= end:
        results.append(scene.step(controller))
        scene.advance(1.0)
    return results


def _pool_node(scene: Scene, pool: str, instance_type: str = "m5.large", **options: object) -> str:
    return scene.add_node(f"NodePool/{pool}", instance_type, age=HOUR, **options)  # type: ignore[arg-type]


def _pod(scene: Scene, name: str, node: str, pool: str, cpu: str = "100m") -> None:
    scene.add_pod(name, cpu=cpu, node=node, nodeSelector={wk.NODEPOOL: pool})


def test_can_delete_empty_nodes(compiled: Path) -> None:
    """Emptiness > can delete empty nodes — disruption/emptiness_test.go:369."""
    scene = Scene(compiled, types=M5)
    node = _pool_node(scene, "under")
    _run(scene, scene.controller(), 60)
    assert node not in scene.nodes()


def test_should_ignore_nodes_with_the_do_not_disrupt_annotation(compiled: Path) -> None:
    """Emptiness > should ignore nodes with the karpenter.sh/do-not-disrupt annotation — emptiness_test.go:419."""
    scene = Scene(compiled, types=M5)
    node = _pool_node(scene, "under", annotations={wk.DO_NOT_DISRUPT: "true"})
    _run(scene, scene.controller(), 60)
    assert node in scene.nodes()


def test_should_delete_nodes_with_the_do_not_disrupt_annotation_set_to_false(compiled: Path) -> None:
    """Emptiness > should delete nodes with the karpenter.sh/do-not-disrupt annotation set to false —
    emptiness_test.go:433 (v0.31 kept a Provisioner's node with the annotation whatever its value; v1 reads "true")."""
    scene = Scene(compiled, types=M5)
    node = _pool_node(scene, "under", annotations={wk.DO_NOT_DISRUPT: "false"})
    _run(scene, scene.controller(), 60)
    assert node not in scene.nodes()


def test_should_ignore_nodes_that_have_pods_under_when_empty(compiled: Path) -> None:
    """Emptiness > should ignore nodes that have pods — emptiness_test.go:450; and Consolidation > should fire an
    event for ConsolidationDisabled when the NodePool has consolidation set to WhenEmpty — consolidation_test.go:114
    (the node is not consolidated: its pods could move onto the other node, but WhenEmpty takes only empty nodes)."""
    scene = Scene(compiled, types=M5)
    first, second = _pool_node(scene, "empty"), _pool_node(scene, "empty")
    _pod(scene, "a", first, "empty")
    _pod(scene, "b", second, "empty")
    _run(scene, scene.controller(), 120)
    assert first in scene.nodes() and second in scene.nodes()


def test_when_empty_or_underutilized_consolidates_the_same_nodes(compiled: Path) -> None:
    """The contrast of the above: Consolidation > should not fire an event for ConsolidationDisabled when the
    NodePool has consolidation set to WhenEmptyOrUnderutilized — consolidation_test.go:104 (one node's pod moves onto
    the other, one node goes)."""
    scene = Scene(compiled, types=M5)
    first, second = _pool_node(scene, "under"), _pool_node(scene, "under")
    _pod(scene, "a", first, "under")
    _pod(scene, "b", second, "under")
    controller = scene.controller(consolidation_validation=15)
    _run(scene, controller, 120)
    assert len({first, second} & set(scene.nodes())) == 1


def test_consolidate_after_never_keeps_even_an_empty_node(compiled: Path) -> None:
    """nodeclaim/disruption: should remove the status condition from the nodeClaim when consolidateAfter is never —
    nodeclaim/disruption/consolidation_test.go:125; Consolidation > …consolidateAfter set to 'Never' —
    disruption/consolidation_test.go:125."""
    scene = Scene(compiled, types=M5)
    node = _pool_node(scene, "never")
    _run(scene, scene.controller(), 120)
    assert node in scene.nodes()


def test_consolidate_after_counts_from_the_last_pod_event(compiled: Path) -> None:
    """nodeclaim/disruption: should remove the status condition from the nodeClaim when lastPodEvent is too recent —
    nodeclaim/disruption/consolidation_test.go:116, and should mark NodeClaims as consolidatable —
    consolidation_test.go:85: the node of `empty` (consolidateAfter 30s) whose pod left is kept for 30 s after that
    pod event, then deleted (the decision comes back by itself when the 30 s are over)."""
    scene = Scene(compiled, types=M5)
    node = _pool_node(scene, "empty")
    _pod(scene, "leaving", node, "empty")
    controller = scene.controller()
    _run(scene, controller, 5)
    scene.cluster.delete(objects.POD, "leaving", "default")
    left_at = scene.clock.now
    _run(scene, controller, 25)
    assert node in scene.nodes(), "still within consolidateAfter of the last pod event"
    _run(scene, controller, 30)
    assert node not in scene.nodes()
    assert scene.clock.now - left_at >= 30
