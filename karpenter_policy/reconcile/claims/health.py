"""The recent registration results of each NodePool, as Karpenter v1.14.1 keeps them in memory (core
pkg/state/nodepoolhealth/tracker.go, on pkg/utils/ringbuffer/buffer.go): per NodePool uid, a ring buffer of the last
`BUFFER_SIZE` (4) results — True a NodeClaim registered, False one that did not launch or register in time — and a
status read from it: Unknown while it is empty, Unhealthy once at least `THRESHOLD_FALSE` (half) of `BUFFER_SIZE`
are failures (two, whether the buffer is full or not), Healthy otherwise.

`dry_run` is the status the buffer would have with one more result, leaving it as it is (v1.14.1 decides the
NodePool's condition from it before recording the result); `set_status` refills the buffer to stand for a status
(the condition read back from a NodePool after a restart, or Unknown after its spec or node class changed). It is the
controller's memory only: nothing of it is written anywhere (`nodepoolstatus` writes the condition it decides).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable
from typing import Final

BUFFER_SIZE: Final = 4
#: The share of failures (of BUFFER_SIZE, not of the results held) from which a NodePool is unhealthy.
THRESHOLD_FALSE: Final = 0.5


class Status(enum.Enum):
    """What a NodePool's recent results say (v1.14.1's `StatusUnknown`, `StatusHealthy`, `StatusUnhealthy`)."""

    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


class Tracker:
    """One NodePool's ring buffer of results (see the module docstring). Not locked: `HealthState` locks."""

    __slots__ = ("_head", "_values")

    def __init__(self, values: Iterable[bool] = ()) -> None:
        self._values: list[bool] = []
        self._head = 0
        for value in values:
            self.update(value)

    def update(self, success: bool) -> None:
        """Record a result, replacing the oldest once BUFFER_SIZE are held."""
        if len(self._values) < BUFFER_SIZE:
            self._values.append(success)
            return
        self._values[self._head] = success
        self._head = (self._head + 1) % BUFFER_SIZE

    def reset(self) -> None:
        self._values.clear()
        self._head = 0

    def items(self) -> tuple[bool, ...]:
        """The results held (in the buffer's slot order, as Go's `Items`: the status does not depend on it)."""
        return tuple(self._values)

    def status(self) -> Status:
        if not self._values:
            return Status.UNKNOWN
        failures = sum(1 for value in self._values if not value)
        return Status.UNHEALTHY if failures / BUFFER_SIZE >= THRESHOLD_FALSE else Status.HEALTHY

    def set_status(self, status: Status) -> None:
        """Empty the buffer, then fill it to stand for `status`: nothing (Unknown), one success (Healthy), or
        the failures that make it Unhealthy."""
        self.reset()
        if status is Status.HEALTHY:
            self.update(True)
        elif status is Status.UNHEALTHY:
            for _ in range(int(BUFFER_SIZE * THRESHOLD_FALSE)):
                self.update(False)


class HealthState:
    """Every NodePool's tracker, by NodePool uid (v1.14.1's `nodepoolhealth.State`); safe across threads."""

    def __init__(self) -> None:
        self._trackers: dict[str, Tracker] = {}
        self._lock = threading.Lock()

    def _tracker(self, uid: str) -> Tracker:
        tracker = self._trackers.get(uid)
        if tracker is None:
            if len(self._trackers) > 10_000:  # NodePools come and go by uid: never grow without bound
                self._trackers.clear()
            tracker = self._trackers[uid] = Tracker()
        return tracker

    def status(self, uid: str) -> Status:
        with self._lock:
            return self._tracker(uid).status()

    def update(self, uid: str, success: bool) -> None:
        with self._lock:
            self._tracker(uid).update(success)

    def set_status(self, uid: str, status: Status) -> None:
        with self._lock:
            self._tracker(uid).set_status(status)

    def dry_run(self, uid: str, success: bool) -> Status:
        """The status with `success` recorded too, the tracker left as it is."""
        with self._lock:
            copy = Tracker(self._tracker(uid).items())
        copy.update(success)
        return copy.status()


__all__ = ["BUFFER_SIZE", "THRESHOLD_FALSE", "HealthState", "Status", "Tracker"]
