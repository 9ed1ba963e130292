"""A static NodePool's NodeClaims counted as Karpenter v1.14.1's `NodePoolState` counts them (core
pkg/controllers/state/statenodepool.go `GetNodeCount`): **active** (launched or launching, not being deleted),
**deleting** (the claim or its Node being deleted), **pending disruption** (the node of a disruption command under
way: static drift's candidate, `queue.go` `MarkNodeClaimPendingDisruption`). One reading for the static provisioning
and deprovisioning controllers (`reconcile.static`) and static drift (`disruption.decider`), from the cluster
state's NodeClaims (`ClaimRecord`) and nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state.records import ClaimRecord

__all__ = ["NodeCounts", "node_counts", "node_limit_left"]


@dataclass(frozen=True, slots=True)
class NodeCounts:
    """One NodePool's claims by state (see the module docstring)."""

    active: int = 0
    deleting: int = 0
    pending_disruption: int = 0

    @property
    def total(self) -> int:
        """Every claim counted against `limits.nodes` (`ReserveNodeCount`: active + deleting + pending)."""
        return self.active + self.deleting + self.pending_disruption


def node_counts(
    claims: Iterable[ClaimRecord], nodepool: str, deleting_nodes: frozenset[str], disrupting: frozenset[str],
    asked: frozenset[str] = frozenset(),
) -> NodeCounts:
    """The NodePool's claims (`karpenter.sh/nodepool` label) by state: deleting when the claim has a deletion
    timestamp, its deletion was `asked` (not seen yet) or its Node is being deleted (`deleting_nodes`, v1.14.1's
    `MarkedForDeletion` on the state node); pending disruption when its Node is a command's (`disrupting`)."""
    active = deleting = pending = 0
    for claim in claims:
        if claim.labels.get(wk.NODEPOOL) != nodepool:
            continue
        if claim.deletion_timestamp is not None or claim.name in asked or claim.node_name in deleting_nodes:
            deleting += 1
        elif claim.node_name and claim.node_name in disrupting:
            pending += 1
        else:
            active += 1
    return NodeCounts(active, deleting, pending)


def node_limit_left(counts: NodeCounts, limit: int | None, wanted: int) -> int:
    """How many more claims `limits.nodes` grants of `wanted` (`ReserveNodeCount`: the limit less every claim
    counted; none past it); no limit grants all."""
    if limit is None:
        return max(wanted, 0)
    return max(min(wanted, limit - counts.total), 0)
