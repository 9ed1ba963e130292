"""The capacity reservations the new node claims of one scheduling run hold, as Karpenter v1.14.1 keeps them.

Core v1.14.1 pkg/controllers/provisioning/scheduling: one `ReservationManager` per pass (scheduler.go:187) over every
reserved offering of the templates' instance types; each time a pod joins a new claim (`NodeClaim.Add`,
nodeclaim.go:247-262) the claim reserves, pessimistically, every available reserved offering of its remaining
instance types that its requirements admit and whose reservation has room (`offeringsToReserve`, here
`scheduling.reservations.offerings_to_reserve`), and gives back what it held and no longer can use; at the end of the
pass (`FinalizeScheduling`, nodeclaim.go:393-402) a claim holding reservations is narrowed to capacity type
`reserved` and to its reservations' ids, so it launches into one of them and no reservation is promised to more
nodes than its room.

:class:`RunReservations` is made only when some template's table holds a reserved offering (`for_templates`:
None otherwise), so a run without reservations does exactly what it did. In the fallback mode (v1.14.1's default,
its disruption simulations') a claim that cannot reserve launches otherwise; in the strict mode
(`DisableReservedCapacityFallback`, v1.14.1's provisioner: `SchedulerOptions.reserved_fallback` false) a claim that
could have had a reservation and gets none, or would lose all it holds, refuses the pod (`refusal`, kind
`reserved`): the pod waits for the next run, no lower-weight template is tried and its preferences are not relaxed.
A claim that holds no reservation in a run that has some launches without the `reserved` capacity type
(docs/scheduling.md, "Capacity reservations").

Pure (no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering, Offering, price_key
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.scheduling.instances import InstanceTable
from karpenter_policy.scheduling.reasons import Refusal
from karpenter_policy.scheduling.reservations import ReservationManager, ReservedOfferingError, offerings_to_reserve

#: The kind of a strict-mode refusal (v1.14.1's `ReservedOfferingError`): the pod waits, nothing else is tried.
RESERVED = "reserved"
#: The capacity types a claim holding no reservation may launch as: any but `reserved`.
NOT_RESERVED = Requirement.new(wk.CAPACITY_TYPE, Operator.NOT_IN, [wk.CAPACITY_RESERVED])


@dataclass(frozen=True, slots=True)
class TableOffering:
    """A reserved offering of type `index` of a table (`ReservedOption` for the count)."""

    index: int
    instance_type: str
    offering: Offering

    @property
    def reservation_id(self) -> str:
        return self.offering.reservation_id

    @property
    def capacity(self) -> int:
        return self.offering.reservation_capacity

    @property
    def available(self) -> bool:
        return self.offering.available

    def labels(self) -> Mapping[str, str]:
        """The offering's requirements as labels (v1.14.1's reserved offering requirements)."""
        return {
            wk.CAPACITY_TYPE: wk.CAPACITY_RESERVED,
            wk.ZONE: self.offering.zone,
            wk.CAPACITY_RESERVATION_ID: self.offering.reservation_id,
            wk.CAPACITY_RESERVATION_TYPE: self.offering.reservation_type,
            wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "true" if self.offering.reservation_interruptible else "false",
        }


def reserved_of(table: InstanceTable) -> tuple[TableOffering, ...]:
    """The reserved offerings of the table's types, in type order (then zone, reservation id)."""
    if wk.CAPACITY_RESERVED not in table.capacity_types:
        return ()
    return tuple(
        TableOffering(i, it.name, o)
        for i, it in enumerate(table.types)
        for o in it.offerings
        if o.capacity_type == wk.CAPACITY_RESERVED and o.reservation_id
    )


