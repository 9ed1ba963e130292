"""A NodePool node stamped under another hash version is re-stamped, as Karpenter v1.14.1's hash controllers do
after a hash-version bump (core pkg/controllers/nodepool/hash/controller.go and aws pkg/controllers/nodeclass/hash/
controller.go `updateNodeClaimHash`): the current version, and the current hash unless the node is already
drifted. Ported cases name core's pkg/controllers/nodepool/hash/suite_test.go at v1.14.1 with their lines; then the
controller on `Scene`: a re-stamped node drifts on a later change, as it never did with the stale version."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from karpenter_policy.api.v1.statichash import (
    EC2NODECLASS_HASH,
    EC2NODECLASS_HASH_VERSION,
    EC2NODECLASS_HASH_VERSION_KEY,
    NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION_KEY,
    restamped,
)
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
CURRENT = {NODEPOOL_HASH: "np-now", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION,
           EC2NODECLASS_HASH: "class-now", EC2NODECLASS_HASH_VERSION_KEY: EC2NODECLASS_HASH_VERSION}


@pytest.mark.parametrize(
    ("case", "stamped", "drifted", "written"),
    [
        ("suite_test.go:163 versions differ: hash and version re-stamped",
         {NODEPOOL_HASH: "old", NODEPOOL_HASH_VERSION_KEY: "test-version"}, False,
         {NODEPOOL_HASH: "np-now", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION}),
        ("suite_test.go:163 no version at all", {NODEPOOL_HASH: "old"}, False,
         {NODEPOOL_HASH: "np-now", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION}),
        ("suite_test.go:200 versions match: nothing",
         {NODEPOOL_HASH: "old", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION}, False, {}),
        ("suite_test.go:228 drifted: the version only, the hash kept",
         {NODEPOOL_HASH: "old", NODEPOOL_HASH_VERSION_KEY: "test-version"}, True,
         {NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION}),
        ("nodeclass/hash/controller.go: the class's hash alike",
         {EC2NODECLASS_HASH: "old", EC2NODECLASS_HASH_VERSION_KEY: "v4"}, False,
         {EC2NODECLASS_HASH: "class-now", EC2NODECLASS_HASH_VERSION_KEY: EC2NODECLASS_HASH_VERSION}),
    ],
)
def test_restamping_is_karpenters(case: str, stamped: dict[str, str], drifted: bool, written: dict[str, str]) -> None:
    if EC2NODECLASS_HASH not in stamped:  # the other hash current: only the one in the case matters
        stamped = {**stamped, EC2NODECLASS_HASH: "class-now", EC2NODECLASS_HASH_VERSION_KEY: EC2NODECLASS_HASH_VERSION}
    if NODEPOOL_HASH not in stamped:
        stamped = {**stamped, NODEPOOL_HASH: "np-now", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION}
    assert restamped(stamped, CURRENT, drifted) == written, case


def test_a_set_without_a_class_hash_restamps_none() -> None:
    current = {NODEPOOL_HASH: "np-now", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION}
    assert restamped({**current, EC2NODECLASS_HASH_VERSION_KEY: "v1"}, current, False) == {}


def test_a_restamped_node_drifts_on_a_later_change(tmp_path: Path) -> None:
    """The controller launched a node; its NodePool hash version is then made stale (as after an upgrade that
    bumped it). A decision re-stamps it (version and hash current, the node not drifted); a later change to the
    template's labels drifts it — its claim Drifted NodePoolDrifted — where the stale version hid it for ever."""
    policies = tmp_path / "policies"
    shutil.copytree(EXAMPLE / "policies", policies)
    build = compile_policies(policies, tmp_path / "build")
    scene = Scene(build)
    scene.add_pod("web", cpu="1", nodeSelector={wk.NODEPOOL: "default"})
    controller = scene.controller()
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (claim, _), = scene.nodeclaims().items()
    node = next(n for n, obj in scene.nodes().items() if claim_of_node(obj) == claim)
    scene.cluster.patch(objects.NODE, node, {"metadata": {"annotations": {
        wk.DO_NOT_DISRUPT: "true", NODEPOOL_HASH_VERSION_KEY: "v2", NODEPOOL_HASH: "from-an-older-karpenter"}}})

    def annotations() -> dict[str, str]:
        return dict(objects.annotations(scene.nodes()[node]))

    scene.run(controller, 900, until=lambda: annotations().get(NODEPOOL_HASH_VERSION_KEY) == NODEPOOL_HASH_VERSION)
    assert annotations()[NODEPOOL_HASH_VERSION_KEY] == NODEPOOL_HASH_VERSION
    assert annotations()[NODEPOOL_HASH] != "from-an-older-karpenter"
    assert _drifted(scene, claim) is None

    source = (policies / "nodepools.yaml").read_text()
    (policies / "nodepools.yaml").write_text(source.replace("team: web", "team: shop", 1))
    compile_policies(policies, build)
    scene.run(controller, 900, until=lambda: _drifted(scene, claim) is not None)
    drifted = _drifted(scene, claim)
    assert drifted is not None and drifted["reason"] == "NodePoolDrifted", drifted


def _drifted(scene: Scene, claim: str) -> dict[str, str] | None:
    status = scene.nodeclaims()[claim].get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Drifted"), None)
