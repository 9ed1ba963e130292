"""Emptiness (`ttlSecondsAfterEmpty`), as Karpenter v0.31 does it: a Node of ours that is initialized and has no
pod but DaemonSets' gets the ``karpenter.sh/emptiness-timestamp`` annotation ("Added TTL to empty node"); a node
that gains a pod loses it ("Removed emptiness TTL from node"); once the provisioner's TTL has passed since, the
Node is deleted ("Triggering termination after 30s for empty node") and termination (`termination`) cordons it,
terminates its instance and removes the finalizer. Provisioners without the TTL leave their nodes alone.

As Karpenter counts it: a node marked empty is a disrupted machine (`karpenter_machines_disrupted{type="emptiness"}`);
a deletion is a deprovisioning action `emptiness/delete` (`karpenter_deprovisioning_actions_performed`,
`karpenter_machines_terminated`, a `DeprovisioningTerminating` Event on the Node), and the nodes a pass finds past
their TTL are `karpenter_deprovisioning_eligible_machines{deprovisioner="emptiness"}`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import events, logs
from karpenter_policy.reconcile.events import Recorder
from karpenter_policy.reconcile.metrics import EMPTINESS as EMPTINESS_METHOD
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.result import Emptied, ReconcileResult
from karpenter_policy.reconcile.state.cluster import Change, ClusterState
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord

EMPTINESS = logs.logger("node")

#: After emptiness deleted a node, its next step comes this soon (termination drains the node meanwhile; in virtual
#: time, that is when the next pass comes).
DRAIN_STEP_SECONDS = 1.0


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def touched(change: Change, workload_pods_on: Callable[[str], int]) -> list[str]:
    """The nodes of ours whose emptiness `change` may have altered — what wakes a pass, decided in O(1) from the
    state's count of each node's workload pods (an index kept anyway): a node of ours that came, went or changed in
    what is read of it (`NodeRecord.same_as_read`: not a status heartbeat); for a pod (not a DaemonSet's) the node
    it left or joined only when that node now runs at most one workload pod. One pod changes a node's count by
    one, so the count crosses zero only if it is 0 or 1 after the change: a bound pod replaced on a full node
    (created there, then the old one deleted) wakes nothing. `workload_pods_on` reads the state after the change
    (listeners run once it is applied)."""
    before, after = change.before, change.after
    if change.kind == "node":
        if isinstance(before, NodeRecord) and isinstance(after, NodeRecord) and before.same_as_read(after):
            return []
        return sorted({r.name for r in (before, after) if isinstance(r, NodeRecord) and r.ours})
    names: list[str] = []
    for record in (before, after):
        if (
            isinstance(record, PodRecord) and record.node and not record.daemon and record.node not in names
            and workload_pods_on(record.node) <= 1
        ):
            names.append(record.node)
    return names


class Emptiness:
    """See the module docstring. It looks at a node of ours when a change may have emptied or filled it
    (:func:`touched`), when its TTL runs out, and at every node when the TTLs or the protected nodes change — never
    at every node on every pass, nor at a full node whose pods are replaced."""

    def __init__(
        self,
        cluster: Cluster,
        state: ClusterState,
        fields: Callable[..., dict[str, object]],
        *,
        metrics: Metrics | None = None,
        recorder: Recorder | None = None,
        ttls: Callable[[], Mapping[str, int | None]] = dict,
        protected: Callable[[], frozenset[str]] = frozenset,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.cluster = cluster
        self.ttls = ttls  # provisioner name → ttlSecondsAfterEmpty, of the constraint sets in force
        self.protected = protected  # the replacements of a disruption under way
        self.clock = clock
        self.wall_clock = wall_clock
        self.state = state
        self.fields = fields
        self.metrics = metrics or Metrics()
        self.events = recorder or Recorder(cluster, self.metrics.clock, fields)
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._due: dict[str, dt.datetime] = {}  # node → when its TTL runs out
        self._ttls: Mapping[str, int | None] = {}
        self._protected: frozenset[str] = frozenset()
        self._everything = True
        self.wake = threading.Event()
        state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        """Note the nodes whose verdict this change may alter (see :func:`touched`); wake only for those."""
        names = touched(change, self.state.workload_pods_on)
        if names:
            with self._lock:
                self._dirty.update(names)
            self.wake.set()

    # --- as a controller (`reconcile.steps.Reconciler`) ------------------------------------------------------

    name = "emptiness"
    label = EMPTINESS_METHOD

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """A pass (:meth:`reconcile`) with the TTLs in force; due when the next TTL runs out, and soon after a
        deletion."""
        done = self.reconcile(self.ttls(), self.wall_clock(), self.protected())
        result.emptied = done
        result.errors.extend(done.errors)
        dues = [now + done.due] if done.due is not None else []
        if done.deleted:
            dues.append(now + DRAIN_STEP_SECONDS)
        return min(dues, default=None)

    def poll(self) -> float | None:
        return None

    def reconcile(
        self, ttls: Mapping[str, int | None], now: dt.datetime, protected: frozenset[str] = frozenset()
    ) -> Emptied:
        """One pass; `ttls`: provisioner name → ttlSecondsAfterEmpty (None: never). `protected` nodes (the
        replacements of a disruption under way, about to receive pods) do not count as empty."""
        done = Emptied()
        with self._lock:
            if ttls != self._ttls or protected != self._protected:
                self._ttls, self._protected, self._everything = dict(ttls), protected, True
            everything, self._everything = self._everything, False
        # The state is read outside our lock: its listeners take our lock under the state's.
        every_node = self.state.node_names() if everything else []
        with self._lock:
            names = set(every_node) | set(self._dirty) | {n for n, when in self._due.items() if when <= now}
            self._dirty.clear()
        for name in sorted(names):
            self._due.pop(name, None)
            node = self.state.node(name)
            if node is None:
                continue
            try:
                self._one(node, ttls, now, protected, done)
            except NotFound:
                continue
            except ClusterError as error:
                done.errors.append(f"emptiness of node {name}: {error}")
                with self._lock:
                    self._dirty.add(name)
        if self._due:
            left = min(self._due.values())
            done.due = max((left - now).total_seconds(), 0.0)
        self.metrics.deprovisioning_eligible.labels(EMPTINESS_METHOD).set(done.expired)
        return done

    def _one(
        self, node: NodeRecord, ttls: Mapping[str, int | None], now: dt.datetime, protected: frozenset[str],
        done: Emptied,
    ) -> None:
        name = node.name
        if not node.ours or node.deleting:
            return
        ttl = ttls.get(node.provisioner or "")
        stamped = node.annotations.get(wk.EMPTINESS_TIMESTAMP)
        empty = self.state.workload_pods_on(name) == 0 and name not in protected and node.labelled_initialized
        if ttl is None or not empty:
            if stamped is not None:
                self.cluster.patch(objects.NODE, name, {"metadata": {"annotations": {wk.EMPTINESS_TIMESTAMP: None}}})
                done.unmarked.append(name)
                EMPTINESS.info("Removed emptiness TTL from node", extra=self.fields(node=name))
            return
        since = _parse(stamped) if stamped else None
        if since is None:
            self.cluster.patch(objects.NODE, name, {"metadata": {"annotations": {wk.EMPTINESS_TIMESTAMP: _stamp(now)}}})
            done.marked.append(name)
            self.metrics.machines_disrupted.labels(EMPTINESS_METHOD, node.provisioner or "").inc()
            EMPTINESS.info("Added TTL to empty node", extra=self.fields(node=name))
            since = now.replace(microsecond=0)
        left = ttl - (now - since).total_seconds()
        if left > 0:
            self._due[name] = now + dt.timedelta(seconds=left)
            return
        done.expired += 1
        EMPTINESS.info("Triggering termination after %ds for empty node", ttl, extra=self.fields(node=name))
        self.cluster.delete(objects.NODE, name)
        done.deleted.append(name)
        reason = f"{EMPTINESS_METHOD}/delete"
        self.metrics.deprovisioned(EMPTINESS_METHOD, "delete")
        self.metrics.machines_terminated.labels(reason, node.provisioner or "").inc()
        self.events.publish(events.deprovisioning_terminating(node.obj, reason))


__all__ = ["Emptiness", "touched"]