class RunReservations:
    """One run's reservation count and what each new claim (by hostname) holds."""

    def __init__(self, offerings: Mapping[int, Sequence[TableOffering]], *, strict: bool = False) -> None:
        """`offerings`: id(table) → its reserved offerings; `strict`: v1.14.1's `DisableReservedCapacityFallback`."""
        self._offerings = offerings
        self.strict = strict
        self.manager = ReservationManager(o for found in offerings.values() for o in found)
        self._held: dict[str, list[TableOffering]] = {}

    @classmethod
    def for_tables(cls, tables: Iterable[InstanceTable], *, strict: bool = False) -> RunReservations | None:
        """The count over the tables' reserved offerings; None when they have none (nothing changes then)."""
        found = {id(table): reserved_of(table) for table in tables}
        if not any(found.values()):
            return None
        return cls(found, strict=strict)

    def refusal(self, hostname: str, table: InstanceTable, options: int, requirements: Requirements) -> Refusal | None:
        """In the strict mode, why the claim `hostname` may not become `options` with `requirements` (v1.14.1's
        `ReservedOfferingError`: it could have had a reservation and gets none, or would lose all it holds); None
        when it may. Changes nothing."""
        offerings = [o for o in self._offerings.get(id(table), ()) if options >> o.index & 1]
        try:
            offerings_to_reserve(
                self.manager, hostname, offerings, requirements, self._held.get(hostname, []), strict=True
            )
        except ReservedOfferingError as error:
            return Refusal(RESERVED, str(error))
        return None

    def add(self, hostname: str, table: InstanceTable, options: int, requirements: Requirements) -> None:
        """A pod joined the claim `hostname`, which may now launch the types of `options` with `requirements`: it
        reserves what `offerings_to_reserve` gives it and releases what it held and no longer can use
        (`NodeClaim.Add`)."""
        offerings = [o for o in self._offerings.get(id(table), ()) if options >> o.index & 1]
        held = self._held.get(hostname, [])
        chosen = offerings_to_reserve(self.manager, hostname, offerings, requirements, held)
        self.manager.reserve(hostname, *chosen)
        kept = {o.reservation_id for o in chosen}
        self.manager.release(hostname, *(o for o in held if o.reservation_id not in kept))
        self._held[hostname] = chosen

    def release(self, hostname: str) -> None:
        """The claim `hostname` was given up: everything it held goes back."""
        self.manager.release(hostname, *self._held.pop(hostname, []))

    def held(self, hostname: str) -> list[TableOffering]:
        """The reserved offerings the claim holds (its reservations may repeat across types)."""
        return self._held.get(hostname, [])

    def finalized(self, hostname: str, requirements: Requirements) -> Requirements:
        """The claim's requirements at the end of the pass (`FinalizeScheduling`): capacity type `reserved` and its
        reservations' ids when it holds any, else as they were."""
        held = self.held(hostname)
        if not held:
            return requirements
        ids = sorted({o.reservation_id for o in held})
        narrowed = [r for k, r in requirements.items() if k != wk.CAPACITY_TYPE]
        return Requirements([
            *narrowed,
            Requirement.new(wk.CAPACITY_TYPE, Operator.IN, [wk.CAPACITY_RESERVED]),
        ]).add(Requirement.new(wk.CAPACITY_RESERVATION_ID, Operator.IN, ids))

    def launch_options(self, hostname: str, mask: int) -> tuple[ChosenOffering, ...]:
        """The claim's launch options when it holds reservations: each type of `mask` with its cheapest held
        offering, cheapest first (ties by name); none when it holds none."""
        best: dict[str, TableOffering] = {}
        for o in self.held(hostname):
            if not mask >> o.index & 1:
                continue
            current = best.get(o.instance_type)
            if current is None or (price_key(o.offering.price), o.offering.zone) < (
                price_key(current.offering.price), current.offering.zone
            ):
                best[o.instance_type] = o
        ranked = sorted(best.values(), key=lambda o: (price_key(o.offering.price), o.instance_type, o.offering.zone))
        return tuple(
            ChosenOffering(o.instance_type, o.offering.zone, wk.CAPACITY_RESERVED, o.offering.price) for o in ranked
        )


__all__ = ["NOT_RESERVED", "RESERVED", "RunReservations", "TableOffering", "reserved_of"]
