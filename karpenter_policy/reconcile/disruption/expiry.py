"""Forceful expiry of a Karpenter v1 NodePool's nodes (`expireAfter`), as v1.14.1's NodeClaim expiration controller
does it (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/expiration/controller.go, `Controller.Reconcile`): once
`creationTimestamp + expireAfter` has passed, the node is deleted — no disruption decision, no budget, no
replacement first, whatever `karpenter.sh/do-not-disrupt` says; `expireAfter: Never` never. Termination then drains
it as any deletion (PodDisruptionBudgets hold its pods' evictions). A Provisioner's nodes keep v0.31's graceful
expiration (`ttlSecondsUntilExpired`, a disruption stage: decider.py).

The NodePool's `expireAfter` in force is read (Karpenter copies it onto each NodeClaim at launch, and a changed one
drifts the NodeClaim: both end in a replacement). Run by the disruption controller at each of its steps, whether or
not the cluster is quiet; it says when the next node expires.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.api.v1.goduration import parse_go_duration
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.state.records import NodeRecord

#: `expireAfter: Never`.
NEVER = "Never"


@dataclass(slots=True)
class Expired:
    """What a pass found: the nodes past their NodePool's expireAfter, and when the next one expires."""

    nodes: list[NodeRecord] = field(default_factory=list)
    next_in: float | None = None  # seconds until the next node of a NodePool expires (None: none will)


def expire_after(constraint_set: ConstraintSet) -> dt.timedelta | None:
    """A NodePool set's `expireAfter` (None: Never, unreadable — admission refused such a set — or a Provisioner)."""
    value = (constraint_set.nodepool or {}).get("expireAfter") if constraint_set.is_nodepool else None
    if value is None or str(value) == NEVER:
        return None
    try:
        return parse_go_duration(str(value))
    except ValueError:
        return None


def _created(node: NodeRecord) -> dt.datetime | None:
    stamp = objects.creation_timestamp(node.obj)
    if stamp is None:
        return None
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def expired(nodes: Iterable[NodeRecord], sets: Mapping[str, ConstraintSet], now: dt.datetime) -> Expired:
    """Our NodePool nodes not being deleted whose expireAfter has passed (see the module docstring)."""
    found = Expired()
    for node in nodes:
        constraint_set = sets.get(node.provisioner or "")
        if not node.ours or node.deleting or constraint_set is None:
            continue
        lifetime = expire_after(constraint_set)
        created = _created(node)
        if lifetime is None or created is None:
            continue
        left = (created + lifetime - now).total_seconds()
        if left <= 0:
            found.nodes.append(node)
        else:
            found.next_in = left if found.next_in is None else min(found.next_in, left)
    return found


__all__ = ["NEVER", "Expired", "expire_after", "expired"]
