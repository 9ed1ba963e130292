"""The cyclic garbage collector's full collections, run by the threaded runner at moments it chooses (issue #23).

Once the informers have listed, what they hold (every object of the cluster, the state's indexes: the bulk of the
heap, alive as long as the process) is frozen out of the collector's generations (`gc.freeze`, after one full
collection: :meth:`HeapCollector.start`). Churn then replaces what was frozen, and what replaced it grows the
collector's oldest generation back; Python's own full (generation-2) collections walked it whenever its thresholds
said so — at 2,000 nodes under 200 pod replacements a second, 0.9 s of CPU each, at 5,000 nodes a 3.35 s pause —
and one that landed in a burst of pending pods made its first launch late (benchmarks/README.md, "gc.freeze after
the first sync" and "Full collections when the provisioner is idle"). So the runner owns the full collections:

* Python's are made rare: the third threshold is set to :data:`RARE_FULL` generation-1 collections, a count that
  every full collection of this module resets, so while the runner's loop lives Python never reaches it (it stays
  a safety net, not a switch: if the loop ever stopped ticking, cycles would still be collected);
* the runner asks :meth:`HeapCollector.tick` several times a second; a full collection is made when the
  provisioner is **idle** (`idle`: no batch window open and neither the provisioning nor the disruption thread in a
  step — no launch under way, no decision mid-simulation) and `Pacing.interval` seconds have passed since the last
  one, or, whatever the provisioner does, once `Pacing.backstop` seconds have passed (constant pressure must not
  keep cycles for ever: the heap stays bounded);
* each collects what is not frozen — what was made since the last one, so it is short — and freezes what survived,
  keeping the unfrozen heap small for the next;
* at most every `Pacing.thaw` seconds, at an idle moment (or after `Pacing.thaw_backstop` seconds at the latest), it
  first unfreezes everything (`gc.unfreeze`): frozen objects that have since become garbage *in a cycle* (reference
  counting frees the others, frozen or not) are collected then. That one walks the whole heap — the cost of the
  first sync's collection, about a second of CPU at 2,000 nodes — which is why it is rare and waits for a quiet
  moment.

A collection holds the interpreter: a pod that becomes pending while one runs is seen when it ends (its batch
window opens then), and the same holds for every thread. The idle test comes first, so this happens only to a
pod that arrives during the collection itself. Young collections (generations 0 and 1) stay Python's: they walk only
what was made since the last ones.

Every collection is counted (`karpenter_policy_gc_full_collections_total{reason, heap}`), its pause and the objects
frozen after it are exported (`karpenter_policy_gc_last_full_collection_seconds`, `karpenter_policy_gc_frozen_objects`)
and logged at debug. A collection that fails is logged and tried again at the next interval: it never ends the
runner. :meth:`HeapCollector.stop` unfreezes and puts the thresholds back as it found them.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.metrics import Metrics

HEAP = logs.logger("heap")

#: Python's full collections come after this many generation-1 collections (its default: 10). Each full collection
#: of :class:`HeapCollector` resets the count, so Python reaches it only if the runner stopped collecting.
RARE_FULL = 1_000_000

#: Why a collection was made (the metric's `reason`): the first sync's, an idle moment's, the backstop's.
SYNCED, IDLE, BACKSTOP = "synced", "idle", "backstop"
#: What it walked (the metric's `heap`): what was not frozen, or everything (after `gc.unfreeze`).
UNFROZEN, ALL = "unfrozen", "all"


@dataclass(frozen=True, slots=True)
class Pacing:
    """When the full collections come (seconds; see the module docstring): at most every `interval` while the
    provisioner is idle, at least every `backstop`; a thaw (the whole heap) at most every `thaw`, at an idle moment,
    at least every `thaw_backstop`."""

    interval: float = 10.0
    backstop: float = 60.0
    thaw: float = 900.0
    thaw_backstop: float = 3600.0

    def __post_init__(self) -> None:
        if not 0 < self.interval <= self.backstop or not 0 < self.thaw <= self.thaw_backstop:
            raise ValueError("gc pacing: each interval must be > 0 and at most its backstop")


@dataclass(frozen=True, slots=True)
class Collection:
    """One full collection: why (`reason`), what it walked (`heap`), its pause (wall and the collecting thread's
    CPU, seconds), the unreachable objects it found, and the objects frozen after it."""

    reason: str
    heap: str
    seconds: float
    cpu_seconds: float
    unreachable: int
    frozen: int


class HeapCollector:
    """See the module docstring. `idle`: whether the provisioner is idle now (the runner's); `clock`: monotonic
    seconds (the controller's, injectable); `metrics`: where collections are counted."""

    def __init__(
        self,
        idle: Callable[[], bool],
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
        pacing: Pacing | None = None,
    ) -> None:
        self.idle = idle
        self.metrics = metrics
        self.clock = clock
        self.pacing = pacing or Pacing()
        self.last: Collection | None = None
        self._thresholds: tuple[int, int, int] | None = None  # Python's, before start(); None: not started
        self._collected_at = 0.0
        self._thawed_at = 0.0
        self._collecting = False
        self._lock = threading.Lock()  # one collection at a time (tick runs on the runner's thread; tests call too)

    @property
    def started(self) -> bool:
        return self._thresholds is not None

    @property
    def collecting(self) -> bool:
        """One of this collector's collections runs now (what a `gc.callbacks` observer asks to tell them from
        Python's own: `benchmarks/scale.py --what memory`)."""
        return self._collecting

    def start(self) -> Collection:
        """After the first sync: one full collection, everything alive frozen, Python's full collections made rare."""
        with self._lock:
            if self._thresholds is None:
                self._thresholds = gc.get_threshold()
                young, middle, _ = self._thresholds
                gc.set_threshold(young, middle, RARE_FULL)
            now = self.clock()
            self._thawed_at = now
            return self._collect(SYNCED, ALL, now)

    def stop(self) -> None:
        """Undo :meth:`start`: nothing frozen, the thresholds as they were (a process that runs runners again — the
        tests — can collect this one's objects)."""
        with self._lock:
            if self._thresholds is None:
                return
            gc.unfreeze()
            gc.set_threshold(*self._thresholds)
            self._thresholds = None

    def due(self, now: float) -> tuple[str, str] | None:
        """The collection due at `now` — (reason, heap) — or None."""
        pacing = self.pacing
        since = now - self._collected_at
        if since < pacing.interval:
            return None
        if self.idle():
            reason = IDLE
        elif since >= pacing.backstop:
            reason = BACKSTOP
        else:
            return None
        since_thaw = now - self._thawed_at
        thaw = since_thaw >= pacing.thaw_backstop or (since_thaw >= pacing.thaw and reason == IDLE)
        return reason, ALL if thaw else UNFROZEN

    def tick(self) -> Collection | None:
        """Make the collection due now, if one is (the runner's loop calls this often). Never raises: a failure is
        logged and the collection tried again after `interval`."""
        try:
            with self._lock:
                if self._thresholds is None:
                    return None
                now = self.clock()
                due = self.due(now)
                if due is None:
                    return None
                reason, heap = due
                return self._collect(reason, heap, now)
        except Exception:  # whatever goes wrong here must not end the runner
            HEAP.exception("a full garbage collection failed; trying again in %.0f s", self.pacing.interval)
            self._collected_at = self.clock()
            return None

    def _collect(self, reason: str, heap: str, now: float) -> Collection:
        self._collected_at = now
        started, cpu = time.perf_counter(), time.thread_time()
        self._collecting = True
        try:
            if heap == ALL:
                gc.unfreeze()
                self._thawed_at = now
            unreachable = gc.collect()
        finally:
            gc.freeze()  # even after a failure: what is alive stays out of Python's collections
            self._collecting = False
        collection = Collection(reason, heap, time.perf_counter() - started, time.thread_time() - cpu, unreachable,
                                gc.get_freeze_count())
        self.last = collection
        metrics = self.metrics
        metrics.gc_full_collections.labels(reason, heap).inc()
        metrics.gc_last_full_collection.set(collection.seconds)
        metrics.gc_frozen_objects.set(collection.frozen)
        HEAP.debug("full garbage collection (%s, %s heap): %.3f s (%.3f s CPU), %d unreachable, %d objects frozen",
                   reason, heap, collection.seconds, collection.cpu_seconds, unreachable, collection.frozen,
                   extra=logs.fields())
        return collection


__all__ = ["ALL", "BACKSTOP", "HEAP", "IDLE", "RARE_FULL", "SYNCED", "UNFROZEN", "Collection", "HeapCollector",
           "Pacing"]
