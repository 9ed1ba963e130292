"""The controller on a static NodePool's constraint set (`spec.replicas`, compiled into `nodePool.replicas`), as
Karpenter v1.14.1 runs with its StaticCapacity feature gate off (the default): the provisioner leaves the NodePool
out (provisioner.go `NewScheduler`: `nodepoolutils.IsStatic`), so pods land only on the dynamic NodePool beside it,
and with no other NodePool they stay pending with Karpenter's `no dynamic nodepools found`; disruption never
empties a static NodePool's nodes (`OwnedByStaticNodePool`). Each through `karpenter_policy.testing`'s Scene; the
data, tests/data/static-nodepools, puts the static NodePool first by name, where a scheduler that did not leave it
out would place the pods."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from karpenter_policy.api.constraintset import read_compiled
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "static-nodepools"
NODE_CLASS = (DATA / "nodepools.yaml").read_text().split("---\n")[2]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Path:
    policies = tmp_path_factory.mktemp("static-both") / "policies"
    policies.mkdir()
    shutil.copy(DATA / "nodepools.yaml", policies)
    return compile_policies(policies, policies.parent / "build")


@pytest.fixture(scope="module")
def only_static(tmp_path_factory: pytest.TempPathFactory) -> Path:
    policies = tmp_path_factory.mktemp("static-only") / "policies"
    policies.mkdir()
    static, _, _ = (DATA / "nodepools.yaml").read_text().split("---\n")
    (policies / "nodepools.yaml").write_text(static + "---\n" + NODE_CLASS)
    return compile_policies(policies, policies.parent / "build")


def test_compile_carries_replicas_in_the_static_nodepools_set_only(both: Path) -> None:
    _, sets = read_compiled(both)
    by_name = {s.name: s for s in sets}
    static, dynamic = by_name["a-reserved"], by_name["dynamic"]
    assert static.nodepool is not None and static.nodepool["replicas"] == 2 and static.is_static
    assert dynamic.nodepool is not None and "replicas" not in dynamic.nodepool and not dynamic.is_static


def test_pods_land_only_on_the_dynamic_nodepool_beside_a_static_one(both: Path) -> None:
    """Provisioning > StaticNodePool > should still provision dynamic NodeClaims when there are both Static and
    Dynamic NodePools — kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go:2859."""
    scene = Scene(both)
    scene.add_deployment("web", 3, cpu="1")
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    assert scene.unbound() == []
    pools = {objects.labels(node).get(wk.NODEPOOL) for node in scene.nodes().values()}
    assert pools == {"dynamic"}
    assert {i.tags.get(wk.NODEPOOL) for i in scene.instances()} == {"dynamic"}


def test_with_only_a_static_nodepool_the_pods_stay_pending_with_karpenters_words(
    only_static: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Provisioning > StaticNodePool > should not create NodeClaims for StaticNodePool — kubernetes-sigs/karpenter
    v1.14.1 pkg/controllers/provisioning/suite_test.go:2848; the words are `Schedule`'s on ErrNodePoolsNotFound
    (provisioner.go:409, "no dynamic nodepools found", logged and marked on every pending pod)."""
    scene = Scene(only_static)
    scene.add_pod("web", cpu="1")
    controller = scene.controller()
    with caplog.at_level(logging.INFO):
        scene.run(controller, 60)
    assert scene.unbound() == ["default/web"]
    assert scene.nodes() == {} and scene.instances() == []
    (event,) = scene.events("FailedScheduling")
    assert str(event["message"]).startswith("no dynamic nodepools found: NodePool/a-reserved: static NodePool")
    said = [r.getMessage() for r in caplog.records]
    assert "no dynamic nodepools found" in said
    left_out = [r for r in caplog.records if r.getMessage().startswith("constraint set NodePool/a-reserved left out")]
    assert left_out and all(r.levelno == logging.INFO for r in left_out)  # by design, not an error


def test_an_empty_node_of_a_static_nodepool_is_not_removed(both: Path) -> None:
    """Emptiness > Static NodePool > should not consolidate static NodePool nodes — kubernetes-sigs/karpenter
    v1.14.1 pkg/controllers/disruption/emptiness_test.go:758 (`Emptiness.ShouldDisrupt`: `OwnedByStaticNodePool`);
    the empty node of the dynamic NodePool beside it goes (consolidateAfter 0s, the CRD's default)."""
    scene = Scene(both)
    static = scene.add_node("NodePool/a-reserved", "m5.large", age=3600)
    dynamic = scene.add_node("NodePool/dynamic", "m5.large", age=3600)
    controller = scene.controller()
    scene.run(controller, 300, until=lambda: dynamic not in scene.nodes())
    assert dynamic not in scene.nodes()
    scene.run(controller, 120)
    assert static in scene.nodes()
