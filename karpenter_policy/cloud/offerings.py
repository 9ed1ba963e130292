"""Live offerings: the catalog's instance types priced and placed with what the cloud says now.

Pure (no I/O): :func:`live_instance_types` combines the catalog (hardware facts, supported capacity types) with
where each type is offered now, the current spot prices and on-demand prices, and the offerings marked
unavailable, the way Karpenter v0.31's ``createOfferings`` does:

- an on-demand offering is priced at the type's on-demand price; no price makes it unavailable;
- a spot offering is priced at the zone's spot price; a type with spot prices in some zones but not this one
  is unavailable there, and a type with no spot price at all falls back to the on-demand price;
- an offering marked unavailable (recent insufficient capacity) is unavailable (:func:`with_unavailable`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering


def supported_capacity_types(instance_type: InstanceType) -> tuple[str, ...]:
    """The capacity types the catalog lists offerings for (both when it lists none), sorted."""
    listed = {o.capacity_type for o in instance_type.offerings if o.capacity_type in wk.CAPACITY_TYPES}
    return tuple(sorted(listed)) if listed else wk.CAPACITY_TYPES


def live_instance_types(
    catalog: Iterable[InstanceType],
    zones_by_type: Mapping[str, Collection[str]],
    on_demand_prices: Mapping[str, float],
    spot_prices: Mapping[str, Mapping[str, float]],
    allowed_zones: Collection[str] | None = None,
) -> list[InstanceType]:
    """The catalog's types offered in at least one (allowed) zone, with live offerings, sorted by name.

    ``zones_by_type``: type -> zones it is offered in now; ``on_demand_prices``: type -> USD/hour;
    ``spot_prices``: type -> zone -> USD/hour. Apply :func:`with_unavailable` for the marked offerings.
    """
    result: list[InstanceType] = []
    for instance_type in catalog:
        zones = set(zones_by_type.get(instance_type.name, ()))
        if allowed_zones is not None:
            zones &= set(allowed_zones)
        if not zones:
            continue
        on_demand = on_demand_prices.get(instance_type.name)
        spot = spot_prices.get(instance_type.name)
        offerings: list[Offering] = []
        for zone in sorted(zones):
            for capacity_type in supported_capacity_types(instance_type):
                price: float | None
                if capacity_type == wk.CAPACITY_ON_DEMAND:
                    price = on_demand
                elif spot:
                    price = spot.get(zone)
                else:
                    price = on_demand
                offerings.append(Offering(zone, capacity_type, price or 0.0, price is not None))
        result.append(dataclasses.replace(instance_type, offerings=tuple(offerings), price_on_demand=on_demand))
    result.sort(key=lambda it: it.name)
    return result


def with_unavailable(
    instance_types: Iterable[InstanceType], unavailable: Collection[tuple[str, str, str]]
) -> list[InstanceType]:
    """The types with every marked offering made unavailable (others unchanged)."""
    marked = set(unavailable)
    if not marked:
        return list(instance_types)
    result = []
    for it in instance_types:
        if any((it.name, o.zone, o.capacity_type) in marked for o in it.offerings):
            offerings = tuple(
                dataclasses.replace(o, available=False) if (it.name, o.zone, o.capacity_type) in marked else o
                for o in it.offerings
            )
            it = dataclasses.replace(it, offerings=offerings)
        result.append(it)
    return result


__all__ = ["live_instance_types", "supported_capacity_types", "with_unavailable"]
