"""Running the controllers in real time: informers feed the cluster state, and each controller of the controller's
one list (`Controller.controllers`, the list virtual time steps through) works on a thread of its own, woken by the
events it cares about (its `wake`), when its step said it is due, or when its `poll` interval passes — as
Karpenter's controllers are:

* **provisioning** (the provisioner, the node lifecycle and registration liveness): woken when a pod becomes
  pending (the batch window then decides when to schedule), when a node changes that may be initialized, when
  the constraint sets change (the ConfigMap's informer, or a directory polled every `resync`), and when a retry,
  a plan ahead or a node's registration TTL is due;
* **termination**: woken the moment a node of ours gets a deletionTimestamp and whenever a pod of a node it drains
  changes — it cordons within the event's handling, not at the next pass;
* **emptiness**: woken when a node of ours or one of its pods changes, and when a TTL runs out;
* **disruption**: decides when its interval and the cluster's quiet allow, bounded by its budgets; however long a
  decision takes, the other threads go on;
* **garbage collection**: every `gc_interval`, only while the state is healthy;
* **interruption** (with a queue): long-polls it, at once again after a poll, after a pause when it failed.

Only the replica holding the Lease (:class:`~karpenter_policy.kube.lease.LeaderElector`) acts; the others keep
their state warm to take over at once. Leading is a deadline (the last renewal's start plus the renew deadline,
which ends before any other replica can take the Lease), and every controller asks it before each step and, through
the controller's guarded cluster and cloud (`acting`), before each call that changes anything: a leader cut off
from the API server stops acting before another replica can start, even while its elector's thread waits on a
request that hangs. A replica that becomes the leader first picks up what the previous one left
(:meth:`Controller.took_over`: adoption, garbage collection, a batch window for the pods already pending). A step
that fails unexpectedly is logged with its traceback and retried after a pause: no thread dies of it.

:meth:`Runner.health` tells `/healthz` (every thread alive: the controllers', the informers', the elector's) and
`/readyz` (the state synced and healthy, the constraint sets loaded, the API server answering the elector within
`api_silence_limit`; a standby is ready without leading). Once the informers have listed, what they hold (every
object of the cluster, the state's indexes: the bulk of the heap, alive as long as the process) is frozen out of
the cyclic garbage collector's generations (`gc.freeze`, after one full collection), so a full collection walks
only what was made since, not every pod of the cluster each time (benchmarks/README.md, "gc.freeze after the first
sync"); from then on the runner's loop makes the full collections itself (`heap.HeapCollector`), when the
provisioner is idle (:meth:`Runner.idle`: no batch window open, neither the provisioning nor the disruption thread
in a step) and at least every minute, each freezing what survived — Python's own are made rare, so none lands in
a burst of pending pods. Both are undone when the runner stops. Each step of a controller is measured as
controller-runtime measures a reconcile (`Metrics.reconciling`), and only a replica that acts exports the gauges
that describe the cluster (`Metrics.leading`); leader election's own metrics are `leadermetrics`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.cloud.queue import InterruptionQueue
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.constraints import ConfigMapSource, ConstraintSource
from karpenter_policy.reconcile.controller import Controller, utc_now
from karpenter_policy.reconcile.heap import HeapCollector, Pacing
from karpenter_policy.reconcile.leadermetrics import LeaderElectionMetrics
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import InformerFeed
from karpenter_policy.reconcile.steps import Abandoning, Reconciler

RUNNER = logs.logger("runner")
DEFAULT_RESYNC = 10.0
FAILURE_PAUSE = 5.0


@dataclass(frozen=True, slots=True)
class Health:
    """What the probes read: `alive` (every thread of the process runs), `ready` (the state is synced and
    healthy and the constraint sets are loaded), `leading`, and why not when not."""

    alive: bool
    ready: bool
    leading: bool
    reasons: tuple[str, ...] = ()


class _Worker:
    """One controller's thread: waits for its wake-up, its due time or its poll interval, then runs a step while
    leading."""

    def __init__(self, runner: Runner, controller: Reconciler, idle: float) -> None:
        self.runner = runner
        self.controller = controller
        self.name = controller.name
        self.wake = controller.wake
        self.idle = idle  # the longest it sleeps with nothing due
        self.thread = threading.Thread(target=self._run, name=f"controller-{self.name}", daemon=True)
        #: In a step now (what :meth:`Runner.idle` asks of the provisioning and disruption threads).
        self.stepping = False

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        runner = self.runner
        clock = runner.clock
        controller = self.controller
        while not runner.stopping.is_set():
            if not runner.leading():
                runner.wait_for_leadership(1.0)
                continue
            timeout = self.idle
            self.stepping = True
            try:
                with runner.controller.metrics.reconciling(controller.label) as outcome:
                    result = ReconcileResult(started=clock())
                    due = controller.step(clock(), result)
                    poll = controller.poll()
                    outcome.requeue_after = due is not None or bool(poll)
                    outcome.failed = result.failed  # a failed reconcile, as Karpenter's returned error
            except Exception:  # a bug or an unforeseen failure must not end the controller
                RUNNER.exception("%s step failed; trying again in %.0f s", self.name, FAILURE_PAUSE)
                timeout = FAILURE_PAUSE
            else:
                if poll is not None:
                    timeout = min(poll, timeout)
                if due is not None:
                    timeout = min(max(due - clock(), 0.0), timeout)
            finally:
                self.stepping = False
            if timeout > 0:
                self.wake.wait(timeout)
            self.wake.clear()


class Leadership:
    """Whether this replica may act, asked by every controller and every change (see the module docstring):
    `elector`'s Lease (None: the one replica, elected alone), and not `stopping` (set when the runner stops)."""

    def __init__(self, elector: LeaderElector | None) -> None:
        self.elector = elector
        self.stopping = threading.Event()

    def holds_lease(self) -> bool:
        """What every change asks (the controller's `acting`): the Lease is ours, its renew deadline not passed.
        Not whether the runner stops: a step under way when it stops finishes (the lease is released only after)."""
        return self.elector is None or self.elector.is_leader

    def acting(self) -> bool:
        """Leading, without taking over (what the metrics ask at a scrape: `Metrics.leading`)."""
        return not self.stopping.is_set() and self.holds_lease()


