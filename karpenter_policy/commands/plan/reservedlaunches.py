"""Replacements launched into capacity reservations: which reservations a v1 NodePool's replacements may take in
`plan`'s waves, and how much room each has left as the waves launch and delete nodes.

Karpenter v1.14.1 adds to each instance type one `reserved` offering per reservation of it that the NodePool's
EC2NodeClass selects (aws `pkg/providers/instancetype/offering/reserved_capacity_resolver.go`; here
`cloud.capacityreservations.reserved_offerings` and `cloud.reservedtypes`), priced at the on-demand price ÷ 10,000,000
and available while the reservation has room; the scheduler, ordering by price, takes a reserved offering first and
counts each reservation's room within a run (core `scheduling/nodeclaim.go` reserved offerings, `scheduling.
reservedclaims`). The launch goes into the reservation of the claim's zone with the most room (aws
`pkg/providers/instance/filter/filter.go`, `cloud.capacityreservations.launch_choices`); the availability cache takes
one on a launch (`MarkLaunched`) and gives one back when an instance in the reservation is terminated
(`MarkTerminated`).

What HEAD's class selects is `ReservationDriftRules.selected_ids` (the cluster's status when HEAD keeps its terms,
else the saved `--capacity-reservations` answer); the room of each is the answer's `AvailableInstanceCount`
(`capacityreservations.available_count`) — v1.14.1's `status.capacityReservations` carries no count, so without the
answer (or without the reservation in it) no room is assumed and a note says so. :class:`ReservedLaunches` keeps the
count for the whole plan: each replacement launched into a reservation takes one (:meth:`ReservedLaunches.take`), each
node in a reservation the plan deletes gives one back when its instance is terminated — after its drain, in the
plan's virtual time (:meth:`ReservedLaunches.release`, called by the room with that time; given by
:meth:`ReservedLaunches.advance` once the plan reaches it), as v1.14.1's termination controller calls
`MarkTerminated` — and the templates offered to each scheduling run carry the reserved offerings with the room left
then (:meth:`ReservedLaunches.templates`). A capacity block's state is read at each moment the plan advances to, not
only at `--start`: `expiring` (no offering) from 40 minutes before its end. Pure (no I/O).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from karpenter_policy.api.v1.objects import NodeClassRef
from karpenter_policy.cloud.capacityreservations import (
    STATE_EXPIRING,
    TERMS,
    CapacityReservation,
    ReservedOffering,
    available_count,
    is_expiring,
    launch_choices,
    reservation,
    reserved_offerings,
)
from karpenter_policy.cloud.reservedtypes import with_reserved_offerings
from karpenter_policy.commands.plan.fleet import Fleet
from karpenter_policy.commands.plan.reservationdrift import GIVE, ReservationDriftRules
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.pools import pool_key
from karpenter_policy.scheduling import ClaimPlan, InstanceTable, NodeClaimTemplate

__all__ = ["ReservedLaunches"]


def _class_of(nodepool: Mapping[str, Any]) -> str:
    """The EC2NodeClass the NodePool's nodeClassRef names ("": none, or another provider's class: no reservation)."""
    ref = NodeClassRef.of_nodepool(nodepool)
    return ref.name if ref is not None and ref.is_ec2_node_class else ""


class ReservedLaunches:
    """The reservations each HEAD NodePool's replacements may launch into and their room (see the module docstring).

    `rules`: HEAD, the saved answers, `--start`, the `ReservedCapacity` gate and `--redact` as the drift check reads
    them; `build(name, table)`: HEAD's template `name` (`NodePool/<name>`) over `table`; `types`: the catalog's
    instance types."""

    def __init__(self, rules: ReservationDriftRules, fleet: Fleet, types: Sequence[InstanceType], region: str,
                 build: Callable[[str, InstanceTable], NodeClaimTemplate]) -> None:
        self.types, self.region, self.build, self._show = tuple(types), region, build, rules.show
        self.start = now = rules.now
        #: (seconds from the start, reservation id): room given back when the instance is terminated, not before
        self._due: list[tuple[float, str]] = []
        #: template name (`NodePool/<name>`) → the reservations (with a known count) its replacements may take
        self.pools: dict[str, tuple[CapacityReservation, ...]] = {}
        #: reservation id → its room now
        self.room: dict[str, int] = {}
        #: room name of a node in a tracked reservation → that reservation (given back when the node goes)
        self.held: dict[str, str] = {}
        #: (NodePool, why) → what the plan could not count on
        self.unknown: Counter[tuple[str, str]] = Counter()
        #: changes with every count: a plan made at the same version is the same plan
        self.version = 0
        self._zones = {t.name: frozenset(o.zone for o in t.offerings) for t in self.types}
        self._on_demand = {t.name: t.price_on_demand for t in self.types if t.price_on_demand is not None}
        self._built: dict[tuple[str, tuple[int, ...], tuple[str, ...]], NodeClaimTemplate] = {}
        if not rules.reserved_capacity:
            return
        head, described = rules.head, rules.answers.capacity_reservations
        by_id = {str(raw.get("CapacityReservationId")): raw for raw in described or ()}
        for pool, document in sorted(head.nodepools.items()):
            class_name = _class_of(document)
            node_class = head.node_classes.get(class_name)
            spec = node_class.get("spec") if isinstance(node_class, Mapping) else None
            if not isinstance(spec, Mapping) or not spec.get(TERMS):
                continue
            ids = rules.selected_ids(class_name) if described is not None else None
            if ids is None:
                self.unknown[(pool, f"the room of the capacity reservations EC2NodeClass {class_name} selects is not "
                              f"known (no room assumed); {GIVE}")] += 1
                continue
            found: list[CapacityReservation] = []
            missing: list[str] = []
            for rid in sorted(ids):
                raw = by_id.get(rid)
                read = reservation(raw, now) if raw is not None else None
                if raw is None or not isinstance(read, CapacityReservation) or "AvailableInstanceCount" not in raw:
                    missing.append(rid)
                    continue
                found.append(read)
                self.room.setdefault(rid, available_count(raw))
            if missing:
                self.unknown[(pool, f"the available instance count of reservation(s) {self._show(missing)} is not "
                              f"known (no room assumed); {GIVE}")] += 1
            if found:
                self.pools[pool_key(pool, True)] = tuple(found)
        for name, node in fleet.nodes.items():
            rid = rules.reservation_of(node)
            if rid in self.room:
                self.held[name] = rid

    def shown(self, reservation_id: str) -> str:
        """The reservation id as the plan prints it (hashed `cr-…` with `--redact`)."""
        return self._show([reservation_id]) if reservation_id else ""

    def notes(self, templates: Sequence[NodeClaimTemplate]) -> list[str]:
        """Why a NodePool whose template (of HEAD's `templates`) allows the `reserved` capacity type launches into no
        reservation."""
        allows = {t.name for t in templates if t.requirements.get_or_exists(wk.CAPACITY_TYPE).has(wk.CAPACITY_RESERVED)}
        return [f"nodepool {pool}: no replacement launched into a capacity reservation: {why}"
                for (pool, why), _ in sorted(self.unknown.items()) if pool_key(pool, True) in allows]

    def _offerings(self, pool: str) -> dict[str, tuple[ReservedOffering, ...]]:
        return reserved_offerings(self.pools[pool], self._zones, self._on_demand, lambda rid: self.room.get(rid, 0))

    def templates(self, base: Sequence[NodeClaimTemplate]) -> list[NodeClaimTemplate]:
        """`base` with each NodePool that may launch into reservations over a table holding its reserved offerings
        with the room left now (built once per count)."""
        out = []
        for template in base:
            found = self.pools.get(template.name)
            if found is None:
                out.append(template)
                continue
            key = (template.name, tuple(self.room.get(r.id, 0) for r in found), tuple(r.state for r in found))
            built = self._built.get(key)
            if built is None:
                types = with_reserved_offerings(self.types, self._offerings(template.name))
                built = self._built[key] = self.build(template.name, InstanceTable(types, self.region))
            out.append(built)
        return out

    def choose(self, claim: ClaimPlan) -> str:
        """The reservation a claim launched as `reserved` goes into ("": none): of those its requirements name, in
        its type and zone, the one with the most room (`launch_choices`)."""
        launch = claim.launch
        found = self.pools.get(claim.template)
        if launch is None or launch.capacity_type != wk.CAPACITY_RESERVED or found is None:
            return ""
        allowed = claim.requirements.get_or_exists(wk.CAPACITY_RESERVATION_ID)
        offerings = [o for per_type in self._offerings(claim.template).values() for o in per_type
                     if allowed.has(o.reservation_id)]
        chosen = launch_choices([(launch.instance_type, launch.zone)], offerings)
        picked = chosen.get((launch.instance_type, launch.zone))
        return picked.reservation_id if picked is not None else ""

    def take(self, reservation_id: str, node: str) -> None:
        """The node (its room name) launched into the reservation: one less room (`MarkLaunched`)."""
        self.room[reservation_id] -= 1
        self.held[node] = reservation_id
        self.version += 1

    def release(self, nodes: Collection[str], at: float | None = None) -> None:
        """The nodes are deleted: each in a tracked reservation gives it one back (`MarkTerminated`) when its instance
        is terminated — `at` seconds from the start (its drain's end; None: now); :meth:`advance` gives it."""
        for node in nodes:
            rid = self.held.pop(node, None)
            if rid is None:
                continue
            if at is None:
                self.room[rid] += 1
                self.version += 1
            else:
                heapq.heappush(self._due, (at, rid))

    def advance(self, at: float) -> None:
        """The plan's virtual time reached `at` seconds from the start: the instances terminated by then give their
        reservations' room back, and a capacity block within 40 minutes of its end is `expiring` from then on
        (v1.14.1's `capacityReservationExpirationPeriod`): no launch takes it any more."""
        while self._due and self._due[0][0] <= at:
            _, rid = heapq.heappop(self._due)
            self.room[rid] += 1
            self.version += 1
        moment = self.start + dt.timedelta(seconds=at)
        for pool, found in list(self.pools.items()):
            if not any(_expires(r, moment) for r in found):
                continue
            self.pools[pool] = tuple(dataclasses.replace(r, state=STATE_EXPIRING) if _expires(r, moment) else r
                                     for r in found)
            self.version += 1


def _expires(found: CapacityReservation, moment: dt.datetime) -> bool:
    """Whether a capacity block not `expiring` yet is by `moment`."""
    return found.state != STATE_EXPIRING and is_expiring(found.reservation_type, found.end_time, moment)
