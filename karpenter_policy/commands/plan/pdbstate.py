"""PodDisruptionBudgets over the plan's virtual time: what each budget allows at a moment, from the pods healthy
then — as Kubernetes' disruption controller computes `status.disruptionsAllowed` (`currentHealthy −
desiredHealthy`, never below 0) and the Eviction API checks it — for both models' waves (Karpenter v0.31's
`waves`, v1's `nodepoolwaves`; one definition).

:class:`PdbBudgets` is each budget in the snapshot's steady state (`kube.disruption`: its expected pods, those
healthy, those it keeps healthy) and which budgets cover a pod. :class:`PdbState` is one rollout's record of the
pods its waves evicted: an evicted pod is not healthy from its eviction until its replacement pod is Ready — on a
node initialized by then, `pod_startup` seconds after the eviction; on a node still starting, `pod_startup` after
that node is initialized. :meth:`PdbState.evictions` drains a node's pods of each budget as the Eviction API lets
them go: as many at once as the budget allows at that moment, the next ones whenever an evicted pod (this drain's or
another's) is healthy again; a budget that allows none at the start because of pods evicted before is a wait
(`Evictions.waiting_until`), one that allows none and no evicted pod will come back is stuck (the caller's
"blocked")."""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.kube import disruption as budgets
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj

__all__ = ["Evictions", "PdbBudgets", "PdbState", "pdb_key"]


class PdbBudgets:
    """Each PodDisruptionBudget's allowance in the snapshot's steady state (`kube.disruption`), and which budgets
    cover a pod (by namespace and labels, computed once per distinct label set)."""

    def __init__(self, pdbs: Sequence[Obj], pods: Sequence[Obj]) -> None:
        self.pdbs = list(pdbs)
        self._selectors = [(pdb, budgets.budget_selector(pdb)) for pdb in self.pdbs]
        self._covering: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}
        groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[Obj]] = {}
        for pod in pods:  # pods of the same namespace and labels: a budget selects all of them or none
            groups.setdefault(_group(pod), []).append(pod)
        selected: dict[str, list[Obj]] = {pdb_key(pdb): [] for pdb in self.pdbs}
        for group, members in groups.items():
            for name in self._covering_group(group, members[0]):
                selected[name].extend(members)
        self.budget = {pdb_key(pdb): budgets.disruption_budget(pdb, selected[pdb_key(pdb)]) for pdb in self.pdbs}

    def _covering_group(self, group: tuple[str, tuple[tuple[str, str], ...]], pod: Obj) -> list[str]:
        found = self._covering.get(group)
        if found is None:
            labels = objects.labels(pod)
            found = [pdb_key(pdb) for pdb, selector in self._selectors
                     if (objects.namespace(pdb) or "default") == group[0] and selector.matches(labels)]
            self._covering[group] = found
        return found

    def covering(self, pod: Obj) -> list[str]:
        """The budgets that select `pod`."""
        return self._covering_group(_group(pod), pod)


def _group(pod: Obj) -> tuple[str, tuple[tuple[str, str], ...]]:
    return objects.namespace(pod) or "default", tuple(sorted(objects.labels(pod).items()))


def pdb_key(pdb: Obj) -> str:
    """A budget's name in the plan: `namespace/name`."""
    return f"{objects.namespace(pdb) or 'default'}/{objects.name(pdb)}"


@dataclass(frozen=True, slots=True)
class Evictions:
    """A drain's evictions from its start: how long until its last evicted pods' replacements are Ready
    (`seconds`), the budgets that made it take more than one round (`slowed`: budget → seconds), when each evicted
    pod of a budget went (`at`: budget → times, seconds from the plan's start); or, when a budget allows no eviction
    at the start but pods evicted before will be healthy again, when the first of them will be (`waiting_until`);
    or the budget that allows none and never will by itself (`stuck`)."""

    seconds: float = 0.0
    slowed: dict[str, float] = field(default_factory=dict)
    at: dict[str, list[float]] = field(default_factory=dict)
    waiting_until: float | None = None
    stuck: str | None = None


