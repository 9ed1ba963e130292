"""A NodePool's instance types with its EC2NodeClass's reserved offerings (`cloud.reservedtypes`), as Karpenter
v1.14.1's aws pkg/providers/instancetype/offering/provider.go `InjectOfferings` adds them: each type one offering per
reservation of it, capacity type `reserved`, naming the reservation; with none, the very same types."""

from __future__ import annotations

import dataclasses

from karpenter_policy.cloud.capacityreservations import ReservedOffering
from karpenter_policy.cloud.reservedtypes import with_reserved_offerings
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, InstanceType, Offering
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.reconcile.provisioning.launcher import launch_options
from karpenter_policy.scheduling import ClaimPlan, InstanceTable, NodeClaimTemplate
from karpenter_policy.scheduling.synthetic import SHAPE
from karpenter_policy.scheduling.vectors import ZERO


def _type(name: str, price: float) -> InstanceType:
    return InstanceType(name, 2, 4096, ("amd64",), offerings=(
        Offering("us-east-1a", "on-demand", price), Offering("us-east-1b", "on-demand", price),
    ), price_on_demand=price)


def _reserved(zone: str, reservation: str, price: float, room: int = 2) -> ReservedOffering:
    return ReservedOffering(
        instance_type="m5.large", zone=zone, reservation_id=reservation, reservation_type="capacity-block",
        interruptible=True, price=price, available=room > 0, capacity=room,
    )


def test_a_reserved_offering_joins_its_type_with_its_reservation() -> None:
    """The offering carries the reservation's id, type, interruptibility and room, and its price (on-demand ÷
    10,000,000, as the cloud priced it); the table's cheapest offering of the type is then the reserved one."""
    types = [_type("m5.large", 0.096), _type("c5.large", 0.085)]
    price = 0.096 / 1e7
    reserved = {"m5.large": (_reserved("us-east-1b", "cr-2", price), _reserved("us-east-1a", "cr-1", price))}
    out = with_reserved_offerings(types, reserved)
    assert out[1] is types[1]  # a type no reservation is of: the same object
    got = [o for o in out[0].offerings if o.capacity_type == wk.CAPACITY_RESERVED]
    assert [(o.zone, o.reservation_id) for o in got] == [("us-east-1a", "cr-1"), ("us-east-1b", "cr-2")]
    assert all(
        o.reservation_type == "capacity-block" and o.reservation_interruptible and o.reservation_capacity == 2
        and o.price == 0.096 / 1e7
        for o in got
    )
    table = InstanceTable(out)
    assert wk.CAPACITY_RESERVED in table.capacity_types
    assert table.cheapest(table.everything, *_any_zone_any_capacity()).capacity_type == wk.CAPACITY_RESERVED


def test_no_reserved_offering_leaves_the_types_as_they_are() -> None:
    """With no reservation (or a gate off: `{}`) the types come back unchanged, so the templates' table is kept."""
    types = [_type("m5.large", 0.096)]
    assert with_reserved_offerings(types, {}) == tuple(types)
    assert with_reserved_offerings(types, {"m5.large": ()})[0] is types[0]


def test_a_full_reservation_is_an_unavailable_offering() -> None:
    """A reservation without room is offered but unavailable (the table does not launch it)."""
    out = with_reserved_offerings([_type("m5.large", 0.096)], {"m5.large": (_reserved("us-east-1a", "cr-1", 1e-8, 0),)})
    table = InstanceTable(out)
    assert wk.CAPACITY_RESERVED not in table.capacity_types


def _any_zone_any_capacity() -> tuple[Requirement, Requirement]:
    return Requirement.new(wk.ZONE, Operator.EXISTS), Requirement.new(wk.CAPACITY_TYPE, Operator.EXISTS)


def test_two_reservations_of_a_type_in_one_zone_are_one_launch_option() -> None:
    """A claim launching into reservations lists each (type, zone) once at its cheapest (`launcher.launch_options`):
    which reservation of the zone it goes into is the cloud's choice among those its requirements name."""
    two = (
        Offering("us-east-1a", wk.CAPACITY_RESERVED, 2e-8, reservation_id="cr-2", reservation_capacity=1),
        Offering("us-east-1a", wk.CAPACITY_RESERVED, 1e-8, reservation_id="cr-1", reservation_capacity=1),
    )
    base = _type("m5.large", 0.096)
    table = InstanceTable([dataclasses.replace(base, offerings=(*base.offerings, *two))])
    template = NodeClaimTemplate.build(table, name="np", requirements=Requirements(), shape=SHAPE)
    claim = ClaimPlan(
        template="np", pods=(), requirements=Requirements(),
        options=(ChosenOffering("m5.large", "us-east-1a", wk.CAPACITY_RESERVED, 1e-8),), requests=ZERO,
    )
    assert launch_options(claim, template) == [ChosenOffering("m5.large", "us-east-1a", wk.CAPACITY_RESERVED, 1e-8)]
