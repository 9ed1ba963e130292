"""The batching window of provisioning: wait for pending pods to stop arriving before scheduling them together.

Karpenter's `Batcher`: the first trigger (a pod became pending) opens a window; every further trigger extends it,
until no trigger came for `idle` seconds (the burst is over) or `maximum` seconds passed since it opened (a
steady trickle must not postpone provisioning for ever). Defaults are Karpenter's: 1 s idle, 10 s maximum.
The clock and the waiting are injectable, so simulations run in accelerated time and tests without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from karpenter_policy.reconcile.options import DEFAULT_IDLE_SECONDS, DEFAULT_MAX_SECONDS
from karpenter_policy.reconcile.result import BatchWindow


class Batcher:
    """Collects triggers into windows (see the module docstring). Thread-safe."""

    def __init__(
        self,
        idle: float = DEFAULT_IDLE_SECONDS,
        maximum: float = DEFAULT_MAX_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle <= 0 or maximum < idle:
            raise ValueError("the batch idle time must be > 0 and at most the maximum")
        self.idle, self.maximum, self.clock = idle, maximum, clock
        self._condition = threading.Condition()
        self._opened: float | None = None
        self._last = 0.0
        self._triggers = 0
        self._stopped = False

    def trigger(self) -> bool:
        """Something to provision arrived: open the window or extend it. Whether it opened one."""
        with self._condition:
            now = self.clock()
            opened = self._opened is None
            if opened:
                self._opened = now
            self._last = now
            self._triggers += 1
            self._condition.notify_all()
            return opened

    def stop(self) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify_all()

    def due(self) -> float | None:
        """When the open window closes (None: no window is open)."""
        with self._condition:
            if self._opened is None:
                return None
            return min(self._last + self.idle, self._opened + self.maximum)

    def last_trigger(self) -> tuple[float, int] | None:
        """When the open window was last triggered, and how many triggers it has had (None: no window is open)."""
        with self._condition:
            return None if self._opened is None else (self._last, self._triggers)

    def take(self) -> BatchWindow | None:
        """Close the window if it is due now (with the injected clock): the window, else None."""
        with self._condition:
            if self._opened is None:
                return None
            now = self.clock()
            if now < min(self._last + self.idle, self._opened + self.maximum):
                return None
            return self._close(now)

    def wait(self, timeout: float | None = None) -> BatchWindow | None:
        """Block until a window opens and closes (real time), or `timeout` passes, or `stop()`: the window or None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while not self._stopped:
                now = self.clock()
                if self._opened is not None:
                    due = min(self._last + self.idle, self._opened + self.maximum)
                    if now >= due:
                        return self._close(now)
                    wait_for = due - now
                else:
                    wait_for = None
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wait_for = left if wait_for is None else min(wait_for, left)
                self._condition.wait(wait_for)
            return None

    def _close(self, now: float) -> BatchWindow:
        assert self._opened is not None
        window = BatchWindow(self._opened, now, self._triggers)
        self._opened, self._triggers = None, 0
        return window
