"""The once-a-minute cadence of the capacity-reservation controllers (aws v1.14.1 pkg/controllers/capacityreservation/
capacitytype and expiration: singleton controllers, `RequeueAfter: time.Minute`): a step runs when due and says when
it is next due, so virtual time and the threaded runner run it on the same cadence; nothing wakes them."""

from __future__ import annotations

import threading

from karpenter_policy.reconcile.steps import MINUTE_REQUEUE as REQUEUE

__all__ = ["REQUEUE", "Minutely"]


class Minutely:
    """`due(now)`: whether a reconcile is due at monotonic `now` (the first at once), and if so the next one set a
    minute on; `next`: when the next is due. `wake` is never set (nothing but time wakes them)."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.next: float | None = None

    def due(self, now: float) -> bool:
        if self.next is not None and now < self.next:
            return False
        self.next = now + REQUEUE
        return True

    def poll(self) -> float | None:
        return REQUEUE
