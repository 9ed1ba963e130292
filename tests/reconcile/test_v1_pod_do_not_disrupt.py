"""A pod's `karpenter.sh/do-not-disrupt` on a Karpenter v1 NodePool's node, read by disruption as v1.14.1 reads it
(core pkg/controllers/state/statenode.go `ValidatePodsDisruptable`, pkg/utils/pod/scheduling.go `IsDisruptable`):
every active pod counts — a DaemonSet's and a static pod's mirror too —, and `karpenter.sh/do-not-evict`, v0.31's
annotation, is read nowhere in v1 (a Provisioner's node keeps v0.31's reading). Termination does the same: such a pod
is waited for, not evicted (tests/reconcile/test_v1_termination_grace.py). The nodes are a WhenEmptyOrUnderutilized
NodePool's (`under`, consolidateAfter 0s, tests/reconcile/data/v1consolidation); each test names the Go test it
follows (kubernetes-sigs/karpenter v1.14.1) and its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1consolidation"
HOUR = 3600.0


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1donotdisrupt") / "build")


def _node(scene: Scene) -> str:
    return scene.add_node("NodePool/under", "m5.large", age=HOUR)


def test_should_not_consider_candidates_that_have_do_not_disrupt_mirror_pods_scheduled(compiled: Path) -> None:
    """should not consider candidates that have do-not-disrupt mirror pods scheduled — disruption/suite_test.go:957:
    a node whose only pod is a static pod's mirror is empty, yet the mirror's annotation keeps it."""
    scene = Scene(compiled, types=["m5.large"])
    kept, empty = _node(scene), _node(scene)
    scene.add_static_pod("etcd", kept, annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_static_pod("proxy", empty)
    scene.run(scene.controller(), 60, until=lambda: empty not in scene.nodes())
    scene.run(scene.controller(), 30)
    assert empty not in scene.nodes() and kept in scene.nodes()


def test_should_not_consider_candidates_that_have_do_not_disrupt_daemonset_pods_scheduled(compiled: Path) -> None:
    """should not consider candidates that have do-not-disrupt daemonset pods scheduled — disruption/suite_test.go:995:
    a node whose only pod is a DaemonSet's is empty, yet that pod's annotation keeps it."""
    scene = Scene(compiled, types=["m5.large"])
    kept, empty = _node(scene), _node(scene)
    scene.add_daemon_set("logs", cpu="10m")
    scene.add_pod("logs-kept", node=kept, owner=("DaemonSet", "logs"), annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("logs-empty", node=empty, owner=("DaemonSet", "logs"))
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: empty not in scene.nodes())
    scene.run(controller, 30)
    assert empty not in scene.nodes() and kept in scene.nodes()


def test_do_not_evict_is_v0_31s_and_does_not_keep_a_nodepools_node(compiled: Path) -> None:
    """v1.14.1 reads no `karpenter.sh/do-not-evict` (v1 replaced it by `do-not-disrupt`): two half-empty nodes, one
    pod kept by do-not-disrupt, the other annotated do-not-evict — the second node is consolidated onto the first,
    where v0.31's reading would have kept both."""
    scene = Scene(compiled, types=["m5.large"])
    first, second = _node(scene), _node(scene)
    scene.add_pod("kept", cpu="100m", node=first, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_DISRUPT: "true"})
    scene.add_pod("old-style", cpu="100m", node=second, nodeSelector={wk.NODEPOOL: "under"},
                  annotations={wk.DO_NOT_EVICT: "true"})
    evictions = scene.record_evictions()
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: second not in scene.nodes())
    assert second not in scene.nodes() and first in scene.nodes()
    assert [(call.name, call.allowed) for call in evictions] == [("old-style", True)]
