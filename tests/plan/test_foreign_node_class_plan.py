"""`plan` and a node class of another provider (`karpenter.azure.com`/`AKSNodeClass`): Karpenter's AWS provider v1.14.1
manages only NodePools and NodeClaims whose nodeClassRef is `karpenter.k8s.aws`/`EC2NodeClass` (core
pkg/utils/nodepool/nodepool.go `IsManaged`), so such a node is left out of the plan with a note — never drifted by
the EC2NodeClass that has the other class's name — and a HEAD holding such a NodePool is refused
(`foreign-node-class`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.api.v1.objects import NodePool
from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.compile.nodepools import nodepool_constraint_set
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import NodeDrift, PolicySide
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.reservedlaunches import _class_of
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import listing, write
from tests.plan.v1snapshots import claim, node_class, nodepool, pool_node, v1_policies

START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
AKS = "{group: karpenter.azure.com, kind: AKSNodeClass, name: default}"
EC2 = "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}"
#: BASE's and HEAD's EC2NodeClass `default`: a hashed field changed (every node launched with it drifts).
OLD_CLASS, NEW_CLASS = node_class(), node_class(extra="  userData: |\n    echo hello\n")
NOT_MANAGED = ("its nodeClassRef is karpenter.azure.com/AKSNodeClass, not karpenter.k8s.aws/EC2NodeClass: "
               "Karpenter's AWS provider does not manage it (IsManaged)")


def aks_pool(name: str = "aks") -> str:
    return nodepool(name).replace(EC2, AKS)


def side(*documents: str) -> PolicySide:
    stored = [stored_form(yaml.safe_load(d)) for d in documents]
    kinds = {kind: {d["metadata"]["name"]: d for d in stored if d["kind"] == kind}
             for kind in ("NodePool", "EC2NodeClass")}
    return PolicySide("x", {}, {}, kinds["NodePool"], kinds["EC2NodeClass"])


def aks_claim(node: str, pool: str) -> dict[str, Any]:
    made = claim(node, pool)
    made["spec"]["nodeClassRef"] = {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"}
    return made


def drift_of(base: PolicySide, head: PolicySide, *items: dict[str, Any]) -> tuple[NodeDrift, NodePoolDriftRules]:
    fleet = fleet_of(read_snapshot(json.dumps(listing(*items)).encode(), "s.json"))
    rules = NodePoolDriftRules(base, head, START)
    return rules(next(iter(fleet.nodes.values()))), rules


def test_the_node_of_a_foreign_nodepool_is_not_drifted_by_the_ec2nodeclass_of_the_same_name() -> None:
    base, head = side(aks_pool(), OLD_CLASS), side(aks_pool(), NEW_CLASS)

    drift, rules = drift_of(base, head, pool_node("n1", "aks"), aks_claim("n1", "aks"))

    assert drift.unknown and not drift.drifted and drift.reasons == ()
    assert rules.notes() == [f"1 node of nodepool aks not planned: its NodeClaim aks-n1: {NOT_MANAGED}"]


def test_without_its_nodeclaim_the_foreign_nodepool_says_it_is_not_managed() -> None:
    base, head = side(aks_pool(), OLD_CLASS), side(aks_pool(), NEW_CLASS)

    drift, rules = drift_of(base, head, pool_node("n1", "aks"))

    assert drift.unknown and not drift.drifted
    assert rules.notes() == [f"1 node of nodepool aks not planned: {NOT_MANAGED}"]


def test_an_ec2_nodeclaim_of_the_same_pool_still_drifts() -> None:
    base, head = side(nodepool(), OLD_CLASS), side(nodepool(), NEW_CLASS)

    drift, rules = drift_of(base, head, pool_node("n1"), claim("n1"))

    assert drift.drifted and drift.reasons == ("EC2NodeClass default: spec.userData added",)
    assert rules.notes() == []


def test_a_foreign_nodepool_takes_no_capacity_reservation_of_the_ec2nodeclass_of_its_name() -> None:
    assert _class_of(stored_form(yaml.safe_load(aks_pool()))) == ""
    assert _class_of(stored_form(yaml.safe_load(nodepool()))) == "default"


def test_consolidation_builds_no_constraint_set_for_a_foreign_nodepool() -> None:
    """`plan`'s consolidation (`simulate.consolidation`) notes such a NodePool's nodes as left out."""
    pool = NodePool.from_document(stored_form(yaml.safe_load(aks_pool())))

    with pytest.raises(ValueError, match="^its nodeClassRef is karpenter.azure.com/AKSNodeClass, not "):
        nodepool_constraint_set(pool, None, version="plan", sources=(), catalog=load_catalog())


def test_plan_refuses_a_head_with_a_foreign_nodepool(tmp_path: Path) -> None:
    base = v1_policies(tmp_path / "base", nodepool(), node_classes=(OLD_CLASS,))
    head = v1_policies(tmp_path / "head", nodepool().replace(EC2, AKS), node_classes=(NEW_CLASS,))
    file = write(tmp_path / "snapshot.json", pool_node("n1"), claim("n1"))

    result = plan_command(PlanOptions(snapshot=(file,), start="2026-11-30T09:00:00Z", output="json", base=base,
                                      head=head), load_catalog())

    assert result.exit_code == 1 and result.stdout == ""
    assert "HEAD (" in result.stderr and "foreign-node-class: " in result.stderr
