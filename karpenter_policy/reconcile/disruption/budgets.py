"""Karpenter v1 disruption budgets for the controller's NodePool nodes: how many more of each NodePool's nodes a
decision may disrupt for a reason, and the candidates that allowance keeps.

As `BuildDisruptionBudgetMapping` (kubernetes-sigs/karpenter v1.14.1, pkg/controllers/disruption/helpers.go) counts:
the NodePool's total is its nodes of ours that were initialized (`karpenter.sh/initialized`: a node that turned
NotReady since still counts); those NotReady, being deleted or in a command under way (Karpenter's
`MarkedForDeletion`: the orchestration queue's candidates) use up the allowance; the allowance is the NodePool's
budgets for the reason at `now` (`api.v1.budgets.allowed_disruptions`: the one definition `plan` and `check` use —
percentages rounded up, the most restrictive active budget, an unreadable budget allowing none) less those, never
below 0. A Provisioner's nodes have no budget (v0.31 has none): they are never limited here.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.api.v1.budgets import allowed_disruptions, budgets_of
from karpenter_policy.model.pools import is_nodepool
from karpenter_policy.reconcile.state.records import NodeRecord


class _Pooled(Protocol):
    @property
    def provisioner(self) -> str: ...


C = TypeVar("C", bound=_Pooled)


def budget_figures(
    nodes: Iterable[NodeRecord], sets: Mapping[str, ConstraintSet], reason: str, now: dt.datetime,
    disrupting_now: Collection[str] = (),
) -> dict[str, tuple[int, int]]:
    """By NodePool pool key, its budgets' allowed disruptions for `reason` and its nodes disrupting (v1.14.1's
    `karpenter_nodepools_allowed_disruptions` and `…_nodes_consuming_budgets`); `disrupting_now`: the nodes of
    commands under way (they use up the allowance as nodes being deleted do)."""
    totals: Counter[str] = Counter()
    disrupting: Counter[str] = Counter()
    for node in nodes:
        pool = node.provisioner
        if not node.ours or pool is None or not is_nodepool(pool) or not node.labelled_initialized:
            continue
        totals[pool] += 1
        if not node.ready or node.deleting or node.name in disrupting_now:
            disrupting[pool] += 1
    figures = {}
    for pool, constraint_set in sets.items():
        if constraint_set.is_nodepool:
            budgets = budgets_of((constraint_set.nodepool or {}).get("disruption"))
            figures[pool] = (allowed_disruptions(budgets, reason, now, totals[pool]), disrupting[pool])
    return figures


def budget_mapping(
    nodes: Iterable[NodeRecord], sets: Mapping[str, ConstraintSet], reason: str, now: dt.datetime,
    disrupting_now: Collection[str] = (),
) -> dict[str, int]:
    """By NodePool pool key, how many more of its nodes may be disrupted for `reason` (see the module docstring)."""
    return allowances(budget_figures(nodes, sets, reason, now, disrupting_now))


def allowances(figures: Mapping[str, tuple[int, int]]) -> dict[str, int]:
    """By NodePool, its allowed disruptions less its nodes disrupting, never below 0."""
    return {pool: max(allowed - disrupting, 0) for pool, (allowed, disrupting) in figures.items()}


def within_budgets(candidates: Sequence[C], mapping: Mapping[str, int]) -> list[C]:
    """The candidates, in order, each NodePool's kept while its allowance lasts (Karpenter's decrement of
    `disruptionBudgetMapping` per candidate it takes); a Provisioner's always."""
    left = dict(mapping)
    kept = []
    for candidate in candidates:
        pool = candidate.provisioner
        if pool in left:
            if left[pool] <= 0:
                continue
            left[pool] -= 1
        kept.append(candidate)
    return kept


__all__ = ["allowances", "budget_figures", "budget_mapping", "within_budgets"]
