"""Provisioning as a controller (`reconcile.steps.Reconciler`): one step takes a new version of the constraint sets
if there is one (and, when there is, or when a NodePool or EC2NodeClass changed in the cluster, writes its NodePools'
readiness and `NodeRegistrationHealthy`: `claims.nodepoolstatus`; a NodePool that is not Ready is not provisioned
from),
follows the launches in flight (registration, settling — `lifecycle`), deletes the nodes whose
kubelet never joined (`liveness`), labels the nodes initialized, then schedules and launches for the pending pods
when their batch window closes (`provisioner`). Woken by the provisioner's `wake`: a pod becomes pending, a node
may be initialized, the constraint sets change. Karpenter splits this across its provisioning and machine
lifecycle controllers (core v0.31.1 `pkg/controllers/provisioning/controller.go`,
`pkg/controllers/machine/lifecycle/controller.go`); here it is one thread, as the provisioner and the launches it
follows share their bookkeeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from karpenter_policy.model.pools import is_nodepool, pool_name
from karpenter_policy.reconcile.constraints import Loaded
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.metrics import PROVISIONER
from karpenter_policy.reconcile.provisioning.lifecycle import NodeLifecycle
from karpenter_policy.reconcile.provisioning.liveness import Liveness
from karpenter_policy.reconcile.provisioning.provisioner import WARM_INTERVAL, Provisioner
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.cluster import Change

#: While launches are in flight (or nodes wait to be initialized), its thread looks at them this often.
INFLIGHT_CHECK = 1.0


class Provisioning:
    """See the module docstring. `refresh` takes the constraint sets' new version, if any (the controller's)."""

    name = "provisioning"
    label = PROVISIONER

    def __init__(
        self,
        context: Context,
        provisioner: Provisioner,
        lifecycle: NodeLifecycle,
        liveness: Liveness,
        refresh: Callable[[ReconcileResult], None],
    ) -> None:
        self.context = context
        self.provisioner = provisioner
        self.lifecycle = lifecycle
        self.liveness = liveness
        self.refresh = refresh
        self._observed: Loaded | None = None  # the constraint sets whose NodePools' health was last observed
        self._changed: set[str] = set()  # NodePools changed in the cluster since the last step ("": every one)
        self._changed_lock = threading.Lock()
        self._counted: dict[str, dict[str, str]] = {}  # NodePool → its status.resources when last observed
        context.state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        """A NodePool (that one) or an EC2NodeClass (every NodePool) changed in the cluster: observe at the next
        step, at once (under the state's lock: only take note)."""
        if change.kind not in ("nodepool", "ec2nodeclass"):
            return
        with self._changed_lock:
            self._changed.add(change.name if change.kind == "nodepool" else "")
        self.provisioner.wake.set()

    @property
    def wake(self) -> threading.Event:
        return self.provisioner.wake

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """See the module docstring; due when a batch window closes, a retry or plan ahead is due, a node's
        registration TTL runs out, or a registration hook's backoff does."""
        self.refresh(result)
        self._observe_nodepools()
        self.lifecycle.register_pending(result)
        self.lifecycle.settle(result)
        self.liveness.reconcile(result)
        self.lifecycle.initialize()
        self.provisioner.reconcile(result)
        return self.next_due()

    def _observe_nodepools(self) -> None:
        """When the constraint sets in force changed (and at the first step), each NodePool of theirs, and when a
        NodePool or EC2NodeClass changed in the cluster or a NodePool's nodes changed its counts, the NodePools of the
        sets it concerns: their readiness and counts are written and `NodeRegistrationHealthy` set Unknown if they
        have none or changed (`claims.nodepoolstatus.observe`)."""
        loaded = self.context.loaded
        if loaded is None:
            return
        with self._changed_lock:
            changed, self._changed = self._changed, set()
        names = {pool_name(s.pool) for s in loaded.sets if is_nodepool(s.pool)}
        counts = {name: self.context.nodepool_counts(name) for name in names}
        recounted = {name for name, counted in counts.items() if self._counted.get(name) != counted}
        self._counted = counts
        if loaded is not self._observed or "" in changed:
            self._observed = loaded
        else:
            names &= changed | recounted
        self.context.registration_health.observe_all(names)

    def next_due(self) -> float | None:
        dues = [
            due
            for due in (self.provisioner.next_due(), self.liveness.next_due(), self.lifecycle.claims.next_due())
            if due is not None
        ]
        return min(dues, default=None)

    def poll(self) -> float | None:
        """Every :data:`INFLIGHT_CHECK` while launches are in flight or nodes wait to be initialized; otherwise
        every :data:`~.provisioner.WARM_INTERVAL` while planning ahead is on, to keep the node claim templates
        built for the cloud's current offerings (`Provisioner.warm`)."""
        if len(self.context.inflight) or self.lifecycle.pending_initialization:
            return INFLIGHT_CHECK
        return WARM_INTERVAL if self.context.options.speculate else None


__all__ = ["INFLIGHT_CHECK", "Provisioning"]
