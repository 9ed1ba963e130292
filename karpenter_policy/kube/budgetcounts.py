"""PodDisruptionBudgets' counts kept up to date pod change by pod change, instead of counted again over every pod.

A disruption decision reads every budget (which of them allow no eviction now); counted afresh
(:func:`~karpenter_policy.kube.disruption.disruption_budgets`) that is a pass over every pod of the cluster at every
decision. :class:`BudgetCounts` keeps, for each budget, how many of the pods it selects are counted (not finished)
and how many of those are healthy, and moves them as one pod changes: a change subtracts the pod's old contribution
and adds its new one. Which budgets cover a pod depends only on its namespace and labels, so it is worked out once
per (namespace, labels) group and remembered: the index from budgets to their pods, built as the pods come. Its
:meth:`BudgetCounts.budgets` are what `disruption_budgets` would count over the same pods (the property
tests/kube/test_budget_counts.py holds it to, after any sequence of changes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from karpenter_policy.kube import objects
from karpenter_policy.kube.disruption import (
    Budget,
    PodGroup,
    budget_of,
    budget_selector,
    counted,
    is_healthy,
    pod_group,
)
from karpenter_policy.kube.objects import Obj


class BudgetCounts:
    """See the module docstring: the budgets `pdbs` (fixed), counted over the pods fed to :meth:`change`."""

    def __init__(self, pdbs: Sequence[Obj], pods: Iterable[Obj] = ()) -> None:
        self.pdbs = tuple(pdbs)
        self._selectors = [(objects.namespace(pdb), budget_selector(pdb)) for pdb in self.pdbs]
        self._covering: dict[PodGroup, tuple[int, ...]] = {}
        self._selected = [0] * len(self.pdbs)
        self._healthy = [0] * len(self.pdbs)
        for pod in pods:
            self.change(None, pod)

    def change(self, before: Obj | None, after: Obj | None) -> None:
        """One pod changed from `before` to `after` (None: it was absent before, or is deleted now)."""
        if not self.pdbs:
            return
        for pod, step in ((before, -1), (after, 1)):
            if pod is None or not counted(pod):
                continue
            covering = self._covering_of(pod)
            if not covering:
                continue
            healthy = is_healthy(pod)
            for index in covering:
                self._selected[index] += step
                if healthy:
                    self._healthy[index] += step

    def budgets(self) -> list[Budget]:
        """Each budget of `pdbs`, in their order, over the pods as they are now."""
        return [budget_of(pdb, selected, healthy)
                for pdb, selected, healthy in zip(self.pdbs, self._selected, self._healthy, strict=True)]

    def _covering_of(self, pod: Obj) -> tuple[int, ...]:
        """The indexes of the budgets that select the pod (its namespace and labels decide; remembered per group)."""
        group = pod_group(pod)
        found = self._covering.get(group)
        if found is None:
            labels = objects.labels(pod)
            found = self._covering[group] = tuple(
                index for index, (namespace, selector) in enumerate(self._selectors)
                if namespace == group[0] and selector.matches(labels))
        return found


__all__ = ["BudgetCounts"]
