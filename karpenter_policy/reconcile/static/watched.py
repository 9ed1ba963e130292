"""What the static provisioning and deprovisioning controllers share: woken by a change of a NodeClaim, Node or
NodePool in the cluster state, and looked at again every minute (v1.14.1's `RequeueAfter: time.Minute`)."""

from __future__ import annotations

import threading
from typing import Final

from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.steps import MINUTE_REQUEUE as REQUEUE

__all__ = ["REQUEUE", "StaticWatch"]

#: The state changes that wake them.
_WAKERS: Final = frozenset({"nodeclaim", "node", "nodepool"})


class StaticWatch:
    """`wake` set on a NodeClaim, Node or NodePool change; `poll`: a minute."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.wake = threading.Event()
        context.state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.kind in _WAKERS:
            self.wake.set()

    def poll(self) -> float | None:
        return REQUEUE
