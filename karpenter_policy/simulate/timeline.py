"""What happened to each pod and each node over a simulation: the figures of a long run (the soak benchmark).

The driver tells the :class:`Timeline` when it creates a pod and when the controller launches a node, and shows it
the cluster after every event (:meth:`Timeline.observe`); the timeline notes, in virtual seconds, when each pod was
bound, started and finished or went away, when each node went away, and the peak of the requests of the pods that
want to run (pending or bound, not finished). :func:`figures` sums it up: pods scheduled, pending time per pod
(creation → bound: max, p99, median; and creation → Running), nodes launched and deleted, the dollars spent (each
node's $/h over its lifetime, from its launch until it was deleted or the run ended).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.reconcile.state.pods import ShapeCache
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I


@dataclass(slots=True)
class PodTimes:
    """One pod's moments (virtual seconds); None: not (yet)."""

    key: str
    workload: str
    created: float
    bound: float | None = None
    started: float | None = None
    finished: float | None = None  # phase Succeeded
    gone: float | None = None  # deleted: scaled down, evicted, its node gone

    @property
    def pending_seconds(self) -> float | None:
        return None if self.bound is None else self.bound - self.created

    @property
    def starting_seconds(self) -> float | None:
        """Creation → Running: the pending time and the node's startup when it had to be launched."""
        return None if self.started is None else self.started - self.created


@dataclass(slots=True)
class NodeLife:
    """One node the controller launched, and when it went away (None: still there)."""

    name: str
    instance_type: str
    capacity_type: str
    price: float | None  # $/h; None: no price data
    launched: float
    deleted: float | None = None

    def dollars(self, end: float) -> float:
        """What the node cost from its launch until it went away or `end`, whichever came first."""
        if self.price is None:
            return 0.0
        until = end if self.deleted is None else min(self.deleted, end)
        return self.price * max(until - self.launched, 0.0) / 3600.0


@dataclass(slots=True)
class Timeline:
    """See the module docstring. Pods by uid (a name can come back after a scale-down), nodes by name."""

    pods: dict[str, PodTimes] = field(default_factory=dict)
    nodes: dict[str, NodeLife] = field(default_factory=dict)
    peak_cpu: int = 0  # millicores requested by the pods that want to run, at the busiest moment
    peak_memory: int = 0  # bytes, likewise (not necessarily the same moment)

    def created(self, pod: objects.Obj, workload: str, now: float) -> None:
        self.pods.setdefault(objects.uid(pod), PodTimes(pod_info.pod_key(pod), workload, now))

    def launched(self, name: str, instance_type: str, capacity_type: str, price: float | None, now: float) -> None:
        if name not in self.nodes:
            self.nodes[name] = NodeLife(name, instance_type, capacity_type, price, now)

    def spent(self, at: float) -> float:
        """The dollars the nodes had cost by `at` (each from its launch until it went away or `at`)."""
        return sum(life.dollars(at) for life in self.nodes.values())

    def observe(
        self, pods: Iterable[objects.Obj], node_names: Iterable[str], now: float, shapes: ShapeCache
    ) -> list[str]:
        """The cluster at `now`: bindings, starts, completions, pods and nodes gone, the requests wanting room.
        The uids of the pods seen running for the first time."""
        seen: set[str] = set()
        started: list[str] = []
        cpu = memory = 0
        for pod in pods:
            uid = objects.uid(pod)
            times = self.pods.get(uid)
            if times is None:
                continue  # not a pod of the scenario's workloads (a DaemonSet's)
            seen.add(uid)
            if times.bound is None and pod_info.node_name(pod):
                times.bound = now
            phase = pod_info.phase(pod)
            if times.started is None and phase == "Running":
                times.started = now
                started.append(uid)
            if phase == wk.POD_SUCCEEDED and times.finished is None:
                times.finished = now
            if pod_info.is_terminal(pod) or objects.is_deleting(pod):
                continue
            try:
                requests = shapes.pod(pod).requests
            except PodSpecError:
                continue
            cpu += requests[CPU_I]
            memory += requests[MEMORY_I]
        for uid, times in self.pods.items():
            if times.gone is None and uid not in seen:
                times.gone = now
        present = set(node_names)
        for life in self.nodes.values():
            if life.deleted is None and life.name not in present:
                life.deleted = now
        self.peak_cpu = max(self.peak_cpu, cpu)
        self.peak_memory = max(self.peak_memory, memory)
        return started


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (`share` in 0..1) of `values`; 0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(share * len(ordered)), 1)
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class Figures:
    """The sums of a run ended at `end` (virtual seconds)."""

    end: float
    pods_created: int
    pods_scheduled: int
    pods_completed: int
    pods_pending_at_end: int
    pending_max: float
    pending_p99: float
    pending_median: float
    running_max: float  # creation → Running (the node's startup included)
    running_p99: float
    nodes_launched: int
    nodes_deleted: int
    dollars: float
    peak_cpu: int
    peak_memory: int


def figures(timeline: Timeline, end: float) -> Figures:
    waits = [t.pending_seconds for t in timeline.pods.values() if t.pending_seconds is not None]
    starts = [t.starting_seconds for t in timeline.pods.values() if t.starting_seconds is not None]
    return Figures(
        end=end,
        pods_created=len(timeline.pods),
        pods_scheduled=len(waits),
        pods_completed=sum(1 for t in timeline.pods.values() if t.finished is not None),
        pods_pending_at_end=sum(1 for t in timeline.pods.values() if t.bound is None and t.gone is None),
        pending_max=max(waits, default=0.0),
        pending_p99=percentile(waits, 0.99),
        pending_median=percentile(waits, 0.5),
        running_max=max(starts, default=0.0),
        running_p99=percentile(starts, 0.99),
        nodes_launched=len(timeline.nodes),
        nodes_deleted=sum(1 for n in timeline.nodes.values() if n.deleted is not None and n.deleted <= end),
        dollars=round(timeline.spent(end), 6),
        peak_cpu=timeline.peak_cpu,
        peak_memory=timeline.peak_memory,
    )


__all__ = ["Figures", "NodeLife", "PodTimes", "Timeline", "figures", "percentile"]
