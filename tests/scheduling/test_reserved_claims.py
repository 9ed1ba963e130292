"""Capacity reservations in a scheduling run: reserved offerings in a table are counted per run, held by the claims
whose requirements admit them, and a claim holding one is narrowed to it at the end of the run — Karpenter v1.14.1's
scheduler in its fallback mode and, below, its provisioner's strict mode (core
pkg/controllers/provisioning/scheduling: scheduler.go:187 one `ReservationManager` per pass; nodeclaim.go:247-262
`NodeClaim.Add`; :303 `offeringsToReserve`; :393-402 `FinalizeScheduling`). Without a reserved offering a run plans
exactly as before."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.scheduling import COST, KARPENTER, InstanceTable, Plan, Scheduler, SchedulerOptions

from .cluster import make_pod, provisioner_requirements, requirement
from .support import fake_type, template

Z1 = "test-zone-1"


def reserved(zone: str, reservation: str, room: int, price: float = 0.0001) -> Offering:
    """A reserved offering (as `cloud.reservedtypes.as_offering` makes them from the cloud's)."""
    return Offering(
        zone, wk.CAPACITY_RESERVED, price, True, reservation_id=reservation, reservation_type="default",
        reservation_capacity=room,
    )


def types(*extra: tuple[str, Offering]) -> list[InstanceType]:
    """The v1.14.1 suite's "Reserved Instance Types" types (suite_test.go:4677-4698): large 6/6Gi, medium 3/3Gi, small
    2/2Gi, with `extra` reserved offerings added to the named types."""
    found = [
        fake_type("large-instance-type", cpu=6, memory_gib=6),
        fake_type("medium-instance-type", cpu=3, memory_gib=3),
        fake_type("small-instance-type", cpu=2, memory_gib=2),
    ]
    out = []
    for it in found:
        more = tuple(o for name, o in extra if name == it.name)
        out.append(dataclasses.replace(it, offerings=(*it.offerings, *more)) if more else it)
    return out


def solve(
    table: InstanceTable, pods: list, strategy: str, *terms: dict, names: tuple[str, ...] = ("np",),
    fallback: bool = True,
) -> Plan:
    requirements = provisioner_requirements(*(terms or (requirement(wk.CAPACITY_TYPE, "Exists"),)))
    templates = [
        template(table, name=name, requirements=requirements, owner_label=wk.NODEPOOL, owner=name) for name in names
    ]
    return Scheduler(templates, options=SchedulerOptions(strategy, reserved_fallback=fallback)).solve(pods)


def reservation_of(claim) -> str | None:  # type: ignore[no-untyped-def]
    requirement_ = claim.requirements.get(wk.CAPACITY_RESERVATION_ID)
    return None if requirement_ is None else ",".join(sorted(requirement_.values))


STRATEGIES = pytest.mark.parametrize("strategy", [KARPENTER, COST])
SMALL = (requirement(wk.CAPACITY_TYPE, "Exists"), requirement(wk.INSTANCE_TYPE, "In", "small-instance-type"))


@STRATEGIES
def test_a_reservation_is_promised_to_no_more_nodes_than_its_room(strategy: str) -> None:
    """A reservation with room for 2 and three pods that each need a small node of their own: two claims hold it and
    launch into it (capacity type `reserved`, its id required: `FinalizeScheduling`), the third launches without it
    (nodeclaim.go:328-331: `CanReserve` false once the room is taken; fallback mode)."""
    table = InstanceTable(types(("small-instance-type", reserved(Z1, "cr-small", 2))))
    pods = [make_pod(cpu="1500m") for _ in range(3)]
    plan = solve(table, pods, strategy, *SMALL)
    assert len(plan.claims) == 3 and not plan.failures
    launched = sorted((c.launch.capacity_type, reservation_of(c)) for c in plan.claims if c.launch is not None)
    assert launched[:2] == [(wk.CAPACITY_RESERVED, "cr-small")] * 2
    assert launched[2][0] != wk.CAPACITY_RESERVED and launched[2][1] is None
    for claim in plan.claims:
        if claim.launch is not None and claim.launch.capacity_type == wk.CAPACITY_RESERVED:
            assert claim.requirements.get(wk.CAPACITY_TYPE).values == {wk.CAPACITY_RESERVED}
            assert all(o.capacity_type == wk.CAPACITY_RESERVED and o.zone == Z1 for o in claim.options)


@STRATEGIES
def test_a_reservation_is_counted_across_nodepools(strategy: str) -> None:
    """Two NodePools over one reservation of room 1 (suite_test.go:4767 "should correctly track reservations shared
    across nodepools", its fallback-mode answer): one claim holds it, the other launches without it."""
    table = InstanceTable(types(("small-instance-type", reserved(Z1, "cr-small", 1))))
    pods = [make_pod(cpu="1500m") for _ in range(2)]
    plan = solve(table, pods, strategy, *SMALL, names=("np-1", "np-2"))
    capacity = sorted(c.launch.capacity_type == wk.CAPACITY_RESERVED for c in plan.claims if c.launch is not None)
    assert capacity == [False, True]


@STRATEGIES
def test_a_claim_that_outgrows_its_reservations_releases_them(strategy: str) -> None:
    """A claim whose pods no longer fit any reserved type gives its reservations back (nodeclaim.go:284-296
    `releaseReservedOfferings`) and launches on-demand or spot; the pod that opened it reserved them first."""
    table = InstanceTable(types(("small-instance-type", reserved(Z1, "cr-small", 1))))
    pods = [make_pod(cpu="1500m", name="a"), make_pod(cpu="1500m", name="b")]
    plan = solve(table, pods, strategy, requirement(wk.CAPACITY_TYPE, "Exists"))
    assert not plan.failures
    for claim in plan.claims:
        if len(claim.pods) > 1:  # both on one larger type: no small reservation left to hold
            assert claim.launch is not None and claim.launch.capacity_type != wk.CAPACITY_RESERVED
            assert reservation_of(claim) is None


@STRATEGIES
def test_a_nodepool_without_reserved_capacity_type_takes_no_reservation(strategy: str) -> None:
    """A NodePool that allows only on-demand admits no reserved offering (its requirements are checked against the
    offering's, nodeclaim.go:322): nothing is reserved, the launch is on-demand."""
    table = InstanceTable(types(("small-instance-type", reserved(Z1, "cr-small", 5))))
    plan = solve(table, [make_pod(cpu="1500m")], strategy, requirement(wk.CAPACITY_TYPE, "In", "on-demand"),
                 requirement(wk.INSTANCE_TYPE, "In", "small-instance-type"))
    (claim,) = plan.claims
    assert claim.launch is not None and claim.launch.capacity_type == wk.CAPACITY_ON_DEMAND
    assert reservation_of(claim) is None


@settings(max_examples=30, deadline=None)
@given(
    room=st.integers(min_value=0, max_value=4),
    count=st.integers(min_value=1, max_value=6),
    strategy=st.sampled_from([KARPENTER, COST]),
)
def test_no_reservation_is_over_promised(room: int, count: int, strategy: str) -> None:
    """However many pods and whatever the room, the claims launching into a reservation are at most its room, and
    every pod is placed (the others fall back)."""
    table = InstanceTable(types(("small-instance-type", reserved(Z1, "cr-small", room))))
    plan = solve(table, [make_pod(cpu="1500m") for _ in range(count)], strategy, *SMALL)
    into = [c for c in plan.claims if c.launch is not None and c.launch.capacity_type == wk.CAPACITY_RESERVED]
    assert len(into) == min(room, count)
    assert not plan.failures


@settings(max_examples=25, deadline=None)
@given(
    cpus=st.lists(st.sampled_from(["250m", "900m", "1500m", "2500m", "4"]), min_size=1, max_size=12),
    strategy=st.sampled_from([KARPENTER, COST]),
)
def test_without_reservations_a_plan_is_what_it_was(cpus: list[str], strategy: str) -> None:
    """The same pods over types without a reserved offering, and over the same types with a reserved offering whose
    NodePool cannot take it (on-demand and spot only): the same claims, types and offerings (nothing is counted
    unless a reservation can be taken)."""
    pods = [make_pod(cpu=cpu, name=f"p{i}") for i, cpu in enumerate(cpus)]
    terms = (requirement(wk.CAPACITY_TYPE, "In", "on-demand", "spot"),)
    plain = solve(InstanceTable(types()), pods, strategy, *terms)
    with_reserved = solve(
        InstanceTable(types(("small-instance-type", reserved(Z1, "cr-small", 3)))), pods, strategy, *terms
    )
    assert [(tuple(p.key for p in c.pods), c.options) for c in plain.claims] == [
        (tuple(p.key for p in c.pods), c.options) for c in with_reserved.claims
    ]
    assert plain.failures.keys() == with_reserved.failures.keys()


# --- the strict mode (v1.14.1's provisioner: DisableReservedCapacityFallback) -------------------------------------


def suite_types(rooms: dict[str, int]) -> list[InstanceType]:
    """suite_test.go:4699-4713: medium and small each with a reservation `r-<name>` of room 1 in test-zone-1, priced
    at their price / 100,000; `rooms`: what is left of each (0: used up, the offering unavailable)."""
    extra = []
    for it in types():
        if it.name in rooms:
            price = it.offerings[0].price / 100_000.0
            offering = reserved(Z1, f"r-{it.name}", rooms[it.name], price)
            extra.append((it.name, dataclasses.replace(offering, available=rooms[it.name] > 0)))
    return types(*extra)


def launched(plan: Plan) -> list[tuple[str, str, str | None]]:
    return sorted(
        (c.launch.instance_type, c.launch.capacity_type, reservation_of(c)) for c in plan.claims if c.launch is not None
    )


@STRATEGIES
def test_strict_no_fallback_while_compatible_reserved_offerings_are_available(strategy: str) -> None:
    """suite_test.go:4715 "shouldn't fallback to on-demand or spot when compatible reserved offerings are available":
    three 1800m pods; the first claim reserves both reservations (pessimistically), so each pass launches one reserved
    node and the other pods wait — small into r-small, then medium into r-medium, then (both used up) small on
    on-demand or spot."""
    pods = [make_pod(cpu="1800m", name=f"p{i}") for i in range(3)]
    rooms = {"medium-instance-type": 1, "small-instance-type": 1}
    first = solve(InstanceTable(suite_types(rooms)), pods, strategy, fallback=False)
    both = "r-medium-instance-type,r-small-instance-type"
    assert launched(first) == [("small-instance-type", wk.CAPACITY_RESERVED, both)]
    assert len(first.failures) == 2
    assert all(r.kind == "reserved" for f in first.failures.values() for r in f.reasons.values())
    left = [p for p in pods if p.key in first.failures]
    rooms["small-instance-type"] = 0
    second = solve(InstanceTable(suite_types(rooms)), left, strategy, fallback=False)
    assert launched(second) == [("medium-instance-type", wk.CAPACITY_RESERVED, "r-medium-instance-type")]
    left = [p for p in left if p.key in second.failures]
    assert len(left) == 1
    rooms["medium-instance-type"] = 0
    third = solve(InstanceTable(suite_types(rooms)), left, strategy, fallback=False)
    ((instance_type, capacity_type, reservation),) = launched(third)
    assert instance_type == "small-instance-type" and capacity_type != wk.CAPACITY_RESERVED and reservation is None


@STRATEGIES
def test_strict_reservations_shared_across_nodepools(strategy: str) -> None:
    """suite_test.go:4767 "should correctly track reservations shared across nodepools": two pods, each pinned to
    small and to its own NodePool, apart by hostname; one reservation of small with room 1 serves one, the other
    waits, and takes on-demand or spot once the reservation is used up."""
    pods = [
        make_pod(
            cpu="100m", name=f"p{i}", labels={"app": "test"},
            pod_anti_requirements=[{"labelSelector": {"matchLabels": {"app": "test"}},
                                    "topologyKey": wk.HOSTNAME}],
            node_requirements=[requirement(wk.INSTANCE_TYPE, "In", "small-instance-type"),
                               requirement(wk.NODEPOOL, "In", f"np-{i + 1}")],
        )
        for i in range(2)
    ]
    rooms = {"medium-instance-type": 1, "small-instance-type": 1}
    names = ("np-1", "np-2")
    first = solve(InstanceTable(suite_types(rooms)), pods, strategy, names=names, fallback=False)
    assert launched(first) == [("small-instance-type", wk.CAPACITY_RESERVED, "r-small-instance-type")]
    left = [p for p in pods if p.key in first.failures]
    assert len(left) == 1
    rooms["small-instance-type"] = 0
    second = solve(InstanceTable(suite_types(rooms)), left, strategy, names=names, fallback=False)
    ((instance_type, capacity_type, reservation),) = launched(second)
    assert instance_type == "small-instance-type" and capacity_type != wk.CAPACITY_RESERVED and reservation is None


@settings(max_examples=30, deadline=None)
@given(
    room=st.integers(min_value=0, max_value=4),
    count=st.integers(min_value=1, max_value=6),
    strategy=st.sampled_from([KARPENTER, COST]),
)
def test_strict_pods_beyond_the_room_wait(room: int, count: int, strategy: str) -> None:
    """The strict mode over a reservation of any room: as many nodes launch into it as it has room, none launches
    otherwise while it has room (the other pods wait, refused as `reserved`), and with no room (the offering
    unavailable) every pod launches on-demand or spot."""
    offering = dataclasses.replace(reserved(Z1, "cr-small", room), available=room > 0)
    table = InstanceTable(types(("small-instance-type", offering)))
    plan = solve(table, [make_pod(cpu="1500m") for _ in range(count)], strategy, *SMALL, fallback=False)
    into = [c for c in plan.claims if c.launch is not None and c.launch.capacity_type == wk.CAPACITY_RESERVED]
    if room == 0:
        assert not into and len(plan.claims) == count and not plan.failures
        return
    assert len(into) == len(plan.claims) == min(room, count)
    assert len(plan.failures) == count - min(room, count)
    assert all(r.kind == "reserved" for f in plan.failures.values() for r in f.reasons.values())
