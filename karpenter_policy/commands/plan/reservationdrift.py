"""CapacityReservationDrift of Karpenter's reserved nodes: the reservation a node's instance is in against the
reservations HEAD's EC2NodeClass selects.

Karpenter v1.14.1 (aws `pkg/cloudprovider/drift.go:148`, `isCapacityReservationDrifted`) — after security groups and
subnets, before placement groups — drifts a NodeClaim whose instance is in a capacity reservation whose id is not
among its EC2NodeClass's `status.capacityReservations`, reason `CapacityReservationDrift`. An instance that EC2 moved
to on-demand (no reservation any more) never drifts so, and with the `ReservedCapacity` gate off no instance is read
as reserved (`--feature-gates ReservedCapacity=false`: nothing drifts so). The class's status is what its controller
found with DescribeCapacityReservations for `spec.capacityReservationSelectorTerms` (`cloud/capacityreservations.py`:
the queries, the `state: active` filter, reservations past their end and of an unknown criteria or type left out).

The node's side is what v1.14.1 reads, the instance (`instance.Instance.CapacityReservationDetails`): from
`--instances`, its `CapacityReservationId` when it launched `capacity-reservations-only` and is not spot
(`capacityreservations.instance_reservation`) — an instance listed without one is in none, whatever its labels say.
A node whose instance is not in `--instances` is read by its (NodeClaim's) labels: `karpenter.sh/capacity-type:
reserved` and `karpenter.k8s.aws/capacity-reservation-id` — the capacity-type controller relabels a node `on-demand`
within a minute of its instance leaving the reservation, so the labels stand for the instance's reservation.

What HEAD's class selects, for a reserved node in reservation R:

* **HEAD keeps the cluster's terms** (the snapshot holds the EC2NodeClass of that name with the very
  `capacityReservationSelectorTerms` HEAD keeps, and its `status.capacityReservations`): those ids;
* **else, with `--capacity-reservations`** (a saved `aws ec2 describe-capacity-reservations --output json`): HEAD's
  terms applied to it as EC2 applies their filters, at `--start` (`capacityreservations.selected`) — the status the
  class's controller will write;
* **else, HEAD changes the terms** (from BASE's, or from the cluster's): an `id` term naming R selects it when the
  cluster's status shows R exists; no term naming R and no `tags` / `instanceMatchCriteria` term: R is not selected
  (no terms at all select nothing); otherwise the node is counted in a note naming the answer to give, never judged;
* **neither** (no cluster class, terms unchanged, no answer): silent, as before.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.cloud.capacityreservations import TERMS, selected
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.ec2answers import Ec2Answers
from karpenter_policy.commands.plan.fleet import FleetNode
from karpenter_policy.commands.plan.redact import hashed
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk

__all__ = ["CAPACITY_RESERVATION_DRIFT", "FLAG", "GIVE", "ReservationDriftRules"]

#: Karpenter's drift reason (aws v1.14.1 `pkg/cloudprovider/drift.go`).
CAPACITY_RESERVATION_DRIFT: Final = "CapacityReservationDrift"
_FIELD: Final = f"spec.{TERMS}"
#: The flag of the saved DescribeCapacityReservations answer, and what a note asks for when the plan lacks it.
FLAG: Final = "--capacity-reservations"
GIVE: Final = f"give `aws ec2 describe-capacity-reservations --output json` as {FLAG}"


@dataclass(frozen=True, slots=True)
class _Selection:
    """What HEAD's terms select: `ids` named (by `id` terms; or all of them, read from `source` — the cluster's
    `status.capacityReservations` or `--capacity-reservations` —, when it is not ""), whether other (`tags` /
    `instanceMatchCriteria`) terms select more (`open`), the reservations the cluster's status shows exist, and
    whether BASE → HEAD (or cluster → HEAD) changes the terms."""

    ids: frozenset[str]
    source: str
    open: bool
    existing: frozenset[str]
    changed: bool


def _terms(document: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    spec = (document or {}).get("spec")
    terms = spec.get(TERMS) if isinstance(spec, Mapping) else None
    return [t for t in terms if isinstance(t, Mapping)] if isinstance(terms, list) else []


def _status_ids(document: Mapping[str, Any] | None) -> frozenset[str] | None:
    status = (document or {}).get("status")
    listed = status.get("capacityReservations") if isinstance(status, Mapping) else None
    if not isinstance(listed, list):
        return None
    return frozenset(str(i["id"]) for i in listed if isinstance(i, Mapping) and i.get("id"))


def _plural(count: int) -> str:
    return f"{count} node{'s' if count != 1 else ''}"


class ReservationDriftRules:
    """The module docstring's check for one BASE → HEAD change, each class's terms resolved once; `cluster` holds
    the snapshot's EC2NodeClasses."""

    def __init__(self, base: PolicySide, head: PolicySide, cluster: Sequence[Obj], *, redact: bool = False,
                 answers: Ec2Answers | None = None, instance_ids: Mapping[str, str] | None = None,
                 now: dt.datetime | None = None, reserved_capacity: bool = True) -> None:
        self.base, self.head, self.redact = base, head, redact
        self.cluster = {objects.name(c): c for c in cluster}
        #: the saved answers (`--instances`, `--capacity-reservations`), each node's instance, and `--start`
        self.answers, self.instance_ids = answers or Ec2Answers(), instance_ids or {}
        self.now = now or dt.datetime.now(dt.UTC)
        self.reserved_capacity = reserved_capacity
        self._resolved: dict[str, _Selection | None] = {}
        #: (owner, why) → reserved nodes whose drift the plan cannot tell
        self.unassessed: Counter[tuple[str, str]] = Counter()

    def notes(self) -> list[str]:
        return [f"{_plural(count)} of {owner}: capacity-reservation drift not assessed: {why}"
                for (owner, why), count in sorted(self.unassessed.items())]

    def show(self, ids: Sequence[str]) -> str:
        """Reservation ids as the plan prints them (hashed `cr-…` with `--redact`; none: "none")."""
        shown = [hashed("cr", i) for i in ids] if self.redact else list(ids)
        return ", ".join(shown) or "none"

    def _selection(self, name: str) -> _Selection | None:
        if name not in self._resolved:
            self._resolved[name] = self._resolve(name)
        return self._resolved[name]

    def _resolve(self, name: str) -> _Selection | None:
        head = self.head.node_classes.get(name)
        if head is None:
            return None
        terms = _terms(head)
        base = self.base.node_classes.get(name)
        cluster = self.cluster.get(name)
        status = _status_ids(cluster)
        if cluster is not None and status is not None and _terms(cluster) == terms:
            changed = base is not None and _terms(base) != terms
            return _Selection(status, "status.capacityReservations", False, status, changed)
        changed = (base is not None and _terms(base) != terms) or (cluster is not None and _terms(cluster) != terms)
        described = self.answers.capacity_reservations
        if described is not None:
            found = frozenset(r.id for r in selected(terms, described, self.now))
            return _Selection(found, FLAG, False, found, changed)
        if not changed:
            return None  # nothing in the snapshot tells what the unchanged terms select
        named = frozenset(str(t["id"]) for t in terms if t.get("id"))
        # v1.14.1 queries a term with `tags` or `instanceMatchCriteria` (an `ownerID` alone: nothing, refused anyway)
        wider = any(t.get("tags") or t.get("instanceMatchCriteria") for t in terms)
        return _Selection(named, "", wider, status or frozenset(), True)

    def selected_ids(self, name: str) -> frozenset[str] | None:
        """The reservations HEAD's EC2NodeClass `name` selects, when the cluster's status or the saved answer tells
        them all (None: it does not, or no such class)."""
        selection = self._selection(name)
        return selection.ids if selection is not None and selection.source else None

    def reservation_of(self, node: FleetNode) -> str:
        """The reservation v1.14.1 reads the node's instance to be in ("": none; see the module docstring)."""
        instance = self.instance_ids.get(node.name)
        listed = self.answers.reservation_of
        if listed is not None and instance is not None and instance in listed:
            return listed[instance]
        labels = node.claim.labels if node.claim is not None else node.labels
        if labels.get(wk.CAPACITY_TYPE) != wk.CAPACITY_RESERVED:
            return ""  # on-demand (or fallen back to it)
        return labels.get(wk.CAPACITY_RESERVATION_ID) or ""

    def node_class(self, name: str, node: FleetNode) -> tuple[str, str] | None:
        """The (field, reason) pair of a node of EC2NodeClass `name` when it drifts (None: it does not, or the plan
        cannot tell — then a note counts it)."""
        reservation = self.reservation_of(node) if self.reserved_capacity else ""
        if not reservation:
            return None  # not in a reservation (on-demand, fallen back to it, or the gate off): never drifts so
        selection = self._selection(name)
        if selection is None:
            return None
        owner = f"EC2NodeClass {name}"
        shown = self.show([reservation])
        now = self.show(sorted(selection.ids))
        if selection.source:
            if reservation in selection.ids:
                return None
            if selection.changed and selection.source == FLAG:
                why = (f"{owner}'s {_FIELD} changed → reservation {shown} of node {node.name} is no longer "
                       f"selected ({FLAG}: {now})")
            else:
                why = (f"reservation {shown} of node {node.name} is not among {owner}'s {_FIELD} "
                       f"({selection.source}: {now})")
            source = f"{_FIELD} ({selection.source})"
        elif reservation in selection.ids:
            if reservation in selection.existing:
                return None
            self.unassessed[(owner, f"HEAD's {_FIELD} names reservation {shown} by id, which the snapshot's "
                             "status.capacityReservations does not show to exist (an id that does not exist "
                             f"selects nothing); {GIVE}")] += 1
            return None
        elif selection.open:
            self.unassessed[(owner, f"HEAD changes {_FIELD}; its tags/instanceMatchCriteria terms select what "
                             f"DescribeCapacityReservations answers: {GIVE}")] += 1
            return None
        else:
            why = (f"{owner}'s {_FIELD} changed → reservation {shown} of node {node.name} is no longer selected "
                   f"(now: {now})")
            source = f"{_FIELD} changed"
        if selection.source and selection.changed:
            source = f"{_FIELD} changed"
        return f"{owner}: {CAPACITY_RESERVATION_DRIFT} ({source})", f"{CAPACITY_RESERVATION_DRIFT}: {why}"
