"""Evicting the pods of a draining node through the Eviction API, as Karpenter v0.31's eviction queue
(`pkg/controllers/termination/terminator/eviction.go`) does, without its thread.

The API server answers an eviction as a PodDisruptionBudget allows: 201 (the pod is being deleted), 404 (it is
gone already: as good), 429 (a budget allows no disruption now). A pod whose eviction was refused — the 429, or
any other error — is tried again after a delay that doubles from 100 ms up to 10 s (the queue's per-item rate
limiter); until then :meth:`Evictions.evict` answers `waiting` without a call. A pod evicted or gone is forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal

from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound, TooManyRequests
from karpenter_policy.reconcile.state.records import PodRecord

#: Karpenter's eviction queue: the first retry after 100 ms, then twice as long each time, at most 10 s.
RETRY_BASE_SECONDS = 0.1
RETRY_MAX_SECONDS = 10.0

EvictionOutcome = Literal["evicted", "gone", "refused", "failed", "waiting"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """What became of one pod's eviction: `evicted` (it is being deleted), `gone` (404), `refused` (429: a
    PodDisruptionBudget), `failed` (another error), `waiting` (not tried: its retry is not due). `detail` says
    why for the last three."""

    outcome: EvictionOutcome
    detail: str = ""


class Evictions:
    """See the module docstring. `clock`: monotonic seconds."""

    def __init__(self, cluster: Cluster, clock: Callable[[], float]) -> None:
        self.cluster = cluster
        self.clock = clock
        self._retries: dict[str, tuple[int, float, str]] = {}  # pod uid → (failures, next try, last reason)

    def evict(self, pod: PodRecord) -> Attempt:
        """Evict `pod` unless its retry is not due yet."""
        retry = self._retries.get(pod.uid)
        now = self.clock()
        if retry is not None and now < retry[1]:
            return Attempt("waiting", retry[2])
        try:
            self.cluster.evict(pod.namespace, pod.name)
        except NotFound:
            self._retries.pop(pod.uid, None)
            return Attempt("gone")
        except TooManyRequests as error:
            return self._failed(pod, retry, now, Attempt("refused", f"eviction refused: {error}"))
        except ClusterError as error:
            return self._failed(pod, retry, now, Attempt("failed", f"evicting pod {pod.key}: {error}"))
        self._retries.pop(pod.uid, None)
        return Attempt("evicted")

    def _failed(self, pod: PodRecord, retry: tuple[int, float, str] | None, now: float, attempt: Attempt) -> Attempt:
        failures = 1 if retry is None else retry[0] + 1
        delay = min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2 ** min(failures - 1, 16))
        self._retries[pod.uid] = (failures, now + delay, attempt.detail)
        return attempt

    def keep_only(self, uids: Collection[str]) -> None:
        """Forget the retries of pods no drain waits for any more (gone, or their node released)."""
        self._retries = {uid: retry for uid, retry in self._retries.items() if uid in uids}


__all__ = ["RETRY_BASE_SECONDS", "RETRY_MAX_SECONDS", "Attempt", "Evictions", "EvictionOutcome"]
