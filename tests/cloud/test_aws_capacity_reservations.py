"""The capacity reservations an EC2NodeClass's `capacityReservationSelectorTerms` select, asked of EC2 through the AWS
adapter (`cloud/aws/reservations.py`) over HTTP, moto's server behind the fault proxy and its capacity-reservation
stand-in (`tests/cloud/reservations.py`: moto has no DescribeCapacityReservations).

The reservations and cases are Karpenter v1.14.1's: aws pkg/controllers/nodeclass/capacityreservation_test.go (its
BeforeEach at :49, the zones ours) and pkg/providers/capacityreservation/suite_test.go.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.cloud.aws.provider import AwsCloudProvider
from karpenter_policy.cloud.capacityreservations import (
    STATE_ACTIVE,
    STATE_EXPIRING,
    TYPE_CAPACITY_BLOCK,
    TYPE_DEFAULT,
    CapacityReservation,
    queries,
    reservation,
)

from .conftest import AwsEnv
from .reservations import DeclaredReservation

SELF = "012345678901"
ALT = "123456789012"
DISCOVERY = {"karpenter.sh/discovery": "test"}
CAPACITY_BLOCK = {"karpenter.sh/discovery": "capacity-block"}
INTERRUPTIBLE = {"karpenter.sh/discovery": "interruptible"}
START = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


class WallClock:
    """The adapter's wall clock, moved by the test."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> dt.datetime:
        return self.now


def declare_suite(aws: AwsEnv, **changes: dict[str, Any]) -> None:
    """capacityreservation_test.go:49's reservations (test-zone-1a/1b: us-east-1a/1b); `changes` by id."""
    suite = [
        DeclaredReservation("cr-m5.large-1a-1", "m5.large", "us-east-1a", 10, owner=SELF),
        DeclaredReservation("cr-m5.large-1a-2", "m5.large", "us-east-1a", 10, owner=SELF, tags=DISCOVERY),
        DeclaredReservation("cr-p5.48xlarge-1a", "p5.48xlarge", "us-east-1a", 2, owner=ALT, tags=CAPACITY_BLOCK,
                            reservation_type=TYPE_CAPACITY_BLOCK, end_date=START + dt.timedelta(hours=24)),
        DeclaredReservation("cr-m5.large-1b-1", "m5.large", "us-east-1b", 15, owner=SELF),
        DeclaredReservation("cr-m5.large-1b-2", "m5.large", "us-east-1b", 15, owner=ALT, tags=DISCOVERY),
        DeclaredReservation("cr-m5.large-1a-3", "m5.large", "us-east-1a", 5, owner=SELF, match_criteria="open"),
        DeclaredReservation("cr-i-m5.large-1a-1", "m5.large", "us-east-1a", 10, owner=SELF, match_criteria="open",
                            tags=INTERRUPTIBLE, interruptible=True),
        DeclaredReservation("cr-nil-interruptible", "m5.large", "us-east-1a", 5, owner=SELF,
                            fields={"interruptible": None}),
    ]
    for declared in suite:
        for name, value in changes.get(declared.id, {}).items():
            setattr(declared, name, value)
        aws.reservations.declare(declared)


@pytest.fixture()
def wall() -> WallClock:
    return WallClock()


@pytest.fixture()
def provider(aws: AwsEnv, wall: WallClock) -> AwsCloudProvider:
    return aws.provider(wall_clock=wall)


def ids(found: tuple[CapacityReservation, ...] | None) -> list[str]:
    assert found is not None
    return [r.id for r in found]


def listed(provider: AwsCloudProvider, *terms: dict[str, Any]) -> tuple[CapacityReservation, ...] | None:
    return provider.capacity_reservations({"capacityReservationSelectorTerms": list(terms)})


# --- capacityreservation_test.go ---------------------------------------------------------------------------------


