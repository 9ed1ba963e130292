"""An EC2NodeClass's capacity reservations as Karpenter v1.14.1 reads them: its `capacityReservationSelectorTerms` as
DescribeCapacityReservations queries, and an EC2 answer's reservations as the class's `status.capacityReservations`.

Pure (no boto3): `cloud/aws/reservations.py` makes the calls and keeps the caches.

- `queries`: v1.14.1's `QueriesFromSelectorTerms` (aws pkg/providers/capacityreservation/types.go): an `id` term is one
  query by id; a term with `tags` or `instanceMatchCriteria` is one query of its `ownerID`, tags and criteria (an
  `ownerID` alone selects nothing, as there: admission refuses such a term). Each query asks for `state: active`; a
  tag value `*` is the key only (`tag-key`), any other value literal (`tag:<key>`); by id without `MaxResults` (EC2
  refuses both), else `MaxResults` 1000.
- `reservation`: v1.14.1's `CapacityReservationFromEC2` (aws pkg/apis/v1/ec2nodeclass_status.go): criteria `open` or
  `targeted` only, type `default` or `capacity-block`, `Interruptible` absent: false; a capacity block is `expiring`
  from 40 minutes before its end (`active` before, and every other reservation always: `is_expiring`). What v1.14.1
  cannot parse it leaves out, logged: here too — and also a reservation missing a field v1.14.1 reads through a
  pointer (its id, zone, type, owner), where v1.14.1 would panic.
- `available_count`: `AvailableInstanceCount`, a count below 0 or not an integer read as 0 (nothing is launched into
  a reservation whose room is unknown).
- `reserved_offerings`: v1.14.1's `ReservedCapacityResolver` (aws pkg/providers/instancetype/offering/
  reserved_capacity_resolver.go): one offering per reservation of an instance type, in its zone, labelled with the
  reservation's id, type and interruptibility; priced at the type's on-demand price / 10,000,000 (0 without one:
  "free", its order kept for consolidation); available when the reservation has room, the type is offered in its zone
  and it is not `expiring`; none with the `ReservedCapacity` gate off. Not read here: zonal shifts and the zone id
  requirement (this project models neither) and `IsCompatibleWithNodeClass` (placement groups, EFA: refused).
- `Query.selects`: EC2's answer to one query read off a saved DescribeCapacityReservations answer (`plan
  --capacity-reservations`): `state` `active`, then the id (exact), or every filter the query sends — `owner-id`,
  `tag-key` / `tag:<key>`, `instance-match-criteria` — met, values with EC2's `*` / `?` wildcards;
  `selected` the class's status a saved answer gives its terms (each query's matches, `unexpired`, read by
  `reservation`, sorted by id: what the nodeclass controller's `CapacityReservation.Reconcile` writes).
- `instance_reservation`: the reservation a DescribeInstances entry is in as v1.14.1's `NewInstance` reads it (aws
  pkg/providers/instance/types.go `capacityTypeFromInstance`): its `CapacityReservationId` when it has no
  `SpotInstanceRequestId` and launched with preference `capacity-reservations-only` (a targeted launch; an open
  reservation's instance stays on-demand); "" otherwise (v1.14.1: no `CapacityReservationDetails`).
- `launch_choices`: which reservation each reserved (type, zone) option of one launch goes into, as v1.14.1's launch
  filters choose (aws pkg/providers/instance/filter/filter.go): one kind of reservation per CreateFleet
  (`CapacityReservationTypeFilter`: the kind — default, capacity block, interruptible — of the cheapest offering,
  ties in that order), a capacity block alone (`CapacityBlockFilter`: the cheapest one), and in each zone the
  reservation with the most room (`ReservedOfferingFilter`; ties: the smaller id).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.cloud.amiselection import any_matches
from karpenter_policy.model import labels as wk

#: The EC2NodeClass field of the terms.
TERMS: Final = "capacityReservationSelectorTerms"
#: `CapacityReservationType` values (v1.14.1's `CapacityReservationTypeDefault` / `…CapacityBlock`).
TYPE_DEFAULT: Final = "default"
TYPE_CAPACITY_BLOCK: Final = "capacity-block"
#: `CapacityReservationState` values of the class's status.
STATE_ACTIVE: Final = "active"
STATE_EXPIRING: Final = "expiring"
#: The instance match criteria v1.14.1 accepts (others are left out: kubernetes-sigs/karpenter#806).
MATCH_CRITERIA: Final = ("open", "targeted")
#: A capacity block is `expiring` this long before its end (`capacityReservationExpirationPeriod`).
EXPIRATION_PERIOD: Final = dt.timedelta(minutes=40)
#: `MaxResults` of a query by tags / owner / criteria (DescribeCapacityReservations' cap).
MAX_RESULTS: Final = 1000
#: A reserved offering costs the on-demand price divided by this (v1.14.1: "free", in the on-demand order).
RESERVED_PRICE_DIVISOR: Final = 10_000_000.0
#: The labels a reserved offering (and a node launched into it) carries (aws pkg/apis/v1/labels.go,
#: core pkg/cloudprovider `ReservationIDLabel`).
LABEL_RESERVATION_ID: Final = wk.CAPACITY_RESERVATION_ID
LABEL_RESERVATION_TYPE: Final = wk.CAPACITY_RESERVATION_TYPE
LABEL_RESERVATION_INTERRUPTIBLE: Final = wk.CAPACITY_RESERVATION_INTERRUPTIBLE


@dataclass(frozen=True, slots=True)
class Query:
    """One DescribeCapacityReservations call of the terms (v1.14.1's `Query`)."""

    id: str = ""
    owner: str = ""
    tags: tuple[tuple[str, str], ...] = ()
    match_criteria: str = ""

    def arguments(self) -> dict[str, Any]:
        """The call's arguments (boto3's names), as v1.14.1's `DescribeCapacityReservationsInput` makes them."""
        filters: list[dict[str, Any]] = [{"Name": "state", "Values": ["active"]}]
        if self.id:
            return {"Filters": filters, "CapacityReservationIds": [self.id]}
        if self.owner:
            filters.append({"Name": "owner-id", "Values": [self.owner]})
        for key, value in self.tags:
            filters.append({"Name": "tag-key", "Values": [key]} if value == "*"
                           else {"Name": f"tag:{key}", "Values": [value]})
        if self.match_criteria:
            filters.append({"Name": "instance-match-criteria", "Values": [self.match_criteria]})
        return {"Filters": filters, "MaxResults": MAX_RESULTS}

    def selects(self, raw: Mapping[str, Any]) -> bool:
        """Whether EC2 answers this query with the described reservation `raw` (see the module docstring)."""
        if raw.get("State") != STATE_ACTIVE:
            return False
        if self.id:
            return raw.get("CapacityReservationId") == self.id
        if self.owner and not any_matches([self.owner], _text(raw, "OwnerId")):
            return False
        tags = _tags(raw.get("Tags"))
        for key, value in self.tags:
            if value == "*":
                if not any(any_matches([key], k) for k in tags):
                    return False
            elif not any_matches([value], tags.get(key)):
                return False
        return not self.match_criteria or any_matches([self.match_criteria], _text(raw, "InstanceMatchCriteria"))


def _tags(raw: Any) -> dict[str, str]:
    """A described resource's `Tags` (`[{Key, Value}]`) as a mapping; entries of another shape left out."""
    out: dict[str, str] = {}
    for tag in raw if isinstance(raw, list) else ():
        if isinstance(tag, Mapping) and isinstance(tag.get("Key"), str):
            value = tag.get("Value")
            out[tag["Key"]] = value if isinstance(value, str) else ""
    return out


def queries(terms: Any) -> tuple[Query, ...]:
    """The queries of an EC2NodeClass's `capacityReservationSelectorTerms` (none: no term, or not a list)."""
    out: list[Query] = []
    for term in terms if isinstance(terms, list) else ():
        if not isinstance(term, Mapping):
            continue
        if term.get("id"):
            out.append(Query(id=str(term["id"])))
        raw_tags = term.get("tags")
        tags: Mapping[Any, Any] = raw_tags if isinstance(raw_tags, Mapping) else {}
        criteria = str(term.get("instanceMatchCriteria") or "")
        if tags or criteria:
            out.append(Query(
                owner=str(term.get("ownerID") or ""),
                tags=tuple(sorted((str(k), str(v)) for k, v in tags.items())),
                match_criteria=criteria,
            ))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """One reservation of the class's `status.capacityReservations` (v1.14.1's `CapacityReservation`)."""

    id: str
    instance_type: str
    zone: str
    owner: str
    match_criteria: str
    reservation_type: str = TYPE_DEFAULT
    interruptible: bool = False
    end_time: dt.datetime | None = None
    state: str = STATE_ACTIVE


def _text(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) and value else None


def reservation(raw: Any, now: dt.datetime) -> CapacityReservation | str:
    """A DescribeCapacityReservations entry as the class's status holds it, or why it is left out."""
    if not isinstance(raw, Mapping):
        return "not an object"
    rid = _text(raw, "CapacityReservationId")
    if rid is None:
        return "no CapacityReservationId"
    criteria = raw.get("InstanceMatchCriteria")
    if criteria not in MATCH_CRITERIA:
        return f"{rid}: unsupported instance match criteria {criteria!r}"
    kind = raw.get("ReservationType") or TYPE_DEFAULT  # unset: default (v1.14.1's `CapacityReservationTypeFromEC2`)
    if kind not in (TYPE_DEFAULT, TYPE_CAPACITY_BLOCK):
        return f"{rid}: unsupported reservation type {kind!r}"
    fields = {key: _text(raw, key) for key in ("AvailabilityZone", "InstanceType", "OwnerId")}
    missing = sorted(key for key, value in fields.items() if value is None)
    if missing:
        return f"{rid}: no {', '.join(missing)}"
    end = raw.get("EndDate")
    if end is not None and not isinstance(end, dt.datetime):
        return f"{rid}: EndDate is not a time"
    end_time = end.astimezone(dt.UTC) if isinstance(end, dt.datetime) else None
    interruptible = raw.get("Interruptible")
    return CapacityReservation(
        id=rid,
        instance_type=str(fields["InstanceType"]),
        zone=str(fields["AvailabilityZone"]),
        owner=str(fields["OwnerId"]),
        match_criteria=str(criteria),
        reservation_type=str(kind),
        interruptible=interruptible is True,
        end_time=end_time,
        state=STATE_EXPIRING if is_expiring(str(kind), end_time, now) else STATE_ACTIVE,
    )


def is_expiring(reservation_type: str, end_time: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether a reservation is `expiring` at `now`: a capacity block within `EXPIRATION_PERIOD` of its end."""
    # the times' difference, never `end - 40 min`: a (saved, hostile) end in year 1 has no moment 40 minutes before it
    return reservation_type == TYPE_CAPACITY_BLOCK and end_time is not None and end_time - now <= EXPIRATION_PERIOD


#: The most an EC2 count can say (its API's `Integer` is 32 bits): more is no answer EC2 gives.
MAX_EC2_COUNT: Final = 2**31 - 1


def is_ec2_count(value: object) -> bool:
    """Whether `value` is a count EC2 could answer (an integer 0 … `MAX_EC2_COUNT`, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_EC2_COUNT


def available_count(raw: Mapping[str, Any]) -> int:
    """`AvailableInstanceCount`; 0 when it is missing or no count EC2 gives (a room not known is no room)."""
    count = raw.get("AvailableInstanceCount")
    return count if isinstance(count, int) and is_ec2_count(count) else 0


@dataclass(frozen=True, slots=True)
class ReservedOffering:
    """One reserved offering of an instance type (v1.14.1's `Offering` with capacity type `reserved`)."""

    instance_type: str
    zone: str
    reservation_id: str
    reservation_type: str
    interruptible: bool
    price: float
    available: bool
    #: the reservation's room now (v1.14.1's `ReservationCapacity`)
    capacity: int

    def labels(self) -> dict[str, str]:
        """The offering's requirements, each `In` one value, as labels."""
        return {
            "karpenter.sh/capacity-type": "reserved",
            "topology.kubernetes.io/zone": self.zone,
            LABEL_RESERVATION_ID: self.reservation_id,
            LABEL_RESERVATION_TYPE: self.reservation_type,
            LABEL_RESERVATION_INTERRUPTIBLE: "true" if self.interruptible else "false",
        }


def reserved_offerings(
    reservations: Sequence[CapacityReservation],
    zones_of: Mapping[str, frozenset[str]],
    on_demand: Mapping[str, float],
    room: Callable[[str], int],
    *,
    enabled: bool = True,
) -> dict[str, tuple[ReservedOffering, ...]]:
    """instance type -> its reserved offerings (see the module docstring), for the types of `zones_of` (each with the
    zones it is offered in); `room(id)` is a reservation's available count now."""
    if not enabled:
        return {}
    out: dict[str, list[ReservedOffering]] = {}
    for found in reservations:
        zones = zones_of.get(found.instance_type)
        if zones is None:
            continue
        price = on_demand.get(found.instance_type)
        capacity = room(found.id)
        out.setdefault(found.instance_type, []).append(ReservedOffering(
            instance_type=found.instance_type,
            zone=found.zone,
            reservation_id=found.id,
            reservation_type=found.reservation_type,
            interruptible=found.interruptible,
            price=price / RESERVED_PRICE_DIVISOR if price is not None else 0.0,
            available=capacity != 0 and found.zone in zones and found.state != STATE_EXPIRING,
            capacity=capacity,
        ))
    return {name: tuple(offerings) for name, offerings in sorted(out.items())}


#: `CapacityReservationTypeFilter`'s order among kinds of reservation of the same cheapest price.
_KIND_ORDER: Final = {(TYPE_DEFAULT, False): 0, (TYPE_CAPACITY_BLOCK, False): 1, (TYPE_DEFAULT, True): 2}


def launch_choices(
    options: Sequence[tuple[str, str]], offerings: Sequence[ReservedOffering]
) -> dict[tuple[str, str], ReservedOffering]:
    """(instance type, zone) of the reserved options one launch may use -> the reservation it launches into (see the
    module docstring); `offerings`: the available reserved offerings the node's requirements allow."""
    wanted = set(options)
    candidates = [o for o in offerings if o.available and (o.instance_type, o.zone) in wanted]
    if not candidates:
        return {}
    kinds = {(o.reservation_type, o.interruptible) for o in candidates}
    kind = min(kinds, key=lambda k: (min(o.price for o in candidates if (o.reservation_type, o.interruptible) == k),
                                     _KIND_ORDER.get(k, len(_KIND_ORDER))))
    candidates = [o for o in candidates if (o.reservation_type, o.interruptible) == kind]
    if kind[0] == TYPE_CAPACITY_BLOCK:
        candidates = [min(candidates, key=lambda o: (o.price, o.instance_type, o.zone, o.reservation_id))]
    chosen: dict[tuple[str, str], ReservedOffering] = {}
    for offering in sorted(candidates, key=lambda o: (-o.capacity, o.reservation_id)):
        chosen.setdefault((offering.instance_type, offering.zone), offering)
    return chosen


def instance_reservation(raw: Mapping[str, Any]) -> str:
    """The capacity reservation of a DescribeInstances entry as v1.14.1 reads it (see the module docstring); ""
    when it is not in one (or in another shape)."""
    reservation_id = raw.get("CapacityReservationId")
    specification = raw.get("CapacityReservationSpecification")
    preference = specification.get("CapacityReservationPreference") if isinstance(specification, Mapping) else None
    if (raw.get("SpotInstanceRequestId") is None and isinstance(reservation_id, str) and reservation_id
            and preference == "capacity-reservations-only"):
        return reservation_id
    return ""


def selected(terms: Any, described: Sequence[Mapping[str, Any]], now: dt.datetime) -> tuple[CapacityReservation, ...]:
    """The class's `status.capacityReservations` that the saved answer `described` (DescribeCapacityReservations'
    entries, `EndDate` a datetime) gives `terms` at `now`: each query's matches in the answer's order, each id once
    and none past its end (`unexpired`), read as the status holds them (`reservation`; one it cannot read left out),
    sorted by id."""
    return status_of([raw for query in queries(terms) for raw in described if query.selects(raw)], now)[0]


def status_of(raws: Sequence[Mapping[str, Any]], now: dt.datetime) -> tuple[tuple[CapacityReservation, ...], list[str]]:
    """The queries' answers `raws` (in their order) as the class's status holds them — each id once and none past
    its end (`unexpired`), read by `reservation`, sorted by id — and why each one it cannot read is left out."""
    found: dict[str, CapacityReservation] = {}
    left_out: list[str] = []
    for raw in unexpired(raws, now):
        read = reservation(raw, now)
        if isinstance(read, str):
            left_out.append(read)
        else:
            found[read.id] = read
    return tuple(found[key] for key in sorted(found)), left_out


def unexpired(raws: Sequence[Mapping[str, Any]], now: dt.datetime) -> list[Mapping[str, Any]]:
    """v1.14.1's `filterReservations`: each id once (the first), and none whose `EndDate` is past."""
    seen: set[str] = set()
    out: list[Mapping[str, Any]] = []
    for raw in raws:
        rid = raw.get("CapacityReservationId")
        key = rid if isinstance(rid, str) else repr(rid)
        if key in seen:
            continue
        seen.add(key)
        end = raw.get("EndDate")
        if isinstance(end, dt.datetime) and end <= now:
            continue
        out.append(raw)
    return out


__all__ = [
    "EXPIRATION_PERIOD", "LABEL_RESERVATION_ID", "LABEL_RESERVATION_INTERRUPTIBLE", "LABEL_RESERVATION_TYPE",
    "MATCH_CRITERIA", "MAX_RESULTS", "RESERVED_PRICE_DIVISOR", "STATE_ACTIVE", "STATE_EXPIRING", "TERMS",
    "TYPE_CAPACITY_BLOCK", "TYPE_DEFAULT", "CapacityReservation", "Query", "ReservedOffering", "available_count",
    "instance_reservation", "is_expiring", "launch_choices", "queries", "reservation", "reserved_offerings",
    "selected", "status_of", "unexpired",
]
