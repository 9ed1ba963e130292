"""`kube.budgetcounts.BudgetCounts`, the PodDisruptionBudgets' counts moved pod change by pod change (what `plan
--consolidate` reads at every decision instead of counting every pod again), equal a recount over the pods as they
are (`disruption_budgets`) after any sequence of changes: pods added, evicted (deleted), placed again (bound
elsewhere or unbound), relabelled, finishing, turning ready or not."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.kube.budgetcounts import BudgetCounts
from karpenter_policy.kube.disruption import disruption_budgets
from tests.kube.test_disruption_budgets import budgets, pods
from tests.profiles import deterministic

#: one change: the pod of a slot (a uid) becomes the drawn pod (added or modified), or is deleted (None)
CHANGES = st.lists(st.tuples(st.integers(0, 7), st.one_of(st.none(), pods())), max_size=40)


def _with_expected(pdb: dict[str, Any], expected: int) -> dict[str, Any]:
    return {**pdb, "status": {"expectedPods": expected}} if expected else pdb


@deterministic(200)
@given(st.lists(st.tuples(budgets(), st.integers(0, 4)), max_size=5), st.lists(pods(), max_size=8), CHANGES)
def test_counts_kept_up_to_date_equal_a_recount(
    drawn: list[tuple[dict[str, Any], int]], first: list[dict[str, Any]], changes: list[tuple[int, Any]],
) -> None:
    pdbs = [_with_expected(pdb, expected) for pdb, expected in drawn]
    cluster: dict[int, dict[str, Any]] = dict(enumerate(first))
    counts = BudgetCounts(pdbs, cluster.values())
    assert counts.budgets() == disruption_budgets(pdbs, cluster.values())
    for slot, pod in changes:
        before = cluster.pop(slot, None)
        if pod is not None:
            cluster[slot] = pod
        counts.change(before, pod)
        assert counts.budgets() == disruption_budgets(pdbs, cluster.values())


def test_an_evicted_pod_and_its_placing_again_move_the_counts() -> None:
    ready = [{"type": "Ready", "status": "True"}]
    web = {"metadata": {"name": "w", "namespace": "default", "labels": {"app": "web"}},
           "spec": {"nodeName": "a"}, "status": {"phase": "Running", "conditions": ready}}
    pdb = {"metadata": {"name": "b", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}}
    counts = BudgetCounts([pdb], [web])
    assert counts.budgets()[0].disruptions_allowed == 0
    placed = {**web, "spec": {"nodeName": "b"}}
    counts.change(web, placed)  # bound elsewhere: still counted, still healthy
    assert (counts.budgets()[0].expected, counts.budgets()[0].healthy) == (1, 1)
    counts.change(placed, None)  # evicted
    assert (counts.budgets()[0].expected, counts.budgets()[0].healthy) == (0, 0)
