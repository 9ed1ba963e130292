"""The count of capacity reservations within one pass, ported from Karpenter v1.14.1's
pkg/controllers/provisioning/scheduling/reservationmanager_test.go (each test names its `It`'s line), plus a property:
no sequence of reserves and releases takes a reservation beyond its room or loses any of it; and which reserved
offerings a claim reserves (nodeclaim.go `offeringsToReserve`, each test naming its lines)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.cloud.capacityreservations import ReservedOffering
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.scheduling.reservations import (
    ReservationError,
    ReservationManager,
    ReservedOfferingError,
    offerings_to_reserve,
)


def _offering(reservation_id: str, capacity: int, zone: str = "test-zone-1") -> ReservedOffering:
    return ReservedOffering(
        instance_type="m5.large", zone=zone, reservation_id=reservation_id, reservation_type="default",
        interruptible=False, price=0.0, available=True, capacity=capacity,
    )


THREE = _offering("small-reserved", 3, "test-zone-1")
TWO = _offering("medium-reserved", 2, "test-zone-2")
ONE = _offering("large-reserved", 1, "test-zone-3")
UNKNOWN = _offering("i-dont-exist", 1)


@pytest.fixture
def rm() -> ReservationManager:
    return ReservationManager([THREE, TWO, ONE])


def test_can_reserve_with_room(rm: ReservationManager) -> None:
    """reservationmanager_test.go:109 should return true when capacity is available."""
    assert rm.can_reserve("hostname-1", ONE)


def test_can_reserve_what_the_node_holds(rm: ReservationManager) -> None:
    """reservationmanager_test.go:114 should return true when hostname already has the reservation."""
    rm.reserve("hostname-1", ONE)
    assert rm.can_reserve("hostname-1", ONE)


def test_cannot_reserve_when_exhausted(rm: ReservationManager) -> None:
    """reservationmanager_test.go:124 should return false when capacity is exhausted."""
    for i in range(ONE.capacity):
        rm.reserve(f"hostname-{i}", ONE)
    assert not rm.can_reserve("hostname-new", ONE)


def test_holder_can_reserve_when_exhausted(rm: ReservationManager) -> None:
    """reservationmanager_test.go:134 should return true for existing hostname even when capacity is exhausted."""
    rm.reserve("hostname-1", ONE)
    assert rm.remaining_capacity(ONE) == 0
    assert rm.can_reserve("hostname-1", ONE)


def test_can_reserve_unknown_reservation_raises(rm: ReservationManager) -> None:
    """reservationmanager_test.go:144 should panic with non-existent reservation ID (here: an error naming it)."""
    with pytest.raises(ReservationError, match="i-dont-exist"):
        rm.can_reserve("hostname-1", UNKNOWN)


def test_reserve(rm: ReservationManager) -> None:
    """reservationmanager_test.go:162 should successfully reserve capacity."""
    rm.reserve("hostname-1", THREE)
    assert rm.has_reservation("hostname-1", THREE)
    assert not rm.has_reservation("hostname-2", THREE)


def test_no_double_reserve(rm: ReservationManager) -> None:
    """reservationmanager_test.go:168 should not double-reserve for the same hostname and reservation."""
    rm.reserve("hostname-1", TWO)
    rm.reserve("hostname-1", TWO)
    assert rm.can_reserve("hostname-2", TWO)
    assert rm.remaining_capacity(TWO) == 1


def test_reserve_decrements(rm: ReservationManager) -> None:
    """reservationmanager_test.go:178 should decrement available capacity."""
    for host in ("hostname-1", "hostname-2", "hostname-3"):
        rm.reserve(host, THREE)
    assert not rm.can_reserve("hostname-4", THREE)


def test_reserve_several_at_once(rm: ReservationManager) -> None:
    """reservationmanager_test.go:191 should handle multiple offerings in a single call."""
    rm.reserve("hostname-1", THREE, TWO)
    assert rm.has_reservation("hostname-1", THREE)
    assert rm.has_reservation("hostname-1", TWO)


def test_reserve_mixed_new_and_held(rm: ReservationManager) -> None:
    """reservationmanager_test.go:199 should handle mixed new and existing reservations."""
    rm.reserve("hostname-1", TWO)
    rm.reserve("hostname-1", TWO, ONE)
    assert rm.has_reservation("hostname-1", TWO)
    assert rm.has_reservation("hostname-1", ONE)
    assert rm.can_reserve("hostname-2", TWO)
    assert rm.remaining_capacity(TWO) == 1


def test_over_reserve_raises(rm: ReservationManager) -> None:
    """reservationmanager_test.go:216 should panic when trying to over-reserve (here: an error naming it)."""
    for i in range(THREE.capacity):
        rm.reserve(f"hostname-{i}", THREE)
    with pytest.raises(ReservationError, match="small-reserved"):
        rm.reserve("hostname-new", THREE)
    assert rm.remaining_capacity(THREE) == 0


def test_reserve_unknown_reservation_raises(rm: ReservationManager) -> None:
    """reservationmanager_test.go:228 should panic with non-existent reservation ID (here: an error naming it)."""
    with pytest.raises(ReservationError, match="i-dont-exist"):
        rm.reserve("hostname-1", UNKNOWN)


def test_release(rm: ReservationManager) -> None:
    """reservationmanager_test.go:246 should release a single reservation."""
    rm.reserve("hostname-1", THREE)
    rm.release("hostname-1", THREE)
    assert not rm.has_reservation("hostname-1", THREE)
    assert rm.remaining_capacity(THREE) == 3


def test_release_not_held(rm: ReservationManager) -> None:
    """reservationmanager_test.go:256 should handle releasing non-existent reservations gracefully (and give nothing
    back)."""
    rm.release("hostname-1", THREE)
    assert rm.remaining_capacity(THREE) == 3


def test_release_other_host(rm: ReservationManager) -> None:
    """reservationmanager_test.go:263 should handle releasing from non-existent hostname gracefully."""
    rm.reserve("hostname-1", THREE)
    rm.release("hostname-2", THREE)
    assert rm.has_reservation("hostname-1", THREE)
    assert rm.remaining_capacity(THREE) == 2


def test_release_several_at_once(rm: ReservationManager) -> None:
    """reservationmanager_test.go:273 should handle multiple offerings in a single call."""
    rm.reserve("hostname-1", THREE, TWO)
    rm.release("hostname-1", THREE, TWO)
    assert not rm.has_reservation("hostname-1", THREE)
    assert not rm.has_reservation("hostname-1", TWO)


def test_partial_release(rm: ReservationManager) -> None:
    """reservationmanager_test.go:285 should handle partial releases."""
    rm.reserve("hostname-1", THREE, TWO)
    rm.release("hostname-1", THREE)
    assert not rm.has_reservation("hostname-1", THREE)
    assert rm.has_reservation("hostname-1", TWO)


def test_release_restores_room(rm: ReservationManager) -> None:
    """reservationmanager_test.go:299 should restore capacity when releasing reservations."""
    for host in ("hostname-1", "hostname-2", "hostname-3"):
        rm.reserve(host, THREE)
    assert rm.remaining_capacity(THREE) == 0
    rm.release("hostname-1", THREE)
    assert rm.remaining_capacity(THREE) == 1


def test_reserve_release_cycles(rm: ReservationManager) -> None:
    """reservationmanager_test.go:315 should correctly track capacity after multiple reserve/release cycles."""
    rm.reserve("hostname-1", THREE)
    rm.release("hostname-1", THREE)
    rm.reserve("hostname-2", THREE)
    assert rm.remaining_capacity(THREE) == 2


def test_complex_patterns(rm: ReservationManager) -> None:
    """reservationmanager_test.go:328 should handle complex reservation patterns."""
    rm.reserve("host-1", TWO, THREE)
    rm.reserve("host-2", TWO, ONE)
    rm.reserve("host-3", THREE)
    held = [("host-1", THREE), ("host-1", TWO), ("host-2", TWO), ("host-2", ONE), ("host-3", THREE)]
    assert all(rm.has_reservation(host, o) for host, o in held)
    assert (rm.remaining_capacity(TWO), rm.remaining_capacity(THREE), rm.remaining_capacity(ONE)) == (0, 1, 0)


def test_mixed_operations(rm: ReservationManager) -> None:
    """reservationmanager_test.go:347 should maintain consistency during mixed operations (Karpenter's test asks the
    medium reservation's room three times; here each reservation's own)."""
    rm.reserve("host-1", TWO, THREE)
    rm.reserve("host-2", THREE, ONE)
    rm.release("host-1", TWO)
    rm.reserve("host-3", TWO)
    rm.release("host-2", ONE)
    assert not rm.has_reservation("host-1", TWO)
    assert rm.has_reservation("host-1", THREE)
    assert rm.has_reservation("host-2", THREE)
    assert not rm.has_reservation("host-2", ONE)
    assert rm.has_reservation("host-3", TWO)
    assert (rm.remaining_capacity(TWO), rm.remaining_capacity(THREE), rm.remaining_capacity(ONE)) == (1, 1, 1)


def test_least_room_of_a_reservation_read_twice() -> None:
    """reservationmanager.go NewReservationManager: a reservation two offerings report (two NodePools reading it at
    different moments) has the least room either reports, whichever comes first."""
    for order in ([_offering("r", 3), _offering("r", 1, zone="z")], [_offering("r", 1, zone="z"), _offering("r", 3)]):
        rm = ReservationManager(order)
        rm.reserve("a", order[0])
        assert not rm.can_reserve("b", order[1])


_OPS = st.lists(
    st.tuples(st.booleans(), st.sampled_from(["h1", "h2", "h3", "h4"]), st.sampled_from([THREE, TWO, ONE])),
    max_size=40,
)


@given(_OPS)
def test_never_over_committed(ops: list[tuple[bool, str, ReservedOffering]]) -> None:
    """Any sequence of reserves (when allowed) and releases: each reservation's room left plus the nodes holding it
    is its room at the start, never below 0, and a node may reserve again what it holds."""
    rm = ReservationManager([THREE, TWO, ONE])
    holders: dict[str, set[str]] = {o.reservation_id: set() for o in (THREE, TWO, ONE)}
    for take, host, offering in ops:
        if take:
            if rm.can_reserve(host, offering):
                rm.reserve(host, offering)
                holders[offering.reservation_id].add(host)
            else:
                with pytest.raises(ReservationError):
                    rm.reserve(host, offering)
        else:
            rm.release(host, offering)
            holders[offering.reservation_id].discard(host)
        for o in (THREE, TWO, ONE):
            assert rm.remaining_capacity(o) >= 0
            assert rm.remaining_capacity(o) + len(holders[o.reservation_id]) == o.capacity
            assert all(rm.has_reservation(h, o) and rm.can_reserve(h, o) for h in holders[o.reservation_id])


# offerings_to_reserve: core v1.14.1 pkg/controllers/provisioning/scheduling/nodeclaim.go:303 `offeringsToReserve`.


def _requirements(**values: list[str]) -> Requirements:
    keys = {"zone": wk.ZONE, "capacity": wk.CAPACITY_TYPE, "reservation": wk.CAPACITY_RESERVATION_ID}
    return Requirements(Requirement.new(keys[key], "In", found) for key, found in values.items())


def test_a_claim_reserves_every_compatible_offering_with_room() -> None:
    """nodeclaim.go:314–331: every available reserved offering the claim's requirements admit is reserved,
    pessimistically (here three, in three zones), in the order given; an unconstrained claim admits them all."""
    rm = ReservationManager([THREE, TWO, ONE])
    assert offerings_to_reserve(rm, "h", [THREE, TWO, ONE], Requirements()) == [THREE, TWO, ONE]


def test_requirements_narrow_the_reservations() -> None:
    """nodeclaim.go:321: an offering whose zone, capacity type or reservation id the claim excludes is not reserved;
    a claim that allows only on-demand reserves none (and is not refused, even in the strict mode)."""
    rm = ReservationManager([THREE, TWO, ONE])
    assert offerings_to_reserve(rm, "h", [THREE, TWO, ONE], _requirements(zone=["test-zone-2"])) == [TWO]
    assert offerings_to_reserve(rm, "h", [THREE, TWO, ONE], _requirements(reservation=["large-reserved"])) == [ONE]
    on_demand = _requirements(capacity=[wk.CAPACITY_ON_DEMAND])
    assert offerings_to_reserve(rm, "h", [THREE, TWO, ONE], on_demand, strict=True) == []


def test_an_unavailable_offering_is_not_reserved() -> None:
    """nodeclaim.go:316: an unavailable reserved offering (no room at the cloud, or expiring) is skipped."""
    gone = dataclasses.replace(TWO, available=False)
    rm = ReservationManager([THREE, gone])
    assert offerings_to_reserve(rm, "h", [THREE, gone], Requirements()) == [THREE]


def test_a_full_reservation_falls_back_or_refuses_in_strict_mode() -> None:
    """nodeclaim.go:328 and :340: a reservation others have filled is not reserved; the claim falls back (on-demand
    or spot) by default, and in the strict mode it is refused with v1.14.1's words, while the holder keeps it."""
    rm = ReservationManager([ONE])
    assert offerings_to_reserve(rm, "h1", [ONE], Requirements()) == [ONE]
    rm.reserve("h1", ONE)
    assert offerings_to_reserve(rm, "h2", [ONE], Requirements()) == []
    with pytest.raises(ReservedOfferingError, match="compatible reserved offerings are available, but could not be"):
        offerings_to_reserve(rm, "h2", [ONE], Requirements(), strict=True)
    assert offerings_to_reserve(rm, "h1", [ONE], Requirements(), strict=True) == [ONE]


def test_strict_mode_refuses_a_pod_that_would_lose_the_claims_reservations() -> None:
    """nodeclaim.go:345: a claim that held reservations and whose new requirements (a pod pinned elsewhere) leave
    none is refused in the strict mode; by default it drops them (the caller releases them, nodeclaim.go:286)."""
    rm = ReservationManager([THREE, TWO])
    rm.reserve("h", THREE)
    elsewhere = _requirements(zone=["test-zone-9"])
    assert offerings_to_reserve(rm, "h", [THREE, TWO], elsewhere, held=[THREE]) == []
    with pytest.raises(ReservedOfferingError, match="would remove all compatible reserved offering options"):
        offerings_to_reserve(rm, "h", [THREE, TWO], elsewhere, held=[THREE], strict=True)