class PdbState:
    """One rollout's evicted pods per budget over virtual time (see the module docstring)."""

    def __init__(self, pdbs: PdbBudgets) -> None:
        self.pdbs = pdbs
        #: each budget's evicted pods, seconds from the plan's start: when each was evicted, when each is healthy
        #: again (both sorted: the pods down at `t` are those evicted by `t` less those healthy again by `t`), and the
        #: pairs (healthy again at, evicted at) by the former
        self._since: dict[str, list[float]] = {}
        self._until: dict[str, list[float]] = {}
        self._spans: dict[str, list[tuple[float, float]]] = {}
        #: how many times an eviction was recorded (a plan made at the same count saw the same budgets)
        self.version = 0

    def allowed(self, name: str, at: float) -> int:
        """What the budget allows at `at`: the snapshot's healthy pods less those evicted and not Ready again
        then, less the healthy pods it keeps; never below 0."""
        return self._allowed(name, at, ())

    def _allowed(self, name: str, at: float, own: Sequence[tuple[float, float]]) -> int:
        budget = self.pdbs.budget[name]
        down = bisect_right(self._since.get(name, ()), at) - bisect_right(self._until.get(name, ()), at)
        for since, until in own:
            down += since <= at < until
        return max(0, budget.healthy - down - budget.desired_healthy)

    def _comes_back(self, name: str, at: float, own: Sequence[tuple[float, float]]) -> float | None:
        """When the first pod down at `at` is healthy again (None: none is down)."""
        ends = [until for since, until in own if since <= at < until]
        spans = self._spans.get(name, ())
        for index in range(bisect_right(self._until.get(name, ()), at), len(spans)):
            until, since = spans[index]
            if since <= at:  # by when they are healthy again: the first down then is the soonest
                ends.append(until)
                break
        return min(ends) if ends else None

    def evictions(self, groups: Mapping[str, int], at: float, pod_startup: float, *, wait: bool = True) -> Evictions:
        """Drain `groups` (budget → how many of the node's pods it covers) from `at` (see the module docstring);
        with `wait`, a budget that allows none at `at` is a wait for its pods evicted before. Nothing is recorded
        (:meth:`record`)."""
        seconds, slowed, times = 0.0, {}, {}
        for name, count in sorted(groups.items()):
            allowed = self._allowed(name, at, ())
            if allowed >= count:  # all at once (most drains: no need to follow rounds)
                went = [at] * count
            elif allowed <= 0 and wait:
                back = self._comes_back(name, at, ())
                return Evictions(stuck=name) if back is None else Evictions(waiting_until=back)
            else:
                own: list[tuple[float, float]] = []
                went = []
                moment, left = at, count
                while left:
                    if allowed > 0:
                        taken = min(left, allowed)
                        own += [(moment, moment + pod_startup)] * taken
                        went += [moment] * taken
                        left -= taken
                    else:
                        back = self._comes_back(name, moment, own)
                        if back is None:
                            return Evictions(stuck=name)
                        moment = back
                    allowed = self._allowed(name, moment, own)  # with no start-up the pods are back already
            took = went[-1] - at + pod_startup
            if went[-1] > went[0]:
                slowed[name] = took
            seconds = max(seconds, took)
            times[name] = went
        return Evictions(seconds, slowed, times)

    def record(self, evictions: Evictions, returns: Mapping[str, Sequence[float]] | None = None,
               pod_startup: float = 0.0) -> None:
        """The drain's evicted pods are down until their replacements are Ready: `pod_startup` after each eviction,
        or, for a budget of `returns` (budget → when nodes its pods go onto are initialized, one per pod, the
        latest taking the last evicted), `pod_startup` after its node is initialized when that is later."""
        self.version += 1
        for name, went in evictions.at.items():
            ready = sorted((returns or {}).get(name, ()))
            starts = [0.0] * (len(went) - len(ready)) + ready[-len(went):] if ready else [0.0] * len(went)
            for moment, up in zip(went, starts, strict=True):
                until = max(moment, up) + pod_startup
                insort(self._since.setdefault(name, []), moment)
                insort(self._until.setdefault(name, []), until)
                insort(self._spans.setdefault(name, []), (until, moment))

    def forget(self, before: float) -> None:
        """Pods healthy again by `before` matter no more (the planner asks nothing earlier any more)."""
        for name in [name for name, until in self._until.items() if until and until[0] <= before]:
            gone = bisect_right(self._until[name], before)  # as many evictions, all by then: the first ones
            del self._until[name][:gone], self._spans[name][:gone], self._since[name][:gone]
