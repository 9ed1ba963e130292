"""Forceful expiry of a Karpenter v1 NodePool's nodes (`reconcile/disruption/expiry.py`): the NodePools of
tests/reconcile/data/v1consolidation keep the default `expireAfter: 720h`. Each test names the Go test it follows
(kubernetes-sigs/karpenter v1.14.1, pkg/controllers/nodeclaim/expiration/suite_test.go) and its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.testing import Scene, compile_policies

POLICIES = Path(__file__).resolve().parent / "data" / "v1consolidation"
M5 = ["m5.large", "m5.xlarge", "m5.2xlarge"]
EXPIRE_AFTER = 720 * 3600.0


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("v1expiry") / "build")


def _steps(scene: Scene, seconds: int, controller: Controller | None = None) -> None:
    controller = controller or scene.controller()
    for _ in range(seconds):
        scene.step(controller)
        scene.advance(1.0)


def test_should_remove_nodeclaims_that_are_expired(compiled: Path) -> None:
    """Expiration > should remove nodeclaims that are expired — nodeclaim/expiration/suite_test.go: a node of the
    NodePool `never` (consolidation off) older than 720h is deleted even with a pod (no replacement first)."""
    scene = Scene(compiled, types=M5)
    node = scene.add_node("NodePool/never", "m5.large", age=EXPIRE_AFTER + 60)
    scene.add_pod("app", node=node, nodeSelector={wk.NODEPOOL: "never"})
    _steps(scene, 5)
    found = scene.node(node)
    assert found is None or objects.is_deleting(found)


def test_should_not_remove_nodeclaims_that_are_not_expired(compiled: Path) -> None:
    """Expiration > should not remove the NodeClaims when expiration is disabled / not yet expired —
    nodeclaim/expiration/suite_test.go."""
    scene = Scene(compiled, types=M5)
    node = scene.add_node("NodePool/never", "m5.large", age=EXPIRE_AFTER - 3600)
    scene.add_pod("app", node=node, nodeSelector={wk.NODEPOOL: "never"})
    _steps(scene, 5)
    found = scene.node(node)
    assert found is not None and not objects.is_deleting(found)


def test_expiry_is_forceful_whatever_do_not_disrupt_says(compiled: Path) -> None:
    """v1's expiry is not a voluntary disruption: `karpenter.sh/do-not-disrupt` does not hold it
    (nodeclaim/expiration/controller.go deletes without looking at it)."""
    scene = Scene(compiled, types=M5)
    node = scene.add_node("NodePool/never", "m5.large", age=EXPIRE_AFTER + 60, annotations={wk.DO_NOT_DISRUPT: "true"})
    _steps(scene, 5)
    found = scene.node(node)
    assert found is None or objects.is_deleting(found)


def test_a_node_expires_when_its_time_comes(compiled: Path) -> None:
    """The controller comes back when the next node expires: one 30 s short of 720h goes within a minute."""
    scene = Scene(compiled, types=M5)
    node = scene.add_node("NodePool/never", "m5.large", age=EXPIRE_AFTER - 30)
    scene.add_pod("app", node=node, nodeSelector={wk.NODEPOOL: "never"})
    controller = scene.controller()
    _steps(scene, 10, controller)
    found = scene.node(node)
    assert found is not None and not objects.is_deleting(found)
    _steps(scene, 40, controller)
    found = scene.node(node)
    assert found is None or objects.is_deleting(found)
