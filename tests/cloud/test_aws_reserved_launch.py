"""A launch into a capacity reservation through the AWS adapter, over moto's server and the capacity-reservation
stand-in (which counts an instance against the reservation its launch template targets, and refuses a fleet into a
full one): the launch template and CreateFleet request as Karpenter v1.14.1 makes them (aws
pkg/providers/launchtemplate/types.go:153-180, pkg/providers/instance/types.go:205-245), which reservation a launch
takes (pkg/providers/instance/filter/filter.go), the instance's reserved details, and the fall-back when the
reservation is full (pkg/providers/instance/instance.go `updateUnavailableOfferingsCache`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from karpenter_policy.cloud.aws.provider import AwsCloudProvider
from karpenter_policy.cloud.capacityreservations import (
    TYPE_CAPACITY_BLOCK,
    TYPE_DEFAULT,
    ReservedOffering,
    launch_choices,
)
from karpenter_policy.cloud.errors import InsufficientCapacity, Throttled
from karpenter_policy.model.requirements import Requirement, Requirements

from .conftest import AwsEnv
from .reservations import DeclaredReservation
from .support import launch_template, offer, request

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
ZONE = "us-east-1a"


@pytest.fixture()
def provider(aws: AwsEnv) -> AwsCloudProvider:
    return aws.provider(wall_clock=lambda: NOW)


def spec(aws: AwsEnv, *terms: dict[str, Any]) -> dict[str, Any]:
    return {**aws.spec(), "capacityReservationSelectorTerms": list(terms) or [{"instanceMatchCriteria": "targeted"}]}


def reserved_then_on_demand(instance_type: str = "m5.large") -> list[Any]:
    return [offer(instance_type, ZONE, "reserved", 0.0), offer(instance_type, ZONE, "on-demand", 0.096)]


def fleet_params(aws: AwsEnv) -> dict[str, str]:
    return aws.proxy.calls_to("CreateFleet")[-1].params


def fleet_template(aws: AwsEnv) -> dict[str, Any]:
    name = fleet_params(aws)["LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName"]
    return launch_template(aws.ec2, name)


def test_a_reserved_launch_targets_the_reservation(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """A default (on-demand capacity) reservation: the template targets it (`capacity-reservations-only`), CreateFleet
    asks for on-demand with the on-demand options; the instance is `reserved` with the reservation's id, EC2 counts
    it against the reservation, and the adapter's availability takes one (cloudprovider suite_test.go:1566 "should
    mark capacity reservations as launched")."""
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", ZONE, 2))
    instance = provider.create(request(spec(aws), reserved_then_on_demand()))
    assert (instance.capacity_type, instance.reservation_id, instance.reservation_type) == ("reserved", "cr-a",
                                                                                           TYPE_DEFAULT)
    assert instance.reservation_interruptible is False
    params = fleet_params(aws)
    assert params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "on-demand"
    assert params["OnDemandOptions.AllocationStrategy"] == "lowest-price"
    data = fleet_template(aws)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-a"},
    }
    assert "InstanceMarketOptions" not in data
    assert aws.reservations.launched_into("cr-a") == [instance.id]
    assert provider.reservations.available("cr-a") == 1


