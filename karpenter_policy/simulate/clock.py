"""The simulation's clock: virtual seconds that move only when the driver moves them.

The controller, the batcher, the AWS provider's caches, the kubelets' stand-in and the in-memory cluster all read
this one clock, so a batch window closes one virtual second after the last pod arrived without anybody waiting
for it. Log lines and object timestamps show :data:`EPOCH` plus the virtual seconds: the same scenario prints
the same times.
"""

from __future__ import annotations

import datetime as dt

#: When every simulation starts (a fixed moment: the output is reproducible).
EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


class VirtualClock:
    """Monotonic virtual seconds (`clock()`), and the wall-clock time they stand for (`wall()`)."""

    def __init__(self, epoch: dt.datetime = EPOCH) -> None:
        self.epoch = epoch
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> dt.datetime:
        return self.epoch + dt.timedelta(seconds=self.now)

    def advance_to(self, moment: float) -> None:
        """Move to `moment` (never back)."""
        self.now = max(self.now, moment)

    def advance(self, seconds: float) -> None:
        """Move forward by `seconds`."""
        self.now += max(seconds, 0.0)

    def sleep(self, seconds: float) -> None:
        """What a component that waits (a retry's back-off) does in virtual time."""
        self.now += max(seconds, 0.0)


__all__ = ["EPOCH", "VirtualClock"]
