"""The pricing rules of live offerings (karpenter_policy.cloud.offerings), as Karpenter v0.31 applies them."""

from __future__ import annotations

from karpenter_policy.cloud.offerings import live_instance_types, with_unavailable
from karpenter_policy.model.instancetypes import InstanceType, Offering


def catalog_type(name: str = "m5.large", capacity_types: tuple[str, ...] = ("on-demand", "spot")) -> InstanceType:
    return InstanceType(
        name=name,
        vcpu=2,
        memory_mib=8192,
        architectures=("amd64",),
        offerings=tuple(Offering("us-east-1a", c, 0.096) for c in capacity_types),
        price_on_demand=0.096,
    )


def offerings(it: InstanceType) -> dict[tuple[str, str], tuple[float, bool]]:
    return {(o.zone, o.capacity_type): (o.price, o.available) for o in it.offerings}


def test_spot_in_a_zone_without_a_spot_price_is_unavailable_when_the_type_has_spot_prices_elsewhere() -> None:
    (it,) = live_instance_types(
        [catalog_type()],
        {"m5.large": {"us-east-1a", "us-east-1b"}},
        {"m5.large": 0.1},
        {"m5.large": {"us-east-1a": 0.03}},
    )
    assert offerings(it) == {
        ("us-east-1a", "on-demand"): (0.1, True),
        ("us-east-1a", "spot"): (0.03, True),
        ("us-east-1b", "on-demand"): (0.1, True),
        ("us-east-1b", "spot"): (0.0, False),
    }


def test_a_type_without_any_spot_price_is_priced_on_demand_for_spot() -> None:
    (it,) = live_instance_types([catalog_type()], {"m5.large": {"us-east-1a"}}, {"m5.large": 0.1}, {})
    assert offerings(it)[("us-east-1a", "spot")] == (0.1, True)


def test_without_an_on_demand_price_the_on_demand_offerings_are_unavailable() -> None:
    (it,) = live_instance_types([catalog_type()], {"m5.large": {"us-east-1a"}}, {}, {"m5.large": {"us-east-1a": 0.03}})
    assert offerings(it) == {("us-east-1a", "on-demand"): (0.0, False), ("us-east-1a", "spot"): (0.03, True)}
    assert it.price_on_demand is None


def test_capacity_types_come_from_the_catalog_and_unoffered_types_are_left_out() -> None:
    types = live_instance_types(
        [catalog_type("m5.large", ("on-demand",)), catalog_type("u-6tb1.metal")],
        {"m5.large": {"us-east-1a"}},
        {"m5.large": 0.1},
        {},
    )
    assert [it.name for it in types] == ["m5.large"]
    assert offerings(types[0]) == {("us-east-1a", "on-demand"): (0.1, True)}


def test_allowed_zones_restrict_the_offerings() -> None:
    (it,) = live_instance_types(
        [catalog_type()],
        {"m5.large": {"us-east-1a", "us-east-1b"}},
        {"m5.large": 0.1},
        {},
        allowed_zones={"us-east-1b"},
    )
    assert it.zones() == ("us-east-1b",)


def test_marked_offerings_become_unavailable_and_nothing_else_changes() -> None:
    (it,) = live_instance_types([catalog_type()], {"m5.large": {"us-east-1a"}}, {"m5.large": 0.1}, {})
    (marked,) = with_unavailable([it], {("m5.large", "us-east-1a", "spot")})
    assert offerings(marked) == {("us-east-1a", "on-demand"): (0.1, True), ("us-east-1a", "spot"): (0.1, False)}
    assert with_unavailable([it], set()) == [it]
