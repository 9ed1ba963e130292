"""`plan` with a static NodePool (`spec.replicas`) in HEAD: the pods a drift wave evicts go to the dynamic NodePool's
replacements, never to the static one — Karpenter v1.14.1, gate on or off, leaves static NodePools out of the
scheduler its disruption simulates with (provisioner.go `NewScheduler`); the static NodePool is named to sort first:
a plan that did not leave it out would put the replacements there. With `--feature-gates StaticCapacity=true` a
change of `replicas` adds or removes nodes (`commands.plan.staticnodepools`), and a static NodePool's drifted nodes
are static drift's, gate on or off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.staticnodepools import MAX_ADDED_NODES, REPLACED
from tests.plan.snapshots import pod
from tests.plan.test_nodepool_plan import START, fleet, plan, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies


def test_drift_replacements_are_the_dynamic_nodepools_never_the_static_ones(tmp_path: Path) -> None:
    base = v1_policies(tmp_path / "base", nodepool())
    head = v1_policies(tmp_path / "head", nodepool(name="a-reserved", extra="  replicas: 2\n"),
                       nodepool(labels="team: platform"))
    code, doc = plan((base, head), tmp_path, *fleet(2))
    assert code == 0 and doc["finishes"]
    assert [w["nodes"] for w in doc["waves"]] == [["n0"], ["n1"]]
    assert {r["provisioner"] for w in doc["waves"] for r in w["replacements"]} == {"NodePool/default"}
    assert [row["provisioner"] for row in doc["cost"]["provisioners"]] == ["NodePool/default"]


def _static(replicas: int, *, labels: str = "team: web", limit: int | None = None) -> str:
    limits = f"  limits: {{nodes: {limit}}}\n" if limit is not None else ""
    return nodepool(name="fixed", labels=labels, extra=f"  replicas: {replicas}\n{limits}")


def _fixed(count: int, pods: dict[int, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for i in range(count):
        items += [pool_node(f"s{i}", "fixed", created=f"2026-11-20T08:0{i}:00Z"),
                  claim(f"s{i}", "fixed", created=f"2026-11-20T08:0{i}:00Z")]
        if pods and i in pods:
            items.append(pods[i])
    return items


def test_a_change_of_replicas_adds_nodes_with_the_gate_on_and_none_without(tmp_path: Path) -> None:
    """`plan --feature-gates StaticCapacity=true`: HEAD raising a static NodePool's replicas from 2 to 5 under
    `limits.nodes: 4` adds the 2 nodes v1.14.1's static provisioning launches (static/provisioning/suite_test.go:356,
    the limit); the gate off adds none and says why."""
    base = v1_policies(tmp_path / "base", _static(2, limit=4))
    head = v1_policies(tmp_path / "head", _static(5, limit=4))
    code, doc = plan((base, head), tmp_path, *_fixed(2), feature_gates="StaticCapacity=true")
    assert code == 0
    assert doc["static"] == [{"nodepool": "fixed", "nodes": 2, "replicas": {"base": 2, "head": 5}, "limit": 4,
                              "static_capacity": True, "added": 2, "removed": [], "drift": []}]
    code, doc = plan((base, head), tmp_path, *_fixed(2))
    assert code == 0 and doc["static"][0]["added"] == 0 and not doc["static"][0]["static_capacity"]


def test_a_lower_replicas_removes_the_empty_node_first_then_the_cheapest(tmp_path: Path) -> None:
    """replicas 3 → 1 with the gate on: the node with a DaemonSet's pod alone goes first, then of the two running an
    application's pod the one without a `do-not-disrupt` pod (static/deprovisioning/suite_test.go:513, :579 and the
    cost ordering :629), in the text output too."""
    base = v1_policies(tmp_path / "base", _static(3), nodepool())
    head = v1_policies(tmp_path / "head", _static(1), nodepool())
    pods = {0: pod("held", "s0", "web", annotations={"karpenter.sh/do-not-disrupt": "true"}),
            1: pod("web", "s1", "web"), 2: pod("agent", "s2", "agent", owner=("DaemonSet", "agent"))}
    code, doc = plan((base, head), tmp_path, *_fixed(3, pods), feature_gates="StaticCapacity=true")
    assert code == 0 and doc["static"][0]["removed"] == ["s2", "s1"]
    assert [(w["method"], w["nodes"]) for w in doc["waves"]] == [("static deprovisioning", ["s2", "s1"])]
    file = tmp_path / "snapshot.json"
    text = plan_command(PlanOptions(snapshot=(str(file),), start=START, base=base, head=head,
                                    feature_gates="StaticCapacity=true"), load_catalog()).stdout
    assert "static NodePool fixed: 3 node(s), replicas 3 → 1: 2 removed (s2, s1)" in text


def test_static_drift_replaces_each_drifted_node_one_for_one_never_through_a_simulation(tmp_path: Path) -> None:
    """A change to a static NodePool's template drifts its nodes: each is replaced one for one by static drift
    (disruption/staticdrift.go, gate on or off) — a node of its template, not the dynamic NodePool's; over its
    replicas it waits (staticdrift_test.go:578), and with no room under `limits.nodes` too (:367)."""
    base = v1_policies(tmp_path / "base", _static(2), nodepool())
    head = v1_policies(tmp_path / "head", _static(2, labels="team: shop"), nodepool())
    code, doc = plan((base, head), tmp_path, *_fixed(2))
    assert code == 0 and [(w["method"], w["nodes"]) for w in doc["waves"]] == [("static drift", ["s0"]),
                                                                               ("static drift", ["s1"])]
    assert {r["provisioner"] for w in doc["waves"] for r in w["replacements"]} == {"NodePool/fixed"}
    assert [d["verdict"] for d in doc["static"][0]["drift"]] == [REPLACED, REPLACED]
    head = v1_policies(tmp_path / "over", _static(1, labels="team: shop"), nodepool())
    code, doc = plan((base, head), tmp_path, *_fixed(2))
    assert [d["verdict"] for d in doc["static"][0]["drift"]] == [
        "static drift waits: 2 nodes, over its 1 replicas (nothing scales it down with the StaticCapacity gate off)"
    ] * 2
    head = v1_policies(tmp_path / "full", _static(2, labels="team: shop", limit=2), nodepool())
    code, doc = plan((base, head), tmp_path, *_fixed(2), feature_gates="StaticCapacity=true")
    assert {d["verdict"] for d in doc["static"][0]["drift"]} == {
        "static drift waits: limits.nodes 2 leaves no room for its replacement"}


def test_replicas_past_what_a_plan_models_are_refused_naming_the_nodepool(tmp_path: Path) -> None:
    """A valid but enormous `replicas` (int64's largest, no `limits.nodes`) with the gate on: v1.14.1 would launch
    NodeClaims until EC2 stops it; `plan` cannot put 9.2e18 nodes in its room, so it refuses with the NodePool's name
    and the way out, exit 2 — never an internal error (before: a MemoryError). Under `limits.nodes` it plans."""
    base = v1_policies(tmp_path / "base", _static(1))
    head = v1_policies(tmp_path / "head", _static(2**63 - 1))
    file = write(tmp_path / "snapshot.json", *_fixed(1))
    result = plan_command(PlanOptions(snapshot=(file,), start=START, output="json", base=base, head=head,
                                      feature_gates="StaticCapacity=true"), load_catalog())
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"karpenter-policy plan: NodePool fixed: spec.replicas {2**63 - 1} would have static provisioning add "
        f"{2**63 - 2} nodes, more than plan models ({MAX_ADDED_NODES:,}); set limits.nodes to bound it\n"
    )
    bounded = v1_policies(tmp_path / "bounded", _static(2**63 - 1, limit=3))
    code, doc = plan((base, bounded), tmp_path, *_fixed(1), feature_gates="StaticCapacity=true")
    assert code == 0 and doc["static"][0]["added"] == 2
