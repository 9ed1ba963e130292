"""Provisioning as a controller (`reconcile.steps.Reconciler`): one step takes a new version of the constraint sets
if there is one (and, when there is, looks at its NodePools' `NodeRegistrationHealthy`: `claims.nodepoolstatus`),
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

    @property
    def wake(self) -> threading.Event:
        return self.provisioner.wake

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """See the module docstring; due when a batch window closes, a retry or plan ahead is due, or a node's
        registration TTL runs out."""
        self.refresh(result)
        self._observe_nodepools()
        self.lifecycle.register_pending(result)
        self.lifecycle.settle(result)
        self.liveness.reconcile(result)
        self.lifecycle.initialize()
        self.provisioner.reconcile(result)
        return self.next_due()

    def _observe_nodepools(self) -> None:
        """When the constraint sets in force changed (and at the first step), the NodePools of theirs get
        `NodeRegistrationHealthy` Unknown if they have none or changed (`claims.nodepoolstatus.observe`)."""
        loaded = self.context.loaded
        if loaded is None or loaded is self._observed:
            return
        self._observed = loaded
        self.context.registration_health.observe_all(pool_name(s.pool) for s in loaded.sets if is_nodepool(s.pool))

    def next_due(self) -> float | None:
        dues = [due for due in (self.provisioner.next_due(), self.liveness.next_due()) if due is not None]
        return min(dues, default=None)

    def poll(self) -> float | None:
        """Every :data:`INFLIGHT_CHECK` while launches are in flight or nodes wait to be initialized; otherwise
        every :data:`~.provisioner.WARM_INTERVAL` while planning ahead is on, to keep the node claim templates
        built for the cloud's current offerings (`Provisioner.warm`)."""
        if len(self.context.inflight) or self.lifecycle.pending_initialization:
            return INFLIGHT_CHECK
        return WARM_INTERVAL if self.context.options.speculate else None


__all__ = ["INFLIGHT_CHECK", "Provisioning"]
