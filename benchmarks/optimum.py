"""The exact reference of the scheduling benchmark: the cheapest set of new nodes that holds a batch of pods, as a
pattern MILP solved with HiGHS (`highspy`, a test extra: never a dependency of the tool). Benchmarks only.

The covering problem of `lpbound.py`, made exact: a *pattern* is one node — a node kind k (a template, an instance
type, a capacity type and the zones it may be in, with its price and its allocatable less the DaemonSet overhead)
and how many pods of each group g it holds (a[g]: pods with equal requests that may use the same kinds). Minimise
Σ price[k]·x[p] over patterns p, x[p] ≥ 0 integer, subject to Σ_p a[p, g]·x[p] ≥ |g| for every group and, for
templates with `limits`, Σ_p capacity[k(p), r]·x[p] ≤ limit[r].

1. **Column generation** on the LP relaxation: start from one-group patterns (as many pods of the group as one
   node of the kind holds, for each group on the kinds cheapest per pod of it) and from the nodes of the plans
   given (ours and Karpenter's rule: every plan is then a point of the master), then repeatedly solve the master
   LP and ask a pricing MIP — choose one kind and a pattern of it maximising Σ dual[g]·a[g] − price[k] — for a
   pattern with a negative reduced cost, until there is none. The LP optimum then bounds every plan from below
   (`bound`): no placement of these pods on new nodes, whatever its topology, is cheaper.
2. **Integer master**: the same master with x integral over the patterns found (HiGHS branch and bound, with a time
   limit): `cost`, the reference. Its gap to `bound` says how close to proven it is (0 %: proven optimal).

A group whose pods keep each other off a node (required anti-affinity on the hostname selecting themselves) has at
most one pod per pattern. Left out: topology spread, other pod (anti-)affinity and host ports (they only remove
points: the reference bounds what any scheduler honouring them can reach), and Karpenter's charging of a claim's
largest option against the limits (a node is charged its own capacity). A pod may use the kinds its placed
attempt allows (the relaxation the plan applied to it, when given).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirement
from karpenter_policy.model.taints import untolerated
from karpenter_policy.scheduling.instances import indices
from karpenter_policy.scheduling.plan import Plan
from karpenter_policy.scheduling.pods import Attempt, Pod
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.vectors import INDEX, RESOURCES, Vector

_BYTES = {INDEX["memory"], INDEX["ephemeral-storage"]}
_EPSILON = 1e-7
#: One-group starting patterns per group: the kinds cheapest per pod of it.
_SEED_KINDS = 40
#: Greedy patterns added per round of column generation, at most.
_GREEDY_COLUMNS = 20
#: Kinds priced by a knapsack MIP of their own per round when the greedy patterns price nothing out.
_PROMISING = 8
_KNAPSACK_GAP = 0.01
_KNAPSACK_SECONDS = 0.1
#: The share of the time limit column generation may take (the integer master has the rest).
_GENERATION_SHARE = 0.6


@dataclass(frozen=True, slots=True)
class Optimum:
    """The reference: `cost` ($/h of the best integral plan found, `nodes` nodes), `bound` (the pattern LP's
    optimum once column generation converged, else NaN: no plan is cheaper), `status` ("proven optimal": the
    cost meets the bound; "optimal over the patterns found": the integer master solved to optimality over the
    patterns of a converged LP; "time limit"), `columns` patterns, `iterations` of column generation, `seconds`
    of wall time."""

    cost: float
    bound: float
    nodes: int
    status: str
    columns: int
    iterations: int
    seconds: float

    @property
    def gap(self) -> float:
        return self.cost / self.bound - 1 if self.bound > 0 else 0.0


@dataclass(frozen=True, slots=True)
class _Kind:
    template: int  # position in the templates given
    instance_type: int  # bit of the template's table
    capacity_type: str
    price: float
    room: tuple[float, ...]  # allocatable less the DaemonSet overhead, on the requested resources (scaled)
    capacity: Vector  # what a node of it counts against its template's limits
    groups: frozenset[int]  # the groups that may use it


def exact_optimum(
    pods: Sequence[Pod],
    templates: Sequence[NodeClaimTemplate],
    plans: Sequence[Plan] = (),
    *,
    time_limit: float = 30.0,
    tolerate_prefer_no_schedule: bool = False,
) -> Optimum:
    """The exact reference of placing `pods` on new nodes of `templates` (see the module docstring). `plans`
    seed the master with their nodes; the first also says which attempt each pod was placed with."""
    import highspy  # a benchmark's dependency, not the tool's

    started = time.perf_counter()
    relaxed = plans[0].relaxed if plans else {}
    attempt_of = {
        pod.key: pod.shape.attempts(tolerate_prefer_no_schedule)[len(relaxed.get(pod.key, ()))] for pod in pods
    }
    group_of: dict[tuple[Vector, Attempt, object], int] = {}
    counts: list[int] = []
    requests: list[Vector] = []
    attempts: list[Attempt] = []
    per_node: list[int] = []  # the most pods of the group one node holds: 1 with hostname anti-affinity to itself
    pod_group: dict[str, int] = {}
    for pod in pods:
        attempt = attempt_of[pod.key]
        key = (pod.requests, attempt, pod.shape.labels if attempt.anti_affinity else ())
        g = group_of.get(key)
        if g is None:
            g = group_of[key] = len(counts)
            counts.append(0)
            requests.append(pod.requests)
            attempts.append(attempt)
            per_node.append(1 if _apart(pod, attempt) else len(pods))
        counts[g] += 1
        pod_group[pod.key] = g
    if not counts:
        return Optimum(0.0, 0.0, 0, "empty", 0, 0, 0.0)
    bounds = [min(count, most) for count, most in zip(counts, per_node, strict=True)]
    resources = sorted({r for vector in requests for r, amount in enumerate(vector) if amount})
    scale = [float(2**20) if r in _BYTES else 1.0 for r in range(len(RESOURCES))]
    need = [tuple(vector[r] / scale[r] for r in resources) for vector in requests]
    kinds = _kinds(templates, attempts, resources, scale)
    for g in range(len(counts)):
        if not any(g in kind.groups for kind in kinds):
            return Optimum(float("nan"), float("nan"), 0, f"group {g} fits no node", 0, 0, 0.0)
    limit_rows = _limit_rows(templates)

    master = highspy.Highs()  # type: ignore[no-untyped-call]
    master.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    for count in counts:
        master.addRow(float(count), inf, 0, [], [])
    for k, r, limit in limit_rows:
        del k, r
        master.addRow(-inf, float(limit), 0, [], [])
    columns: list[tuple[int, tuple[int, ...]]] = []  # (kind, pods per group)
    seen: set[tuple[int, tuple[int, ...]]] = set()

    def add_column(kind_index: int, pattern: tuple[int, ...]) -> bool:
        if (kind_index, pattern) in seen or not any(pattern):
            return False
        seen.add((kind_index, pattern))
        kind = kinds[kind_index]
        rows = [g for g, a in enumerate(pattern) if a]
        values = [float(pattern[g]) for g in rows]
        for j, (template, r, _) in enumerate(limit_rows):
            if template == kind.template and kind.capacity[r]:
                rows.append(len(counts) + j)
                values.append(float(kind.capacity[r]))
        master.addCol(kind.price, 0.0, inf, len(rows), rows, values)
        columns.append((kind_index, pattern))
        return True

    for g in range(len(counts)):  # one-group patterns on the kinds cheapest per pod of the group
        ranked = []
        for kind_index, kind in enumerate(kinds):
            if g in kind.groups:
                fit = min(bounds[g], _most(kind.room, need[g]))
                if fit > 0:
                    ranked.append((kind.price / fit, kind_index, fit))
        for _, kind_index, fit in sorted(ranked)[:_SEED_KINDS]:
            add_column(kind_index, tuple(fit if h == g else 0 for h in range(len(counts))))
    kind_at = {(kind.template, kind.instance_type, kind.capacity_type): i for i, kind in enumerate(kinds)}
    seed_columns: list[list[tuple[int, tuple[int, ...]]]] = []  # each plan's nodes, when all are columns
    for plan in plans:  # every plan is a point of the master
        nodes: list[tuple[int, tuple[int, ...]]] | None = []
        for claim in plan.claims:
            launch = claim.launch
            if launch is None:
                continue
            position = next(i for i, t in enumerate(templates) if t.name == claim.template)
            instance_type = templates[position].table.position[launch.instance_type]
            kind_index = kind_at.get((position, instance_type, launch.capacity_type))
            pattern = [0] * len(counts)
            for pod in claim.pods:
                pattern[pod_group[pod.key]] += 1
            if kind_index is None or not all(g in kinds[kind_index].groups for g, a in enumerate(pattern) if a):
                nodes = None  # a node of a dominated kind: the plan is no starting point as it is
                continue
            add_column(kind_index, tuple(pattern))
            if nodes is not None:
                nodes.append((kind_index, tuple(pattern)))
        if nodes is not None:
            seed_columns.append(nodes)

    pricing = _Pricing(highspy, kinds, counts, bounds, need, len(resources))
    iterations = 0
    bound = 0.0
    generation_ends = started + time_limit * _GENERATION_SHARE
    converged = False
    while time.perf_counter() < generation_ends:
        master.run()
        duals = list(master.getSolution().row_dual)
        bound = float(master.getInfo().objective_function_value)
        iterations += 1
        group_duals = [max(0.0, d) for d in duals[: len(counts)]]
        limit_duals = duals[len(counts) :]
        adjusted = []
        for kind in kinds:  # price less what the node's capacity is worth against the limits (duals ≤ 0)
            extra = sum(
                limit_duals[j] * kind.capacity[r]
                for j, (template, r, _) in enumerate(limit_rows)
                if template == kind.template
            )
            adjusted.append(kind.price - extra)
        # the greedy patterns of every kind first (cheap); the pricing MIP only when none prices out, to prove it
        added = sum(add_column(k, pattern) for k, pattern in _greedy(kinds, group_duals, adjusted, bounds, need))
        if added:
            continue
        added = sum(add_column(k, pattern) for k, pattern in pricing.promising(group_duals, adjusted))
        if added:
            continue
        found = pricing.best(group_duals, adjusted)
        if found is None or not add_column(*found):  # none, or one already there: numerical noise
            converged = True
            break

    for j in range(len(columns)):
        master.changeColIntegrality(j, highspy.HighsVarType.kInteger)
    seeded = _seed_solution(columns, kinds, seed_columns)
    if seeded is not None:
        solution = highspy.HighsSolution()
        solution.col_value = seeded
        solution.value_valid = True
        master.setSolution(solution)
    master.setOptionValue("time_limit", max(1.0, started + time_limit - time.perf_counter()))
    master.setOptionValue("mip_rel_gap", 1e-6)
    master.run()
    status = master.modelStatusToString(master.getModelStatus())
    values = list(master.getSolution().col_value)
    cost = sum(kinds[k].price * round(v) for (k, _), v in zip(columns, values, strict=True))
    nodes = sum(round(v) for v in values)
    if converged and cost <= bound * (1 + 1e-6):
        verdict = "proven optimal"  # meets the LP bound over every pattern
    elif converged and status == "Optimal":
        verdict = "optimal over the patterns found"
    else:
        verdict = "time limit"
    return Optimum(
        cost,
        bound if converged else float("nan"),
        nodes,
        verdict,
        len(columns),
        iterations,
        time.perf_counter() - started,
    )


def _greedy(
    kinds: Sequence[_Kind],
    duals: Sequence[float],
    prices: Sequence[float],
    bounds: Sequence[int],
    need: Sequence[Sequence[float]],
) -> list[tuple[int, tuple[int, ...]]]:
    """For every kind, a pattern filled greedily (groups by dual value per share of the kind's room); the ones of
    negative reduced cost, most negative first (at most _GREEDY_COLUMNS)."""
    found: list[tuple[float, int, tuple[int, ...]]] = []
    for k, kind in enumerate(kinds):
        room = list(kind.room)
        order = []
        for g in kind.groups:
            if duals[g] <= 0:
                continue
            size = sum(want / have if have > 0 else math.inf for want, have in zip(need[g], room, strict=True))
            if size < math.inf:
                order.append((-duals[g] / size if size > 0 else -math.inf, g))
        if not order:
            continue
        order.sort()
        pattern = [0] * len(duals)
        value = 0.0
        for _, g in order:
            n = min(bounds[g], _most(room, need[g]))
            if n <= 0:
                continue
            pattern[g] = n
            value += n * duals[g]
            room = [have - n * want for have, want in zip(room, need[g], strict=True)]
        reduced = prices[k] - value
        if reduced < -_EPSILON * max(1.0, prices[k]):
            found.append((reduced, k, tuple(pattern)))
    found.sort()
    return [(k, pattern) for _, k, pattern in found[:_GREEDY_COLUMNS]]


def _seed_solution(
    columns: Sequence[tuple[int, tuple[int, ...]]],
    kinds: Sequence[_Kind],
    plans: Sequence[Sequence[tuple[int, tuple[int, ...]]]],
) -> list[float] | None:
    """The cheapest of the plans given as an integral point of the master (its nodes counted per column)."""
    if not plans:
        return None
    best = min(plans, key=lambda nodes: sum(kinds[k].price for k, _ in nodes))
    where = {column: j for j, column in enumerate(columns)}
    values = [0.0] * len(columns)
    for node in best:
        values[where[node]] += 1.0
    return values


def _apart(pod: Pod, attempt: Attempt) -> bool:
    """The pod keeps its own kind off its node: a required anti-affinity on the hostname selecting itself."""
    return any(
        term.required
        and term.key == wk.HOSTNAME
        and term.selector.matches(pod.labels)
        and term.namespaces.includes(pod.namespace, {})
        for term in attempt.anti_affinity
    )


def _most(room: Sequence[float], need: Sequence[float]) -> int:
    """How many pods needing `need` one node with `room` holds."""
    most = None
    for have, want in zip(room, need, strict=True):
        if want > 0:
            n = int(have // want + 1e-9)
            most = n if most is None else min(most, n)
    return max(0, most or 0)


def _usable(template: NodeClaimTemplate, attempt: Attempt) -> tuple[int, Requirement, Requirement] | None:
    """The instance types of `template` a pod of `attempt` may use, and its zone and capacity-type requirements."""
    if template.taints and untolerated(template.taints, attempt.tolerations):
        return None
    if not template.requirements.admits(attempt.requirements, template.well_known):
        return None
    merged = template.requirements.intersection(attempt.requirements)
    mask = template.types & template.table.type_mask(merged, os=template.os)
    return mask, merged.get_or_exists(wk.ZONE), merged.get_or_exists(wk.CAPACITY_TYPE)


def _allows(usable: tuple[int, Requirement, Requirement] | None, zone: str, capacity_type: str) -> bool:
    return usable is not None and usable[1].has(zone) and usable[2].has(capacity_type)


def _kinds(
    templates: Sequence[NodeClaimTemplate],
    attempts: Sequence[Attempt],
    resources: Sequence[int],
    scale: Sequence[float],
) -> list[_Kind]:
    """The node kinds some group may use: per template, type and capacity type, the cheapest zone the groups that
    may use it allow (offerings whose groups differ stay apart); dominated kinds dropped."""
    found: dict[tuple[int, int, str, frozenset[int]], float] = {}
    for position, template in enumerate(templates):
        table = template.table
        usable = [_usable(template, attempt) for attempt in attempts]
        allowed: dict[int, list[int]] = defaultdict(list)
        for g, entry in enumerate(usable):
            if entry is not None:
                for i in indices(entry[0]):
                    allowed[i].append(g)
        for i, groups in allowed.items():
            for price, z, c in table.offerings[i]:
                zone, capacity_type = table.zones[z], table.capacity_types[c]
                if not (template.zone.has(zone) and template.capacity_type.has(capacity_type)) or price != price:
                    continue
                if price == float("inf"):
                    continue
                who = frozenset(g for g in groups if _allows(usable[g], zone, capacity_type))
                if who:
                    key = (position, i, capacity_type, who)
                    found[key] = min(price, found.get(key, price))
    kinds = []
    for (position, i, capacity_type, who), price in found.items():
        template = templates[position]
        allocatable = template.shapes.allocatable[i]
        room = tuple(max(0, allocatable[r] - template.overhead[r]) / scale[r] for r in resources)
        kinds.append(_Kind(position, i, capacity_type, price, room, template.shapes.capacity[i], who))
    return _undominated(kinds, templates)


def _undominated(kinds: list[_Kind], templates: Sequence[NodeClaimTemplate]) -> list[_Kind]:
    """Drop a kind when another of a template without limits is no dearer, has at least its room on every
    resource and takes every group it takes (ties keep the first by price, then position)."""
    kinds.sort(key=lambda k: (k.price, -sum(k.room), k.template, k.instance_type, k.capacity_type))
    kept: list[_Kind] = []
    free = [not template.limited for template in templates]
    for kind in kinds:
        dominated = False
        for other in kept:
            if (
                other.price <= kind.price
                and (free[other.template] or other.template == kind.template and other.capacity == kind.capacity)
                and other.groups >= kind.groups
                and all(a >= b for a, b in zip(other.room, kind.room, strict=True))
            ):
                dominated = True
                break
        if not dominated:
            kept.append(kind)
    return kept


def _limit_rows(templates: Sequence[NodeClaimTemplate]) -> list[tuple[int, int, int]]:
    """(template, resource, limit) of every limited resource of every template."""
    return [(k, r, limit) for k, template in enumerate(templates) for r, limit in sorted(template.limited.items())]


class _Pricing:
    """The pricing MIP: choose one kind (binary z) and a pattern of it (integer a[g] ≤ |g|, only groups the kind
    takes, their needs within its room) maximising Σ dual[g]·a[g] − adjusted price (built once; each call changes
    the objective)."""

    def __init__(
        self,
        highspy: object,
        kinds: Sequence[_Kind],
        counts: Sequence[int],
        bounds: Sequence[int],
        need: Sequence[Sequence[float]],
        resources: int,
    ) -> None:
        h = highspy.Highs()  # type: ignore[attr-defined]
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_rel_gap", 1e-6)
        self.h, self.kinds, self.groups = h, kinds, len(counts)
        self.need, self.bounds, self.highspy = need, bounds, highspy
        inf = highspy.kHighsInf  # type: ignore[attr-defined]
        for bound in bounds:
            h.addCol(0.0, 0.0, float(bound), 0, [], [])
        for _ in kinds:
            h.addCol(0.0, 0.0, 1.0, 0, [], [])
        integer = highspy.HighsVarType.kInteger  # type: ignore[attr-defined]
        for j in range(len(counts) + len(kinds)):
            h.changeColIntegrality(j, integer)
        z = [len(counts) + t for t in range(len(kinds))]
        h.addRow(1.0, 1.0, len(z), z, [1.0] * len(z))  # exactly one kind
        for r in range(resources):  # the pattern within the chosen kind's room
            cols = [g for g in range(len(counts)) if need[g][r]] + z
            vals = [need[g][r] for g in range(len(counts)) if need[g][r]] + [-kind.room[r] for kind in kinds]
            h.addRow(-inf, 0.0, len(cols), cols, vals)
        for g, count in enumerate(counts):  # only groups the chosen kind takes
            takers = [len(counts) + t for t, kind in enumerate(kinds) if g in kind.groups]
            h.addRow(-inf, 0.0, 1 + len(takers), [g, *takers], [1.0] + [-float(count)] * len(takers))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)  # type: ignore[attr-defined]

    def best(self, duals: Sequence[float], prices: Sequence[float]) -> tuple[int, tuple[int, ...]] | None:
        """The kind and pattern of the most negative reduced cost, None when none is negative. Kinds whose
        patterns cannot be worth their price (a bound per resource: room × the best dual per unit of it) are left
        out of the MIP."""
        h = self.h
        groups = self.groups
        open_kinds = [t for t, kind in enumerate(self.kinds) if self._most_worth(kind, duals) > prices[t] + _EPSILON]
        if not open_kinds:
            return None
        chosen = set(open_kinds)
        kinds = len(self.kinds)
        h.changeColsBounds(
            kinds,
            [groups + t for t in range(kinds)],
            [0.0] * kinds,
            [1.0 if t in chosen else 0.0 for t in range(kinds)],
        )
        h.changeColsCost(groups, list(range(groups)), list(duals))
        h.changeColsCost(kinds, [groups + t for t in range(kinds)], [-p for p in prices])
        h.run()
        if h.modelStatusToString(h.getModelStatus()) != "Optimal":
            return None
        value = float(h.getInfo().objective_function_value)
        if value <= _EPSILON * max(1.0, max(prices)):
            return None
        solution = list(h.getSolution().col_value)
        kind = max(range(kinds), key=lambda t: solution[groups + t])
        pattern = tuple(round(solution[g]) for g in range(groups))
        return kind, pattern

    def promising(self, duals: Sequence[float], prices: Sequence[float]) -> list[tuple[int, tuple[int, ...]]]:
        """The best pattern of each of the _PROMISING kinds whose bound exceeds their price most, by a knapsack
        MIP of its own (small and quick), those of negative reduced cost."""
        gaps = sorted(
            ((prices[t] - self._most_worth(kind, duals), t) for t, kind in enumerate(self.kinds)),
        )
        found = []
        for gap, t in gaps[:_PROMISING]:
            if gap >= -_EPSILON:
                break
            pattern, value = self._knapsack(self.kinds[t], duals)
            if value > prices[t] + _EPSILON * max(1.0, prices[t]):
                found.append((t, pattern))
        return found

    def _knapsack(self, kind: _Kind, duals: Sequence[float]) -> tuple[tuple[int, ...], float]:
        """max Σ dual[g]·a[g] over the patterns of one kind."""
        h = self.highspy.Highs()  # type: ignore[attr-defined]
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_rel_gap", _KNAPSACK_GAP)  # any improving pattern will do: the proof is best()'s
        h.setOptionValue("time_limit", _KNAPSACK_SECONDS)
        groups = sorted(g for g in kind.groups if duals[g] > 0)
        if not groups:
            return tuple([0] * self.groups), 0.0
        integer = self.highspy.HighsVarType.kInteger  # type: ignore[attr-defined]
        for g in groups:
            h.addCol(-duals[g], 0.0, float(min(self.bounds[g], _most(kind.room, self.need[g]))), 0, [], [])
        for j in range(len(groups)):
            h.changeColIntegrality(j, integer)
        inf = self.highspy.kHighsInf  # type: ignore[attr-defined]
        for r, room in enumerate(kind.room):
            cols = [j for j, g in enumerate(groups) if self.need[g][r]]
            h.addRow(-inf, room, len(cols), cols, [self.need[groups[j]][r] for j in cols])
        h.run()
        values = list(h.getSolution().col_value)
        pattern = [0] * self.groups
        for j, g in enumerate(groups):
            pattern[g] = round(values[j])
        return tuple(pattern), sum(duals[g] * pattern[g] for g in groups)

    def _most_worth(self, kind: _Kind, duals: Sequence[float]) -> float:
        """An upper bound on Σ dual[g]·a[g] over the patterns of `kind`."""
        best = math.inf
        for r, room in enumerate(kind.room):
            rate = max((duals[g] / self.need[g][r] for g in kind.groups if self.need[g][r] > 0), default=0.0)
            if all(self.need[g][r] > 0 or duals[g] <= 0 for g in kind.groups):
                best = min(best, rate * room)
        by_count = sum(duals[g] * min(self.bounds[g], _most(kind.room, self.need[g])) for g in kind.groups)
        return min(best, by_count)


__all__ = ["Optimum", "exact_optimum"]