def test_a_capacity_block_launch(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """A capacity block: CreateFleet's `capacity-block` with no on-demand options, the template's market type
    `capacity-block`."""
    aws.reservations.declare(DeclaredReservation("cr-block", "m5.large", ZONE, 1, reservation_type=TYPE_CAPACITY_BLOCK,
                                                 end_date=NOW + dt.timedelta(days=1)))
    instance = provider.create(request(spec(aws), reserved_then_on_demand()))
    assert (instance.capacity_type, instance.reservation_type) == ("reserved", TYPE_CAPACITY_BLOCK)
    params = fleet_params(aws)
    assert params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "capacity-block"
    assert not any(key.startswith("OnDemandOptions") for key in params)
    assert fleet_template(aws)["InstanceMarketOptions"] == {"MarketType": "capacity-block"}


def test_an_interruptible_reservation_launch(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """An interruptible reservation: `reserved-capacity` with ReservedCapacityOptions, the template's market type
    `interruptible-capacity-reservation`."""
    aws.reservations.declare(DeclaredReservation("cr-i", "m5.large", ZONE, 1, interruptible=True))
    instance = provider.create(request(spec(aws), reserved_then_on_demand()))
    assert (instance.reservation_id, instance.reservation_interruptible) == ("cr-i", True)
    params = fleet_params(aws)
    assert params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "reserved-capacity"
    assert params["ReservedCapacityOptions.ReservationType.1"] == "interruptible-capacity-reservation"
    assert fleet_template(aws)["InstanceMarketOptions"] == {"MarketType": "interruptible-capacity-reservation"}


def test_a_full_reservation_falls_back_to_on_demand(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """The reservation filled since it was listed: EC2 refuses the fleet (`ReservationCapacityExceeded`), the
    reservation has no room until EC2 says otherwise (instance.go `MarkUnavailable`; the offering cache untouched),
    and the same launch goes on with the next capacity type."""
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", ZONE, 1))
    assert provider.reserved_offerings(spec(aws)) is not None  # listed: room 1
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", ZONE, 0))  # taken by someone else since
    instance = provider.create(request(spec(aws), reserved_then_on_demand()))
    assert (instance.capacity_type, instance.reservation_id) == ("on-demand", "")
    failed = [(f.capacity_type, f.code) for f in instance.failed_offerings]
    assert failed == [("reserved", "ReservationCapacityExceeded")]
    assert provider.reservations.available("cr-a") == 0
    assert ("m5.large", ZONE, "reserved") not in provider.unavailable.active()
    assert "CapacityReservationSpecification" not in fleet_template(aws)


def test_only_reserved_and_full_is_insufficient_capacity(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """instance/suite_test.go:308 "should return an ICE error when all attempted instance types return a
    ReservedCapacityReservation error": the adapter believes the reservation has room, EC2 has none; a node that may
    only run reserved gets InsufficientCapacity, no instance, and the reservation is marked without room."""
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1a-1", "m5.large", ZONE, 1))
    provider.reserved_offerings(spec(aws))
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1a-1", "m5.large", ZONE, 0))
    assert provider.reservations.available("cr-m5.large-1a-1") == 1
    with pytest.raises(InsufficientCapacity):
        provider.create(request(spec(aws), [offer("m5.large", ZONE, "reserved", 0.0)]))
    assert aws.instances() == []
    assert provider.reservations.available("cr-m5.large-1a-1") == 0


def test_throttled_fleet_leaves_the_reservation(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """instance/suite_test.go:354 "should not mark capacity reservations unavailable for RequestLimitExceeded
    CreateFleet errors": the launch fails throttled, the reservation keeps its room."""
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1a-1", "m5.large", ZONE, 1))
    aws.proxy.throttle("CreateFleet", times=None)
    with pytest.raises(Throttled):
        provider.create(request(spec(aws), [offer("m5.large", ZONE, "reserved", 0.0)]))
    assert provider.reservations.available("cr-m5.large-1a-1") == 1


def test_a_launch_template_per_reservation(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """launchtemplate/suite_test.go:2780 "should generate a unique launch template per capacity reservation": a
    reserved-only launch over four reservations makes three templates, one per zone's reservation with the most
    room (1a's smaller one left out), each targeting its reservation — and none without a target."""
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1a-1", "m5.large", "us-east-1a", 10))
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1a-2", "m5.large", "us-east-1a", 15))
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1b-1", "m5.large", "us-east-1b", 10))
    aws.reservations.declare(DeclaredReservation("cr-m5.xlarge-1b-1", "m5.xlarge", "us-east-1b", 15))
    options = [offer("m5.large", "us-east-1a", "reserved", 0.0), offer("m5.large", "us-east-1b", "reserved", 0.0),
               offer("m5.xlarge", "us-east-1b", "reserved", 0.0)]
    provider.create(request(spec(aws), options))
    created = [c.params["LaunchTemplateName"] for c in aws.proxy.calls_to("CreateLaunchTemplate")]
    assert len(created) == 3
    targets = sorted(
        launch_template(aws.ec2, name)["CapacityReservationSpecification"]["CapacityReservationTarget"][
            "CapacityReservationId"]
        for name in created
    )
    assert targets == ["cr-m5.large-1a-2", "cr-m5.large-1b-1", "cr-m5.xlarge-1b-1"]


def test_reservations_unknown_launch_no_reserved_option(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """DescribeCapacityReservations failing: the reserved options are dropped (never a launch into nothing), the
    others launch."""
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", ZONE, 2))
    aws.proxy.fail("DescribeCapacityReservations", times=3)
    instance = provider.create(request(spec(aws), reserved_then_on_demand()))
    assert (instance.capacity_type, instance.reservation_id) == ("on-demand", "")
    assert "CapacityReservationSpecification" not in fleet_template(aws)
    assert aws.reservations.launched_into("cr-a") == []


def test_the_reservation_with_most_room_unless_required(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """Two reservations of the type in the zone: the one with more room (filter.go `ReservedOfferingFilter`); a node
    whose requirements name a reservation id goes into that one."""
    aws.reservations.declare(DeclaredReservation("cr-small", "m5.large", ZONE, 1))
    aws.reservations.declare(DeclaredReservation("cr-big", "m5.large", ZONE, 5))
    first = provider.create(request(spec(aws), reserved_then_on_demand(), token="claim-a"))
    assert first.reservation_id == "cr-big"
    pinned = Requirements([Requirement.new("karpenter.k8s.aws/capacity-reservation-id", "In", ["cr-small"])])
    second = provider.create(request(spec(aws), reserved_then_on_demand(), token="claim-b", requirements=pinned))
    assert second.reservation_id == "cr-small"
    assert aws.reservations.launched_into("cr-small") == [second.id]


def _offering(rid: str, kind: str = TYPE_DEFAULT, price: float = 1e-8, capacity: int = 1,
              interruptible: bool = False, instance_type: str = "m5.large", zone: str = ZONE) -> ReservedOffering:
    return ReservedOffering(instance_type, zone, rid, kind, interruptible, price, True, capacity)


def test_one_kind_of_reservation_per_fleet() -> None:
    """filter.go `CapacityReservationTypeFilter`: the kind of the cheapest offering; at the same price default, then
    capacity block, then interruptible; `CapacityBlockFilter`: a capacity block alone, the cheapest."""
    options = [("m5.large", ZONE), ("c5.large", ZONE)]
    mixed = [_offering("cr-d", price=2e-8), _offering("cr-b", TYPE_CAPACITY_BLOCK, 1e-8, instance_type="c5.large")]
    assert sorted(o.reservation_id for o in launch_choices(options, mixed).values()) == ["cr-b"]
    tie = [_offering("cr-i", interruptible=True), _offering("cr-b", TYPE_CAPACITY_BLOCK, instance_type="c5.large"),
           _offering("cr-d", instance_type="c5.large")]
    assert sorted(o.reservation_id for o in launch_choices(options, tie).values()) == ["cr-d"]
    blocks = [_offering("cr-b1", TYPE_CAPACITY_BLOCK, 3e-8), _offering("cr-b2", TYPE_CAPACITY_BLOCK, 2e-8,
                                                                         instance_type="c5.large")]
    assert list(launch_choices(options, blocks)) == [("c5.large", ZONE)]
    unavailable = [ReservedOffering("m5.large", ZONE, "cr-x", TYPE_DEFAULT, False, 0.0, False, 0)]
    assert launch_choices(options, unavailable) == {}


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (DeclaredReservation("cr-a", "m5.large", ZONE, 2), (TYPE_DEFAULT, False)),
        (DeclaredReservation("cr-a", "m5.large", ZONE, 2, reservation_type=TYPE_CAPACITY_BLOCK,
                             end_date=NOW + dt.timedelta(days=1)), (TYPE_CAPACITY_BLOCK, False)),
        (DeclaredReservation("cr-a", "m5.large", ZONE, 2, interruptible=True), (TYPE_DEFAULT, True)),
    ],
    ids=["default", "capacity-block", "interruptible"],
)
def test_described_reserved_instances(
    aws: AwsEnv, provider: AwsCloudProvider, declared: DeclaredReservation, expected: tuple[str, bool]
) -> None:
    """instance/types.go:111-121 `capacityTypeFromInstance` / `NewInstance`: an instance EC2 describes with a
    `CapacityReservationId` launched `capacity-reservations-only` is `reserved`, its type and interruptibility from
    its lifecycle — what `get`, `list` and a launch's idempotent retry (the client token's instance) say."""
    aws.reservations.declare(declared)
    launched = provider.create(request(spec(aws), reserved_then_on_demand()))
    for found in (provider.get(launched.id), provider.create(request(spec(aws), reserved_then_on_demand()))):
        assert found is not None and found.id == launched.id
        assert (found.capacity_type, found.reservation_id) == ("reserved", "cr-a")
        assert (found.reservation_type, found.reservation_interruptible) == expected
    plain = provider.create(request(aws.spec(), [offer("m5.large", ZONE, "on-demand", 0.096)], token="claim-plain"))
    assert (provider.get(plain.id) or plain).capacity_type == "on-demand"


def test_terminating_gives_the_room_back(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """cloudprovider/suite_test.go:1575 "should mark capacity reservations as terminated": deleting an instance
    launched into a reservation gives the reservation one back (before EC2's next answer says so)."""
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", ZONE, 2))
    instance = provider.create(request(spec(aws), reserved_then_on_demand()))
    assert provider.reservations.available("cr-a") == 1
    provider.delete(instance.id)
    assert provider.reservations.available("cr-a") == 2
    provider.delete(instance.id)  # once only
    assert provider.reservations.available("cr-a") == 2
