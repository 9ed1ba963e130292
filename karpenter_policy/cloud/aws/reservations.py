"""The capacity reservations an EC2NodeClass selects, asked of EC2 as Karpenter v1.14.1's capacity-reservation provider
asks (aws pkg/providers/capacityreservation/provider.go, types.go), and how much room each has.

`list(terms)`: one DescribeCapacityReservations per query of `cloud.capacityreservations.queries` (paginated), each
query's answer cached for a minute on its own (v1.14.1's `reservationCache`, `DefaultTTL`); a query by an id EC2 says
does not exist answers nothing (v1.14.1's `IsNotFound` break), cached as any answer. The reservations of every
query, each id once, none past its `EndDate` (checked at every call, cached answers too), are read as the class's
status holds them (`capacityreservations.reservation`; one that cannot be read is left out, logged), sorted by id.
Any other failure raises `CloudError`: the answer is unknown, never "no reservation".

The availability: each answer sets every reservation's `AvailableInstanceCount` (v1.14.1's `syncAvailability`), kept
for 24 hours (`CapacityReservationAvailabilityTTL`); `mark_launched` takes one (never below 0), `mark_terminated`
gives one back, `mark_unavailable` sets 0 (a launch EC2 refused for the reservation's capacity); a reservation never
synced has 0.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.capacityreservations import (
    CapacityReservation,
    Query,
    available_count,
    queries,
    status_of,
)
from karpenter_policy.cloud.errors import NotFound
from karpenter_policy.cloud.provider import Clock

log = logging.getLogger(__name__)

#: How long a query's answer is used (v1.14.1's `awscache.DefaultTTL`).
RESERVATIONS_TTL = 60.0
#: How long a reservation's synced availability is kept (v1.14.1's `CapacityReservationAvailabilityTTL`).
AVAILABILITY_TTL = dt.timedelta(hours=24)


@dataclass
class _Availability:
    count: int
    synced: dt.datetime


class CapacityReservations:
    """Lists (and caches) the reservations terms select; tracks each reservation's available instance count."""

    def __init__(
        self, api: AwsApi, clock: Clock, wall_clock: Callable[[], dt.datetime], ttl: float = RESERVATIONS_TTL
    ) -> None:
        self._api = api
        self._wall_clock = wall_clock
        self._answers: TtlCache[tuple[Mapping[str, Any], ...]] = TtlCache(clock, ttl)
        self._lock = threading.Lock()
        self._availability: dict[str, _Availability] = {}

    def list(self, terms: Any) -> tuple[CapacityReservation, ...]:
        """The reservations the terms select now (see the module docstring); raises CloudError when EC2 fails."""
        raws: list[Mapping[str, Any]] = []
        for query in queries(terms):
            raws.extend(self._answer(query))
        found, left_out = status_of(raws, self._wall_clock())
        for why in left_out:
            log.error("failed to parse a discovered capacity reservation: %s", why)
        return found

    def _answer(self, query: Query) -> tuple[Mapping[str, Any], ...]:
        return self._answers.get_or_load(query, lambda: self._describe(query))

    def _describe(self, query: Query) -> tuple[Mapping[str, Any], ...]:
        try:
            found = tuple(
                raw for raw in self._api.paginate(
                    "ec2", "describe_capacity_reservations", "CapacityReservations", **query.arguments()
                ) if isinstance(raw, Mapping)
            )
        except NotFound:  # an id EC2 does not know (asked alone: one page): nothing
            found = ()
        self._sync({str(raw["CapacityReservationId"]): available_count(raw)
                    for raw in found if isinstance(raw.get("CapacityReservationId"), str)})
        return found

    # --- availability ---------------------------------------------------------------------------------------

    def _sync(self, counts: Mapping[str, int]) -> None:
        now = self._wall_clock()
        with self._lock:
            for rid, count in counts.items():
                self._availability[rid] = _Availability(count, now)

    def _entry(self, reservation_id: str, now: dt.datetime) -> _Availability | None:
        entry = self._availability.get(reservation_id)
        if entry is not None and now - entry.synced >= AVAILABILITY_TTL:
            del self._availability[reservation_id]
            return None
        return entry

    def available(self, reservation_id: str) -> int:
        """The instances the reservation can still take, as last synced and marked since (0: never synced)."""
        with self._lock:
            entry = self._entry(reservation_id, self._wall_clock())
            return entry.count if entry is not None else 0

    def set_available(self, reservation_id: str, count: int) -> None:
        """Set a reservation's count as a sync would (v1.14.1's `SetAvailableInstanceCount`)."""
        self._sync({reservation_id: count})

    def mark_launched(self, reservation_id: str) -> None:
        """One instance launched into the reservation: one fewer (never below 0; v1.14.1 skips a count synced
        after now, which a clock that does not go back never meets)."""
        with self._lock:
            entry = self._entry(reservation_id, self._wall_clock())
            if entry is not None and entry.count > 0:
                entry.count -= 1

    def mark_terminated(self, reservation_id: str) -> None:
        """One instance of the reservation terminated: one more (no time check, as v1.14.1)."""
        with self._lock:
            entry = self._entry(reservation_id, self._wall_clock())
            if entry is not None:
                entry.count += 1

    def mark_unavailable(self, *reservation_ids: str) -> None:
        """EC2 refused a launch into these reservations for capacity: no room until the next sync."""
        with self._lock:
            for rid in reservation_ids:
                entry = self._entry(rid, self._wall_clock())
                if entry is not None:
                    entry.count = 0

    def invalidate(self) -> None:
        self._answers.invalidate()


__all__ = ["AVAILABILITY_TTL", "RESERVATIONS_TTL", "CapacityReservations"]
