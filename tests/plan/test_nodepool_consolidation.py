"""`plan` with BASE = HEAD on Karpenter v1 NodePools: what consolidation would do now, decided by the controller's
v1.14.1 rules for NodePool nodes (`reconcile/disruption/decider.py`: `consolidationPolicy`, `consolidateAfter`,
budgets per reason) — the moves in order with $/month saved, and why a node is not a candidate in v1.14.1's words
(core pkg/controllers/disruption/consolidation.go `ShouldDisrupt`, emptiness.go, state/statenode.go
`ValidateNodeDisruptable`, disruption/events/events.go)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.simulate.consolidation import consolidate_now
from tests.plan.snapshots import pod, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies

START = "2026-11-30T09:00:00Z"
INITIALIZED = {"karpenter.sh/initialized": "true"}
M5_LARGE_MONTHLY = 70.08


def disruption(policy: str = "WhenEmptyOrUnderutilized", after: str = "0s", budgets: str = "[{nodes: '100%'}]") -> str:
    return (f"  disruption:\n    consolidationPolicy: {policy}\n    consolidateAfter: {after}\n"
            f"    budgets: {budgets}\n")


def consolidation(tmp_path: Path, pool: str, pods_per_node: list[list[str]], *,
                  claims: dict[int, dict[str, Any]] | None = None, initialized: bool = True) -> dict[str, Any]:
    """Plan BASE = HEAD (`pool`) over m5.large NodePool nodes n0, n1, … each with its NodeClaim and web pods of
    these CPU requests; `claims`: a node's NodeClaim status fields to add."""
    same = v1_policies(tmp_path / "p", pool)
    items: list[dict[str, Any]] = []
    for i, requests in enumerate(pods_per_node):
        made = claim(f"n{i}")
        made["status"].update((claims or {}).get(i, {}))
        items += [pool_node(f"n{i}", labels=INITIALIZED if initialized else {}), made]
        items += [pod(f"web-{i}-{j}", f"n{i}", "web", cpu=cpu) for j, cpu in enumerate(requests)]
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, base=same, head=same, output="json"),
                          load_catalog(), consolidate=consolidate_now)
    assert result.exit_code == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)["consolidation"]
    return found


def moves(found: dict[str, Any]) -> list[tuple[str, str, list[str], dict[str, int]]]:
    return [(m["stage"], m["action"], m["removed"], m["evicted"]) for m in found["moves"]]


def reasons(found: dict[str, Any]) -> dict[str, str]:
    return {n["node"]: n["reason"] for n in found["not_candidates"]}


def test_the_moves_in_order_with_savings_on_a_nodepool(tmp_path: Path) -> None:
    """emptiness_test.go: the empty node goes first; then the three busy ones together, by one cheaper node (the
    NodePool requires no architecture: a Graviton m6g.medium, $0.0385/h, takes the three pods). The replacement
    had pod events: with consolidateAfter 0s it is Consolidatable at once, and the last decision finds nothing
    cheaper."""
    found = consolidation(tmp_path, nodepool(extra=disruption()), [["300m"], ["300m"], ["300m"], []])

    assert moves(found) == [
        ("empty", "delete", ["n3"], {}),
        ("multi-node", "replace", ["n0", "n1", "n2"], {"default/Deployment/web": 3}),
    ]
    assert found["moves"][1]["launched"] == ["m6g.medium"]
    assert [m["saved_monthly"] for m in found["moves"]] == [M5_LARGE_MONTHLY,
                                                            pytest.approx(3 * M5_LARGE_MONTHLY - 0.0385 * 730)]
    assert found["notes"] == []
    assert reasons(found) == {"consolidation-1": "consolidation: can't replace with a cheaper node"}


def test_a_budget_of_zero_for_underutilized_blocks_the_moves_but_not_the_empty_node(tmp_path: Path) -> None:
    """budgets per reason (helpers.go BuildDisruptionBudgetMapping): `nodes: "0"` for Underutilized keeps every
    busy node; the empty one goes under the Empty reason's budget."""
    budgets = "[{nodes: '0', reasons: [Underutilized]}, {nodes: '100%'}]"
    found = consolidation(tmp_path, nodepool(extra=disruption(budgets=budgets)), [["300m"], ["300m"], []])

    assert moves(found) == [("empty", "delete", ["n2"], {})]
    assert reasons(found) == {
        "n0": "No allowed disruptions for disruption reason Underutilized due to blocking budget",
        "n1": "No allowed disruptions for disruption reason Underutilized due to blocking budget",
    }


def test_when_empty_only_deletes_empty_nodes(tmp_path: Path) -> None:
    found = consolidation(tmp_path, nodepool(extra=disruption(policy="WhenEmpty")), [["300m"], ["300m"], []])

    assert moves(found) == [("empty", "delete", ["n2"], {})]
    why = 'NodePool "default" has consolidation policy WhenEmpty, but node is not empty'
    assert reasons(found) == {"n0": why, "n1": why}


def test_consolidate_after_never_disables_consolidation(tmp_path: Path) -> None:
    found = consolidation(tmp_path, nodepool(extra=disruption(after="Never")), [["300m"], []])

    assert moves(found) == []
    why = 'NodePool "default" has consolidation disabled'
    assert reasons(found) == {"n0": why, "n1": why}


def test_consolidate_after_counts_from_the_nodeclaims_last_pod_event(tmp_path: Path) -> None:
    """consolidation.go (nodeclaim/disruption): Consolidatable once consolidateAfter has passed since
    `status.lastPodEventTime` — n0's pod event 10 minutes before the start holds it under 1h; n1's is older."""
    events = {0: {"lastPodEventTime": "2026-11-30T08:50:00Z"}, 1: {"lastPodEventTime": "2026-11-30T07:00:00Z"},
              2: {"lastPodEventTime": "2026-11-30T07:00:00Z"}}
    found = consolidation(tmp_path, nodepool(extra=disruption(after="1h")), [["300m"], ["300m"], ["300m"]],
                          claims=events)

    assert moves(found) == [("multi-node", "delete", ["n1", "n2"], {"default/Deployment/web": 2})]
    # n0 (not a candidate, but room for their pods) took them: a pod event now, an hour again
    assert reasons(found) == {"n0": "not Consolidatable: consolidateAfter has not passed since its last pod event "
                                    "(3600s left)"}


def test_a_node_held_under_consolidate_after_says_how_long(tmp_path: Path) -> None:
    found = consolidation(tmp_path, nodepool(extra=disruption(after="1h")), [["300m"]],
                          claims={0: {"lastPodEventTime": "2026-11-30T08:50:00Z"}})

    assert moves(found) == []
    assert reasons(found) == {"n0": "not Consolidatable: consolidateAfter has not passed since its last pod event "
                                    "(3000s left)"}


def test_a_node_not_initialized_is_no_candidate(tmp_path: Path) -> None:
    found = consolidation(tmp_path, nodepool(extra=disruption()), [["300m"], []], initialized=False)

    assert moves(found) == []
    assert reasons(found) == {"n0": "node isn't initialized", "n1": "node isn't initialized"}
