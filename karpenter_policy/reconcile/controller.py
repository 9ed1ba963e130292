"""The provisioning controller: pending pods in, EC2 instances, Nodes and bindings out — one pass at a time.

:meth:`Controller.reconcile_once` does one pass and returns what it did (:class:`ReconcileResult`):

1. **constraint sets**: take a new version from the source if there is one (or refuse it: the last good one
   stays in force, with a log line and a Warning Event on the ConfigMap);
2. **launches in flight**: register the Nodes of launched instances that are not registered yet, bind their
   planned pods, drop the launches the cluster now shows settled, label our Ready nodes initialized; on the
   first pass, register a Node for every instance of ours that has none (a controller that stopped between
   CreateFleet and registration picks its instance up instead of launching another);
3. **batching**: every provisionable pod triggers the :class:`Batcher` once — when a watch event announces it
   (:meth:`Controller.notify`), else when a pass first sees it — as do a new version of the constraint sets
   and, for pods still pending, the retry interval; nothing more happens until the window closes (1 s without a
   new pod, 10 s at most by default);
4. **scheduling**: the batch's pods, the existing and in-flight nodes, the DaemonSets and the node templates of
   the sets in force (their admitted types at the cloud's live offerings) go to the scheduler — the same code
   as `check --workloads`; pods no set can take get a Warning Event with the scheduler's reason;
5. **launching**: one launch request per node claim, in parallel; each launched instance gets its Node
   registered and its pods bound at once. A claim whose every offering lacked capacity has its pods scheduled
   again in the same pass, without the offerings the cloud just refused (the provider already falls back to
   the next offering within a launch); other launch errors leave the pods pending for the next retry;
6. **existing capacity**: pods the plan puts on existing nodes are bound when the controller is the cluster's
   only scheduler (`bind_existing`: the in-memory cluster, simulations); with kube-scheduler present they get a
   `Nominated` Event and kube-scheduler binds them.

Garbage collection (:mod:`~karpenter_policy.reconcile.garbage.collector`: instances without a Node are terminated, Nodes
without an instance deleted) runs in the pass after step 2, on the first pass and every `gc_interval` seconds
after; :meth:`Controller.took_over` (a replica that just became the leader) makes the next pass adopt and collect
again, since another replica may have launched meanwhile.

Every time source is injected (`clock`: monotonic seconds for batching and retries; `wall_clock`: log times),
so a simulation can drive passes in virtual time; :mod:`karpenter_policy.reconcile.runner` drives them in real
time from watch events.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from karpenter_policy.cloud.errors import CloudError, ConfigurationError, InsufficientCapacity, Throttled
from karpenter_policy.cloud.provider import STATE_PENDING, STATE_RUNNING, CloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, EventSeverity
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.constraints import ConstraintSource, Loaded, Refused
from karpenter_policy.reconcile.disruption.decider import Command, Decider, Inputs
from karpenter_policy.reconcile.disruption.deprovisioner import (
    DEFAULT_INTERVAL as DEFAULT_DISRUPTION_INTERVAL,
)
from karpenter_policy.reconcile.disruption.deprovisioner import (
    DEFAULT_REPLACEMENT_TIMEOUT,
    DEFAULT_VALIDATION,
    Deprovisioner,
    Disrupted,
)
from karpenter_policy.reconcile.disruption.emptiness import Emptied, reconcile_emptiness
from karpenter_policy.reconcile.garbage.collector import (
    DEFAULT_INSTANCE_GRACE,
    DEFAULT_INTERVAL,
    DEFAULT_NODE_GRACE,
    Collected,
    GarbageCollector,
)
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.provisioning import registration
from karpenter_policy.reconcile.provisioning.ahead import PlanAhead
from karpenter_policy.reconcile.provisioning.batcher import (
    DEFAULT_IDLE_SECONDS,
    DEFAULT_MAX_SECONDS,
    Batcher,
    BatchWindow,
)
from karpenter_policy.reconcile.provisioning.binder import Binder, Binding
from karpenter_policy.reconcile.provisioning.launcher import Launcher, Outcome, launch_request
from karpenter_policy.reconcile.provisioning.templates import TemplateBuilder, Templates
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.inflight import InFlight, InFlightNode
from karpenter_policy.reconcile.state.pods import ShapeCache, pod_key
from karpenter_policy.reconcile.state.snapshot import ClusterState, build_state
from karpenter_policy.reconcile.state.view import ClusterView, ListView, Snapshot
from karpenter_policy.reconcile.termination.terminator import Terminated, Terminator
from karpenter_policy.scheduling import COST, ClaimPlan, Plan, Pod, PodFailure, Scheduler, SchedulerOptions
from karpenter_policy.scheduling.vectors import as_resources

PROVISIONER = logs.logger("provisioner")
CONSTRAINTS = logs.logger("constraints")
NODE = logs.logger("node")

REASON_FAILED_SCHEDULING = "FailedScheduling"
REASON_NOMINATED = "Nominated"
REASON_LAUNCHED = "Launched"
REASON_REFUSED = "ConstraintSetRefused"


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    """How the controller behaves (see the module docstring and docs/reconcile.md)."""

    cluster_name: str
    batch_idle: float = DEFAULT_IDLE_SECONDS
    batch_max: float = DEFAULT_MAX_SECONDS
    #: Provision only for pods kube-scheduler marked Unschedulable (a real cluster); else every unbound pod.
    unschedulable_only: bool = False
    #: Bind pods the plan puts on existing nodes (when no kube-scheduler runs); else nominate them.
    bind_existing: bool = True
    strategy: str = COST
    #: Launches issued at once (Karpenter launches every node of a batch at once); 1: in plan order.
    launch_parallelism: int = 64
    bind_parallelism: int = 8
    #: Pods still pending after a batch are tried again after this many seconds (capacity may be back).
    retry_interval: float = 10.0
    #: Scheduling rounds after a launch found no capacity at all, in the same pass.
    replans: int = 1
    #: A launched instance whose Node never shows up is forgotten after this many seconds.
    registration_timeout: float = 300.0
    #: Plan the batch ahead while its window is open and quiet (see `ahead`); the plan is used when the
    #: window closes if nothing changed meanwhile.
    speculate: bool = True
    #: Garbage collection (see `garbage`): every this many seconds (0: never); an instance with no Node is
    #: terminated this long after its launch; a Node of ours whose instance is gone is deleted once this old.
    gc_interval: float = DEFAULT_INTERVAL
    gc_instance_grace: float = DEFAULT_INSTANCE_GRACE
    gc_node_grace: float = DEFAULT_NODE_GRACE
    #: Disruption (see `deprovisioner`): decide at most this often; act on a consolidation only when a decision
    #: this much later agrees; abandon a command whose replacements are not initialized within this time.
    disruption_interval: float = DEFAULT_DISRUPTION_INTERVAL
    consolidation_validation: float = DEFAULT_VALIDATION
    replacement_timeout: float = DEFAULT_REPLACEMENT_TIMEOUT

    def __post_init__(self) -> None:
        if not self.cluster_name:
            raise ValueError("a cluster name is required")
        if self.retry_interval <= 0 or self.registration_timeout <= 0 or self.replans < 0:
            raise ValueError("retry interval and registration timeout must be > 0, replans >= 0")


@dataclass(frozen=True, slots=True)
class LaunchedNode:
    """A node the pass launched and registered (or tried to register)."""

    node: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    provisioner: str
    pods: tuple[str, ...]  # pod keys planned onto it
    price: float | None = None  # $/h; None: no price data for it


@dataclass(slots=True)
class ReconcileResult:
    """What one pass did. `due`: when the controller wants its next pass (monotonic clock; None: on a change)."""

    started: float
    pending: int = 0
    batch: BatchWindow | None = None
    loaded: str | None = None  # a new constraint-set version taken (its origin)
    refused: str | None = None  # a new version refused (why)
    plans: list[Plan] = field(default_factory=list)
    launched: list[LaunchedNode] = field(default_factory=list)
    bound: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node → pod keys bound this pass
    nominated: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node → pod keys left to kube-scheduler
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key → why (PodFailure.message())
    errors: list[str] = field(default_factory=list)
    due: float | None = None
    garbage: Collected | None = None  # what garbage collection did, when it ran this pass
    emptied: Emptied | None = None  # emptiness: nodes marked, unmarked, deleted
    terminated: Terminated | None = None  # termination: nodes cordoned, pods evicted or blocked, nodes deleted
    disrupted: Disrupted | None = None  # expiry, drift, consolidation: the command acted on or followed

    @property
    def scheduled(self) -> bool:
        """The pass closed a batch and scheduled it."""
        return self.batch is not None


@dataclass(frozen=True, slots=True)
class _Observed:
    """The scheduling inputs a pass built, and what they were built from (reused while neither changed)."""

    version: object
    inflight: object
    snapshot: Snapshot
    state: ClusterState


#: After a node was deleted or a drain step taken, the next pass comes this soon; a drain a budget or a
#: do-not-evict pod blocks is tried again this often.
DRAIN_STEP_SECONDS = 1.0
BLOCKED_DRAIN_RETRY_SECONDS = 10.0


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
        view: ClusterView | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = _utc_now,
        metrics: Metrics | None = None,
    ) -> None:
        self.cluster = cluster
        self.cloud = cloud
        self.constraints = constraints
        self.options = options
        self.view: ClusterView = view or ListView(cluster)
        self.clock = clock
        self.wall_clock = wall_clock
        self.metrics = metrics or Metrics()
        self.batcher = Batcher(options.batch_idle, options.batch_max, clock)
        self.inflight = InFlight()
        self.shapes = ShapeCache()
        self.templates = TemplateBuilder(cloud, region)
        self.launcher = Launcher(cloud, options.launch_parallelism, clock)
        self.binder = Binder(cluster, options.bind_parallelism)
        self.loaded: Loaded | None = None
        self.last_refusal: str | None = None
        self._scheduler_options = SchedulerOptions(options.strategy)
        self._seen: set[str] = set()  # uids of the pending pods seen by the last pass
        self._notified: set[str] = set()  # uids of pods `notify` announced that no pass has seen yet
        self._lock = threading.Lock()
        self._retry_at: float | None = None
        self._reported: dict[str, str] = {}  # pod uid → the reason last reported (Event and log once per reason)
        self._nominated: dict[str, str] = {}  # pod uid → the node it was nominated to
        self._left_out: dict[str, str] = {}  # set name → why it is left out (logged once)
        self._initialized: set[str] = set()  # uids of our nodes known to be labelled initialized
        self._adopted = False
        self._sets_changed = False
        self._observed: _Observed | None = None
        self.ahead = PlanAhead(self.batcher, options.batch_idle, clock)
        self.terminator = Terminator(cluster, cloud, self._fields)
        self._deprovision_due: float | None = None
        self.deprovisioner = Deprovisioner(
            cluster, Decider(self._scheduler_options), clock, self._fields,
            interval=options.disruption_interval, validation=options.consolidation_validation,
            replacement_timeout=options.replacement_timeout,
        )
        self.garbage = GarbageCollector(
            cluster, cloud, options.cluster_name, metrics=self.metrics, clock=clock, wall_clock=wall_clock,
            interval=options.gc_interval, instance_grace=options.gc_instance_grace, node_grace=options.gc_node_grace,
        )

    # --- the pass ----------------------------------------------------------------------------------------------

    def notify(self, uid: str = "") -> None:
        """A provisionable pod (`uid`) appeared, as a watch event tells: open or extend the batch window now. A
        pass that finds a pod nobody notified triggers the window itself, at the time of the pass."""
        with self._lock:
            if uid:
                self._notified.add(uid)
        self.batcher.trigger()

    def next_due(self) -> float | None:
        """When the next pass has something to do on its own: the batch window closes, a plan can be made ahead
        for it, or a retry is due."""
        due = self.batcher.due()
        for other in (self.ahead.due() if self._plans_ahead() else None, self._retry_at, self._deprovision_due):
            if other is not None:
                due = other if due is None else min(due, other)
        return due

    def reconcile_once(self) -> ReconcileResult:
        """One pass (see the module docstring)."""
        result = ReconcileResult(started=self.clock())
        self.refresh_constraint_sets(result)
        self._register_inflight(result)
        snapshot, state = self._observe(result)
        if self._adopted and self.garbage.due():  # after adoption: an instance adopted has its Node
            result.garbage = self.garbage.collect(snapshot.nodes, self.inflight.provider_ids())
            result.errors.extend(result.garbage.errors)
        self._initialize(state)
        self._deprovision(snapshot, state, result)
        result.pending = len(state.pending)
        self.metrics.pods_pending.set(len(state.pending))
        self._report_unreadable(state)
        window = self._batch(state)
        if window is None:
            if self._plans_ahead():
                self._plan_ahead(state)
            result.due = self.next_due()
            return result
        result.batch = window
        self._provision(snapshot, state, result)
        self.metrics.reconcile_duration.observe(self.clock() - result.started)
        result.due = self.next_due()
        return result

    def _deprovision(self, snapshot: Snapshot, state: ClusterState, result: ReconcileResult) -> None:
        """Emptiness marks and deletes empty nodes; expiry, drift and consolidation (`deprovisioner`) replace and
        delete nodes; termination drains and terminates the nodes being deleted."""
        sets = self.loaded.sets if self.loaded else ()
        ttls = {s.name: s.ttl_seconds_after_empty for s in sets}
        protected = self.deprovisioner.protected()
        emptied = reconcile_emptiness(self.cluster, snapshot.nodes, snapshot.pods, ttls, self.wall_clock(),
                                      self._fields, protected)
        disrupted = self._disrupt(snapshot, state, protected, result)
        terminated = self.terminator.reconcile(snapshot.nodes, snapshot.pods)
        # Come back: at once for a node just deleted or a drain under way, later for a drain a budget blocks.
        dues = [self.clock() + emptied.due] if emptied.due is not None else []
        if disrupted.due is not None:
            dues.append(disrupted.due)
        if emptied.deleted or terminated.cordoned or terminated.evicted:
            dues.append(self.clock() + DRAIN_STEP_SECONDS)
        elif terminated.blocked:
            dues.append(self.clock() + BLOCKED_DRAIN_RETRY_SECONDS)
        self._deprovision_due = min(dues) if dues else None
        result.terminated = terminated
        result.emptied = emptied
        result.disrupted = disrupted
        result.errors.extend(emptied.errors + terminated.errors + disrupted.errors)

    def _disrupt(
        self, snapshot: Snapshot, state: ClusterState, protected: frozenset[str], result: ReconcileResult
    ) -> Disrupted:
        """Expiry, drift and consolidation: decided only while nothing else moves (no pod pending, no launch in
        flight, no node of ours being deleted, no batch window open)."""
        if self.loaded is None and self.deprovisioner.underway is None:
            return Disrupted()
        deleting = any(node_info.is_ours(n) and objects.is_deleting(n) for n in snapshot.nodes)
        quiet = not (state.pending or state.unreadable or len(self.inflight) or deleting
                     or self.batcher.due() is not None)

        def inputs() -> Inputs:
            budgets = self.cluster.list(objects.POD_DISRUPTION_BUDGET).items
            templates = self._template_sets()
            return Inputs(state, templates, snapshot.pods, budgets, self.wall_clock(), protected,
                          self._current_images(templates))

        def launch(command: Command) -> list[str] | str:
            return self._launch_replacements(command, result)

        try:
            return self.deprovisioner.step(quiet, inputs, snapshot.nodes, launch)
        except (ClusterError, CloudError) as error:
            done = Disrupted(errors=[f"could not decide on disruption, {error}"])
            NODE.error(done.errors[0], extra=self._fields())
            done.due = self.clock() + self.options.disruption_interval
            return done

    def took_over(self) -> None:
        """This replica just became the leader: the next pass registers Nodes for instances of ours that have
        none (another replica may have stopped between CreateFleet and registration) and collects garbage."""
        self._adopted = False
        self.garbage.request()

    def _observe(self, result: ReconcileResult) -> tuple[Snapshot, ClusterState]:
        """The cluster as the view shows it and the scheduling inputs built from it — the last pass's again when
        neither the view nor the launches in flight changed since (a cache that did not move is not copied)."""
        version = self.view.version()
        observed = self._observed
        same_view = observed is not None and version is not None and observed.version == version
        snapshot = observed.snapshot if same_view and observed is not None else self.view.snapshot()
        if not self._adopted:
            self._adopt(snapshot, result)
        self._settle_inflight(snapshot, result)
        fingerprint = self.inflight.fingerprint()
        if same_view and observed is not None and observed.inflight == fingerprint:
            state = observed.state
        else:
            state = build_state(snapshot, self.inflight, self.shapes, self.options.unschedulable_only)
        self._observed = _Observed(version, fingerprint, snapshot, state)
        return snapshot, state

    # --- planning ahead (see `ahead`) ----------------------------------------------------------------------

    def _plans_ahead(self) -> bool:
        """Planning ahead needs to know that nothing changed: a view that tells its version."""
        return self.options.speculate and not (self._observed is not None and self._observed.version is None)

    def _plan_ahead(self, state: ClusterState) -> None:
        def plan(templates: Templates) -> Plan:
            return self._scheduler(templates, state).solve(state.pending)

        try:
            self.ahead.maybe(state, self.loaded, self._template_sets, plan)
        except CloudError:
            return  # the pass that closes the window will say so

    def _scheduler(self, templates: Templates, state: ClusterState) -> Scheduler:
        return Scheduler(
            templates.templates,
            state.existing,
            state.daemons,
            state.cluster_pods,
            state.namespace_labels,
            self._scheduler_options,
        )

    def _batch(self, state: ClusterState) -> BatchWindow | None:
        uids = {pod.uid for pod in state.pending}
        now = self.clock()
        with self._lock:
            fresh = uids - self._seen - self._notified
            self._notified -= uids
            if len(self._notified) > 100_000:  # notified pods that never showed up (deleted at once)
                self._notified.clear()
        retry_due = self._retry_at is not None and now >= self._retry_at
        again = uids and self.batcher.due() is None and (self._sets_changed or retry_due)
        if fresh or again:  # pods nobody notified; or pods still pending when the sets changed or a retry is due
            self.batcher.trigger()
        if again:
            self._retry_at = None  # the batch this opens is the retry (the pass that closes it sets the next one)
        self._seen = uids
        self._sets_changed = False
        # A pod that is no longer pending is reported again if it ever is (and for another reason).
        waiting = uids | {objects.uid(obj) for obj, _ in state.unreadable}
        self._reported = {uid: why for uid, why in self._reported.items() if uid in waiting}
        self._nominated = {uid: node for uid, node in self._nominated.items() if uid in uids}
        if not uids:
            self._retry_at = None
        window = self.batcher.take()
        if window is not None and not uids:
            self.ahead.take()
            return None  # the pods that opened it are gone (deleted, or bound by someone else)
        return window

    # --- constraint sets ---------------------------------------------------------------------------------------

    def refresh_constraint_sets(self, result: ReconcileResult | None = None) -> None:
        """Take the source's new version, if any (a pass starts with this; a command calls it to load the first
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
        """Put a version of the constraint sets in force."""
        self.loaded = loaded
        self._sets_changed = True
        if result is not None:
            result.loaded = loaded.origin
        self.metrics.constraint_sets.set(len(loaded.sets))
        CONSTRAINTS.info(
            "loaded %d constraint set(s) from %s",
            len(loaded.sets),
            loaded.origin,
            extra=self._fields(sets=[s.name for s in loaded.sets], hash=loaded.hash),
        )

    def _refuse(self, refused: Refused, result: ReconcileResult) -> None:
        kept = (
            f"the last good version ({self.loaded.origin}, {self.loaded.hash}) stays in force"
            if self.loaded is not None
            else "no constraint set is in force"
        )
        message = f"refused constraint sets: {refused.message}; {kept}"
        result.refused = self.last_refusal = message
        self.metrics.constraint_set_refusals.inc()
        CONSTRAINTS.error(message, extra=self._fields(source=self.constraints.description))
        if refused.involved is not None:
            self._event(refused.involved, REASON_REFUSED, message, "Warning")

    def _template_sets(self) -> Templates:
        sets = self.loaded.sets if self.loaded is not None else ()
        templates = self.templates.build(sets)
        for name, why in sorted(templates.left_out.items()):
            if self._left_out.get(name) != why:
                CONSTRAINTS.error("constraint set %s left out: %s", name, why, extra=self._fields(provisioner=name))
        self._left_out = dict(templates.left_out)
        return templates

    # --- launches in flight, registration, initialization ------------------------------------------------------

    def _register_inflight(self, result: ReconcileResult) -> None:
        for entry in self.inflight:
            if not entry.registered:
                self._register(entry, result)

    def _register(self, entry: InFlightNode, result: ReconcileResult) -> None:
        error = registration.register(self.cluster, entry)
        if error is not None:  # retried on the next pass
            self._error(result, NODE, f"could not register node {entry.name}, {error}", node=entry.name)

    def _settle_inflight(self, snapshot: Snapshot, result: ReconcileResult) -> None:
        nodes = {objects.name(n): n for n in snapshot.nodes}
        bound = {objects.uid(p) for p in snapshot.pods if (p.get("spec") or {}).get("nodeName")}
        live = {objects.uid(p) for p in snapshot.pods}
        for entry in self.inflight:
            if entry.registered:
                waiting = [p for u, p in entry.pods.items() if u not in entry.bound and u not in bound and u in live]
                if waiting:
                    self._bind(entry.name, waiting, entry, result)
        for dropped in self.inflight.settle(nodes, bound, live, self.clock(), self.options.registration_timeout):
            if dropped.name not in nodes:
                self._error(
                    result, NODE, f"node {dropped.name} of instance {dropped.instance.id} never showed up or vanished",
                    node=dropped.name,
                )

    def _adopt(self, snapshot: Snapshot, result: ReconcileResult) -> None:
        """Register a Node for each instance of ours that has none (see the module docstring)."""
        try:
            instances = self.cloud.list(self.options.cluster_name)
            known = node_info.provider_ids(snapshot.nodes) | self.inflight.provider_ids()
            orphans = [
                i for i in instances if i.provider_id not in known and i.state in (STATE_PENDING, STATE_RUNNING)
            ]
            templates = self._template_sets() if orphans else Templates()
        except CloudError as error:
            self._error(result, NODE, f"could not list the cluster's instances, {error}")
            return
        self._adopted = True
        for instance in orphans:
            name = instance.provisioner or ""
            constraint_set = templates.sets.get(name)
            if constraint_set is None:
                NODE.warning(
                    "instance %s of provisioner %s has no node and no constraint set in force: not registered "
                    "(garbage collection terminates it)",
                    instance.id, name, extra=self._fields(provisioner=name),
                )
                continue
            template = templates.template(name)
            node = node_info.node_object(instance, template, constraint_set, template.requirements)
            entry = InFlightNode(instance, node, name, self.clock())
            self.inflight.add(entry)
            self._register(entry, result)
            NODE.info(
                "registered node %s for instance %s launched before a restart", entry.name, instance.id,
                extra=self._fields(provisioner=name),
            )

    def _initialize(self, state: ClusterState) -> None:
        done = registration.initialize(self.cluster, state.nodes, self._initialized)
        for name in done.labelled:
            NODE.info("initialized node %s", name, extra=self._fields(node=name))
        for name, error in done.failed:
            NODE.warning("could not label node %s initialized, %s", name, error, extra=self._fields(node=name))

    # --- scheduling and acting on the plan ---------------------------------------------------------------------

    def _provision(self, snapshot: Snapshot, state: ClusterState, result: ReconcileResult) -> None:
        PROVISIONER.info(
            "found %d provisionable pod(s)", len(state.pending), extra=self._fields(pods=len(state.pending))
        )
        ahead = self.ahead.take()
        planned_ahead = ahead is not None and ahead.fits(state, self.loaded)
        if ahead is not None:
            self.metrics.plans_ahead.labels(str(planned_ahead).lower()).inc()
        try:
            templates = ahead.templates if ahead is not None and planned_ahead else self._template_sets()
        except CloudError as error:
            self._error(result, PROVISIONER, f"could not read the cloud's offerings, {error}")
            self._retry_at = self.clock() + self.options.retry_interval
            return
        pods = state.pending
        assigned: dict[str, str] = {}  # uid → existing node, this pass
        retry: list[ClaimPlan] = []
        for round_ in range(1 + self.options.replans):
            if round_ > 0:  # some claims found no capacity: their pods again, without the refused offerings
                try:
                    templates = self._template_sets()
                except CloudError as error:
                    self._error(result, PROVISIONER, f"could not read the cloud's offerings, {error}")
                    break
                again = {pod.uid for pod in pods}
                state = build_state(snapshot, self.inflight, self.shapes, self.options.unschedulable_only, assigned)
                pods = [pod for pod in state.pending if pod.uid in again]
                if not pods:
                    break
            if round_ == 0 and ahead is not None and planned_ahead:
                plan = ahead.plan  # planned while the window was quiet, on exactly these inputs
            else:
                plan = self._scheduler(templates, state).solve(pods)
            result.plans.append(plan)
            self._report_failures(plan, state, result)
            self._place_on_existing(plan, state, assigned, result)
            retry = self._launch(plan.claims, templates, state, result)
            if not retry:
                break
            pods = [pod for claim in retry for pod in claim.pods]
        self.metrics.pods_unschedulable.set(len(result.unschedulable))
        left = bool(result.unschedulable or result.errors or retry)  # pods still pending: try again later
        self._retry_at = self.clock() + self.options.retry_interval if left else None

    def _report_failures(self, plan: Plan, state: ClusterState, result: ReconcileResult) -> None:
        for failure in plan.failures.values():
            message = failure.message()
            result.unschedulable[failure.pod.key] = message
            self._report_pod(state.pending_objects.get(failure.pod.uid), failure, message)

    def _report_pod(self, obj: Obj | None, failure: PodFailure, message: str) -> None:
        uid = failure.pod.uid
        if self._reported.get(uid) == message:
            return
        self._reported[uid] = message
        PROVISIONER.error("could not schedule pod, %s", message, extra=self._fields(pod=failure.pod.key))
        if obj is not None:
            self._event(obj, REASON_FAILED_SCHEDULING, message, "Warning")

    def _report_unreadable(self, state: ClusterState) -> None:
        for obj, why in state.unreadable:
            message = f"cannot read the pod spec: {why}"
            uid = objects.uid(obj)
            if self._reported.get(uid) != message:
                self._reported[uid] = message
                PROVISIONER.error("could not schedule pod, %s", message, extra=self._fields(pod=pod_key(obj)))
                self._event(obj, REASON_FAILED_SCHEDULING, message, "Warning")

    def _place_on_existing(
        self, plan: Plan, state: ClusterState, assigned: dict[str, str], result: ReconcileResult
    ) -> None:
        for node_name, pods in sorted(plan.existing.items()):
            for pod in pods:
                assigned[pod.uid] = node_name
            entry = self.inflight.get(node_name)
            if entry is not None:  # a node being launched: its pods are the controller's to bind
                entry.pods.update((pod.uid, pod) for pod in pods)
                if entry.registered:
                    self._bind(node_name, pods, entry, result)
            elif self.options.bind_existing:
                self._bind(node_name, pods, None, result)
            else:
                result.nominated[node_name] = tuple(p.key for p in pods)
                for pod in pods:
                    if self._nominated.get(pod.uid) != node_name:
                        self._nominated[pod.uid] = node_name
                        obj = state.pending_objects.get(pod.uid)
                        if obj is not None:
                            self._event(obj, REASON_NOMINATED, f"Pod should schedule on node: {node_name}")

    def _launch(
        self, claims: Sequence[ClaimPlan], templates: Templates, state: ClusterState, result: ReconcileResult
    ) -> list[ClaimPlan]:
        """Launch every claim, register and bind; the claims that found no capacity at all."""
        if not claims:
            return []
        PROVISIONER.info(
            "computed new node(s) to fit pod(s)",
            extra=self._fields(nodes=len(claims), pods=sum(len(c.pods) for c in claims)),
        )
        requests = []
        for claim in claims:
            template = templates.template(claim.template)
            request = launch_request(self.options.cluster_name, claim, template, templates.sets[claim.template])
            requests.append(request)
            PROVISIONER.info(
                "launching node with %d pod(s) requesting %s from types %s",
                len(claim.pods),
                logs.resources_text(as_resources(claim.requests)),
                logs.options_text([o.instance_type for o in claim.options]),
                extra=self._fields(provisioner=claim.template),
            )
        outcomes = self.launcher.launch(requests)
        retry = []
        for claim, outcome in zip(claims, outcomes, strict=True):
            if outcome.instance is None:
                if self._launch_failed(claim, outcome, result):
                    retry.append(claim)
                continue
            self._launched(claim, outcome, templates, result)
        return retry

    def _current_images(self, templates: Templates) -> Callable[[str, str], str | None]:
        """(provisioner, instance type) → the image a node launched now would get (one answer per pair and
        decision; None when the cloud cannot tell)."""
        known: dict[tuple[str, str], str | None] = {}

        def current(provisioner: str, instance_type: str) -> str | None:
            if (provisioner, instance_type) not in known:
                constraint_set = templates.sets.get(provisioner)
                spec = constraint_set.provider.spec if constraint_set and constraint_set.provider else None
                try:
                    known[provisioner, instance_type] = self.cloud.current_image(instance_type, spec)
                except CloudError:
                    known[provisioner, instance_type] = None
            return known[provisioner, instance_type]

        return current

    def _launch_replacements(self, command: Command, result: ReconcileResult) -> list[str] | str:
        """Launch a disruption command's replacements and register their Nodes; no pod is bound to them (their
        pods still run on the nodes they replace). The names, or why a launch failed."""
        templates = self._template_sets()
        claims = []
        for claim in command.replacements:
            if claim.template not in templates.sets:
                return f"provisioner {claim.template} is no longer in the constraint sets"
            # A token of its own: the same pods may later need a launch of their own, which must not get this one.
            salt = f"{claim.template_hash}/{command.method}:{','.join(command.names)}"
            claims.append(dataclasses.replace(claim, template_hash=salt))
        requests = [
            launch_request(self.options.cluster_name, c, templates.template(c.template), templates.sets[c.template])
            for c in claims
        ]
        names: list[str] = []
        failed: list[str] = []
        for claim, outcome in zip(claims, self.launcher.launch(requests), strict=True):
            if outcome.instance is None:
                self._launch_failed(claim, outcome, result)
                failed.append(str(outcome.error))
                continue
            names.append(self._launched(claim, outcome, templates, result, bind=False))
        return "; ".join(failed) if failed else names

    def _launch_failed(self, claim: ClaimPlan, outcome: Outcome, result: ReconcileResult) -> bool:
        """Log and count a failed launch; whether it failed for capacity alone (worth re-planning)."""
        error = outcome.error
        assert error is not None
        reason = "cloud"
        if isinstance(error, InsufficientCapacity):
            reason = "insufficient_capacity"
            for failed in error.failed:
                self.metrics.insufficient_capacity.labels(claim.template, failed.capacity_type).inc()
        elif isinstance(error, ConfigurationError):
            reason = "configuration"
        elif isinstance(error, Throttled):
            reason = "throttled"
        self.metrics.launch_errors.labels(claim.template, reason).inc()
        self._error(
            result, PROVISIONER, f"could not launch node, {error}", provisioner=claim.template,
            pods=len(claim.pods),
        )
        return isinstance(error, InsufficientCapacity)

    def _launched(
        self, claim: ClaimPlan, outcome: Outcome, templates: Templates, result: ReconcileResult, bind: bool = True
    ) -> str:
        """Register the Node of a launched instance and (`bind`) bind the claim's pods to it; the Node's name."""
        instance = outcome.instance
        assert instance is not None
        template = templates.template(claim.template)
        constraint_set = templates.sets[claim.template]
        self.metrics.nodes_launched.labels(claim.template, instance.capacity_type).inc()
        self.metrics.launch_duration.labels(claim.template).observe(outcome.seconds)
        for failed in instance.failed_offerings:
            self.metrics.insufficient_capacity.labels(claim.template, failed.capacity_type).inc()
        if instance.failed_offerings:
            refused = "; ".join(str(f) for f in instance.failed_offerings[:5])
            PROVISIONER.info(
                "fell back to the next offering after insufficient capacity: %s", refused,
                extra=self._fields(provisioner=claim.template, refused=len(instance.failed_offerings)),
            )
        node = node_info.node_object(instance, template, constraint_set, claim.requirements)
        planned = {pod.uid: pod for pod in claim.pods} if bind else {}
        entry = InFlightNode(instance, node, claim.template, self.clock(), planned)
        self.inflight.add(entry)
        launched_offering = (instance.instance_type, instance.zone)
        price = next((o.price for o in outcome.request.options if (o.instance_type, o.zone) == launched_offering), None)
        launched = LaunchedNode(
            entry.name, instance.id, instance.instance_type, instance.zone, instance.capacity_type, claim.template,
            tuple(p.key for p in claim.pods) if bind else (), price,
        )
        result.launched.append(launched)
        text = (
            f"launched instance {instance.id}, type {instance.instance_type}, zone {instance.zone}, "
            f"capacity {instance.capacity_type}"
        )
        PROVISIONER.info(text, extra=self._fields(provisioner=claim.template, node=entry.name, pods=len(claim.pods)))
        self._register(entry, result)
        if entry.registered:
            self._event(entry.node, REASON_LAUNCHED, text)
            if bind:
                self._bind(entry.name, claim.pods, entry, result)
        return entry.name

    def _bind(self, node: str, pods: Sequence[Pod], entry: InFlightNode | None, result: ReconcileResult) -> None:
        bindings = [Binding(p.namespace, p.name, p.uid, node) for p in pods]
        bound = []
        for outcome in self.binder.bind(bindings):
            if outcome.settled and entry is not None:
                entry.bound.add(outcome.binding.uid)
            if outcome.outcome == "bound":
                bound.append(f"{outcome.binding.namespace}/{outcome.binding.pod}")
            elif not outcome.settled:
                self._error(
                    result, PROVISIONER, f"could not bind pod to node {node}, {outcome.error}",
                    pod=f"{outcome.binding.namespace}/{outcome.binding.pod}",
                )
        if bound:
            result.bound[node] = tuple(sorted({*result.bound.get(node, ()), *bound}))
            self.metrics.pods_bound.inc(len(bound))
            PROVISIONER.info("Bound %d pod(s) to node %s", len(bound), node, extra=self._fields(node=node))

    # --- helpers -----------------------------------------------------------------------------------------------

    def _fields(self, **values: object) -> dict[str, object]:
        return logs.fields(self.wall_clock(), **values)

    def _error(self, result: ReconcileResult, logger: logging.Logger, message: str, **values: object) -> None:
        result.errors.append(message)
        logger.error(message, extra=self._fields(**values))

    def _event(self, involved: Obj, reason: str, message: str, severity: EventSeverity = "Normal") -> None:
        try:
            self.cluster.record_event(involved, reason, message, severity)
        except ClusterError as error:
            PROVISIONER.warning("could not record event %s, %s", reason, error, extra=self._fields())


__all__ = ["Controller", "ControllerOptions", "LaunchedNode", "ReconcileResult"]
