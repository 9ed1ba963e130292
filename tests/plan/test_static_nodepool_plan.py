"""`plan` with a static NodePool (`spec.replicas`) in HEAD: the pods a drift wave evicts go to the dynamic NodePool's
replacements, never to the static one — Karpenter v1.14.1 with its StaticCapacity feature gate off (the default)
leaves static NodePools out of the scheduler its disruption simulates with (provisioner.go `NewScheduler`). The
static NodePool is named to sort first: a plan that did not leave it out would put the replacements there."""

from __future__ import annotations

from pathlib import Path

from tests.plan.test_nodepool_plan import fleet, plan
from tests.plan.v1snapshots import nodepool, v1_policies


def test_drift_replacements_are_the_dynamic_nodepools_never_the_static_ones(tmp_path: Path) -> None:
    base = v1_policies(tmp_path / "base", nodepool())
    head = v1_policies(tmp_path / "head", nodepool(name="a-reserved", extra="  replicas: 2\n"),
                       nodepool(labels="team: platform"))
    code, doc = plan((base, head), tmp_path, *fleet(2))
    assert code == 0 and doc["finishes"]
    assert [w["nodes"] for w in doc["waves"]] == [["n0"], ["n1"]]
    assert {r["provisioner"] for w in doc["waves"] for r in w["replacements"]} == {"NodePool/default"}
    assert [row["provisioner"] for row in doc["cost"]["provisioners"]] == ["NodePool/default"]