def assemble(
    cluster: Cluster,
    cloud: CloudProvider,
    constraints: ConstraintSource,
    options: ControllerOptions,
    *,
    region: str,
    elector: LeaderElector | None = None,
    resync: float = DEFAULT_RESYNC,
    api_silence_limit: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], dt.datetime] = utc_now,
    interruption_queue: InterruptionQueue | None = None,
    account: str | None = None,
    freeze: bool = True,
    gc_pacing: Pacing | None = None,
) -> Runner:
    """THE place that wires a controller to run on threads, each piece built complete before the next: the
    leadership (`elector`), the metrics that ask it, the informers that feed the state, the controller on them
    (its changes made only while the Lease is held), then the runner. The controller's parameters are
    :class:`Controller`'s; the runner's `resync`, `api_silence_limit`, `freeze` and `gc_pacing` are
    :class:`Runner`'s."""
    leadership = Leadership(elector)
    metrics = Metrics(clock, leading=leadership.acting)
    state = ClusterState(unschedulable_only=options.unschedulable_only)
    feed = InformerFeed(cluster, state)
    metrics.watch_counters(feed.malformed, lambda: dict(state.malformed))  # registered before anything is scraped
    if elector is not None:
        metrics.use("leader_election", LeaderElectionMetrics(elector))
    controller = Controller(
        cluster, cloud, constraints, options, region=region, feed=feed, clock=clock, wall_clock=wall_clock,
        metrics=metrics, interruption_queue=interruption_queue, account=account, acting=leadership.holds_lease,
    )
    return Runner(controller, feed, leadership, resync=resync, api_silence_limit=api_silence_limit, freeze=freeze,
                  gc_pacing=gc_pacing)


