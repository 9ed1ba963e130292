"""What the fleet costs before the rollout, at its peak and after, per provisioner and NodePool (`NodePool/<name>`,
as the scheduler names it): $/month (`HOURS_PER_MONTH`
hours) of each node at its catalog price — a node by the instance type, zone and capacity type of its labels,
a replacement at its launch choice. Nodes of neither count under "(not Karpenter's)". A node whose
offering has no price in the catalog counts nothing and is counted in `unpriced`. A node of capacity type `reserved`
(launched into a capacity reservation) is priced as Karpenter v1.14.1 prices a reserved offering: its type's on-demand
price divided by 10,000,000 (aws pkg/providers/instancetype/offering/reserved_capacity_resolver.go) — the reservation is
paid for whether it runs or not, so the plan counts it next to nothing.

The timeline follows the waves, which may overlap (Karpenter v1 runs drift commands side by side): a wave that
replaces first adds its replacements at its start and loses its nodes at its end (the peak); one that deletes first
(a removed provisioner or NodePool, v1's forceful expiry) loses its nodes when drained and gains the new ones then.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.proof.placement import HOURS_PER_MONTH
from karpenter_policy.cloud.capacityreservations import RESERVED_PRICE_DIVISOR
from karpenter_policy.commands.plan.fleet import FleetNode
from karpenter_policy.commands.plan.waves import Rollout, Wave
from karpenter_policy.model import labels as wk

__all__ = ["UNMANAGED", "Cost", "WorkloadCost", "fleet_cost", "monthly", "node_price", "wave_moments"]

#: The name nodes without `karpenter.sh/provisioner-name` or `karpenter.sh/nodepool` are priced under.
UNMANAGED = "(not Karpenter's)"


def node_price(catalog: Catalog, node: FleetNode) -> float | None:
    """$/h of a node's offering in the catalog (None: unknown type, zone or price); a reserved node's: its type's
    on-demand price (in its zone, else any zone's) / 10,000,000."""
    instance_type = catalog.get(node.instance_type)
    if instance_type is None:
        return None
    if node.capacity_type == wk.CAPACITY_RESERVED:
        prices = sorted(
            (o.zone != node.zone, o.price) for o in instance_type.offerings
            if o.capacity_type == wk.CAPACITY_ON_DEMAND and o.price is not None
        )
        return prices[0][1] / RESERVED_PRICE_DIVISOR if prices else None
    for offering in instance_type.offerings:
        if offering.zone == node.zone and offering.capacity_type == node.capacity_type:
            return offering.price
    return None


@dataclass(frozen=True, slots=True)
class WorkloadCost:
    """One workload's ($/month) share of the fleet before the rollout, at its own peak and after
    (`commands.plan.workloadcost`)."""

    workload: str
    before: float
    peak: float
    after: float

    def to_json(self) -> dict[str, object]:
        return {"workload": self.workload, "before_monthly": round(self.before, 2),
                "peak_monthly": round(self.peak, 2), "after_monthly": round(self.after, 2)}


@dataclass(slots=True)
class Cost:
    """$/month per provisioner before, at the peak (each provisioner's own) and after, the fleet's totals, and how
    many nodes had no price."""

    before: dict[str, float] = field(default_factory=dict)
    peak: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    before_monthly: float = 0.0
    peak_monthly: float = 0.0
    after_monthly: float = 0.0
    unpriced: int = 0
    #: each workload's share, most expensive first (empty until `workloadcost` fills it)
    workloads: list[WorkloadCost] = field(default_factory=list)

    def rows(self) -> list[tuple[str, float, float, float]]:
        """(provisioner, before, peak, after) $/month, by provisioner name."""
        names = sorted(set(self.before) | set(self.after))
        return [(n, self.before.get(n, 0.0), self.peak.get(n, 0.0), self.after.get(n, 0.0)) for n in names]

    def to_json(self) -> dict[str, object]:
        return {
            "before_monthly": round(self.before_monthly, 2),
            "peak_monthly": round(self.peak_monthly, 2),
            "after_monthly": round(self.after_monthly, 2),
            "unpriced_nodes": self.unpriced,
            "provisioners": [
                {
                    "provisioner": name,
                    "before_monthly": round(before, 2),
                    "peak_monthly": round(peak, 2),
                    "after_monthly": round(after, 2),
                }
                for name, before, peak, after in self.rows()
            ],
            "workloads": [w.to_json() for w in self.workloads],
        }


def monthly(price: float | None) -> float:
    """$/month of a $/h price (None: no price, nothing)."""
    return (price or 0.0) * HOURS_PER_MONTH


def wave_moments(wave: Wave, first: dt.datetime) -> tuple[float, float]:
    """When (seconds from the first wave's start) a wave's replacements come and its nodes go: replace first, they
    come at its start and the nodes go at its end; delete first, both when the drain ends."""
    begins = (wave.start - first).total_seconds()
    return (begins, begins + wave.seconds) if wave.replaced_first else (begins + wave.drain_seconds,) * 2


def fleet_cost(catalog: Catalog, nodes: Iterable[FleetNode], rollout: Rollout) -> Cost:
    """The cost before, at the peak and after `rollout` (see the module docstring)."""
    cost = Cost()
    running: defaultdict[str, float] = defaultdict(float)
    of_node: dict[str, tuple[str, float]] = {}
    for node in nodes:
        price = node_price(catalog, node)
        cost.unpriced += price is None
        owner = node.owner or UNMANAGED
        of_node[node.name] = (owner, monthly(price))
        running[owner] += monthly(price)
    cost.before = dict(running)
    peak = dict(running)
    total_peak = sum(running.values())
    # (seconds from the first wave, 0 = a node goes / 1 = a node comes, owner, $/month): at a tie, going first
    changes: list[tuple[float, int, str, float]] = []
    first = rollout.waves[0].start if rollout.waves else None
    for wave in rollout.waves:
        comes, goes = wave_moments(wave, first or wave.start)
        for replacement in wave.replacements:
            cost.unpriced += replacement.price is None
            changes.append((comes, 1, replacement.provisioner, monthly(replacement.price)))
        for name in wave.nodes:
            owner, a_month = of_node[name]
            changes.append((goes, 0, owner, -a_month))
    changes.sort(key=lambda c: (c[0], c[1]))
    for index, (moment, _, owner, change) in enumerate(changes):
        running[owner] += change
        if index + 1 == len(changes) or changes[index + 1][0] != moment:  # every change of this moment made
            for name, value in running.items():
                peak[name] = max(peak.get(name, 0.0), value)
            total_peak = max(total_peak, sum(running.values()))
    cost.peak = peak
    cost.after = {name: value for name, value in running.items()}
    cost.before_monthly = sum(cost.before.values())
    cost.after_monthly = sum(running.values())
    cost.peak_monthly = total_peak
    return cost
