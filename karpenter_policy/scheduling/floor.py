"""A floor under what a run of Karpenter's packing rule can still cost, while it runs: the scheduler's cost
safety net stops that run as soon as it cannot end cheaper than the cost plan.

The cost strategy runs Karpenter's rule beside its own plan and keeps the better (`scheduler.py`); when the cost
plan places every pod at a known price, Karpenter's plan can only win by being cheaper. During Karpenter's run its
plan's final price is at least the :class:`CostFloor` of where it stands:

* every claim made so far, at the cheapest offering of the types it may still launch in the zones and capacity
  types it still allows — a claim's types, zones and capacity types only narrow as pods join, so its launch
  price can only rise (Karpenter launches the cheapest of them, `NodeClaim.Add` then the cheapest offering);
* the pods not yet placed need cpu and memory beyond the room left in those claims (each at its largest type)
  and on the existing nodes: new nodes, each priced at least at the lowest price per unit of cpu (and, apart,
  of memory) of any priced type of any template. A plan that launched a type without a price would lose anyway
  (`_plan_order`: fewer unpriced nodes first).

So once the floor is above the cost plan's price, Karpenter's plan cannot win and the run is stopped: the answer
is the same plan, without the rest of that run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirement
from karpenter_policy.scheduling.nodes import ExistingNode, NodeClaim
from karpenter_policy.scheduling.pods import Pod
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I

_RESOURCES = (CPU_I, MEMORY_I)


class CostFloor:
    """A lower bound on the final price of one packing run (see the module docstring). Told of each pod placed
    (:meth:`placed`); asked with the run's claims (:meth:`of`)."""

    def __init__(self, templates: Sequence[NodeClaimTemplate], existing: Sequence[ExistingNode], pods: Sequence[Pod]):
        self.templates, self.existing = templates, existing
        totals = list(map(sum, zip(*(pod.requests for pod in pods), strict=True))) if pods else None
        self.left = [totals[r] if totals else 0 for r in _RESOURCES]
        # what the first question needs, worked out then (most runs are over before it: small batches)
        self._unit: list[float] | None = None
        self._free: list[int] = []
        self._prices: dict[int, tuple[int, Requirement, Requirement, float, int, int]] = {}

    def placed(self, pod: Pod) -> None:
        for j, r in enumerate(_RESOURCES):
            self.left[j] -= pod.requests[r]

    def of(self, claims: Iterable[NodeClaim]) -> float:
        """What the run's plan will cost at least, the claims made so far being `claims`."""
        if self._unit is None:
            self._unit = [_unit_price(self.templates, r) for r in _RESOURCES]
            self._free = [sum(max(0, n.allocatable[r] - n.requests[r]) for n in self.existing) for r in _RESOURCES]
        unit = self._unit
        total = 0.0
        spare = list(self._free)
        for claim in claims:
            price, room_cpu, room_memory = self._claim(claim)
            total += price
            spare[0] += max(0, room_cpu - claim.requests[CPU_I])
            spare[1] += max(0, room_memory - claim.requests[MEMORY_I])
        more = max(max(0, self.left[j] - spare[j]) * unit[j] for j in range(len(_RESOURCES)))
        return total + more

    def _claim(self, claim: NodeClaim) -> tuple[float, int, int]:
        """The claim's cheapest launch price (0 without one) and the most cpu and memory its types have."""
        cached = self._prices.get(id(claim))
        if cached is not None and (cached[0], cached[1], cached[2]) == (claim.options, claim.zone, claim.capacity_type):
            return cached[3], cached[4], cached[5]
        template = claim.template
        cheapest = template.table.cheapest(claim.options, claim.zone, claim.capacity_type)
        price = cheapest.price if cheapest is not None and cheapest.price is not None else 0.0
        shapes = template.shapes
        room_cpu, room_memory = shapes.most(CPU_I, claim.options), shapes.most(MEMORY_I, claim.options)
        self._prices[id(claim)] = (claim.options, claim.zone, claim.capacity_type, price, room_cpu, room_memory)
        return price, room_cpu, room_memory


def _unit_price(templates: Iterable[NodeClaimTemplate], resource: int) -> float:
    """The lowest price per unit of `resource` a new node of any template offers (0 when no type has a price and
    room for it: no bound)."""
    lowest = math.inf
    for template in templates:
        lowest = min(lowest, _template_unit_price(template, resource))
    return 0.0 if math.isinf(lowest) else lowest


def _template_unit_price(template: NodeClaimTemplate, resource: int) -> float:
    """The lowest price per unit of `resource` a new node of `template` offers (inf: none), worked out once for its
    types and DaemonSet overhead (`NodeClaimTemplate.unit_prices`)."""
    overhead = template.overhead[resource]
    key = (resource, template.types, overhead)
    found = template.unit_prices.get(key)
    if found is not None:
        return found
    lowest = math.inf
    prices = template.table.prices(Requirement.exists(wk.ZONE), Requirement.exists(wk.CAPACITY_TYPE))
    allocatable = template.shapes.allocatable
    types = template.types
    for i, price in prices.items():
        room = allocatable[i][resource] - overhead
        if types >> i & 1 and room > 0:
            lowest = min(lowest, price / room)
    template.unit_prices[key] = lowest
    return lowest
