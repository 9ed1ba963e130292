"""Static provisioning (Karpenter v1.14.1 core pkg/controllers/static/provisioning/controller.go), started with the
`StaticCapacity` feature gate: each static NodePool of the constraint sets in force gets NodeClaims launched up to
its `replicas`, from its template (`reconcile.staticclaim`), never through pod scheduling.

Per NodePool, as `Reconcile`: nothing while the NodePool is not Ready or the cluster state not synced (looked at
again a second later); nothing when its active and pending-disruption claims (`state.nodepoolcounts`) reach
`replicas` (lowering is the deprovisioning controller's); else `replicas - active` claims, bounded by `limits.nodes`
(every claim counted against it, deleting ones too: `ReserveNodeCount`) — none granted logs `nodepool node limit
reached` and looks again 30 s later; some granted logs `provisioning nodeclaims to satisfy replica count` (current,
desired, provision-count) and launches them at once, counted
`karpenter_nodeclaims_created_total{reason="provisioned"}`. A launch this controller made and the state has not
shown yet counts as active (Karpenter's `NodePoolState` is updated by its `Create`): under the threaded runner no
NodePool is provisioned twice for one shortfall. It looks again every minute (`RequeueAfter: time.Minute`) and when
a NodeClaim or Node changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.model.pools import pool_name
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.metrics import STATIC_PROVISIONING
from karpenter_policy.reconcile.provisioning.provisioner import Provisioner
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.nodepoolcounts import node_counts, node_limit_left
from karpenter_policy.reconcile.static.watched import REQUEUE, StaticWatch
from karpenter_policy.reconcile.staticclaim import static_claim

__all__ = ["PROVISIONED", "StaticProvisioning"]

STATIC = logs.logger("static.provisioning")
#: v1.14.1's reason for the claims it creates (core pkg/metrics/constants.go `ProvisionedReason`).
PROVISIONED = "provisioned"
LIMIT_REQUEUE = 30.0
SYNC_REQUEUE = 1.0
#: The most NodeClaims one step launches for a NodePool (v1.14.1 makes them all in one slice, so a `replicas` of
#: int64's largest with no `limits.nodes` panics it): the rest at the next step, a second later.
MAX_LAUNCHES_PER_STEP = 1000


class StaticProvisioning(StaticWatch):
    """See the module docstring. `disrupting`: the nodes of the disruption commands under way; `synced`: the
    cluster state has synced once."""

    name = "static-provisioning"
    label = STATIC_PROVISIONING

    def __init__(
        self, context: Context, provisioner: Provisioner, disrupting: Callable[[], frozenset[str]],
        synced: Callable[[], bool],
    ) -> None:
        super().__init__(context)
        self.provisioner = provisioner
        self.disrupting = disrupting
        self.synced = synced
        self._launched: dict[str, set[str]] = {}  # NodePool → nodes launched that no claim of the state names yet
        self._serial = 0  # each launch's client token its own (with the time: across restarts)

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """Every static NodePool in force brought up to its replicas (see the module docstring); when next due."""
        context = self.context
        static = context.static_sets()
        if not static:
            return None
        if not self.synced():
            return now + SYNC_REQUEUE
        try:
            templates = context.static_template_sets()
        except CloudError as error:
            result.errors.append(f"static provisioning: {error}")
            return now + SYNC_REQUEUE
        not_ready = context.registration_health.not_ready()
        state = context.state
        claims = state.claims()
        named = {claim.node_name for claim in claims if claim.node_name}
        # A command's node marked for deletion (not yet deleting) counts as pending disruption here, as its
        # replacement, launched before the mark, may not be in the state yet: never a second launch for it.
        deleting_nodes = frozenset(n.name for n in state.nodes() if n.deleting)
        disrupting = self.disrupting()
        due = now + REQUEUE
        for constraint_set in static:
            name = pool_name(constraint_set.pool)
            if name in not_ready or constraint_set.pool not in templates.sets:
                continue
            unseen = self._launched.get(name, set()) - named
            self._launched[name] = unseen
            counts = node_counts(claims, name, deleting_nodes, disrupting)
            counts = dataclasses.replace(counts, active=counts.active + len(unseen))
            active = counts.active
            replicas = int((constraint_set.nodepool or {})["replicas"])
            if active + counts.pending_disruption >= replicas:
                continue
            template = templates.template(constraint_set.pool)
            granted = node_limit_left(counts, template.node_limit, replicas - active)
            if granted > MAX_LAUNCHES_PER_STEP:  # the rest a second later: never a list of 2^63 claims
                granted = MAX_LAUNCHES_PER_STEP
                due = min(due, now + SYNC_REQUEUE)
            if granted <= 0:
                STATIC.info("nodepool node limit reached", extra=context.fields(NodePool=name))
                due = min(due, now + LIMIT_REQUEUE)
                continue
            STATIC.info(
                "provisioning nodeclaims to satisfy replica count",
                extra=context.fields(NodePool=name, current=active, desired=replicas, **{"provision-count": granted}),
            )
            # a client token of each launch's own, across restarts too (EC2 answers a token it saw with that launch)
            stamp = context.wall_clock().strftime("%Y%m%dT%H%M%S.%f")
            claims_ = []
            for _ in range(granted):
                self._serial += 1
                claims_.append(static_claim(template, f"static-{stamp}-{self._serial}"))
            launched = self.provisioner.launch_replacements(
                claims_, "static", result, "provisioning", PROVISIONED
            )
            if isinstance(launched, str):
                result.errors.append(f"static provisioning of NodePool {name}: {launched}")
                due = min(due, now + SYNC_REQUEUE)
                continue
            self._launched[name] = unseen | set(launched)
        return due
