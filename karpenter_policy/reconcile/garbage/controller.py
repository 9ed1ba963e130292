"""Garbage collection as a controller (`reconcile.steps.Reconciler`): the collector (`collector`) run when due, on the
cluster state and the launches in flight — once the node lifecycle has adopted what a previous replica left (an
instance adopted has its Node, and is no garbage). Karpenter runs its machine garbage collection as a controller of
its own (core v0.31.1 `pkg/controllers/machine/garbagecollection/controller.go`, polled every two minutes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.garbage.collector import GarbageCollector
from karpenter_policy.reconcile.metrics import GARBAGE_COLLECTION
from karpenter_policy.reconcile.provisioning.lifecycle import NodeLifecycle
from karpenter_policy.reconcile.result import ReconcileResult

#: Before adoption, its thread looks again this often.
ADOPTION_CHECK = 1.0


class GarbageCollection:
    """See the module docstring. `steady`: the cluster state is synced and healthy (what "no Node" needs)."""

    name = "garbage"
    label = GARBAGE_COLLECTION

    def __init__(
        self, context: Context, collector: GarbageCollector, lifecycle: NodeLifecycle, steady: Callable[[], bool]
    ) -> None:
        self.context = context
        self.collector = collector
        self.lifecycle = lifecycle
        self.steady = steady
        self.wake = threading.Event()  # nothing wakes it but its interval (and a take-over)

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """Collect when due, after adoption."""
        if self.lifecycle.adopted and self.collector.due():
            collected = self.collector.collect(
                self.context.state.nodes(), self.context.inflight.provider_ids(), self.steady(),
                self.context.state.claims(),
            )
            result.garbage = collected
            result.errors.extend(collected.errors)
        return None

    def poll(self) -> float | None:
        """Every interval once adopted (None: collection off), every second before."""
        if not self.lifecycle.adopted:
            return ADOPTION_CHECK
        interval = self.collector.interval
        return interval if interval > 0 else None


__all__ = ["GarbageCollection"]
