"""The controller: Karpenter's controllers over one cluster state, and one step of all of them.

The pieces (each in its room, each with its own bookkeeping, all sharing the `context`):

* the **cluster state** (`state/`), fed by watch events: records, indexes, listeners;
* **provisioning** (`provisioning/`): the provisioner (batch → schedule → launch → register → bind), the node
  lifecycle (launches in flight until settled, adoption after a restart, initialization) and registration
  liveness (a node whose kubelet never joins is deleted);
* **termination** (`termination/`): the finalizer of our nodes being deleted — cordon, drain, terminate;
* **disruption** (`disruption/`): emptiness (`ttlSecondsAfterEmpty`), and expiry, drift and consolidation
  decided under a time budget and carried out one command at a time;
* **garbage collection** (`garbage/`): instances without a Node and Nodes without an instance, both ways;
* **interruption** (`interruption/`, wired by the runner): spot interruptions and AWS Health events.

:meth:`Controller.reconcile_once` runs one step of every controller in a fixed order — the constraint sets, the
launches in flight and registration liveness, garbage collection, initialization, emptiness, disruption,
termination, then provisioning — after bringing the state up to date (`feed.sync()`). Simulations and
step-driven tests run it in virtual time; it returns what it did (:class:`ReconcileResult`) and when it wants the
next step. The threaded runner (:mod:`~karpenter_policy.reconcile.runner`) runs the same controllers on threads of
their own instead, each woken by the events it cares about.

Every time source is injected (`clock`: monotonic seconds for batching and retries; `wall_clock`: log times and
ages).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable

from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.acting import ActingCloud, ActingCluster
from karpenter_policy.reconcile.cloudmetrics import MeasuredCloud
from karpenter_policy.reconcile.constraints import ConstraintSource, Loaded, Refused
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.disruption.controller import Disruption
from karpenter_policy.reconcile.disruption.emptiness import Emptiness
from karpenter_policy.reconcile.garbage.collector import GarbageCollector
from karpenter_policy.reconcile.metrics import (
    DEPROVISIONING,
    EMPTINESS,
    GARBAGE_COLLECTION,
    PROVISIONER,
    TERMINATION,
    Metrics,
)
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.provisioning.batcher import Batcher
from karpenter_policy.reconcile.provisioning.lifecycle import NodeLifecycle
from karpenter_policy.reconcile.provisioning.liveness import Liveness
from karpenter_policy.reconcile.provisioning.provisioner import Provisioner
from karpenter_policy.reconcile.result import LaunchedNode, ReconcileResult
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import ListFeed, StateFeed, WatchFeed
from karpenter_policy.reconcile.state.inflight import InFlight
from karpenter_policy.reconcile.termination.terminator import Terminator

CONSTRAINTS = logs.logger("constraints")

REASON_REFUSED = "ConstraintSetRefused"

#: After emptiness deleted a node, the next pass (which drains it) comes this soon; a drain under way asks for its
#: own next step (`Terminated.due`).
DRAIN_STEP_SECONDS = 1.0


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def default_feed(cluster: Cluster, state: ClusterState) -> StateFeed:
    """A watch drained step by step where the cluster answers a watch at once (the in-memory one), else a list."""
    if getattr(cluster, "drains_watches", False):
        return WatchFeed(cluster, state)
    return ListFeed(cluster, state)


class Controller:
    """See the module docstring. `region` is the cloud's (constraint sets of another region are left out)."""

    def __init__(
        self,
        cluster: Cluster,
        cloud: CloudProvider,
        constraints: ConstraintSource,
        options: ControllerOptions,
        *,
        region: str,
        feed: StateFeed | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = _utc_now,
        metrics: Metrics | None = None,
    ) -> None:
        self.constraints = constraints
        self.state = feed.state if feed is not None else ClusterState(unschedulable_only=options.unschedulable_only)
        metrics = metrics or Metrics(clock)
        #: Whether this replica may change anything now (the runner's leadership; always, driven step by step).
        self.acting: Callable[[], bool] = lambda: True
        # every controller's calls measured (docs/metrics.md), and each change made only while acting (`acting`)
        cloud = ActingCloud(MeasuredCloud(cloud, metrics, region), lambda: self.acting())
        cluster = ActingCluster(cluster, lambda: self.acting())
        self.context = Context(cluster, cloud, options, self.state, region, clock, wall_clock, metrics)
        self.feed: StateFeed = feed or default_feed(cluster, self.state)
        self.last_refusal: str | None = None
        self._refused_since_taken = False  # a version was refused after the one in force was taken
        self.provisioner = Provisioner(self.context)
        self.lifecycle = NodeLifecycle(self.context, self.provisioner)
        self.liveness = Liveness(self.context)
        self.emptiness = Emptiness(
            cluster, self.state, self.context.fields, metrics=metrics, recorder=self.context.events
        )
        self.terminator = Terminator(self.context)
        self.disruption = Disruption(
            self.context, self.provisioner, self.terminator, synced=lambda: self.feed.health().synced
        )
        self.garbage = GarbageCollector(
            cluster, cloud, options.cluster_name, metrics=metrics, clock=clock, wall_clock=wall_clock,
            interval=options.gc_interval, instance_grace=options.gc_instance_grace, node_grace=options.gc_node_grace,
            count_malformed=self.state.count_malformed,
        )
        self._deprovision_due: float | None = None

    # --- what the rest of the program reads ----------------------------------------------------------------

    @property
    def cluster(self) -> Cluster:
        return self.context.cluster

    @property
    def cloud(self) -> CloudProvider:
        return self.context.cloud

    @property
    def options(self) -> ControllerOptions:
        return self.context.options

    @property
    def metrics(self) -> Metrics:
        return self.context.metrics

    @property
    def clock(self) -> Callable[[], float]:
        return self.context.clock

    @property
    def wall_clock(self) -> Callable[[], dt.datetime]:
        return self.context.wall_clock

    @property
    def loaded(self) -> Loaded | None:
        return self.context.loaded

    @property
    def inflight(self) -> InFlight:
        return self.context.inflight

    @property
    def batcher(self) -> Batcher:
        return self.provisioner.batcher

    # --- events --------------------------------------------------------------------------------------------

    def notify(self, uid: str = "") -> None:
        """A provisionable pod (`uid`) appeared, as a watch event tells: open or extend the batch window now."""
        self.provisioner.notify(uid)

    def took_over(self) -> None:
        """This replica just became the leader (or started): the next step adopts instances of ours that have no
        Node, collects garbage, and opens a batch window for every pod already pending."""
        self.lifecycle.took_over()
        self.garbage.request()
        self.provisioner.resume()

    def next_due(self) -> float | None:
        """When the next step has something to do on its own: a batch window closes, a plan can be made ahead, a
        retry, a drain step, a TTL, a disruption decision."""
        due = self.provisioner.next_due()
        for other in (self._deprovision_due, self.liveness.next_due()):
            if other is not None:
                due = other if due is None else min(due, other)
        return due

    # --- one step of every controller ----------------------------------------------------------------------

    def reconcile_once(self) -> ReconcileResult:
        """One step (see the module docstring)."""
        result = ReconcileResult(started=self.clock())
        self.feed.sync()
        provisioning = self.metrics.step(PROVISIONER)  # one reconcile of each controller, as the runner's threads
        with provisioning.segment():
            self.refresh_constraint_sets(result)
            self.lifecycle.register_pending(result)
            self.lifecycle.settle(result)
            self.liveness.reconcile(result)
        with self.metrics.reconciling(GARBAGE_COLLECTION):
            self.collect_garbage(result)
        with provisioning.segment():
            self.lifecycle.initialize()
        self.deprovision(result)
        with provisioning.segment():
            self.provisioner.reconcile(result)
        provisioning.finish()
        result.due = self.next_due()
        return result

    def collect_garbage(self, result: ReconcileResult) -> None:
        """Collect garbage when due (after adoption: an instance adopted has its Node)."""
        if self.lifecycle.adopted and self.garbage.due():
            steady = self.feed.health().steady
            result.garbage = self.garbage.collect(self.state.nodes(), self.inflight.provider_ids(), steady)
            result.errors.extend(result.garbage.errors)

    def deprovision(self, result: ReconcileResult) -> None:
        """Emptiness marks and deletes empty nodes; expiry, drift and consolidation replace and delete nodes;
        termination drains and terminates the nodes being deleted."""
        loaded = self.loaded
        sets = loaded.sets if loaded is not None else ()
        ttls = {s.name: s.ttl_seconds_after_empty for s in sets}
        reconciling = self.metrics.reconciling
        with reconciling(EMPTINESS):
            emptied = self.emptiness.reconcile(ttls, self.wall_clock(), self.disruption.protected())
        with reconciling(DEPROVISIONING):
            disrupted = self.disruption.reconcile(result)
        with reconciling(TERMINATION):
            terminated = self.terminator.reconcile()
        # Come back: at once for a node just deleted, when a drain under way asks for it.
        now = self.clock()
        dues = [now + emptied.due] if emptied.due is not None else []
        if disrupted.due is not None:
            dues.append(disrupted.due)
        if terminated.due is not None:
            dues.append(terminated.due)
        if emptied.deleted:
            dues.append(now + DRAIN_STEP_SECONDS)
        self._deprovision_due = min(dues) if dues else None
        result.terminated = terminated
        result.emptied = emptied
        result.disrupted = disrupted
        result.errors.extend(emptied.errors + terminated.errors + disrupted.errors)

    # --- constraint sets ---------------------------------------------------------------------------------------

    def refresh_constraint_sets(self, result: ReconcileResult | None = None) -> None:
        """Take the source's new version, if any (a step starts with this; a command calls it to load the first
        version before running): `loaded` is the version in force, `last_refusal` why the last one was not."""
        result = result or ReconcileResult(started=self.clock())
        update = self.constraints.poll()
        if update is None:
            return
        if isinstance(update, Refused):
            self._refuse(update, result)
        else:
            self.take(update, result)

    def take(self, loaded: Loaded, result: ReconcileResult | None = None) -> None:
        """Put a version of the constraint sets in force. The same version read again (the same hash: `compile`
        run again on unchanged policies, a ConfigMap whose metadata alone changed, the kubelet's new symlink for
        the same data) only notes where it was read, at debug level: 'loaded' is logged, and plans made
        again, for a new version only — or for the version in force back after a refused one."""
        previous = self.context.loaded
        refused, self._refused_since_taken = self._refused_since_taken, False
        if previous is not None and previous.hash == loaded.hash and not refused:
            if previous.origin != loaded.origin:  # a ConfigMap's new resourceVersion
                self.context.loaded = dataclasses.replace(previous, origin=loaded.origin)
            CONSTRAINTS.debug(
                "constraint sets unchanged, read again from %s", loaded.origin,
                extra=self.context.fields(hash=loaded.hash),
            )
            return
        self.context.loaded = loaded
        self.provisioner.sets_changed()
        if result is not None:
            result.loaded = loaded.origin
        self.metrics.constraint_sets.set(len(loaded.sets))
        CONSTRAINTS.info(
            "loaded %d constraint set(s) from %s",
            len(loaded.sets),
            loaded.origin,
            extra=self.context.fields(sets=[s.name for s in loaded.sets], hash=loaded.hash),
        )

    def _refuse(self, refused: Refused, result: ReconcileResult) -> None:
        loaded = self.loaded
        kept = (
            f"the last good version ({loaded.origin}, {loaded.hash}) stays in force"
            if loaded is not None
            else "no constraint set is in force"
        )
        message = f"refused constraint sets: {refused.message}; {kept}"
        result.refused = self.last_refusal = message
        self._refused_since_taken = True
        self.metrics.constraint_set_refusals.inc()
        CONSTRAINTS.error(message, extra=self.context.fields(source=self.constraints.description))
        if refused.involved is not None:
            self.context.event(refused.involved, REASON_REFUSED, message, "Warning")


__all__ = ["Controller", "ControllerOptions", "LaunchedNode", "ReconcileResult", "default_feed"]
