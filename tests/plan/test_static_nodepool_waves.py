"""`plan` carries out what a change does to HEAD's static NodePools (`spec.replicas`) as Karpenter v1.14.1 would, in
the waves and the cost like the other rollouts (`commands.plan.staticnodepools.StaticWork`, `nodepoolwaves`):

* static deprovisioning (`--feature-gates StaticCapacity=true`, replicas lowered) deletes its NodeClaims at once
  (core pkg/controllers/static/deprovisioning/controller.go): the nodes drain as any deleted node — a PDB allowing no
  eviction holds the drain, for ever without a `terminationGracePeriod` — and their pods are provisioned for on the
  dynamic NodePools (never the static one: `NewScheduler` leaves it out); a pod no NodePool admits is pending;
* static drift (gate on or off, core pkg/controllers/disruption/staticdrift.go) replaces each drifted node one for
  one by a node of its template — no simulation, replace before delete, its pods onto the replacement —, under its
  NodePool's `Drifted` budget;
* static provisioning's nodes (replicas raised) are launched at the start;
* the cost before / peak / after counts them all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.proof.placement import HOURS_PER_MONTH
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from tests.plan.snapshots import FULL, pdb, pod, write
from tests.plan.test_nodepool_plan import START, plan
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies

GATE = "StaticCapacity=true"


def _static(replicas: int, *, labels: str = "team: web", budgets: str | None = None) -> str:
    return nodepool(name="fixed", labels=labels, budgets=budgets, extra=f"  replicas: {replicas}\n")


def _fixed(count: int, *, cpu: str = FULL, grace: str | None = None, app: str = "web") -> list[dict[str, Any]]:
    """`count` static nodes `s0…`, each with one pod of `app` requesting `cpu` (FULL: no other node has room)."""
    items: list[dict[str, Any]] = []
    for i in range(count):
        created = f"2026-11-20T08:0{i}:00Z"
        items += [pool_node(f"s{i}", "fixed", created=created), claim(f"s{i}", "fixed", created=created, grace=grace),
                  pod(f"{app}-{i}", f"s{i}", app, cpu=cpu)]
    return items


def _month(price: float | None) -> float:
    return round((price or 0.0) * HOURS_PER_MONTH, 2)


def _node_month() -> float:
    """$/month of a snapshot node here: m5.large on-demand in us-east-1a."""
    offering = next(o for o in load_catalog().get("m5.large").offerings  # type: ignore[union-attr]
                    if o.zone == "us-east-1a" and o.capacity_type == "on-demand")
    return _month(offering.price)


def _rows(doc: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    return {r["provisioner"]: (r["before_monthly"], r["peak_monthly"], r["after_monthly"])
            for r in doc["cost"]["provisioners"]}


def test_static_deprovisioning_moves_the_removed_nodes_pods_to_the_dynamic_nodepool(tmp_path: Path) -> None:
    """replicas 3 → 1 with the gate on: s0 and s1 (v1.14.1's order: cheapest to disrupt first, then name) are deleted at
    the start in one wave, drained, and their pods provisioned for on NodePool `default` — new nodes (the static
    node left is full) —; the cost after is the static node left plus the dynamic NodePool's new nodes, and
    the peak never has both (the nodes go before their pods' new nodes come)."""
    base = v1_policies(tmp_path / "base", _static(3), nodepool())
    head = v1_policies(tmp_path / "head", _static(1), nodepool())
    code, doc = plan((base, head), tmp_path, *_fixed(3), feature_gates=GATE)

    assert code == 0 and doc["finishes"] and doc["pending"] == [] and doc["blocked"] == []
    assert doc["static"][0]["removed"] == ["s0", "s1"]
    [wave] = doc["waves"]
    assert (wave["method"], wave["nodes"], wave["start"], wave["evicted"]) == (
        "static deprovisioning", ["s0", "s1"], START, {"default/Deployment/web": 2})
    assert {r["provisioner"] for r in wave["replacements"]} == {"NodePool/default"} and wave["replacements"]
    assert {n["name"]: n["wave"] for n in doc["nodes"]} == {"s0": 0, "s1": 0, "s2": None}
    new = sum(_month(r["price"]) for r in wave["replacements"])
    rows = _rows(doc)
    assert rows["NodePool/fixed"] == pytest.approx((3 * _node_month(), 3 * _node_month(), _node_month()), abs=0.02)
    assert rows["NodePool/default"] == pytest.approx((0.0, new, new), abs=0.02)
    assert doc["cost"]["before_monthly"] == pytest.approx(3 * _node_month(), abs=0.02)
    assert doc["cost"]["after_monthly"] == pytest.approx(_node_month() + new, abs=0.02)
    assert doc["cost"]["peak_monthly"] == pytest.approx(max(3 * _node_month(), _node_month() + new), abs=0.02)
    assert not any("not in the waves" in note for note in doc["notes"])


def test_a_pdb_holds_a_removed_node_for_ever_without_a_termination_grace_period(tmp_path: Path) -> None:
    """A PDB that allows no eviction of the removed node's pod holds its drain: the node is blocked for good (the
    rollout never finishes, exit 1) — termination honours PDBs; with the NodeClaim's `terminationGracePeriod` the
    drain ends after it (core node/termination), and the pod goes to the dynamic NodePool."""
    base = v1_policies(tmp_path / "base", _static(2), nodepool())
    head = v1_policies(tmp_path / "head", _static(1), nodepool())
    items = [*_fixed(2), pdb("web", "web", minAvailable=2)]
    code, doc = plan((base, head), tmp_path, *items, feature_gates=GATE)

    assert code == 1 and not doc["finishes"]
    assert [(b["node"], b["by"], b["forever"]) for b in doc["blocked"]] == [("s0", "PodDisruptionBudget/default/web",
                                                                            True)]
    assert "deleting (static deprovisioning), but its drain never ends" in doc["blocked"][0]["reason"]

    code, doc = plan((base, head), tmp_path, *_fixed(2, grace="10m"), pdb("web", "web", minAvailable=2),
                     feature_gates=GATE)
    assert code == 0 and doc["finishes"] and doc["blocked"] == []
    [wave] = doc["waves"]
    assert wave["nodes"] == ["s0"] and wave["drain_seconds"] == 600.0
    assert [r["provisioner"] for r in wave["replacements"]] == ["NodePool/default"]


def test_a_do_not_disrupt_pod_holds_a_removed_nodes_drain(tmp_path: Path) -> None:
    """replicas 1 → 0: the node goes all the same (static deprovisioning takes a `do-not-disrupt` node last, not
    never), but termination waits for its `do-not-disrupt` pod — for ever without a `terminationGracePeriod`."""
    base = v1_policies(tmp_path / "base", _static(1), nodepool())
    head = v1_policies(tmp_path / "head", _static(0), nodepool())
    items = [pool_node("s0", "fixed"), claim("s0", "fixed"),
             pod("held", "s0", "web", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    code, doc = plan((base, head), tmp_path, *items, feature_gates=GATE)

    assert code == 1 and not doc["finishes"] and doc["static"][0]["removed"] == ["s0"]
    assert [(b["node"], b["by"], b["forever"]) for b in doc["blocked"]] == [("s0", "Pod/default/held", True)]


def test_the_removed_nodes_pods_no_dynamic_nodepool_admits_are_pending(tmp_path: Path) -> None:
    """No dynamic NodePool: the removed node's pod goes nowhere — the static NodePool takes none (gate on) — and is
    pending (exit 1; `--allow-stranded` 0)."""
    base = v1_policies(tmp_path / "base", _static(2))
    head = v1_policies(tmp_path / "head", _static(1))
    code, doc = plan((base, head), tmp_path, *_fixed(2), feature_gates=GATE)

    assert code == 1
    assert [(p["pod"], p["node"], p["held"]) for p in doc["pending"]] == [("default/web-0", "s0", False)]
    assert [w["method"] for w in doc["waves"]] == ["static deprovisioning"]
    assert doc["waves"][0]["replacements"] == []
    assert doc["cost"]["after_monthly"] == pytest.approx(_node_month(), abs=0.02)
    code, _ = plan((base, head), tmp_path, *_fixed(2), feature_gates=GATE, allow_stranded=True)
    assert code == 0


def test_static_drift_replaces_one_for_one_under_the_drifted_budget(tmp_path: Path) -> None:
    """Two drifted static nodes, the static NodePool's budget 1: each replaced in turn by a node of its template
    (launched, initialized 60 s, drained 15 s), its pod moving onto it — no new node of the dynamic NodePool, though
    the static nodes are full —; the cost's peak is the two nodes and one replacement, after the replacements."""
    base = v1_policies(tmp_path / "base", _static(2, budgets='[{nodes: "1"}]'), nodepool())
    head = v1_policies(tmp_path / "head", _static(2, labels="team: shop", budgets='[{nodes: "1"}]'), nodepool())
    code, doc = plan((base, head), tmp_path, *_fixed(2))

    assert code == 0 and doc["finishes"]
    assert [(w["method"], w["nodes"], w["start"][11:19], w["seconds"]) for w in doc["waves"]] == [
        ("static drift", ["s0"], "09:00:10", 75.0), ("static drift", ["s1"], "09:01:30", 75.0)]
    replacements = [r for w in doc["waves"] for r in w["replacements"]]
    assert {r["provisioner"] for r in replacements} == {"NodePool/fixed"}
    assert all(w["evicted"] == {"default/Deployment/web": 1} for w in doc["waves"])
    new = _month(replacements[0]["price"])
    assert _rows(doc)["NodePool/fixed"] == pytest.approx(
        (2 * _node_month(), 2 * _node_month() + new, 2 * new), abs=0.02)
    assert "NodePool/default" not in _rows(doc)
    [web] = doc["cost"]["workloads"]  # its pods' share moves to the replacements
    assert (web["workload"], web["after_monthly"]) == ("default/Deployment/web", pytest.approx(2 * new, abs=0.02))


def test_static_drift_goes_before_the_dynamic_nodepools_drift(tmp_path: Path) -> None:
    """A drifted static node and a drifted dynamic one (created earlier): static drift's command comes first
    (staticdrift.go runs ahead of drift in v1.14.1's methods), then the dynamic one's."""
    base = v1_policies(tmp_path / "base", _static(1), nodepool())
    head = v1_policies(tmp_path / "head", _static(1, labels="team: shop"), nodepool(labels="team: platform"))
    items = [pool_node("n0", created="2026-11-19T08:00:00Z"), claim("n0", created="2026-11-19T08:00:00Z"),
             pod("api-0", "n0", "api", cpu=FULL), *_fixed(1)]
    code, doc = plan((base, head), tmp_path, *items)

    assert code == 0
    assert [(w["method"], w["nodes"]) for w in doc["waves"]] == [("static drift", ["s0"]), ("drift", ["n0"])]


def test_an_expiring_drifted_static_node_goes_by_expiry_never_by_a_drift_simulation(tmp_path: Path) -> None:
    """A drifted static node that expires an hour after the start: static drift does not take it here (a static
    NodePool's drifted node goes by static drift or expiry), and no drift command simulates its pods onto the dynamic
    NodePool (v1.14.1 never simulates static drift) — its expiry deletes it at 10:00 and provisions for its pod."""
    base = v1_policies(tmp_path / "base", _static(1), nodepool())
    head = v1_policies(tmp_path / "head", _static(1, labels="team: shop"), nodepool())
    items = [pool_node("s0", "fixed"), claim("s0", "fixed", expire_after="242h"), pod("web-0", "s0", "web", cpu=FULL)]
    code, doc = plan((base, head), tmp_path, *items)

    assert code == 0
    assert [(w["method"], w["nodes"], w["start"][11:19]) for w in doc["waves"]] == [("expiration", ["s0"],
                                                                                    "10:00:00")]


def test_static_provisioning_launches_its_nodes_at_the_start_and_counts_them(tmp_path: Path) -> None:
    """replicas 1 → 3, gate on: a wave at the start launches the 2 nodes, and they cost from then on."""
    base = v1_policies(tmp_path / "base", _static(1))
    head = v1_policies(tmp_path / "head", _static(3))
    code, doc = plan((base, head), tmp_path, *_fixed(1), feature_gates=GATE)

    assert code == 0
    [wave] = doc["waves"]
    assert (wave["method"], wave["nodes"], wave["start"], len(wave["replacements"])) == (
        "static provisioning", [], START, 2)
    new = 2 * _month(wave["replacements"][0]["price"])
    assert _rows(doc)["NodePool/fixed"] == pytest.approx((_node_month(), _node_month() + new, _node_month() + new),
                                                         abs=0.02)


def test_the_text_plan_shows_the_static_waves(tmp_path: Path) -> None:
    base = v1_policies(tmp_path / "base", _static(2), nodepool())
    head = v1_policies(tmp_path / "head", _static(1), nodepool())
    file = write(tmp_path / "snapshot.json", *_fixed(2))
    options = PlanOptions(snapshot=(file,), start=START, base=base, head=head, feature_gates=GATE)
    first = plan_command(options, load_catalog()).stdout
    assert "static deprovisioning  s0 → " in first and "1 pod evicted" in first
    assert "not in the waves" not in first
    assert plan_command(options, load_catalog()).stdout == first  # deterministic


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.integers(1, 4), replicas=st.integers(0, 4), cpus=st.lists(st.sampled_from(["100m", "500m", FULL]),
                                                                          min_size=4, max_size=4))
def test_every_removed_nodes_pod_is_placed_or_pending_and_the_cost_adds_up(
        tmp_path_factory: pytest.TempPathFactory, nodes: int, replicas: int, cpus: list[str]) -> None:
    """Whatever the replicas and pods: the nodes removed are those over replicas, every pod on them is evicted by
    the static deprovisioning wave and none is pending (the dynamic NodePool admits them all), and the cost after is
    the nodes kept plus the new nodes launched."""
    tmp_path = tmp_path_factory.mktemp("static")
    base = v1_policies(tmp_path / "base", _static(nodes), nodepool())
    head = v1_policies(tmp_path / "head", _static(replicas), nodepool())
    items: list[dict[str, Any]] = []
    for i in range(nodes):
        created = f"2026-11-20T08:0{i}:00Z"
        items += [pool_node(f"s{i}", "fixed", created=created), claim(f"s{i}", "fixed", created=created),
                  pod(f"web-{i}", f"s{i}", "web", cpu=cpus[i])]
    code, doc = plan((base, head), tmp_path, *items, feature_gates=GATE)

    removed = max(0, nodes - replicas)
    assert code == 0 and doc["pending"] == [] and doc["blocked"] == []
    assert len(doc["static"][0]["removed"]) == removed
    waves = [w for w in doc["waves"] if w["method"] == "static deprovisioning"]
    assert sum(w["evicted_pods"] for w in waves) == removed
    new = sum(_month(r["price"]) for w in doc["waves"] for r in w["replacements"])
    added = (replicas - nodes) if replicas > nodes else 0
    assert sum(len(w["replacements"]) for w in doc["waves"] if w["method"] == "static provisioning") == added
    assert doc["cost"]["after_monthly"] == pytest.approx((nodes - removed) * _node_month() + new, abs=0.05)


def test_the_nodes_static_provisioning_adds_take_evicted_pods(tmp_path: Path) -> None:
    """Once launched, a static NodePool's node is an ordinary node to the scheduler (v1.14.1: the provisioner
    counts in-flight NodeClaims, static ones too, and kube-scheduler binds to them): replicas 1 → 2 with the gate on
    while HEAD removes NodePool `default`, whose node d0's pod is evicted at the start. The node static provisioning
    adds, with its template's allocatable, takes it: nothing is pending, no node is launched for it, and the
    workload's cost after is its share of that node. Before, the added nodes took no pod and it was pending (exit
    1)."""
    base = v1_policies(tmp_path / "base", _static(1), nodepool())
    head = v1_policies(tmp_path / "head", _static(2))
    items = [*_fixed(1), pool_node("d0", "default"), claim("d0", "default"), pod("api-0", "d0", "api", cpu="300m")]
    code, doc = plan((base, head), tmp_path, *items, feature_gates=GATE)

    assert code == 0 and doc["pending"] == [] and doc["blocked"] == []
    added, removed = doc["waves"]
    assert (added["method"], len(added["replacements"])) == ("static provisioning", 1)
    assert (removed["nodes"], removed["evicted"], removed["replacements"]) == (["d0"], {"default/Deployment/api": 1},
                                                                              [])
    workloads = {w["workload"]: w for w in doc["cost"]["workloads"]}
    assert workloads["default/Deployment/api"]["after_monthly"] == pytest.approx(
        _month(added["replacements"][0]["price"]), abs=0.02)
    assert not any("take none of the evicted pods" in note for note in doc["notes"])
