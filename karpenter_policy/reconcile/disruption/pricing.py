"""What nodes cost, as Karpenter v0.31's consolidation prices them (`helpers.go`, `multimachineconsolidation.go`).

* A candidate costs the price of its **offering** (its type in its zone and capacity type) whatever that
  offering's availability now: a node runs on capacity it already has, so an offering EC2 has no capacity for
  today still prices it (`getCandidatePrices`).
* A replacement type is kept only when its **worst launch price** is below what goes (`filterByPrice`): the most
  expensive offering the launch may take — its zones the claim allows, in the capacity type it launches in (spot
  whenever the claim allows spot and the type is offered as spot) — since the launch may land in any of them
  (`worstLaunchPrice`).
* When several nodes are replaced by one, a type among those going caps the replacement: it must cost less than
  the cheapest node of that type, or deleting fewer nodes does the same with less disruption
  (`filterOutSameType`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.reconcile.templates import Templates
from karpenter_policy.scheduling import ClaimPlan, NodeClaimTemplate


def offering_price(
    templates: Templates, provisioner: str, instance_type: str, zone: str, capacity: str
) -> float | None:
    """$/h of a node's offering as the cloud prices it, available now or not (`Templates.offering_price`)."""
    return templates.offering_price(provisioner, instance_type, zone, capacity)


def worst_launch_price(template: NodeClaimTemplate, claim: ClaimPlan, option: ChosenOffering) -> float:
    """The most a launch of `option`'s type for `claim` may cost: its dearest available offering in a zone the
    claim allows, in the option's capacity type (infinite: none, or one without price data)."""
    table = template.table
    position = table.position.get(option.instance_type)
    if position is None:
        return math.inf
    zones = claim.requirements.get_or_exists(wk.ZONE)
    worst = -math.inf
    for price, zone, capacity in table.offerings[position]:
        if table.capacity_types[capacity] == option.capacity_type and zones.has(table.zones[zone]):
            worst = max(worst, price)  # an unknown price is infinite (price_key)
    return worst if worst > -math.inf else math.inf


def cheaper_options(template: NodeClaimTemplate, claim: ClaimPlan, price: float) -> tuple[ChosenOffering, ...]:
    """The claim's options whose worst launch price is below `price` (Karpenter's `filterByPrice`)."""
    return tuple(o for o in claim.options if worst_launch_price(template, claim, o) < price)


def same_type_ceiling(going: Iterable[tuple[str, float | None]], options: Sequence[ChosenOffering]) -> float:
    """The price a replacement of several nodes must stay below when one of its options is a type among those going
    (`going`: each node's type and price): the cheapest such node's (infinite when no option is such a type)."""
    cheapest: dict[str, float] = {}
    for instance_type, price in going:
        if price is not None:
            cheapest[instance_type] = min(price, cheapest.get(instance_type, math.inf))
    offered = {o.instance_type for o in options}
    return min((p for t, p in cheapest.items() if t in offered), default=math.inf)


def total(prices: Iterable[float | None]) -> float | None:
    """The sum of prices (None when one is unknown)."""
    result = 0.0
    for price in prices:
        if price is None:
            return None
        result += price
    return result


__all__ = ["cheaper_options", "offering_price", "same_type_ceiling", "total", "worst_launch_price"]
