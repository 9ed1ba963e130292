"""Capacity blocks ending during the rollout: when Karpenter v1.14.1's expiration controller deletes a reserved node.

aws v1.14.1 `pkg/controllers/capacityreservation/expiration/controller.go` deletes every NodeClaim in a capacity
block once the block is `expiring`: 40 minutes before its end (`pkg/apis/v1/ec2nodeclass_status.go:238`,
`capacityReservationExpirationPeriod`). The snapshot tells a block's end by the cluster's EC2NodeClasses:
`status.capacityReservations[]` with `reservationType: capacity-block` and `endTime`. A node labelled
`karpenter.sh/capacity-type: reserved` and `karpenter.k8s.aws/capacity-reservation-id` of such a block is deleted
then — as an expiry is (no budget, no replacement first), so the plan shows it as expiring at that moment.

The controller itself asks EC2 by the NodeClaims' reservation ids, whatever a class's status lists: a block no class
status lists is read from the saved `aws ec2 describe-capacity-reservations --output json` (`--capacity-reservations`)
when it holds it as that query answers — `State` `active`, `ReservationType` `capacity-block`, an `EndDate`, and
readable as v1.14.1 reads a reservation (`capacityreservations.reservation`). A block that has ended already at
`--start` expires its nodes at once (EC2 has taken them back). Default reservations (interruptible or not) are never
expired early; a reservation neither a class status nor the answer lists is not known to end: a node labelled
`karpenter.k8s.aws/capacity-reservation-type: capacity-block` in such a block is counted in a note naming
`--capacity-reservations` (:meth:`CapacityBlocks.notes`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from karpenter_policy.cloud.capacityreservations import (
    EXPIRATION_PERIOD,
    STATE_ACTIVE,
    TYPE_CAPACITY_BLOCK,
    CapacityReservation,
    reservation,
)
from karpenter_policy.commands.plan.fleet import FleetNode
from karpenter_policy.commands.plan.redact import hashed
from karpenter_policy.commands.plan.reservationdrift import FLAG, GIVE
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk

__all__ = ["CapacityBlocks"]


class CapacityBlocks:
    """The capacity blocks the snapshot's EC2NodeClasses list — and, of those they do not, the saved answer
    `described` (`Ec2Answers.capacity_reservations`), read at `now` —, by reservation id: their end."""

    def __init__(self, cluster_classes: Sequence[Obj], *, redact: bool = False,
                 described: Sequence[Mapping[str, Any]] = (), now: dt.datetime | None = None) -> None:
        self.redact = redact
        self.described = bool(described)
        self.ends: dict[str, dt.datetime] = {}
        #: nodes in a capacity block whose end neither a class status nor the answer tells
        self.unknown: set[str] = set()
        for node_class in cluster_classes:
            status = node_class.get("status")
            listed = status.get("capacityReservations") if isinstance(status, Mapping) else None
            for item in listed if isinstance(listed, list) else []:
                if not isinstance(item, Mapping) or item.get("reservationType") != TYPE_CAPACITY_BLOCK:
                    continue
                end = item.get("endTime")
                if isinstance(end, str) and isinstance(item.get("id"), str):
                    moment = objects.parse_time(end)  # the snapshot checked it is a time
                    known = self.ends.get(item["id"])
                    self.ends[item["id"]] = moment if known is None else min(known, moment)
        listed = set(self.ends)
        for raw in described:
            if raw.get("State") != STATE_ACTIVE or raw.get("ReservationType") != TYPE_CAPACITY_BLOCK:
                continue
            read = reservation(raw, now or dt.datetime.now(dt.UTC))
            if isinstance(read, CapacityReservation) and read.end_time is not None and read.id not in listed:
                self.ends[read.id] = read.end_time

    def notes(self) -> list[str]:
        """The nodes in capacity blocks whose end is not known (when they expire is not planned)."""
        if not self.unknown:
            return []
        count = len(self.unknown)
        where = f"the saved {FLAG} answer does not list their blocks" if self.described else GIVE
        return [f"{count} node{'s' if count != 1 else ''} in capacity blocks no EC2NodeClass status lists: when "
                f"Karpenter deletes {'them' if count != 1 else 'it'} (40 minutes before the block ends) is not "
                f"planned; {where}"]

    def expiry(self, node: FleetNode) -> tuple[str, dt.datetime] | None:
        """(reservation id — hashed `cr-…` with `--redact` —, when the expiration controller deletes the node) for a
        node in a capacity block."""
        labels = node.claim.labels if node.claim is not None else node.labels
        reservation = labels.get(wk.CAPACITY_RESERVATION_ID)
        if labels.get(wk.CAPACITY_TYPE) != wk.CAPACITY_RESERVED or not reservation:
            return None
        if reservation not in self.ends:
            if labels.get(wk.CAPACITY_RESERVATION_TYPE) == TYPE_CAPACITY_BLOCK:
                self.unknown.add(node.name)
            return None
        shown = hashed("cr", reservation) if self.redact else reservation
        end = self.ends[reservation]
        # a block ending within 40 minutes of year 1 expired long ago: the earliest moment Python can say
        earliest = dt.datetime.min.replace(tzinfo=end.tzinfo)
        return shown, end - EXPIRATION_PERIOD if end - earliest >= EXPIRATION_PERIOD else earliest
