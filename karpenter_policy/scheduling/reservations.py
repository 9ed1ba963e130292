"""Capacity reservations counted within one scheduling pass, as Karpenter v1.14.1's `ReservationManager` counts them.

Core v1.14.1 pkg/controllers/provisioning/scheduling/reservationmanager.go: at the start of a pass each reservation's
room is the least `ReservationCapacity` any reserved offering of it reports (two NodePools may read one reservation
at different moments); a node (by its hostname) that takes a reserved offering takes one of its reservation's room,
once however often it is asked; a node given up gives it back. A node that already holds a reservation may always
take it again, so that re-fitting a node does not count it twice.

Karpenter panics on a reservation it was not told of and on an over-reservation (a bug in its scheduler); here both
raise :class:`ReservationError`, which names the reservation.

:func:`offerings_to_reserve` is v1.14.1's `NodeClaim.offeringsToReserve` (nodeclaim.go): a claim reserves,
pessimistically, every available reserved offering of its remaining types that its requirements admit and that has
room for it; in the strict mode (`DisableReservedCapacityFallback`) a claim that could have had a reservation but got
none, or that would lose all it had, is refused with :class:`ReservedOfferingError` (the pod waits for room rather
than falling back to on-demand or spot).

Pure (no I/O). The packing keeps this count per run through `scheduling.reservedclaims` (docs/scheduling.md,
"Capacity reservations").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from karpenter_policy.api.v1.nodepool import WELL_KNOWN_LABELS
from karpenter_policy.model.requirements import Requirements


class Reservable(Protocol):
    """A reserved offering as the count reads it: its reservation and the room it reports now."""

    @property
    def reservation_id(self) -> str: ...

    @property
    def capacity(self) -> int: ...


class ReservedOption(Reservable, Protocol):
    """A reserved offering as a claim weighs it: whether it can launch now and its requirements as labels."""

    @property
    def available(self) -> bool: ...

    def labels(self) -> Mapping[str, str]: ...


_Option = TypeVar("_Option", bound=ReservedOption)


class ReservationError(Exception):
    """A reservation the count was not told of, or taken beyond its room (Karpenter v1.14.1 panics: a bug)."""


class ReservationManager:
    """Each reservation's room left in one pass, and which node holds which reservations."""

    def __init__(self, offerings: Iterable[Reservable]) -> None:
        """The room of every reservation among `offerings`: the least any of its offerings reports
        (`NewReservationManager`)."""
        self._capacity: dict[str, int] = {}
        self._held: dict[str, set[str]] = {}
        for offering in offerings:
            current = self._capacity.get(offering.reservation_id)
            if current is None or current > offering.capacity:
                self._capacity[offering.reservation_id] = offering.capacity

    def _room(self, reservation_id: str) -> int:
        room = self._capacity.get(reservation_id)
        if room is None:
            raise ReservationError(f"no reservation {reservation_id!r} was offered in this pass")
        return room

    def can_reserve(self, hostname: str, offering: Reservable) -> bool:
        """Whether the node may take the offering's reservation: it holds it already, or it has room (`CanReserve`).
        Raises ReservationError for a reservation not offered in this pass."""
        if self.has_reservation(hostname, offering):
            return True
        return self._room(offering.reservation_id) > 0

    def reserve(self, hostname: str, *offerings: Reservable) -> None:
        """The node takes each offering's reservation, once per reservation however often asked (`Reserve`). Raises
        ReservationError for a reservation not offered or with no room left."""
        for offering in offerings:
            if self.has_reservation(hostname, offering):
                continue
            room = self._room(offering.reservation_id)
            if room <= 0:
                raise ReservationError(f"reservation {offering.reservation_id!r} has no room left for {hostname}")
            self._capacity[offering.reservation_id] = room - 1
            self._held.setdefault(hostname, set()).add(offering.reservation_id)

    def release(self, hostname: str, *offerings: Reservable) -> None:
        """The node gives back each offering's reservation it holds; others are ignored (`Release`)."""
        for offering in offerings:
            held = self._held.get(hostname)
            if held is not None and offering.reservation_id in held:
                held.discard(offering.reservation_id)
                self._capacity[offering.reservation_id] += 1

    def has_reservation(self, hostname: str, offering: Reservable) -> bool:
        """Whether the node holds the offering's reservation (`HasReservation`)."""
        return offering.reservation_id in self._held.get(hostname, ())

    def remaining_capacity(self, offering: Reservable) -> int:
        """The room left in the offering's reservation; 0 for one not offered (`RemainingCapacity`: Go's map
        zero value)."""
        return self._capacity.get(offering.reservation_id, 0)


class ReservedOfferingError(Exception):
    """A claim refused a pod to keep its reserved capacity (v1.14.1's `ReservedOfferingError`, strict mode only)."""


def offerings_to_reserve(
    manager: ReservationManager,
    hostname: str,
    offerings: Iterable[_Option],
    requirements: Requirements,
    held: Sequence[_Option] = (),
    *,
    strict: bool = False,
) -> list[_Option]:
    """The reserved offerings the claim `hostname` reserves with `requirements` (`offeringsToReserve`): each available
    one its requirements admit (v1.14.1's well-known labels, the reservations' among them, may be undefined) whose
    reservation has room for it or is held by it already, in the given order. `held`: what the claim reserved before
    this pod. Raises ReservedOfferingError in the strict mode, as above."""
    compatible = False
    chosen: list[_Option] = []
    for offering in offerings:
        if not offering.available:
            continue
        if not requirements.admits(Requirements.from_labels(offering.labels()), WELL_KNOWN_LABELS):
            continue
        compatible = True
        if manager.can_reserve(hostname, offering):
            chosen.append(offering)
    if strict:
        if compatible and not chosen:
            raise ReservedOfferingError(
                "one or more instance types with compatible reserved offerings are available, but could not be reserved"
            )
        if held and not chosen:
            raise ReservedOfferingError(
                "satisfying updated nodeclaim constraints would remove all compatible reserved offering options"
            )
    return chosen


__all__ = [
    "Reservable",
    "ReservationError",
    "ReservationManager",
    "ReservedOfferingError",
    "ReservedOption",
    "offerings_to_reserve",
]
