"""Termination: a Node of ours being deleted (`kubectl delete node`, emptiness) goes through the
``karpenter.sh/termination`` finalizer, as Karpenter v0.31's termination controller does:

1. **cordon** (``spec.unschedulable``), logged once ("Cordoned node");
2. **drain**: every pod on it that is not finished and not a DaemonSet's is evicted through the Eviction API, so
   PodDisruptionBudgets hold (a 429 leaves the pod for the next pass); a pod annotated
   ``karpenter.sh/do-not-evict: "true"`` is never evicted: the node waits until it finishes;
3. once no such pod is left: **terminate** the instance, then **remove the finalizer** ("Deleted node").

As Karpenter's, each eviction is an Event `Evicted` on the pod, a node whose drain is not done a Warning
`FailedDraining` (pods left; an eviction a budget refused), and the removal of the finalizer counts
`karpenter_nodes_terminated` and observes `karpenter_nodes_termination_time_seconds` (since the deletion was
requested); evictions are counted by outcome (`karpenter_policy_evictions_total`).

Each pass takes every such Node one step further; every step is idempotent, so a controller that died half-way
resumes where the cluster shows it stopped. Nodes without the finalizer, or not ours, are left alone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.errors import NotFound as InstanceNotFound
from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound, TooManyRequests
from karpenter_policy.reconcile import events, logs
from karpenter_policy.reconcile.events import Recorder
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.result import Terminated
from karpenter_policy.reconcile.state.cluster import Change, ClusterState
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord
from karpenter_policy.reconcile.termination.nodedeletion import remove_finalizer

TERMINATION = logs.logger("termination")
DO_NOT_EVICT = "karpenter.sh/do-not-evict"


class Terminator:
    """See the module docstring. It follows the state: a node of ours that gets a deletionTimestamp joins the
    nodes it drains, one that leaves the cluster leaves them (`fields` makes a log line's structured fields)."""

    def __init__(
        self,
        cluster: Cluster,
        cloud: CloudProvider,
        state: ClusterState,
        fields: Callable[..., dict[str, object]],
        *,
        metrics: Metrics | None = None,
        recorder: Recorder | None = None,
        wall_clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.cluster = cluster
        self.cloud = cloud
        self.state = state
        self.fields = fields
        self.metrics = metrics or Metrics()
        self.events = recorder or Recorder(cluster, self.metrics.clock, fields)
        self.wall_clock = wall_clock
        self._told: set[tuple[str, str]] = set()  # (what, whom) already logged
        self._terminating: set[str] = set()
        self._finished: set[str] = set()  # uids whose finalizer we removed (a late event must not drain them again)
        self._lock = threading.Lock()
        self.wake = threading.Event()
        state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.kind == "node":
            after = change.after
            with self._lock:
                if isinstance(after, NodeRecord) and after.terminating:
                    if after.name not in self._terminating and after.uid not in self._finished:
                        self._terminating.add(after.name)
                        self.wake.set()
                elif isinstance(change.before, NodeRecord):
                    self._terminating.discard(change.before.name)
                    if after is None:
                        self._finished.discard(change.before.uid)
        elif change.kind == "pod":
            before, after = change.before, change.after
            node = (before.node if isinstance(before, PodRecord) else "") or (
                after.node if isinstance(after, PodRecord) else ""
            )
            if node and node in self._terminating:
                self.wake.set()  # a pod of a draining node moved: the drain may go on

    @property
    def draining(self) -> bool:
        return bool(self._terminating)

    def _once(self, what: str, whom: str, message: str, *args: object, **extra: object) -> None:
        if (what, whom) not in self._told:
            self._told.add((what, whom))
            TERMINATION.info(message, *args, extra=self.fields(**extra))

    def reconcile(self) -> Terminated:
        """Take every node being deleted one step further."""
        done = Terminated()
        with self._lock:
            names = sorted(self._terminating)
        for name in names:
            node = self.state.node(name)
            if node is None or not node.terminating:
                continue
            pods = [p for p in self.state.pods_on(name) if not p.daemon]
            try:
                self._step(node, pods, done)
            except (ClusterError, CloudError) as error:
                done.errors.append(f"terminating node {name}: {error}")
        return done

    def _step(self, node: NodeRecord, pods: list[PodRecord], done: Terminated) -> None:
        name = node.name
        if not node.unschedulable:
            self.cluster.patch(objects.NODE, name, {"spec": {"unschedulable": True}})
            done.cordoned.append(name)
            self._once("cordon", name, "Cordoned node", node=name)
        remaining = 0
        for pod in pods:
            key = pod.key
            if pod.deleting:
                remaining += 1  # evicted, still shutting down
                continue
            if pod.annotations.get(DO_NOT_EVICT) == "true":
                remaining += 1
                done.blocked[key] = f"{DO_NOT_EVICT} is set"
                self._once("do-not-evict", key, "waiting on pod %s: it is annotated %s", key, DO_NOT_EVICT, node=name)
                continue
            try:
                self.cluster.evict(pod.namespace, pod.name)
            except NotFound:
                continue
            except TooManyRequests as error:
                remaining += 1
                done.blocked[key] = f"eviction refused: {error}"
                self.metrics.evictions.labels("refused").inc()
                self.events.publish(events.failed_draining(node.obj, f"evicting pod {key} violates a PDB"))
                self._once("pdb", key, "eviction of pod %s refused (a PodDisruptionBudget): retrying", key, node=name)
                continue
            done.evicted.append(key)
            self.metrics.evictions.labels("evicted").inc()
            self.events.publish(events.evicted(pod.obj))
            remaining += 1  # gone from the next snapshot, not this one
        if remaining:
            self.events.publish(events.failed_draining(node.obj, f"{remaining} pods are waiting to be evicted"))
            return
        instance = node.instance_id
        if instance:
            with contextlib.suppress(InstanceNotFound):
                self.cloud.delete(instance)
        remove_finalizer(self.cluster, name)
        with self._lock:
            self._terminating.discard(name)  # done: the state showing it a moment longer changes nothing
            self._finished.add(node.uid)
        done.deleted.append(name)
        self.metrics.node_terminated(node.provisioner or "", self._since(node.deletion_timestamp))
        TERMINATION.info("Deleted node", extra=self.fields(node=name, instance=instance))

    def _since(self, stamp: str | None) -> float | None:
        """Seconds from an API timestamp to now (None: no readable timestamp)."""
        try:
            return (self.wall_clock() - objects.parse_time(stamp)).total_seconds() if stamp else None
        except ValueError:
            return None


__all__ = ["DO_NOT_EVICT", "Terminator"]
