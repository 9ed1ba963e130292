"""The controller: Karpenter's controllers over one cluster state, in ONE ordered list, and one step of all of them.

The pieces (each in its room, each with its own bookkeeping, all sharing the `context`):

* the **cluster state** (`state/`), fed by watch events: records, indexes, listeners;
* the controllers, each a :class:`~karpenter_policy.reconcile.steps.Reconciler` (a name, what wakes it, a step
  that says when it is next due), built here and wired in their constructors:

  - **interruption** (`interruption/`, with a queue): spot interruptions, state changes and AWS Health events;
  - **provisioning** (`provisioning/`): constraint sets taken, the launches in flight followed (registration,
    settling, initialization), registration liveness, then batch → schedule → launch → register → bind;
  - **garbage collection** (`garbage/`): instances without a Node and Nodes without an instance, both ways;
  - **capacity type** and **reservation expiration** (`capacityreservation/`, once a minute): a reserved node whose
    instance EC2 moved to on-demand relabelled so, a capacity block's claims deleted 40 minutes before its end
    (aws v1.14.1 pkg/controllers/capacityreservation/);
  - **emptiness** (`disruption/emptiness.py`, `ttlSecondsAfterEmpty`);
  - **disruption** (`disruption/`): expiry, drift and consolidation decided under a time budget and carried out
    one command at a time;
  - **termination** (`termination/`): the finalizer of our nodes being deleted — cordon, drain, terminate;
  - with the `StaticCapacity` feature gate (`ControllerOptions.static_capacity`), **static provisioning** and
    **static deprovisioning** (`static/`): static NodePools' NodeClaims kept at `replicas` (v1.14.1 core
    pkg/controllers/static/, registered only with the gate: pkg/controllers/controllers.go).

:attr:`Controller.controllers` is the one list. Karpenter registers the same controllers with its manager (core
v0.31.1 `pkg/controllers/controllers.go` `NewControllers`: the provisioner, deprovisioning, provisioning, …,
termination, …, machine lifecycle and garbage collection; aws v0.31.1 `pkg/controllers/controllers.go`: garbage
collection, then interruption when a queue is configured), and controller-runtime runs each on goroutines of its
own: that order is not an order of execution. The threaded runner (:mod:`~karpenter_policy.reconcile.runner`) does
the same — a thread per controller of the list, each woken by the events it cares about. Virtual time
(:meth:`Controller.reconcile_once`: `simulate`, the scenes of `karpenter_policy.testing`, the step-driven tests)
runs one step of each, in the list's order, after bringing the state up to date (`feed.sync()`): the queue's
messages first, then provisioning (new constraint sets, launches in flight, then the batch), garbage collection, the
capacity-reservation controllers, emptiness, disruption, the static controllers (gate on), and termination last,
which drains what the others deleted (interruption shows the state the deletions it requests at once). That is the
order a pass had before the list (#24), but for the provisioner's batch, which came after termination and now closes
provisioning's own step, and interruption, which `simulate`'s driver polled before the kubelets' sync: `simulate`
prints the same bytes on the examples either way. It returns what they did (:class:`ReconcileResult`) and when the
earliest wants the next step.

Adding a controller: its package (a class with `name`, `label`, `wake`, `step` and `poll`), built in
:class:`Controller`'s constructor, and a line in :attr:`Controller.controllers` (docs/reconcile.md).

Every time source is injected (`clock`: monotonic seconds for batching and retries; `wall_clock`: log times and
ages). :meth:`Controller.close` stops the threads it started (the runner closes it as it stops; a scene closes the
controllers it made).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable

from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.cloud.queue import InterruptionQueue
from karpenter_policy.kube.attachments import attachment_index
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.acting import ActingCloud, ActingCluster
from karpenter_policy.reconcile.capacityreservation.capacitytype import CapacityTypeSync
from karpenter_policy.reconcile.capacityreservation.expiration import ReservationExpiration
from karpenter_policy.reconcile.cloudmetrics import MeasuredCloud
from karpenter_policy.reconcile.constraints import ConfigMapSource, ConstraintSource, Loaded, Refused
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.disruption.controller import Disruption
from karpenter_policy.reconcile.disruption.emptiness import Emptiness
from karpenter_policy.reconcile.garbage.collector import GarbageCollector
from karpenter_policy.reconcile.garbage.controller import GarbageCollection
from karpenter_policy.reconcile.interruption.handler import InterruptionHandler
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.provisioning.batcher import Batcher
from karpenter_policy.reconcile.provisioning.controller import Provisioning
from karpenter_policy.reconcile.provisioning.lifecycle import NodeLifecycle
from karpenter_policy.reconcile.provisioning.liveness import Liveness
from karpenter_policy.reconcile.provisioning.provisioner import Provisioner
from karpenter_policy.reconcile.result import LaunchedNode, ReconcileResult
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import InformerFeed, ListFeed, StateFeed, WatchFeed
from karpenter_policy.reconcile.state.inflight import InFlight
from karpenter_policy.reconcile.static.deprovisioning import StaticDeprovisioning
from karpenter_policy.reconcile.static.provisioning import StaticProvisioning
from karpenter_policy.reconcile.steps import Reconciler
from karpenter_policy.reconcile.termination.terminator import Terminator

CONSTRAINTS = logs.logger("constraints")

REASON_REFUSED = "ConstraintSetRefused"


def utc_now() -> dt.datetime:
    """The wall clock: now, in UTC."""
    return dt.datetime.now(dt.UTC)


def always() -> bool:
    """A controller driven step by step always acts (it has no Lease to hold)."""
    return True


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
        wall_clock: Callable[[], dt.datetime] = utc_now,
        metrics: Metrics | None = None,
        interruption_queue: InterruptionQueue | None = None,
        account: str | None = None,
        acting: Callable[[], bool] = always,
    ) -> None:
        self.constraints = constraints
        self.state = feed.state if feed is not None else ClusterState(unschedulable_only=options.unschedulable_only)
        metrics = metrics or Metrics(clock)
        #: Whether this replica may change anything now (the threaded runner's leadership; always, driven step by
        #: step): every call that changes the cluster or the cloud asks it first.
        self.acting = acting
        # every controller's calls measured (docs/metrics.md), and each change made only while acting (`acting`)
        cloud = ActingCloud(MeasuredCloud(cloud, metrics, region), acting)
        cluster = ActingCluster(cluster, acting)
        self.context = Context(cluster, cloud, options, self.state, region, clock, wall_clock, metrics)
        self.feed: StateFeed = feed or default_feed(cluster, self.state)
        self.last_refusal: str | None = None
        self._refused_since_taken = False  # a version was refused after the one in force was taken
        # a ConfigMap source's informer wakes provisioning when the constraint sets change
        self.provisioner = Provisioner(
            self.context, wake=constraints.changed if isinstance(constraints, ConfigMapSource) else None
        )
        self.lifecycle = NodeLifecycle(self.context, self.provisioner)
        self.liveness = Liveness(self.context)
        self.provisioning = Provisioning(
            self.context, self.provisioner, self.lifecycle, self.liveness, self.refresh_constraint_sets
        )
        self.emptiness = Emptiness(
            cluster, self.state, self.context.fields, metrics=metrics, recorder=self.context.events,
            ttls=self._ttls, protected=lambda: self.disruption.protected(), clock=clock, wall_clock=wall_clock,
        )
        # VolumeAttachments by node: an informer under the threaded runner (started when a node first needs them),
        # a watch drained at each pass when driven step by step on the in-memory cluster
        attachments = attachment_index(cluster, isinstance(self.feed, InformerFeed), self.state.count_malformed)
        self.terminator = Terminator(self.context, attachments)
        self.disruption = Disruption(
            self.context, self.provisioner, self.terminator, synced=lambda: self.feed.health().synced
        )
        self.static_provisioning: StaticProvisioning | None = None
        self.static_deprovisioning: StaticDeprovisioning | None = None
        if options.static_capacity:  # v1.14.1 registers them only with the gate (pkg/controllers/controllers.go)
            self.static_provisioning = StaticProvisioning(
                self.context, self.provisioner, self.disruption.disrupting, lambda: self.feed.health().synced
            )
            self.static_deprovisioning = StaticDeprovisioning(self.context, self.disruption.disrupting)
        self.garbage = GarbageCollector(
            cluster, cloud, options.cluster_name, metrics=metrics, clock=clock, wall_clock=wall_clock,
            interval=options.gc_interval, instance_grace=options.gc_instance_grace, node_grace=options.gc_node_grace,
            count_malformed=self.state.count_malformed,
        )
        self.garbage_collection = GarbageCollection(
            self.context, self.garbage, self.lifecycle, steady=lambda: self.feed.health().steady
        )
        self.capacity_type = CapacityTypeSync(self.context)
        self.reservation_expiration = ReservationExpiration(self.context)
        self.interruption = (
            InterruptionHandler(
                cluster, cloud, interruption_queue, metrics=metrics, wall_clock=wall_clock, account=account,
                region=region, state=self.state, acting=acting, clock=clock,
            )
            if interruption_queue is not None
            else None
        )
        #: THE list of controllers, in the order of a step in virtual time (see the module docstring); the runner
        #: gives each a thread. Adding a controller: its package, and a line here.
        self.controllers: tuple[Reconciler, ...] = tuple(c for c in (
            self.interruption,
            self.provisioning,
            self.garbage_collection,
            self.capacity_type,
            self.reservation_expiration,
            self.emptiness,
            self.disruption,
            self.static_provisioning,
            self.static_deprovisioning,
            self.terminator,
        ) if c is not None)

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
        """When provisioning has something to do on its own: a batch window closes, a plan can be made ahead, a
        retry, a node's registration TTL, a registration hook's backoff."""
        return self.provisioning.next_due()

    def close(self) -> None:
        """Stop every thread the controller started itself: the VolumeAttachment informer termination starts when a
        node first needs it (on an API server over HTTP, driven step by step or threaded). Its state's informers
        are its feed's owner's (the threaded runner's). A controller that shuts down must not leave one watching;
        idempotent, and the informer is never started once closed."""
        self.terminator.attachments.stop()

    # --- one step of every controller ----------------------------------------------------------------------

    def reconcile_once(self) -> ReconcileResult:
        """One step of every controller of :attr:`controllers`, in its order, after bringing the state up to date
        (`feed.sync()`): what they did, and when the earliest wants the next step (`due`)."""
        result = ReconcileResult(started=self.clock())
        self.feed.sync()
        dues, failed = [], False
        for controller in self.controllers:
            with self.metrics.reconciling(controller.label) as outcome:  # each a reconcile, as the runner counts
                result.failed = False
                due = controller.step(self.clock(), result)
                outcome.failed = result.failed
            failed = failed or result.failed
            if due is not None:
                dues.append(due)
        result.due, result.failed = min(dues, default=None), failed
        return result

    def _ttls(self) -> dict[str, int | None]:
        """Pool key → ttlSecondsAfterEmpty, of the constraint sets in force (a NodePool's: None)."""
        loaded = self.loaded
        return {s.pool: s.ttl_seconds_after_empty for s in (loaded.sets if loaded is not None else ())}

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
            extra=self.context.fields(sets=[s.pool for s in loaded.sets], hash=loaded.hash),
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
