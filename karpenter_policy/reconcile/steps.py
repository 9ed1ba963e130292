"""What every controller is to the code that runs it: a name, what wakes it, and one step that says when it is due.

:class:`Reconciler` is the one interface the controllers of `reconcile/` share (provisioning, termination,
emptiness, disruption, interruption, garbage collection). `reconcile.controller` holds them in one ordered list;
virtual time (`Controller.reconcile_once`, and through it `simulate`'s driver and scenes) runs one step of each in
that order, and the threaded runner (`reconcile.runner`) gives each a thread of its own that runs its step when it
is woken or due — the same steps, the same order of construction, in both.

A step returns the monotonic time of its next step (None: only when woken). What a thread does besides — look again
every so often while launches are in flight, poll a queue — is :meth:`Reconciler.poll`: virtual time has no such
looking (nothing changes between its events), so it is kept apart from the due time, which both honour.

A controller whose step may wait long on something outside (the interruption queue's long poll) is also
:class:`Abandoning`: when the runner stops it asks that one to act on nothing more instead of waiting for its step.
"""

from __future__ import annotations

import threading
from typing import Final, Protocol, runtime_checkable

from karpenter_policy.reconcile.result import ReconcileResult

#: Seconds until a controller that Karpenter requeues with `RequeueAfter: time.Minute` looks again with nothing
#: changed (v1.14.1's static and capacity-reservation controllers).
MINUTE_REQUEUE: Final = 60.0


class Reconciler(Protocol):
    """One controller: `name` (its thread, `controller-<name>`), `label` (its `controller` label in the metrics,
    Karpenter's name for it), `wake` (set by the events it cares about), and its step."""

    @property
    def name(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def wake(self) -> threading.Event: ...

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """One step at monotonic time `now`; what it did goes into `result`. Returns when its next step is due."""
        ...

    def poll(self) -> float | None:
        """Seconds after which its thread looks again even when nothing is due nor woke it (None: the runner's
        resync period); virtual time never asks."""
        ...


@runtime_checkable
class Abandoning(Protocol):
    """A controller whose step may wait long on something outside (a queue's long poll)."""

    def abandon(self) -> None:
        """Act on nothing more; return once what is being acted on is done (not what is still being waited for)."""
        ...


__all__ = ["MINUTE_REQUEUE", "Abandoning", "Reconciler"]