class Runner:
    """See the module docstring: :meth:`run` until :meth:`stop` (from another thread or a signal handler). Built by
    :func:`assemble`, which gives it the controller, the informers that feed the controller's state (`feed`) and
    the `leadership` the controller asks."""

    def __init__(
        self,
        controller: Controller,
        feed: InformerFeed,
        leadership: Leadership,
        *,
        resync: float = DEFAULT_RESYNC,
        api_silence_limit: float | None = None,
        freeze: bool = True,
        gc_pacing: Pacing | None = None,
    ) -> None:
        self.controller = controller
        self.feed = feed
        self.leadership = leadership
        self.elector = elector = leadership.elector
        #: Not ready once the API server has not answered the elector for this long (default: a lease duration —
        #: a replica that cannot reach it can neither lead nor take over).
        self.api_silence_limit = api_silence_limit or (elector.lease_duration if elector is not None else 0.0)
        self.resync = resync
        #: Freeze the warm heap after the first sync and make the full collections (`heap`, paced by `gc_pacing`);
        #: False only for a benchmark's A/B (`scale.py --no-gc-freeze`: Python's collector left as it is).
        self.freeze = freeze
        self.clock = controller.clock
        self.heap = HeapCollector(self.idle, controller.metrics, self.clock, gc_pacing)
        self.stopping = leadership.stopping
        self._took_over = False
        self._lock = threading.Lock()
        source = controller.constraints
        #: The constraint-set ConfigMap's own informer (its source's), started and stopped with the others.
        self.configmap: Informer | None = source.informer if isinstance(source, ConfigMapSource) else None
        self.workers = [_Worker(self, c, resync) for c in controller.controllers]  # a thread per controller
        #: The threads a full collection waits for (:meth:`idle`): provisioning's, and disruption's decisions.
        self._quiet_for = [w for w in self.workers if w.controller in (controller.provisioning, controller.disruption)]

    # --- leadership ----------------------------------------------------------------------------------------

    def leading(self) -> bool:
        """This replica may act now: not stopping, and holding the Lease (or elected alone)."""
        if self.stopping.is_set():
            return False
        if self.elector is not None and not self.elector.is_leader:
            with self._lock:
                self._took_over = False
            return False
        with self._lock:
            if not self._took_over:
                self._took_over = True
                self.controller.took_over()
                for worker in self.workers:
                    worker.wake.set()
        return True

    def wait_for_leadership(self, timeout: float) -> None:
        if self.elector is not None:
            self.elector.wait_for_leadership(timeout)
        else:
            self.stopping.wait(timeout)

    # --- running -------------------------------------------------------------------------------------------

    def _informers(self) -> list[Informer]:
        found = list(self.feed.informers.values())
        return [*found, self.configmap] if self.configmap is not None else found

    def _synced(self) -> bool:
        """Start the informers and wait until the required ones have listed once (False: stopped first)."""
        for informer in self._informers():
            informer.start()
        required = self.feed.required() + ([self.configmap] if self.configmap is not None else [])
        for informer in required:
            while not informer.wait_synced(0.5):
                if self.stopping.is_set():
                    return False
        return True

    def health(self) -> Health:
        """See :class:`Health`."""
        reasons = []
        threads = [w.thread for w in self.workers]
        stopped = [t.name for t in threads if t.ident is not None and not t.is_alive()]  # started, then ended
        alive = not stopped
        if stopped:
            reasons.append(f"a controller thread stopped ({', '.join(stopped)})")
        feed = self.feed.health()
        if not feed.alive:
            alive = False
            reasons.append("an informer thread stopped")
        ready = True
        if self.elector is not None:
            if not self.elector.alive():
                alive = False
                reasons.append("the leader election thread stopped or hangs")
            silent = self.elector.silent_for()
            if silent > self.api_silence_limit:
                ready = False
                reasons.append(f"the API server has not answered for {silent:.0f} s")
        if not feed.synced:
            reasons.append("the cluster state is not synced yet")
        reasons.extend(f"watching {kind} fails: {why}" for kind, why in feed.failing)
        loaded = self.controller.loaded is not None
        if not loaded:
            reasons.append("no constraint set is loaded")
        leading = self.elector.is_leader if self.elector is not None else not self.stopping.is_set()
        return Health(alive, ready and feed.healthy and loaded, leading, tuple(reasons))

    def idle(self) -> bool:
        """Whether the provisioner is idle — no batch window open, neither the provisioning thread (a batch being
        scheduled, its launches) nor the disruption thread (a decision mid-simulation, its replacements) in a step:
        when the runner makes its full garbage collections (`heap`). A standby is idle: its batch windows (the state
        it keeps warm sees pods become pending) are not closed by a provisioning step until it leads."""
        if not self.leadership.acting():
            return True
        if self.controller.batcher.due() is not None:
            return False
        return not any(worker.stepping for worker in self._quiet_for)

    def stop(self) -> None:
        self.stopping.set()
        for worker in self.workers:
            worker.wake.set()

    def run(self) -> None:
        """Start the informers, wait until they have listed, then run the controllers until :meth:`stop`."""
        try:
            if not self._synced():
                return
            self._freeze_warm_heap()
            for worker in self.workers:
                worker.start()
            while not self.stopping.is_set():
                self.leading()  # a take-over is noticed here too, even while every worker sleeps
                self.stopping.wait(0.2)
                self.heap.tick()  # a full collection if one is due (never raises)
            for worker in self.workers:  # a step waiting on a long poll acts on nothing more: not waited for
                if isinstance(worker.controller, Abandoning):
                    worker.controller.abandon()
            for worker in self.workers:
                if not isinstance(worker.controller, Abandoning):
                    worker.thread.join(30)
        finally:
            for informer in self._informers():
                informer.stop()
            self.controller.close()  # the informer termination started, if it did
            self.heap.stop()  # a process that runs runners again (the tests) can collect this one's objects

    def _freeze_warm_heap(self) -> None:
        """Move what the first sync built out of the collector's generations (see the module docstring): a full
        collection first, so no garbage is frozen; then every object alive now is left out of later collections
        (still freed by reference counting), and the full collections are the runner's from now on
        (`HeapCollector.start`). `freeze` False (`benchmarks/scale.py --no-gc-freeze`: the A/B of the freeze)
        leaves the collector as it is."""
        if not self.freeze:
            return
        collection = self.heap.start()
        RUNNER.info("state synced; %d objects frozen out of garbage collection (%.2f s)", collection.frozen,
                    collection.seconds, extra=logs.fields())


def run_in_thread(runner: Runner) -> threading.Thread:
    thread = threading.Thread(target=runner.run, name="reconcile", daemon=True)
    thread.start()
    return thread


__all__ = ["DEFAULT_RESYNC", "Health", "Leadership", "Runner", "assemble", "run_in_thread"]
