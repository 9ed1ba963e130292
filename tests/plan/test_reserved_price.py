"""`plan` prices a node launched into a capacity reservation (`karpenter.sh/capacity-type: reserved`) as Karpenter
v1.14.1 prices a reserved offering: its type's on-demand price / 10,000,000 (aws
pkg/providers/instancetype/offering/reserved_capacity_resolver.go:73-80) — before, it had no catalog offering and was
counted unpriced."""

from __future__ import annotations

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.cost import node_price
from karpenter_policy.commands.plan.fleet import FleetNode


def fleet_node(instance_type: str, capacity_type: str, zone: str = "us-east-1a") -> FleetNode:
    return FleetNode("n", None, instance_type, zone, capacity_type, None, {}, {}, nodepool="default")


def on_demand(instance_type: str, zone: str) -> float:
    found = load_catalog().get(instance_type)
    assert found is not None
    prices = [o.price for o in found.offerings if o.capacity_type == "on-demand" and o.zone == zone]
    assert prices and prices[0] is not None
    return prices[0]


@pytest.mark.parametrize("instance_type", ["m5.large", "c6g.large", "p4d.24xlarge"])
def test_a_reserved_node_costs_its_on_demand_price_over_ten_million(instance_type: str) -> None:
    price = node_price(load_catalog(), fleet_node(instance_type, "reserved"))
    assert price == pytest.approx(on_demand(instance_type, "us-east-1a") / 10_000_000)
    assert price is not None and 0 < price < 0.001


def test_a_reserved_node_keeps_the_order_of_on_demand_prices() -> None:
    """The reservation is "free" but keeps the on-demand order (v1.14.1: for consolidation)."""
    catalog = load_catalog()
    small = node_price(catalog, fleet_node("m5.large", "reserved"))
    large = node_price(catalog, fleet_node("m5.4xlarge", "reserved"))
    assert small is not None and large is not None and small < large


def test_an_unknown_type_stays_unpriced() -> None:
    assert node_price(load_catalog(), fleet_node("x9.nothing", "reserved")) is None
