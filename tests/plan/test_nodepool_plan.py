"""`plan` on Karpenter v1 NodePools end to end (`nodepoolwaves`, Karpenter v1.14.1's disruption): drift commands
side by side as the NodePool's `Drifted` budget allows at each moment (count, reasons, cron windows; a budget of 0
never finishes), forceful expiry regardless of budgets, terminationGracePeriod ending a blocked drain, cost per
NodePool, a snapshot mixing Provisioners' and NodePools' nodes, and the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from tests.plan.snapshots import FULL, node, pdb, pod, policies, provisioner, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies

START = "2026-11-30T09:00:00Z"
ROOT = Path(__file__).resolve().parents[2]


def sides(root: Path, budgets: str | None = None, *, extra: str = "", base_extra: str = "") -> tuple[str, str]:
    """BASE: `default` (team: web); HEAD: relabelled (team: platform), with `budgets`."""
    base = v1_policies(root / "base", nodepool(budgets=budgets, template_extra=base_extra))
    head = v1_policies(root / "head", nodepool(labels="team: platform", budgets=budgets, extra=extra,
                                               template_extra=base_extra))
    return base, head


def fleet(count: int, **claim_options: Any) -> list[dict[str, Any]]:
    """`count` nodes, each full (no other node has room for its pod: each command launches a replacement)."""
    items: list[dict[str, Any]] = []
    for i in range(count):
        items += [pool_node(f"n{i}", created=f"2026-11-20T08:0{i}:00Z"),
                  claim(f"n{i}", created=f"2026-11-20T08:0{i}:00Z", **claim_options),
                  pod(f"web-{i}", f"n{i}", "web", cpu=FULL)]
    return items


def plan(pair: tuple[str, str], tmp_path: Path, *items: dict[str, Any], **options: Any) -> tuple[int, Any]:
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=options.pop("start", START), output="json",
                                      base=pair[0], head=pair[1], **options), load_catalog())
    assert result.stderr == ""
    return result.exit_code, json.loads(result.stdout)


def starts(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(w["start"][11:19], w["nodes"]) for w in doc["waves"]]


def test_drift_runs_as_many_commands_side_by_side_as_the_drifted_budget_allows(tmp_path: Path) -> None:
    code, doc = plan(sides(tmp_path, '[{nodes: "2"}]'), tmp_path, *fleet(5))

    assert code == 0 and doc["finishes"] and doc["model"] == "Karpenter v1.14.1, v1 NodePools"
    # 10 s to the first poll; each command: 60 s to initialize the replacement + 15 s to drain
    assert starts(doc) == [("09:00:10", ["n0"]), ("09:00:10", ["n1"]), ("09:01:30", ["n2"]),
                           ("09:01:30", ["n3"]), ("09:02:50", ["n4"])]
    assert [n["nodepool"] for n in doc["nodes"]] == ["default"] * 5
    assert doc["drift"] == [{"field": "spec.template.metadata.labels.team changed (nodepool default)", "nodes": 5}]
    assert "nodepool default: HEAD's budgets allow 2 of its 5 nodes to be disrupted for drift at " \
           "2026-11-30T09:00:00Z" in doc["notes"]
    (row,) = doc["cost"]["provisioners"]
    assert row["provisioner"] == "NodePool/default" and row["peak_monthly"] > row["before_monthly"]


def test_a_percentage_is_of_the_nodepools_nodes_rounded_up_and_the_default_is_10_percent(tmp_path: Path) -> None:
    _, doc = plan(sides(tmp_path), tmp_path, *fleet(3))  # 10 % of 3, rounded up: 1 at a time

    # each starts at the first 10 s poll after the one before is gone (75 s after it started)
    assert [s for s, _ in starts(doc)] == ["09:00:10", "09:01:30", "09:02:50"]


@pytest.mark.parametrize(
    ("budgets", "finishes"),
    [
        ('[{nodes: "0"}]', False),
        ('[{nodes: "0", reasons: [Drifted]}]', False),
        ('[{nodes: "0", reasons: [Underutilized, Empty]}, {nodes: "5"}]', True),  # not drift's budget
    ],
)
def test_a_drifted_budget_of_zero_never_finishes(tmp_path: Path, budgets: str, finishes: bool) -> None:
    code, doc = plan(sides(tmp_path, budgets), tmp_path, *fleet(2))

    assert doc["finishes"] is finishes and code == (0 if finishes else 1)
    if not finishes:
        assert doc["waves"] == []
        assert [(b["node"], b["by"], b["forever"]) for b in doc["blocked"]] == [
            ("n0", "NodePool/default", True), ("n1", "NodePool/default", True)]
        assert "allow no Drifted disruption" in doc["blocked"][0]["reason"]
        assert plan(sides(tmp_path, budgets), tmp_path, *fleet(2), allow_stranded=True)[0] == 0


def test_waves_wait_for_the_budgets_window(tmp_path: Path) -> None:
    # disruption is frozen 09:00–17:00 UTC each day
    budgets = '[{nodes: "0", schedule: "0 9 * * *", duration: 8h}, {nodes: "1"}]'

    _, doc = plan(sides(tmp_path, budgets), tmp_path, *fleet(2))

    assert starts(doc) == [("17:00:00", ["n0"]), ("17:01:20", ["n1"])]


def test_termination_grace_ends_a_blocked_drain_and_without_it_the_node_is_blocked(tmp_path: Path) -> None:
    held = {"karpenter.sh/do-not-disrupt": "true"}
    items = [pool_node("graced"), claim("graced", grace="2h"), pod("db-0", "graced", "db", annotations=held),
             pool_node("stuck"), claim("stuck"), pod("db-1", "stuck", "db", annotations=held),
             pool_node("guarded"), claim("guarded", grace="30m"), pod("pay-0", "guarded", "pay"),
             pdb("pay", "pay", maxUnavailable=0)]

    code, doc = plan(sides(tmp_path, '[{nodes: "100%"}]'), tmp_path, *items)

    waves = {w["nodes"][0]: w for w in doc["waves"]}
    assert waves["graced"]["drain_seconds"] == 7200.0
    assert waves["graced"]["slowed_by"] == {"Pod/default/db-0 (until terminationGracePeriod)": 7200.0}
    assert waves["guarded"]["drain_seconds"] == 1800.0
    assert [(b["node"], b["reason"], b["forever"]) for b in doc["blocked"]] == [
        ("stuck", "pod default/db-1 has karpenter.sh/do-not-disrupt", True)]
    assert code == 1


def test_a_node_annotated_do_not_disrupt_is_no_candidate_even_with_a_termination_grace(tmp_path: Path) -> None:
    items = [pool_node("n0", annotations={"karpenter.sh/do-not-disrupt": "true"}), claim("n0", grace="1h")]

    _, doc = plan(sides(tmp_path), tmp_path, *items)

    assert doc["waves"] == [] and doc["blocked"][0]["by"] == "Node/n0"


def test_forceful_expiry_ignores_budgets_deletes_first_and_holds_the_budget_while_it_drains(tmp_path: Path) -> None:
    items = [pool_node("old", created="2026-10-01T00:00:00Z"),
             claim("old", created="2026-10-01T00:00:00Z", grace="1h"), pod("pay-0", "old", "pay"),
             pdb("pay", "pay", maxUnavailable=0), *fleet(1)]

    code, doc = plan(sides(tmp_path, '[{nodes: "1"}]'), tmp_path, *items)

    expiry, drift = doc["waves"]
    assert (expiry["method"], expiry["start"], expiry["nodes"], expiry["drain_seconds"]) == (
        "expiration", "2026-11-30T09:00:00Z", ["old"], 3600.0)
    # the expiring node disrupts until its grace ends: drift's one-node budget waits for it
    assert (drift["method"], drift["start"], drift["nodes"]) == ("drift", "2026-11-30T10:00:00Z", ["n0"])
    assert code == 0


def test_forceful_expiry_without_a_termination_grace_blocked_by_a_pdb_never_ends(tmp_path: Path) -> None:
    items = [pool_node("old", created="2026-10-01T00:00:00Z"), claim("old", created="2026-10-01T00:00:00Z"),
             pod("pay-0", "old", "pay"), pdb("pay", "pay", maxUnavailable=0)]
    pair = sides(tmp_path)

    code, doc = plan((pair[0], pair[0]), tmp_path, *items)

    assert code == 1 and not doc["finishes"]
    assert doc["blocked"][0]["reason"].startswith("deleting (expiration), but its drain never ends: PDB default/pay")


def test_a_snapshot_of_provisioners_and_nodepools_plans_both(tmp_path: Path) -> None:
    base = policies(tmp_path / "base", provisioner())
    head = policies(tmp_path / "head", provisioner(labels="team: platform"))
    v1_policies(tmp_path / "base", nodepool(budgets='[{nodes: "1"}]'))
    v1_policies(tmp_path / "head", nodepool(labels="team: platform", budgets='[{nodes: "1"}]'))
    items = [node("a"), pod("api-0", "a", "api"), *fleet(2)]

    code, doc = plan((base, head), tmp_path, *items)

    assert code == 0
    assert doc["model"] == "Karpenter v0.31 for v1alpha5 Provisioners, v1.14.1 for v1 NodePools"
    assert {(n["name"], n["provisioner"], n["nodepool"], n["wave"] is not None) for n in doc["nodes"]} == {
        ("a", "default", None, True), ("n0", None, "default", True), ("n1", None, "default", True)}
    assert [w["index"] for w in doc["waves"]] == [0, 1, 2]
    assert sorted(r["provisioner"] for r in doc["cost"]["provisioners"]) == ["NodePool/default", "default"]


def test_the_cli_plans_a_nodepool_change(tmp_path: Path) -> None:
    base, head = sides(tmp_path, '[{nodes: "1"}]')
    file = write(tmp_path / "snapshot.json", *fleet(1))

    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "plan", base, head, "--snapshot", file,
                           "--start", START], cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert "(Karpenter v1.14.1, v1 NodePools)" in done.stdout
    assert "spec.template.metadata.labels.team changed (nodepool default) → 1 node drift" in done.stdout


def test_the_markdown_comment_names_the_nodepools(tmp_path: Path) -> None:
    base, head = sides(tmp_path, '[{nodes: "1"}]')
    file = write(tmp_path / "snapshot.json", *fleet(1))

    result = plan_command(PlanOptions(snapshot=(file,), start=START, output="markdown", base=base, head=head),
                          load_catalog())

    assert "| `spec.template.metadata.labels.team changed (nodepool default)` | 1 |" in result.stdout
    assert "| NodePool | Before | Peak | After |" in result.stdout
    assert "| `NodePool/default` |" in result.stdout


def test_nodeclaims_already_drifted_go_first_in_the_order_they_drifted(tmp_path: Path) -> None:
    items = [*fleet(2), pool_node("late"), claim("late", drifted="2026-11-29T12:00:00Z"), pod("web-l", "late", "web"),
             pool_node("early"), claim("early", drifted="2026-11-28T12:00:00Z"), pod("web-e", "early", "web")]

    _, doc = plan(sides(tmp_path, '[{nodes: "1"}]'), tmp_path, *items)

    assert [w["nodes"][0] for w in doc["waves"]] == ["early", "late", "n0", "n1"]


def test_a_pods_do_not_disrupt_duration_holds_its_node_while_it_runs_at_the_start(tmp_path: Path) -> None:
    """v1.14.1's `IsDoNotDisruptActive` (pkg/utils/pod/scheduling.go:210) at the rollout's start (09:00), each pod
    started at 08:30: "1h" holds its node (blocked), "10m" has run out, "5 minutes" is no duration (ignored) — those
    two nodes drift as any other."""
    def started(item: dict[str, Any]) -> dict[str, Any]:
        item["status"]["startTime"] = "2026-11-30T08:30:00Z"
        return item

    items: list[dict[str, Any]] = []
    for name, value in (("held", "1h"), ("over", "10m"), ("typo", "5 minutes")):
        items += [pool_node(name), claim(name),
                  started(pod(f"{name}-0", name, name, annotations={"karpenter.sh/do-not-disrupt": value}))]

    code, doc = plan(sides(tmp_path, '[{nodes: "100%"}]'), tmp_path, *items)

    assert sorted(w["nodes"][0] for w in doc["waves"]) == ["over", "typo"]
    assert [(b["node"], b["reason"]) for b in doc["blocked"]] == [
        ("held", "pod default/held-0 has karpenter.sh/do-not-disrupt")]
    assert code == 1


def test_the_replacements_of_both_models_are_shared_by_their_own_pods(tmp_path: Path) -> None:
    """Provisioners' and NodePools' waves each keep a room of their own; their replacements are two nodes, not one
    of the same name: each workload pays for the node that took its pods (named alike, as the two rooms first named
    them, `api` and `web` shared one node's price)."""
    base = policies(tmp_path / "base", provisioner())
    head = policies(tmp_path / "head", provisioner(labels="team: platform"))
    v1_policies(tmp_path / "base", nodepool(budgets='[{nodes: "1"}]'))
    v1_policies(tmp_path / "head", nodepool(labels="team: platform", budgets='[{nodes: "1"}]'))
    items = [node("a"), pod("api-0", "a", "api", cpu=FULL), *fleet(2)]

    _, doc = plan((base, head), tmp_path, *items)

    price = {w["nodes"][0]: sum(r["price"] for r in w["replacements"]) * 730 for w in doc["waves"]}
    after = {w["workload"]: w["after_monthly"] for w in doc["cost"]["workloads"]}
    assert after["default/Deployment/api"] == pytest.approx(price["a"], abs=0.01)
    assert after["default/Deployment/web"] == pytest.approx(price["n0"] + price["n1"], abs=0.01)