def test_nil_interruptible_reads_false(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """capacityreservation_test.go:149 "should handle capacity reservations with nil Interruptible field"."""
    declare_suite(aws)
    found = listed(provider, {"id": "cr-nil-interruptible"})
    assert ids(found) == ["cr-nil-interruptible"]
    assert found is not None and found[0].interruptible is False


def test_by_id(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """capacityreservation_test.go:161 "should resolve capacity reservations by ID": the status entry in full."""
    declare_suite(aws)
    assert listed(provider, {"id": "cr-m5.large-1a-1"}) == (
        CapacityReservation(
            id="cr-m5.large-1a-1", instance_type="m5.large", zone="us-east-1a", owner=SELF, match_criteria="targeted",
            reservation_type=TYPE_DEFAULT, interruptible=False, end_time=None, state=STATE_ACTIVE,
        ),
    )
    (call,) = aws.proxy.calls_to("DescribeCapacityReservations")
    assert call.params["CapacityReservationId.1"] == "cr-m5.large-1a-1"
    assert "MaxResults" not in call.params  # EC2 refuses MaxResults beside ids
    assert (call.params["Filter.1.Name"], call.params["Filter.1.Value.1"]) == ("state", "active")


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        # :182 by tags
        ({"tags": DISCOVERY}, ["cr-m5.large-1a-2", "cr-m5.large-1b-2"]),
        # :195 by tags + owner
        ({"tags": DISCOVERY, "ownerID": SELF}, ["cr-m5.large-1a-2"]),
        # :209 by instance match criteria 'open'
        ({"instanceMatchCriteria": "open"}, ["cr-i-m5.large-1a-1", "cr-m5.large-1a-3"]),
        # :225 by instance match criteria 'targeted'
        ({"instanceMatchCriteria": "targeted"}, ["cr-m5.large-1a-1", "cr-m5.large-1a-2", "cr-m5.large-1b-1",
                                                  "cr-m5.large-1b-2", "cr-nil-interruptible", "cr-p5.48xlarge-1a"]),
        # :241 by instance match criteria with tags
        ({"instanceMatchCriteria": "targeted", "tags": DISCOVERY}, ["cr-m5.large-1a-2", "cr-m5.large-1b-2"]),
        # :258 by instance match criteria with tags and owner
        ({"instanceMatchCriteria": "targeted", "tags": DISCOVERY, "ownerID": SELF}, ["cr-m5.large-1a-2"]),
        # a tag value `*` is the key only (types.go `tag-key`)
        ({"tags": {"karpenter.sh/discovery": "*"}},
         ["cr-i-m5.large-1a-1", "cr-m5.large-1a-2", "cr-m5.large-1b-2", "cr-p5.48xlarge-1a"]),
        # an ownerID alone makes no query (QueriesFromSelectorTerms; admission refuses such a term)
        ({"ownerID": SELF}, []),
    ],
)
def test_terms_select(aws: AwsEnv, provider: AwsCloudProvider, term: dict[str, Any], expected: list[str]) -> None:
    """capacityreservation_test.go:182–271: each term selects what v1.14.1's queries select, sorted by id."""
    declare_suite(aws)
    found = listed(provider, term)
    assert ids(found) == expected
    if "instanceMatchCriteria" in term:
        assert found is not None and {r.match_criteria for r in found} == {term["instanceMatchCriteria"]}


