"""A lower bound on the cost of the new nodes a plan launches: the linear-programming relaxation of the covering
problem (HiGHS, through `highspy`: a test extra, not a dependency of the tool). Benchmarks only.

Variables: x[t] ≥ 0 nodes of each (template, instance type) t, fractional; y[g, t] ≥ 0 pods of group g (pods with
equal requests that may use the same types) placed on type t. Minimise Σ price[t]·x[t] subject to Σ_t y[g, t] =
|g| for every group, and Σ_g requests[g, r]·y[g, t] ≤ (allocatable[t, r] − DaemonSet overhead[r])·x[t] for every
resource r (cpu, memory, pods, accelerators, ...). Every plan that puts those pods on new nodes pays at least the
optimum: it is one feasible integral point, and topology, host ports, limits and the one-pod-at-a-time packing only
remove points. A pod may use the types of its most relaxed attempt (a superset of what it was placed with).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from karpenter_policy.model.resources import EPHEMERAL_STORAGE, MEMORY
from karpenter_policy.model.taints import untolerated
from karpenter_policy.scheduling.instances import indices
from karpenter_policy.scheduling.plan import Plan
from karpenter_policy.scheduling.pods import Pod
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.vectors import RESOURCES, Vector

_BYTES = (MEMORY, EPHEMERAL_STORAGE)


@dataclass(frozen=True, slots=True)
class Bound:
    cost: float  # $/h
    status: str


def lower_bound(plan: Plan, templates: Sequence[NodeClaimTemplate], tolerate_prefer_no_schedule: bool = False) -> Bound:
    """The LP bound of the new nodes of `plan` (see the module docstring)."""
    pods = [pod for claim in plan.claims for pod in claim.pods]
    return lower_bound_of(pods, templates, tolerate_prefer_no_schedule)


def _usable(pod: Pod, template: NodeClaimTemplate, tolerate: bool) -> int:
    attempt = pod.shape.attempts(tolerate)[-1]
    if template.taints and untolerated(template.taints, attempt.tolerations):
        return 0
    if not template.requirements.admits(attempt.requirements, template.well_known):
        return 0
    table = template.table
    merged = template.requirements.intersection(attempt.requirements)
    return template.types & table.mask_of(merged, os=template.os)


def lower_bound_of(pods: Sequence[Pod], templates: Sequence[NodeClaimTemplate], tolerate: bool = False) -> Bound:
    import highspy  # a benchmark's dependency, not the tool's

    groups: dict[tuple[Vector, tuple[int, ...]], int] = defaultdict(int)
    for pod in pods:
        usable = tuple(_usable(pod, t, tolerate) for t in templates)
        groups[(pod.requests, usable)] += 1
    columns: dict[tuple[int, int], int] = {}  # (template, type) → x column
    prices: list[float] = []
    for (_, usable), _count in groups.items():
        for k, mask in enumerate(usable):
            template = templates[k]
            price_of = template.table.prices(template.zone, template.capacity_type)
            for i in indices(mask):
                if (k, i) not in columns and i in price_of:
                    columns[(k, i)] = len(prices)
                    prices.append(price_of[i])
    if not groups:
        return Bound(0.0, "empty")
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    for price in prices:
        h.addVar(0.0, inf)
        h.changeColCost(h.getNumCol() - 1, price)
    # capacity rows: one per (column, requested resource), in MiB for byte resources (well-scaled for the LP)
    requested = sorted({r for requests, _ in groups for r, amount in enumerate(requests) if amount})
    scale = [float(2**20) if name in _BYTES else 1.0 for name in RESOURCES]
    rows: dict[tuple[int, int], int] = {}
    for (k, i), col in columns.items():
        allocatable = templates[k].shapes.allocatable[i]
        overhead = templates[k].overhead
        for r in requested:
            h.addRow(-inf, 0.0, 1, [col], [-max(0, allocatable[r] - overhead[r]) / scale[r]])
            rows[(col, r)] = h.getNumRow() - 1
    for (requests, usable), count in groups.items():
        y_columns = []
        for k, mask in enumerate(usable):
            for i in indices(mask):
                x = columns.get((k, i))
                if x is None:
                    continue
                h.addVar(0.0, inf)
                y = h.getNumCol() - 1
                y_columns.append(y)
                for r, amount in enumerate(requests):
                    if amount:
                        h.changeCoeff(rows[(x, r)], y, amount / scale[r])
        if not y_columns:
            return Bound(float("nan"), "a pod fits no type")
        h.addRow(float(count), float(count), len(y_columns), y_columns, [1.0] * len(y_columns))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    return Bound(float(h.getInfo().objective_function_value), status)
