"""Static deprovisioning (Karpenter v1.14.1 core pkg/controllers/static/deprovisioning/controller.go), started with the
`StaticCapacity` feature gate: a static NodePool with more active NodeClaims than `replicas`
(`state.nodepoolcounts`: a node pending disruption does not count, so a static drift's replacement is no excess) has
the excess deleted.

Which claims go, as `getDeprovisioningCandidates`: first those not launched yet (no `status.providerID`, not being
deleted: by name, as the list returns them); then, of its nodes with a claim that are not being deleted nor a
disruption command's, the **empty** ones — no pod bound, or only DaemonSets' pods none of which has an active
`karpenter.sh/do-not-disrupt` (`api.v1.donotdisrupt`) — by name; then the others, those without an active
do-not-disrupt pod first, each by its pods' rescheduling cost (their eviction costs) times the fraction of its
lifetime left (`expireAfter`), cheapest first (v1.14.1 `ReschedulingCost` x `LifetimeRemaining`; name breaks
ties: v1.14.1's order among equals is its map's). Each chosen NodeClaim is deleted (termination drains and terminates
it, `termination`), logged at debug (`deleting nodeclaim`), after the info line `deprovisioning nodeclaims to
satisfy replica count` (current, desired, deprovision-count). A deletion asked counts as deleting until the state
shows it, so the threaded runner never deletes twice for one excess. It looks again every minute and when a
NodeClaim or Node changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from karpenter_policy.api.v1.donotdisrupt import do_not_disrupt, start_time
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import pool_name
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.disruption.decider import lifetime_remaining
from karpenter_policy.reconcile.disruption.expiry import expire_after
from karpenter_policy.reconcile.metrics import STATIC_DEPROVISIONING
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.nodepoolcounts import node_counts
from karpenter_policy.reconcile.state.records import ClaimRecord, NodeRecord, PodRecord
from karpenter_policy.reconcile.static.watched import REQUEUE, StaticWatch

__all__ = ["StaticDeprovisioning", "deprovisioning_candidates"]

STATIC = logs.logger("static.deprovisioning")


def deprovisioning_candidates(
    claims: list[ClaimRecord], nodes: list[tuple[NodeRecord, list[PodRecord]]], count: int,
    expire_after_seconds: int | None, now: dt.datetime,
) -> list[str]:
    """The names of the `count` NodeClaims to delete, in v1.14.1's order (see the module docstring): `claims` the
    NodePool's not being deleted, `nodes` its nodes that may go, with their pods."""
    chosen = [c.name for c in sorted(claims, key=lambda c: c.name) if not c.provider_id][:count]
    empty: list[NodeRecord] = []
    others: list[tuple[bool, float, str, NodeRecord]] = []
    for node, pods in sorted(nodes, key=lambda e: e[0].name):
        held = any(do_not_disrupt(p.annotations, start_time(p.obj), now).active for p in pods)
        if not pods or (all(p.daemon for p in pods) and not held):
            empty.append(node)
            continue
        cost = sum(p.disruption_cost for p in pods) * lifetime_remaining(expire_after_seconds, _created(node), now)
        others.append((held, cost, node.name, node))
    for node in [*empty, *(e[3] for e in sorted(others, key=lambda e: e[:3]))]:
        if len(chosen) >= count:
            break
        name = claim_of_node(node.obj)
        if name is not None and name not in chosen:
            chosen.append(name)
    return chosen


def _created(node: NodeRecord) -> dt.datetime | None:
    try:
        return objects.parse_time(node.created) if node.created else None
    except ValueError:
        return None


class StaticDeprovisioning(StaticWatch):
    """See the module docstring. `disrupting`: the nodes of the disruption commands under way."""

    name = "static-deprovisioning"
    label = STATIC_DEPROVISIONING

    def __init__(self, context: Context, disrupting: Callable[[], frozenset[str]]) -> None:
        super().__init__(context)
        self.disrupting = disrupting
        self._asked: set[str] = set()  # NodeClaims whose deletion was asked, until the state shows it

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """Every static NodePool in force brought down to its replicas (see the module docstring)."""
        context = self.context
        static = context.static_sets()
        if not static:
            return None
        state = context.state
        claims = state.claims()
        live = {c.name for c in claims if c.deletion_timestamp is None}
        self._asked &= live
        nodes = state.nodes()
        deleting_nodes = frozenset(n.name for n in state.deleting_nodes())  # marked for deletion too
        disrupting = self.disrupting()
        wall = context.wall_clock()
        for constraint_set in static:
            name = pool_name(constraint_set.pool)
            counts = node_counts(claims, name, deleting_nodes, disrupting, frozenset(self._asked))
            replicas = int((constraint_set.nodepool or {})["replicas"])
            excess = counts.active - replicas
            if excess <= 0:
                continue
            STATIC.info(
                "deprovisioning nodeclaims to satisfy replica count",
                extra=context.fields(NodePool=name, current=counts.active, desired=replicas,
                                     **{"deprovision-count": excess}),
            )
            own = [c for c in claims if c.labels.get(wk.NODEPOOL) == name and c.name in live
                   and c.name not in self._asked]
            own_names = {c.name for c in own}
            candidates = [
                (node, state.pods_on(node.name)) for node in nodes
                if node.labels.get(wk.NODEPOOL) == name and not node.deleting and node.name not in disrupting
                and claim_of_node(node.obj) in own_names
            ]
            lifetime = expire_after(constraint_set)
            seconds = None if lifetime is None else int(lifetime.total_seconds())
            for claim in deprovisioning_candidates(own, candidates, excess, seconds, wall):
                try:
                    context.claims.delete(claim)
                except ClusterError as error:
                    result.errors.append(f"static deprovisioning of NodePool {name}: deleting nodeclaim {claim}, "
                                         f"{error}")
                    continue
                self._asked.add(claim)
                STATIC.debug("deleting nodeclaim", extra=context.fields(NodePool=name, NodeClaim=claim))
        return now + REQUEUE
