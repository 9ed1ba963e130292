"""CapacityReservationDrift of Karpenter's reserved nodes: the reservation a node was launched into against the
reservations HEAD's EC2NodeClass selects.

Karpenter v1.14.1 (aws `pkg/cloudprovider/drift.go:148`, `isCapacityReservationDrifted`) — after security groups and
subnets, before placement groups — drifts a NodeClaim whose instance is in a capacity reservation whose id is not
among its EC2NodeClass's `status.capacityReservations`, reason `CapacityReservationDrift`. An instance that EC2 moved
to on-demand (no reservation any more) never drifts so. The class's status is what its controller found with
DescribeCapacityReservations for `spec.capacityReservationSelectorTerms`; a term naming an `id` that does not exist
selects nothing.

The node's side is its (NodeClaim's) labels: `karpenter.sh/capacity-type: reserved` and
`karpenter.k8s.aws/capacity-reservation-id` — the capacity-type controller relabels a node `on-demand` within a
minute of its instance leaving the reservation, so the labels stand for the instance's `CapacityReservationId`.

What HEAD's class selects, for a reserved node in reservation R:

* **HEAD keeps the cluster's terms** (the snapshot holds the EC2NodeClass of that name with the very
  `capacityReservationSelectorTerms` HEAD keeps, and its `status.capacityReservations`): those ids;
* **HEAD changes the terms** (from BASE's, or from the cluster's): an `id` term naming R selects it when the cluster's
  status shows R exists; no term naming R and no `tags` / `ownerID` term: R is not selected (no terms at all select
  nothing); otherwise the answer is DescribeCapacityReservations' at apply time — the node is counted in a note,
  never judged;
* **neither** (no cluster class, terms unchanged): silent, as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import FleetNode
from karpenter_policy.commands.plan.redact import hashed
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk

__all__ = ["CAPACITY_RESERVATION_DRIFT", "TERMS", "ReservationDriftRules"]

#: Karpenter's drift reason (aws v1.14.1 `pkg/cloudprovider/drift.go`).
CAPACITY_RESERVATION_DRIFT: Final = "CapacityReservationDrift"
#: The EC2NodeClass field.
TERMS: Final = "capacityReservationSelectorTerms"
_FIELD: Final = f"spec.{TERMS}"


@dataclass(frozen=True, slots=True)
class _Selection:
    """What HEAD's terms select: `ids` named (by `id` terms, or the status's when `from_status`), whether other
    (`tags` / `ownerID`) terms select more (`open`), the reservations the cluster's status shows exist, and whether
    BASE → HEAD (or cluster → HEAD) changes the terms."""

    ids: frozenset[str]
    from_status: bool
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

    def __init__(self, base: PolicySide, head: PolicySide, cluster: Sequence[Obj], *, redact: bool = False) -> None:
        self.base, self.head, self.redact = base, head, redact
        self.cluster = {objects.name(c): c for c in cluster}
        self._resolved: dict[str, _Selection | None] = {}
        #: (owner, why) → reserved nodes whose drift the plan cannot tell
        self.unassessed: Counter[tuple[str, str]] = Counter()

    def notes(self) -> list[str]:
        return [f"{_plural(count)} of {owner}: capacity-reservation drift not assessed: {why}"
                for (owner, why), count in sorted(self.unassessed.items())]

    def _show(self, ids: Sequence[str]) -> str:
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
            return _Selection(status, True, False, status, changed)
        changed = (base is not None and _terms(base) != terms) or (cluster is not None and _terms(cluster) != terms)
        if not changed:
            return None  # nothing in the snapshot tells what the unchanged terms select
        named = frozenset(str(t["id"]) for t in terms if t.get("id"))
        return _Selection(named, False, any(not t.get("id") for t in terms), status or frozenset(), True)

    def node_class(self, name: str, node: FleetNode) -> tuple[str, str] | None:
        """The (field, reason) pair of a node of EC2NodeClass `name` when it drifts (None: it does not, or the plan
        cannot tell — then a note counts it)."""
        labels = node.claim.labels if node.claim is not None else node.labels
        reservation = labels.get(wk.CAPACITY_RESERVATION_ID)
        if labels.get(wk.CAPACITY_TYPE) != wk.CAPACITY_RESERVED or not reservation:
            return None  # on-demand (or fallen back to it): v1.14.1 never drifts it so
        selection = self._selection(name)
        if selection is None:
            return None
        owner = f"EC2NodeClass {name}"
        shown = self._show([reservation])
        if selection.from_status:
            if reservation in selection.ids:
                return None
            why = (f"reservation {shown} of node {node.name} is not among {owner}'s {_FIELD} "
                   f"(status.capacityReservations: {self._show(sorted(selection.ids))})")
            source = f"{_FIELD} (status.capacityReservations)"
        elif reservation in selection.ids:
            if reservation in selection.existing:
                return None
            self.unassessed[(owner, f"HEAD's {_FIELD} names reservation {shown} by id, which the snapshot's "
                             "status.capacityReservations does not show to exist (an id that does not exist "
                             "selects nothing)")] += 1
            return None
        elif selection.open:
            self.unassessed[(owner, f"HEAD changes {_FIELD}; its tags/ownerID terms select what "
                             "`aws ec2 describe-capacity-reservations` answers at apply time")] += 1
            return None
        else:
            why = (f"{owner}'s {_FIELD} changed → reservation {shown} of node {node.name} is no longer selected "
                   f"(now: {self._show(sorted(selection.ids))})")
            source = f"{_FIELD} changed"
        if selection.from_status and selection.changed:
            source = f"{_FIELD} changed"
        return f"{owner}: {CAPACITY_RESERVATION_DRIFT} ({source})", f"{CAPACITY_RESERVATION_DRIFT}: {why}"