def test_terms_are_ored_and_each_id_once(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """Terms are ORed, a reservation two terms select listed once (provider.go `filterReservations`)."""
    declare_suite(aws)
    assert ids(listed(provider, {"id": "cr-m5.large-1a-2"}, {"tags": DISCOVERY}, {"id": "cr-m5.large-1b-1"})) == [
        "cr-m5.large-1a-2", "cr-m5.large-1b-1", "cr-m5.large-1b-2",
    ]


def test_expired_reservations_are_left_out(aws: AwsEnv, provider: AwsCloudProvider, wall: WallClock) -> None:
    """capacityreservation_test.go:273 "should exclude expired capacity reservations": past its end it is gone, the
    cached answer too (provider.go `filterReservations` runs at every List)."""
    declare_suite(aws, **{"cr-m5.large-1a-1": {"end_date": START + dt.timedelta(hours=1)}})
    assert ids(listed(provider, {"id": "cr-m5.large-1a-1"})) == ["cr-m5.large-1a-1"]
    wall.now += dt.timedelta(hours=2)
    assert listed(provider, {"id": "cr-m5.large-1a-1"}) == ()
    assert len(aws.proxy.calls_to("DescribeCapacityReservations")) == 1  # from the cache


@pytest.mark.parametrize(
    "state",
    ["expired", "cancelled", "pending", "failed", "scheduled", "payment-pending", "payment-failed",
     "assessing", "delayed", "unsupported", "cancelling", "unavailable"],
)
def test_non_active_reservations_are_left_out(aws: AwsEnv, provider: AwsCloudProvider, state: str) -> None:
    """capacityreservation_test.go:296 "should exclude non-active capacity reservations" (every EC2 state but
    active): the query asks for `state: active`."""
    declare_suite(aws, **{"cr-m5.large-1a-1": {"state": state}})
    assert listed(provider, {"id": "cr-m5.large-1a-1"}) == ()


def test_capacity_block(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """capacityreservation_test.go:318 "should discover capacity block reservations"."""
    declare_suite(aws)
    (found,) = listed(provider, {"tags": CAPACITY_BLOCK}) or ()
    assert (found.id, found.reservation_type, found.state) == ("cr-p5.48xlarge-1a", TYPE_CAPACITY_BLOCK, STATE_ACTIVE)
    assert found.end_time == START + dt.timedelta(hours=24)


def test_capacity_block_expiring_40_minutes_before_its_end(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """capacityreservation_test.go:332 "should mark capacity blocks as expiring 40 minutes prior to their endDate"."""
    declare_suite(aws, **{"cr-p5.48xlarge-1a": {"end_date": START + dt.timedelta(minutes=40)}})
    (found,) = listed(provider, {"tags": CAPACITY_BLOCK}) or ()
    assert (found.id, found.state) == ("cr-p5.48xlarge-1a", STATE_EXPIRING)


def test_default_reservations_never_expiring(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """capacityreservation_test.go:354 "shouldn't mark default capacity reservations as expiring 40 minutes prior to
    their endDate"."""
    end = {"end_date": START + dt.timedelta(minutes=40)}
    declare_suite(aws, **{"cr-m5.large-1a-2": end, "cr-m5.large-1b-2": end})
    found = listed(provider, {"tags": DISCOVERY}) or ()
    assert [(r.reservation_type, r.state) for r in found] == [(TYPE_DEFAULT, STATE_ACTIVE)] * 2


def test_interruptible(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """capacityreservation_test.go:386 "should discover interruptible reservations"."""
    declare_suite(aws)
    (found,) = listed(provider, {"tags": INTERRUPTIBLE}) or ()
    assert (found.id, found.interruptible, found.state) == ("cr-i-m5.large-1a-1", True, STATE_ACTIVE)


# --- suite_test.go: the availability cache -----------------------------------------------------------------------


def test_listing_syncs_availability(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """capacityreservation/suite_test.go:99 "should sync availability cache when listing reservations"."""
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1a-1", "m5.large", "us-east-1a", 10, tags=DISCOVERY))
    aws.reservations.declare(DeclaredReservation("cr-m5.large-1a-2", "m5.large", "us-east-1a", 15, tags=DISCOVERY))
    assert ids(listed(provider, {"tags": DISCOVERY})) == ["cr-m5.large-1a-1", "cr-m5.large-1a-2"]
    assert provider.reservations.available("cr-m5.large-1a-1") == 10
    assert provider.reservations.available("cr-m5.large-1a-2") == 15


def test_launched_takes_one(provider: AwsCloudProvider) -> None:
    """capacityreservation/suite_test.go:109 "should decrement availability when reservation is marked as launched"."""
    provider.reservations.set_available("cr-test", 5)
    provider.reservations.mark_launched("cr-test-2")
    assert provider.reservations.available("cr-test") == 5
    provider.reservations.mark_launched("cr-test")
    assert provider.reservations.available("cr-test") == 4


def test_terminated_gives_one_back(provider: AwsCloudProvider) -> None:
    """capacityreservation/suite_test.go:116 "should increment availability when reservation is marked as
    terminated"."""
    provider.reservations.set_available("cr-test", 5)
    provider.reservations.mark_terminated("cr-test-2")
    assert provider.reservations.available("cr-test") == 5
    provider.reservations.mark_terminated("cr-test")
    assert provider.reservations.available("cr-test") == 6


def test_unavailable_until_the_next_sync(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """types.go `MarkUnavailable` (a launch refused for the reservation's capacity): 0 until EC2 answers again;
    never below 0, never synced: 0."""
    aws.reservations.declare(DeclaredReservation("cr-a", "m5.large", "us-east-1a", 3))
    listed(provider, {"id": "cr-a"})
    provider.reservations.mark_unavailable("cr-a", "cr-unknown")
    assert provider.reservations.available("cr-a") == 0
    provider.reservations.mark_launched("cr-a")
    assert provider.reservations.available("cr-a") == 0
    assert provider.reservations.available("cr-unknown") == 0
    aws.clock.advance(61)
    listed(provider, {"id": "cr-a"})
    assert provider.reservations.available("cr-a") == 3


def test_availability_kept_a_day(aws: AwsEnv, provider: AwsCloudProvider, wall: WallClock) -> None:
    """cache.go `CapacityReservationAvailabilityTTL`: a synced count is forgotten after 24 hours (then 0)."""
    provider.reservations.set_available("cr-a", 4)
    wall.now += dt.timedelta(hours=23, minutes=59)
    assert provider.reservations.available("cr-a") == 4
    wall.now += dt.timedelta(minutes=1)
    assert provider.reservations.available("cr-a") == 0


# --- caching, pagination, unknown answers ----------------------------------------------------------------------


def test_each_query_cached_a_minute(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """provider.go: each query's answer is kept `DefaultTTL` (a minute) on its own; a new term asks only its query."""
    declare_suite(aws)
    listed(provider, {"tags": DISCOVERY})
    listed(provider, {"tags": DISCOVERY}, {"id": "cr-m5.large-1a-1"})
    assert len(aws.proxy.calls_to("DescribeCapacityReservations")) == 2
    aws.clock.advance(59)
    listed(provider, {"tags": DISCOVERY}, {"id": "cr-m5.large-1a-1"})
    assert len(aws.proxy.calls_to("DescribeCapacityReservations")) == 2
    aws.clock.advance(2)
    listed(provider, {"tags": DISCOVERY}, {"id": "cr-m5.large-1a-1"})
    assert len(aws.proxy.calls_to("DescribeCapacityReservations")) == 4


def test_pages_are_followed(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """A query's every page is read (`NewDescribeCapacityReservationsPaginator`)."""
    aws.reservations.page_size = 2
    for index in range(5):
        aws.reservations.declare(DeclaredReservation(f"cr-{index}", "m5.large", "us-east-1a", 1, tags=DISCOVERY))
    assert ids(listed(provider, {"tags": DISCOVERY})) == [f"cr-{index}" for index in range(5)]
    calls = aws.proxy.calls_to("DescribeCapacityReservations")
    assert len(calls) == 3 and calls[0].params["MaxResults"] == "1000"


def test_an_unknown_id_selects_nothing(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """provider.go: EC2's NotFound for an id ends that query with nothing; the other terms still answer."""
    declare_suite(aws)
    assert ids(listed(provider, {"id": "cr-0000000000000000"}, {"id": "cr-m5.large-1a-1"})) == ["cr-m5.large-1a-1"]


@pytest.mark.parametrize("code", ["InternalError", "UnauthorizedOperation"])
def test_a_failed_answer_is_unknown_not_none(aws: AwsEnv, provider: AwsCloudProvider, code: str) -> None:
    """EC2 failing (after botocore's retries) or refusing makes the reservations unknown (None), never "none" — and
    nothing is cached: the next call asks again."""
    declare_suite(aws)
    server_error = code == "InternalError"  # retried by botocore (3 attempts here); a refusal is not
    aws.proxy.fail("DescribeCapacityReservations", times=3 if server_error else 1, status=500 if server_error else 403,
                   code=code)
    assert listed(provider, {"tags": DISCOVERY}) is None
    assert ids(listed(provider, {"tags": DISCOVERY})) == ["cr-m5.large-1a-2", "cr-m5.large-1b-2"]


# --- hostile shapes ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"capacityReservationId": None}, "no id"),
        ({"availabilityZone": None}, "no zone"),
        ({"instanceType": None}, "no type"),
        ({"ownerId": None}, "no owner"),
        ({"instanceMatchCriteria": "sometimes"}, "criteria v1.14.1 does not know"),
        ({"reservationType": "spot-block"}, "a type v1.14.1 does not know"),
    ],
)
def test_unreadable_reservations_are_left_out(
    aws: AwsEnv, provider: AwsCloudProvider, fields: dict[str, str | None], why: str
) -> None:
    """A reservation v1.14.1's `CapacityReservationFromEC2` cannot read (or would dereference a nil of) is left out;
    the others stay."""
    aws.reservations.declare(DeclaredReservation("cr-bad", "m5.large", "us-east-1a", 3, tags=DISCOVERY, fields=fields))
    aws.reservations.declare(DeclaredReservation("cr-good", "m5.large", "us-east-1a", 3, tags=DISCOVERY))
    assert ids(listed(provider, {"tags": DISCOVERY})) == ["cr-good"], why


@pytest.mark.parametrize("count", ["-3", None, "9" * 40])
def test_a_count_not_known_is_no_room(aws: AwsEnv, provider: AwsCloudProvider, count: str | None) -> None:
    """A negative or missing AvailableInstanceCount, or one past EC2's 32-bit counts, is 0 (nothing launched into a
    room not known)."""
    aws.reservations.declare(
        DeclaredReservation("cr-a", "m5.large", "us-east-1a", 3, fields={"availableInstanceCount": count})
    )
    assert ids(listed(provider, {"id": "cr-a"})) == ["cr-a"]
    assert provider.reservations.available("cr-a") == 0


def test_a_count_that_is_no_number_is_unknown(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """An answer botocore cannot parse (a count `many`) makes the reservations unknown, not a traceback."""
    aws.reservations.declare(
        DeclaredReservation("cr-a", "m5.large", "us-east-1a", 3, fields={"availableInstanceCount": "many"})
    )
    assert listed(provider, {"id": "cr-a"}) is None


_VALUES = st.one_of(st.none(), st.text(max_size=8), st.integers(-5, 5), st.booleans(),
                    st.sampled_from(["open", "targeted", "default", "capacity-block", "us-east-1a"]))


@given(
    raw=st.one_of(_VALUES, st.dictionaries(st.sampled_from([
        "CapacityReservationId", "InstanceType", "AvailabilityZone", "OwnerId", "InstanceMatchCriteria",
        "ReservationType", "Interruptible", "EndDate", "AvailableInstanceCount"]), _VALUES)),
    terms=st.one_of(_VALUES, st.lists(st.one_of(_VALUES, st.dictionaries(
        st.sampled_from(["id", "ownerID", "tags", "instanceMatchCriteria"]),
        st.one_of(_VALUES, st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)))), max_size=3)),
)
def test_any_shape_reads_or_is_left_out(raw: Any, terms: Any) -> None:
    """Whatever EC2 (or a hand-edited spec) says, the reading never raises: a reservation or why it is left out,
    queries or none; a reservation read has every field v1.14.1's status requires."""
    read = reservation(raw, START)
    assert isinstance(read, (str, CapacityReservation))
    if isinstance(read, CapacityReservation):
        assert read.id and read.zone and read.instance_type and read.owner
        assert read.match_criteria in ("open", "targeted")
    for query in queries(terms):
        assert query.arguments()["Filters"][0] == {"Name": "state", "Values": ["active"]}


# --- reserved offerings (offering/reserved_capacity_resolver.go) -------------------------------------------------


@pytest.mark.parametrize("end", [dt.timedelta(hours=24), dt.timedelta(minutes=40)], ids=["active", "expiring"])
def test_a_capacity_block_offering(aws: AwsEnv, provider: AwsCloudProvider, end: dt.timedelta) -> None:
    """instancetype/suite_test.go:3023 "should create an offering for a capacity block" (active, expiring): one
    reserved offering of the type, in the reservation's zone, with its id and type, available unless expiring, its
    room the reservation's; priced at the on-demand price / 10,000,000."""
    aws.prices["c6g.large"] = 0.068
    aws.reservations.declare(DeclaredReservation(
        "cr-123", "c6g.large", "us-east-1a", 1, reservation_type=TYPE_CAPACITY_BLOCK, end_date=START + end,
    ))
    offerings = provider.reserved_offerings(
        {**aws.spec(), "capacityReservationSelectorTerms": [{"id": "cr-123"}]}
    )
    assert offerings is not None
    (offering,) = offerings["c6g.large"]
    assert offering.labels() == {
        "karpenter.sh/capacity-type": "reserved",
        "topology.kubernetes.io/zone": "us-east-1a",
        "karpenter.k8s.aws/capacity-reservation-id": "cr-123",
        "karpenter.k8s.aws/capacity-reservation-type": "capacity-block",
        "karpenter.k8s.aws/capacity-reservation-interruptible": "false",
    }
    assert offering.available is (end > dt.timedelta(minutes=40))
    assert offering.capacity == 1
    assert offering.price == pytest.approx(0.068 / 10_000_000)


def test_reserved_offering_availability(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """reserved_capacity_resolver.go: available only with room (`ReservationCapacity != 0`) and in a zone the type is
    offered in for the class's subnets; one offering per reservation; none for a type the catalog lacks."""
    aws.reservations.declare(DeclaredReservation("cr-room", "m5.large", "us-east-1a", 2))
    aws.reservations.declare(DeclaredReservation("cr-full", "m5.large", "us-east-1b", 1,
                                                 fields={"availableInstanceCount": "0"}))
    aws.reservations.declare(DeclaredReservation("cr-elsewhere", "m5.large", "us-east-1d", 3))
    aws.reservations.declare(DeclaredReservation("cr-unknown-type", "p5.48xlarge", "us-east-1a", 3))
    spec = {**aws.spec(), "capacityReservationSelectorTerms": [{"instanceMatchCriteria": "targeted"}]}
    offerings = provider.reserved_offerings(spec)
    assert offerings is not None and sorted(offerings) == ["m5.large"]
    assert [(o.reservation_id, o.available, o.capacity) for o in offerings["m5.large"]] == [
        ("cr-elsewhere", False, 3), ("cr-full", False, 0), ("cr-room", True, 2),
    ]
    provider.reservations.mark_launched("cr-room")
    provider.reservations.mark_launched("cr-room")
    offerings = provider.reserved_offerings(spec)
    assert offerings is not None
    assert [(o.reservation_id, o.available) for o in offerings["m5.large"]][-1] == ("cr-room", False)


def test_reserved_offerings_gate_off_and_unknown(aws: AwsEnv, provider: AwsCloudProvider) -> None:
    """With the ReservedCapacity gate off there are none (the resolver returns the offerings as they are); with the
    reservations unknown, they are unknown (None), never none."""
    aws.reservations.declare(DeclaredReservation("cr-room", "m5.large", "us-east-1a", 2))
    spec = {**aws.spec(), "capacityReservationSelectorTerms": [{"id": "cr-room"}]}
    assert provider.reserved_offerings(spec, enabled=False) == {}
    aws.proxy.fail("DescribeCapacityReservations", times=3)
    assert provider.reserved_offerings(spec) is None
    assert provider.reserved_offerings({**aws.spec()}) == {}  # no terms: no reservation
