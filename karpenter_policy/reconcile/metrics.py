"""Prometheus metrics of the controller (prometheus-client), in a registry of its own per controller.

**Karpenter v0.31's metrics**, with its names, labels and buckets (kubernetes-sigs/karpenter and
aws/karpenter-provider-aws at v0.31.1), so that dashboards and alerts written for Karpenter work; docs/metrics.md
lists each one, where it is recorded, and the ones that do not apply here:

* controller-runtime's, one "controller" per controller of ours (:data:`CONTROLLERS`):
  `controller_runtime_reconcile_total{controller, result}`, `controller_runtime_reconcile_errors_total
  {controller}`, `controller_runtime_reconcile_time_seconds{controller}`, `controller_runtime_active_workers
  {controller}`, `controller_runtime_max_concurrent_reconciles{controller}` (:meth:`Metrics.reconciling`);
* nodes and machines: `karpenter_nodes_created{nodepool, provisioner}` (`nodepool` always ""),
  `karpenter_nodes_terminated{nodepool, provisioner}`, `karpenter_nodes_termination_time_seconds{provisioner}`
  (summary), `karpenter_machines_created{reason, provisioner}`, `karpenter_machines_launched{provisioner}`,
  `karpenter_machines_registered{provisioner}`, `karpenter_machines_initialized{provisioner}`,
  `karpenter_machines_terminated{reason, provisioner}`, `karpenter_machines_disrupted{type, provisioner}`;
* provisioning: `karpenter_provisioner_scheduling_duration_seconds`,
  `karpenter_provisioner_scheduling_simulation_duration_seconds`;
* deprovisioning: `karpenter_deprovisioning_actions_performed{action, deprovisioner}`,
  `karpenter_deprovisioning_eligible_machines{deprovisioner}`, `karpenter_deprovisioning_evaluation_duration_seconds
  {method}`, `karpenter_deprovisioning_consolidation_timeouts{consolidation_type}`,
  `karpenter_deprovisioning_replacement_machine_initialized_seconds`,
  `karpenter_deprovisioning_replacement_machine_launch_failure_counter{deprovisioner}`;
* interruption: `karpenter_interruption_received_messages{message_type}`, `karpenter_interruption_deleted_messages`,
  `karpenter_interruption_actions_performed{action_type}`, `karpenter_interruption_message_latency_time_seconds`;
* the cloud provider (`cloudmetrics`): `karpenter_cloudprovider_duration_seconds{controller, method, provider}`,
  `karpenter_cloudprovider_errors_total{controller, method, provider, error}` and the instance types' gauges;
* pods: `karpenter_pods_startup_time_seconds` (summary); the gauges that describe the cluster (nodes' allocatable,
  requests and limits, pods' state, provisioners' limits and usage) are read from the cluster state at each
  scrape (`clustermetrics`).

**Karpenter v1.14.1's**, for a NodePool's nodes instead of v0.31's where v1 has them (:meth:`Metrics._nodeclaims`):
`karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}`, `karpenter_nodeclaims_disrupted_total
{reason, nodepool, capacity_type}`, `karpenter_nodeclaims_terminated_total{nodepool, capacity_type, zone}`,
`karpenter_voluntary_disruption_decisions_total{decision, reason, consolidation_type}`,
`…_decisions_by_nodepool_total` and `…_queue_failures_total` (a command under way whose replacements did not
initialize), `…_eligible_nodes{reason}`, `…_decision_evaluation_duration_seconds{reason, consolidation_type}` and
`…_consolidation_timeouts_total{consolidation_type}` (each decision's NodePool candidates and methods, once a
NodePool's set is in force), `…_failed_validations_total{consolidation_type}` (a held consolidation whose nodes are
no longer all candidates), `karpenter_nodepools_allowed_disruptions{nodepool, reason}` and
`…_nodes_consuming_budgets` (set by each decision for the reasons it read), `karpenter_nodes_created_total
{nodepool, zone}`, `karpenter_nodes_terminated_total{nodepool, zone}`,
`karpenter_nodes_termination_duration_seconds{nodepool}` (summary), `karpenter_nodes_drained_total{nodepool}` and
`karpenter_nodes_lifetime_duration_seconds{nodepool}`; `karpenter_nodepools_limit` and `…_usage{resource_type,
nodepool}` are read from the state at each scrape (`clustermetrics`).

The process's own (`process_*`, `python_info`, `python_gc_*`: `karpenter_policy.processmetrics`), as a Go
controller has its client's `process_*` and `go_*`.

Karpenter's counters are exposed under their own names (no `_total` appended) and its summaries with their
quantiles (`exposition`).

**The project's own**, where Karpenter has none (`karpenter_policy_*`):

* `karpenter_policy_pods_pending` — provisionable pods the last pass saw (pods already planned onto a node being
  launched are not pending); `karpenter_policy_pods_unschedulable` — those no constraint set can take.
* `karpenter_policy_nodes_launched_total{provisioner, capacity_type}` — instances launched (with the capacity type
  `karpenter_machines_launched` does not have).
* `karpenter_policy_launch_duration_seconds{provisioner}` — one launch, from the cloud call to the instance
  (CreateFleet and the offerings it fell back to), histogram.
* `karpenter_policy_insufficient_capacity_total{provisioner, capacity_type}` — offerings the cloud refused for lack
  of capacity (each is then unavailable for 3 minutes).
* `karpenter_policy_launch_errors_total{provisioner, reason}` — launches that failed: `insufficient_capacity`
  (every offering), `configuration`, `throttled`, `cloud`.
* `karpenter_policy_pods_bound_total` — pods the controller bound.
* `karpenter_policy_evictions_total{outcome}` — evictions termination asked of the API: `evicted`, `gone` (the
  pod no longer exists), `refused` (a PodDisruptionBudget) or `failed` (another error) — the last two tried again
  with backoff.
* `karpenter_policy_reconcile_duration_seconds` — one pass that scheduled a batch, histogram.
* `karpenter_policy_plans_ahead_total{used}` — plans made ahead while a batch window was quiet, and whether the
  pass closing the window used it (`true`) or something had changed (`false`: it planned again).
* `karpenter_policy_constraint_sets` — constraint sets in force; `karpenter_policy_constraint_set_refusals_total` —
  versions refused (unreadable, hash mismatch, wrong region).
* interruption: `karpenter_policy_interruption_malformed_messages_total` (unreadable, deleted),
  `karpenter_policy_interruption_foreign_messages_total{reason}` (about another `account` or `region`, deleted)
  and `karpenter_policy_interruption_queue_errors_total{operation}` (receive, delete).
* the watches (`watch_counters`): `karpenter_policy_watch_malformed_answers_total{kind, problem}` and
  `karpenter_policy_malformed_objects_total{kind, reason}`.
* garbage collection (see `garbage`): `karpenter_policy_garbage_collected_total{object}` — instances terminated
  for having no Node (`instance`), Nodes deleted for having no instance (`node`), NodeClaims deleted for having
  no instance and no Node (`nodeclaim`), unused launch templates deleted (`launch_template`).
* `karpenter_policy_nodepool_status_failures_total{reason}` — writes of a NodePool's `NodeRegistrationHealthy`
  (`claims.nodepoolstatus`) that did not take: `refused` by the API, still in `conflict` after retries, or `pruned`
  (the API stored the NodePool without the field: its CRD is older than v1.14.1's).
* the runner's full garbage collections (`heap`, every replica's, leading or not):
  `karpenter_policy_gc_full_collections_total{reason, heap}`, `karpenter_policy_gc_last_full_collection_seconds`
  and `karpenter_policy_gc_frozen_objects`.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from karpenter_policy.model.pools import is_nodepool, pool_name
from karpenter_policy.processmetrics import register_process_metrics
from karpenter_policy.reconcile.exposition import ExactCounter, WindowedSummary, exposition

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series next to every counter


def owner_label_values(pool: str) -> tuple[str, str]:
    """The (nodepool, provisioner) label values of v0.31.1's node counters (`karpenter_nodes_created`,
    `karpenter_nodes_terminated`): a NodePool's name under `nodepool`, a Provisioner's under `provisioner` (a NodePool's
    nodes are counted under v1.14.1's names instead: `karpenter_nodes_created_total`, …)."""
    return (pool_name(pool), "") if is_nodepool(pool) else ("", pool)

LAUNCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
_HOUR, _DAY = 3600.0, 86400.0
#: v1.14.1's `karpenter_nodes_lifetime_duration_seconds` buckets (node/termination/metrics.go): 15 minutes to 30 days.
#: v1.14.1's `karpenter_consolidation_score` buckets (core pkg/controllers/disruption/metrics.go).
CONSOLIDATION_SCORE_BUCKETS = (0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0)
LIFETIME_BUCKETS = (
    900.0, 1800.0, 2700.0, _HOUR, 2 * _HOUR, 4 * _HOUR, 6 * _HOUR, 8 * _HOUR, 10 * _HOUR, 12 * _HOUR, 16 * _HOUR,
    20 * _HOUR, _DAY, 2 * _DAY, 3 * _DAY, 5 * _DAY, 10 * _DAY, 15 * _DAY, 20 * _DAY, 25 * _DAY, 30 * _DAY,
)
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: controller-runtime v0.14's reconcile-time buckets (Karpenter v0.31 runs on it).
RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)
#: Karpenter's `metrics.DurationBuckets()`: controller-runtime's, and longer ones for its singleton controllers.
DURATION_BUCKETS = (*RECONCILE_BUCKETS, 120, 150, 300, 450, 600)
#: The Go client's default buckets (`prometheus.DefBuckets`): the cloud provider's durations.
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

#: The "controller" label of each of our controllers (Karpenter's names where it has the controller).
PROVISIONER = "provisioner"
DEPROVISIONING = "deprovisioning"
TERMINATION = "termination"
EMPTINESS = "emptiness"
GARBAGE_COLLECTION = "garbagecollection"
INTERRUPTION = "interruption"
#: v1.14.1's static NodePools' controllers (`reconcile.static`), with the StaticCapacity feature gate.
STATIC_PROVISIONING = "static.provisioning"
STATIC_DEPROVISIONING = "static.deprovisioning"
#: v1.14.1's capacity-reservation controllers (`reconcile.capacityreservation`; aws pkg/controllers/
#: capacityreservation).
CAPACITY_TYPE = "capacityreservation.capacitytype"
RESERVATION_EXPIRATION = "capacityreservation.expiration"
CONTROLLERS = (PROVISIONER, DEPROVISIONING, TERMINATION, EMPTINESS, GARBAGE_COLLECTION, INTERRUPTION)
#: controller-runtime's `result` label values.
RESULTS = ("error", "requeue", "requeue_after", "success")

#: The controller a call is made for (`reconciling` sets it; the cloud provider's metrics read it).
CONTROLLER: contextvars.ContextVar[str] = contextvars.ContextVar("controller", default="")


@dataclass(slots=True)
class Reconcile:
    """What the step under :meth:`Metrics.reconciling` tells: it wants to run again at a given time
    (`requeue_after`, controller-runtime's result `requeue_after`), or it failed without raising (`failed`: a
    reconcile error, as controller-runtime counts a Reconcile that returned an error)."""

    requeue_after: bool = False
    failed: bool = False


class Step:
    """One reconcile of a controller (:meth:`Metrics.step`): its segments' time adds up, :meth:`finish` counts it
    once — a step-driven pass runs the provisioner's parts between other controllers' steps. A segment that raises
    counts the reconcile as an error at once."""

    def __init__(self, metrics: Metrics, controller: str) -> None:
        self.metrics = metrics
        self.controller = controller
        self.outcome = Reconcile()
        self.seconds = 0.0
        self.counted = False

    @contextlib.contextmanager
    def segment(self) -> Iterator[Reconcile]:
        metrics, controller = self.metrics, self.controller
        token = CONTROLLER.set(controller)
        started = time.perf_counter()
        metrics.active_workers.labels(controller).inc()
        try:
            yield self.outcome
        except Exception:
            if not self.counted:
                self.counted = True
                metrics.reconcile_errors.labels(controller).inc()
                metrics.reconcile_total.labels(controller, "error").inc()
                metrics.reconcile_time.labels(controller).observe(self.seconds + time.perf_counter() - started)
            raise
        finally:
            metrics.active_workers.labels(controller).dec()
            self.seconds += time.perf_counter() - started
            CONTROLLER.reset(token)

    def finish(self) -> None:
        if self.counted:
            return
        self.counted = True
        if self.outcome.failed:
            self.metrics.reconcile_errors.labels(self.controller).inc()
            result = "error"
        else:
            result = "requeue_after" if self.outcome.requeue_after else "success"
        self.metrics.reconcile_total.labels(self.controller, result).inc()
        self.metrics.reconcile_time.labels(self.controller).observe(self.seconds)


class Metrics:
    """The controller's metrics (see the module docstring). `clock`: monotonic seconds, the controller's (the
    summaries' window); `leading`: whether this replica acts (the threaded runner's leadership, always by default:
    the gauges that describe the cluster and the pods' start-up times are a leader's, as Karpenter's controllers
    run on the leader only)."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, leading: Callable[[], bool] = lambda: True
    ) -> None:
        self.registry = CollectorRegistry()
        self.clock = clock
        self.leading = leading
        self._started: set[str] = set()  # controllers whose series are there
        self._collectors: dict[str, Collector] = {}
        self._ours(self.registry)
        self._interruption_and_garbage(self.registry)
        self._controller_runtime(self.registry)
        self._nodes_and_machines(self.registry)
        self._scheduling_and_deprovisioning(self.registry)
        self._interruption(self.registry)
        self._nodeclaims(self.registry)
        register_process_metrics(self.registry)  # process_* and python_*, as Karpenter has process_* and go_*

    # --- the project's own -----------------------------------------------------------------------------------

    def _ours(self, registry: CollectorRegistry) -> None:
        self.pods_pending = Gauge(
            "karpenter_policy_pods_pending", "Provisionable pods seen by the last pass.", registry=registry
        )
        self.pods_unschedulable = Gauge(
            "karpenter_policy_pods_unschedulable",
            "Pending pods that no constraint set can take (last scheduling pass).",
            registry=registry,
        )
        self.nodes_launched = Counter(
            "karpenter_policy_nodes_launched",
            "Instances launched, per provisioner and capacity type.",
            ["provisioner", "capacity_type"],
            registry=registry,
        )
        self.launch_duration = Histogram(
            "karpenter_policy_launch_duration_seconds",
            "Time of one launch: the cloud call until the instance is known, fallbacks included.",
            ["provisioner"],
            buckets=LAUNCH_BUCKETS,
            registry=registry,
        )
        self.insufficient_capacity = Counter(
            "karpenter_policy_insufficient_capacity",
            "Offerings the cloud refused for lack of capacity, per provisioner and capacity type.",
            ["provisioner", "capacity_type"],
            registry=registry,
        )
        self.launch_errors = Counter(
            "karpenter_policy_launch_errors",
            "Launches that failed, per provisioner and reason.",
            ["provisioner", "reason"],
            registry=registry,
        )
        self.pods_bound = Counter("karpenter_policy_pods_bound", "Pods the controller bound.", registry=registry)
        self.evictions = Counter(
            "karpenter_policy_evictions",
            "Evictions termination asked of the API, by outcome (evicted, gone, refused by a budget, failed).",
            ["outcome"],
            registry=registry,
        )
        self.reconcile_duration = Histogram(
            "karpenter_policy_reconcile_duration_seconds",
            "Passes that scheduled a batch: from the start of the pass to its end.",
            buckets=PASS_BUCKETS,
            registry=registry,
        )
        self.plans_ahead = Counter(
            "karpenter_policy_plans_ahead",
            "Plans made ahead while a batch window was quiet, by whether the pass closing it used them.",
            ["used"],
            registry=registry,
        )
        self.constraint_sets = Gauge(
            "karpenter_policy_constraint_sets", "Constraint sets in force.", registry=registry
        )
        self.constraint_set_refusals = Counter(
            "karpenter_policy_constraint_set_refusals",
            "Constraint-set versions refused (unreadable, hash mismatch, wrong region).",
            registry=registry,
        )

    def _interruption_and_garbage(self, registry: CollectorRegistry) -> None:
        self.interruption_malformed = Counter(
            "karpenter_policy_interruption_malformed_messages",
            "Interruption messages that could not be read (deleted without action).",
            registry=registry,
        )
        self.interruption_foreign = Counter(
            "karpenter_policy_interruption_foreign_messages",
            "Interruption messages about another account or region (deleted, not acted on), by reason.",
            ["reason"],
            registry=registry,
        )
        self.interruption_queue_errors = Counter(
            "karpenter_policy_interruption_queue_errors",
            "Failed calls to the interruption queue, by operation.",
            ["operation"],
            registry=registry,
        )
        self.nodepool_status_failures = Counter(
            "karpenter_policy_nodepool_status_failures",
            "NodePool status writes (NodeRegistrationHealthy) that did not take, by reason (refused: the API refused "
            "it; conflict: still conflicting after retries; pruned: stored without the field).",
            ["reason"],
            registry=registry,
        )
        self.garbage_collected = Counter(
            "karpenter_policy_garbage_collected",
            "Instances terminated for having no Node (instance), Nodes deleted for having no instance (node), "
            "NodeClaims deleted for having no instance and no Node (nodeclaim), "
            "unused launch templates deleted (launch_template).",
            ["object"],
            registry=registry,
        )
        self.gc_full_collections = Counter(
            "karpenter_policy_gc_full_collections",
            "Full garbage collections the runner made, by reason (synced: after the first sync; idle: the "
            "provisioner idle; backstop: the longest interval passed) and heap (unfrozen: what was not frozen; all: "
            "everything, unfrozen first).",
            ["reason", "heap"],
            registry=registry,
        )
        self.gc_last_full_collection = Gauge(
            "karpenter_policy_gc_last_full_collection_seconds",
            "How long the last full garbage collection the runner made held the process (wall seconds).",
            registry=registry,
        )
        self.gc_frozen_objects = Gauge(
            "karpenter_policy_gc_frozen_objects",
            "Objects frozen out of garbage collection after the last full collection the runner made.",
            registry=registry,
        )

    # --- Karpenter's -----------------------------------------------------------------------------------------

    def _controller_runtime(self, registry: CollectorRegistry) -> None:
        self.reconcile_total = ExactCounter(
            "controller_runtime_reconcile_total", "Total number of reconciliations per controller",
            ["controller", "result"], registry,
        )
        self.reconcile_errors = ExactCounter(
            "controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller",
            ["controller"], registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
            ["controller"], buckets=RECONCILE_BUCKETS, registry=registry,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller",
            ["controller"], registry=registry,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers", "Number of currently used workers per controller",
            ["controller"], registry=registry,
        )

    def _nodes_and_machines(self, registry: CollectorRegistry) -> None:
        self.nodes_created = ExactCounter(
            "karpenter_nodes_created", "Number of nodes created in total by Karpenter. Labeled by owning provisioner.",
            ["nodepool", "provisioner"], registry,
        )
        self.nodes_terminated = ExactCounter(
            "karpenter_nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning provisioner.",
            ["nodepool", "provisioner"], registry,
        )
        self.termination_time = WindowedSummary(
            "karpenter_nodes_termination_time_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            ["provisioner"], registry, clock=lambda: self.clock(),
        )
        self.machines_created = ExactCounter(
            "karpenter_machines_created",
            "Number of machines created in total by Karpenter. Labeled by reason the machine was created and the "
            "owning provisioner.",
            ["reason", "provisioner"], registry,
        )
        self.machines_launched = ExactCounter(
            "karpenter_machines_launched",
            "Number of machines launched in total by Karpenter. Labeled by the owning provisioner.",
            ["provisioner"], registry,
        )
        self.machines_registered = ExactCounter(
            "karpenter_machines_registered",
            "Number of machines registered in total by Karpenter. Labeled by the owning provisioner.",
            ["provisioner"], registry,
        )
        self.machines_initialized = ExactCounter(
            "karpenter_machines_initialized",
            "Number of machines initialized in total by Karpenter. Labeled by the owning provisioner.",
            ["provisioner"], registry,
        )
        self.machines_terminated = ExactCounter(
            "karpenter_machines_terminated",
            "Number of machines terminated in total by Karpenter. Labeled by reason the machine was terminated and "
            "the owning provisioner.",
            ["reason", "provisioner"], registry,
        )
        self.machines_disrupted = ExactCounter(
            "karpenter_machines_disrupted",
            "Number of machines disrupted in total by Karpenter. Labeled by disruption type of the machine and the "
            "owning provisioner.",
            ["type", "provisioner"], registry,
        )
        self.pods_startup_time = WindowedSummary(
            "karpenter_pods_startup_time_seconds", "The time from pod creation until the pod is running.",
            registry=registry, clock=lambda: self.clock(),
        )

    def _scheduling_and_deprovisioning(self, registry: CollectorRegistry) -> None:
        self.scheduling_duration = Histogram(
            "karpenter_provisioner_scheduling_duration_seconds", "Duration of scheduling process in seconds.",
            buckets=DURATION_BUCKETS, registry=registry,
        )
        self.scheduling_simulation_duration = Histogram(
            "karpenter_provisioner_scheduling_simulation_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
            buckets=DURATION_BUCKETS, registry=registry,
        )
        self.deprovisioning_evaluation = Histogram(
            "karpenter_deprovisioning_evaluation_duration_seconds",
            "Duration of the deprovisioning evaluation process in seconds.",
            ["method"], buckets=DURATION_BUCKETS, registry=registry,
        )
        self.deprovisioning_replacement_initialized = Histogram(
            "karpenter_deprovisioning_replacement_machine_initialized_seconds",
            "Amount of time required for a replacement machine to become initialized.",
            buckets=DURATION_BUCKETS, registry=registry,
        )
        self.deprovisioning_actions = ExactCounter(
            "karpenter_deprovisioning_actions_performed",
            "Number of deprovisioning actions performed. Labeled by deprovisioner.",
            ["action", "deprovisioner"], registry,
        )
        self.deprovisioning_eligible = Gauge(
            "karpenter_deprovisioning_eligible_machines",
            "Number of machines eligible for deprovisioning by Karpenter. Labeled by deprovisioner",
            ["deprovisioner"], registry=registry,
        )
        self.deprovisioning_timeouts = ExactCounter(
            "karpenter_deprovisioning_consolidation_timeouts",
            "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.",
            ["consolidation_type"], registry,
        )
        self.deprovisioning_launch_failures = ExactCounter(
            "karpenter_deprovisioning_replacement_machine_launch_failure_counter",
            "The number of times that Karpenter failed to launch a replacement node for deprovisioning. Labeled by "
            "deprovisioner.",
            ["deprovisioner"], registry,
        )

    def _interruption(self, registry: CollectorRegistry) -> None:
        self.interruption_received = ExactCounter(
            "karpenter_interruption_received_messages",
            "Count of messages received from the SQS queue. Broken down by message type and whether the message was "
            "actionable.",
            ["message_type"], registry,
        )
        self.interruption_deleted = ExactCounter(
            "karpenter_interruption_deleted_messages", "Count of messages deleted from the SQS queue.",
            registry=registry,
        )
        self.interruption_latency = Histogram(
            "karpenter_interruption_message_latency_time_seconds",
            "Length of time between message creation in queue and an action taken on the message by the "
            "controller.",
            buckets=DURATION_BUCKETS, registry=registry,
        )
        self.interruption_actions = ExactCounter(
            "karpenter_interruption_actions_performed", "Number of notification actions performed. Labeled by action",
            ["action_type"], registry,
        )

    def _nodeclaims(self, registry: CollectorRegistry) -> None:
        """Karpenter v1.14.1's, for a NodePool's nodes (core pkg/metrics/metrics.go, pkg/controllers/disruption/
        metrics.go); a Provisioner's nodes keep v0.31's above."""
        self.nodeclaims_created = ExactCounter(
            "karpenter_nodeclaims_created_total",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created and the "
            "owning nodepool.",
            ["reason", "nodepool", "min_values_relaxed"], registry,
        )
        self.nodeclaims_terminated = ExactCounter(
            "karpenter_nodeclaims_terminated_total",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool.",
            ["nodepool", "capacity_type", "zone"], registry,
        )
        self.nodeclaims_disrupted = ExactCounter(
            "karpenter_nodeclaims_disrupted_total",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and "
            "the owning nodepool.",
            ["reason", "nodepool", "capacity_type"], registry,
        )
        self.voluntary_disruption_decisions = ExactCounter(
            "karpenter_voluntary_disruption_decisions_total",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation "
            "type.",
            ["decision", "reason", "consolidation_type"], registry,
        )
        self.nodes_created_v1 = ExactCounter(
            "karpenter_nodes_created_total",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.",
            ["nodepool", "zone"], registry,
        )
        self.nodes_terminated_v1 = ExactCounter(
            "karpenter_nodes_terminated_total",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.",
            ["nodepool", "zone"], registry,
        )
        self.termination_duration = WindowedSummary(
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            ["nodepool"], registry, clock=lambda: self.clock(),
        )
        self.nodes_drained = ExactCounter(
            "karpenter_nodes_drained_total", "The total number of nodes drained by Karpenter", ["nodepool"], registry,
        )
        self.nodes_lifetime = Histogram(
            "karpenter_nodes_lifetime_duration_seconds", "The lifetime duration of the nodes since creation.",
            ["nodepool"], buckets=LIFETIME_BUCKETS, registry=registry,
        )
        self.voluntary_disruption_decisions_by_nodepool = ExactCounter(
            "karpenter_voluntary_disruption_decisions_by_nodepool_total",
            "Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, "
            "reason, and consolidation type.",
            ["nodepool", "decision", "reason", "consolidation_type"], registry,
        )
        self.nodepool_allowed_disruptions = Gauge(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled "
            "by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and "
            "others may be deleted at any point.",
            ["nodepool", "reason"], registry=registry,
        )
        self.nodepool_nodes_consuming_budgets = Gauge(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
            ["nodepool", "reason"], registry=registry,
        )
        self.voluntary_disruption_queue_failures = ExactCounter(
            "karpenter_voluntary_disruption_queue_failures_total",
            "The number of times that an enqueued disruption decision failed. Labeled by disruption method.",
            ["decision", "reason", "consolidation_type"], registry,
        )
        self.voluntary_disruption_eligible = Gauge(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            ["reason"], registry=registry,
        )
        self.voluntary_disruption_evaluation = Histogram(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation "
            "type.",
            ["reason", "consolidation_type"], buckets=DURATION_BUCKETS, registry=registry,
        )
        self.voluntary_disruption_timeouts = ExactCounter(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.",
            ["consolidation_type"], registry,
        )
        self.voluntary_disruption_failed_validations = ExactCounter(
            "karpenter_voluntary_disruption_failed_validations_total",
            "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation "
            "type.",
            ["consolidation_type"], registry,
        )
        self.consolidation_moves = ExactCounter(
            "karpenter_consolidation_moves_total",
            "Number of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            ["decision", "nodepool", "policy"], registry,
        )
        self.consolidation_score = Histogram(
            "karpenter_consolidation_score",
            "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            ["decision", "nodepool", "policy"], buckets=CONSOLIDATION_SCORE_BUCKETS, registry=registry,
        )

    # --- recording -------------------------------------------------------------------------------------------

    def claim_created(self, pool: str, reason: str, v1_reason: str, min_values_relaxed: bool = False) -> None:
        """A node is being launched for `pool`: a NodePool's as a NodeClaim created (v1's `v1_reason`), a
        Provisioner's as a machine created (v0.31's `reason`)."""
        if is_nodepool(pool):
            relaxed = "true" if min_values_relaxed else "false"
            self.nodeclaims_created.labels(v1_reason, pool_name(pool), relaxed).inc()
        else:
            self.machines_created.labels(reason, pool).inc()

    def claim_disrupted(self, pool: str, reason: str, v1_reason: str, capacity_type: str) -> None:
        """A node of `pool` deleted by the controller (not by a disruption command: those count themselves): a
        NodePool's as v1.14.1 counts a NodeClaim disrupted (`karpenter_nodeclaims_disrupted_total`, its
        `v1_reason`), a Provisioner's as v0.31 counts a machine terminated (`reason`)."""
        if is_nodepool(pool):
            self.nodeclaims_disrupted.labels(v1_reason, pool_name(pool), capacity_type).inc()
        else:
            self.machines_terminated.labels(reason, pool).inc()

    def step(self, controller: str) -> Step:
        """One reconcile of a controller, measured in one or more segments (see :class:`Step`)."""
        if controller not in self._started:  # every series of the controller present from the start
            self._started.add(controller)
            self.reconcile_errors.labels(controller)
            for result in RESULTS:
                self.reconcile_total.labels(controller, result)
            self.max_concurrent_reconciles.labels(controller).set(1)  # one thread per controller
        return Step(self, controller)

    @contextlib.contextmanager
    def reconciling(self, controller: str) -> Iterator[Reconcile]:
        """A step of one of our controllers, as controller-runtime counts a reconcile: its time, its result
        (`error` when it raised, `requeue_after` when the step says so, else `success`), the worker busy meanwhile.
        Calls to the cloud inside are counted for `controller`."""
        step = self.step(controller)
        with step.segment():
            yield step.outcome
        step.finish()

    def launched(self, provisioner: str, capacity_type: str) -> None:
        """An instance was launched for a provisioner."""
        self.machines_launched.labels(provisioner).inc()
        self.nodes_launched.labels(provisioner, capacity_type).inc()

    def registered(self, provisioner: str, created: bool = True) -> None:
        """The Node of a launched instance was registered (created, or the kubelet's given our labels); `created`
        false: an instance launched before a restart or a take-over, adopted — not a node created now. A
        Provisioner's node is a node created (v0.31.1's `karpenter_nodes_created{provisioner}`); a NodePool's is
        counted when its NodeClaim turns Registered (`node_created`)."""
        self.machines_registered.labels(provisioner).inc()
        if created and not is_nodepool(provisioner):
            self.nodes_created.labels(*owner_label_values(provisioner)).inc()

    def node_created(self, nodepool: str, zone: str) -> None:
        """A NodePool's NodeClaim turned Registered — its kubelet joined —, as v1.14.1 counts a node created
        (`NodesCreatedTotal`, core pkg/controllers/nodeclaim/lifecycle/registration.go:122; `nodepool` and `zone`: the
        claim's labels): `karpenter_nodes_created_total{nodepool, zone}`."""
        self.nodes_created_v1.labels(nodepool, zone).inc()

    def node_drained(self, nodepool: str) -> None:
        """A NodePool's Node drained: its claim's Drained condition written True (v1.14.1's
        `NodesDrainedTotal`, node/termination/controller.go:172; `nodepool`: the Node's label)."""
        self.nodes_drained.labels(nodepool).inc()

    def node_terminated(
        self, provisioner: str, seconds: float | None, lifetime: float | None = None, zone: str = ""
    ) -> None:
        """The termination finalizer of a Node was removed, `seconds` after its deletion was requested and
        `lifetime` after its creation (None: not known). A NodePool's node (`provisioner` its pool key) is counted
        under v1.14.1's names (node/termination/controller.go:371 `removeFinalizer`):
        `karpenter_nodes_terminated_total{nodepool, zone}` (`zone`: the Node's label),
        `karpenter_nodes_termination_duration_seconds{nodepool}` and `karpenter_nodes_lifetime_duration_seconds
        {nodepool}`; a Provisioner's under v0.31.1's, `karpenter_nodes_terminated{provisioner}` and
        `karpenter_nodes_termination_time_seconds{provisioner}`."""
        if is_nodepool(provisioner):
            nodepool = pool_name(provisioner)
            self.nodes_terminated_v1.labels(nodepool, zone).inc()
            if seconds is not None:
                self.termination_duration.labels(nodepool).observe(max(seconds, 0.0))
            if lifetime is not None:
                self.nodes_lifetime.labels(nodepool).observe(max(lifetime, 0.0))
            return
        self.nodes_terminated.labels(*owner_label_values(provisioner)).inc()
        if seconds is not None:
            self.termination_time.labels(provisioner).observe(max(seconds, 0.0))

    def deprovisioned(self, deprovisioner: str, action: str) -> None:
        """A deprovisioning command was carried out (Karpenter's `action` label is `<deprovisioner>/<action>`)."""
        self.deprovisioning_actions.labels(f"{deprovisioner}/{action}", deprovisioner).inc()

    def watch_counters(
        self,
        malformed_answers: Callable[[], Mapping[tuple[str, str], int]],
        malformed_objects: Callable[[], Mapping[tuple[str, str], int]],
    ) -> None:
        """Export what the informers and the state count (read at each scrape):
        `karpenter_policy_watch_malformed_answers_total{kind, problem}` — list and watch answers the API gave in a
        shape no reader can trust (each backed off and relisted), and `karpenter_policy_malformed_objects_total
        {kind, reason}` — objects the state ignored (their last good version kept). A second call replaces the
        sources of the first (a new runner on the same controller)."""
        for collector in getattr(self, "_watch_collectors", ()):
            self.registry.unregister(collector)
        self._watch_collectors = (_Counted(
            "karpenter_policy_watch_malformed_answers",
            "API answers in a shape no reader can trust, per kind and problem (backed off, relisted).",
            ("kind", "problem"), malformed_answers,
        ), _Counted(
            "karpenter_policy_malformed_objects",
            "Objects the controller could not read, per kind and reason (their last good version kept).",
            ("kind", "reason"), malformed_objects,
        ))
        for collector in self._watch_collectors:
            self.registry.register(collector)

    def use(self, name: str, collector: Collector) -> None:
        """Register a collector that reads its values at each scrape, replacing the one registered under `name`
        before (a new controller on the same metrics)."""
        previous = self._collectors.pop(name, None)
        if previous is not None:
            self.registry.unregister(previous)
        self.registry.register(collector)
        self._collectors[name] = collector

    def exposition(self) -> bytes:
        return exposition(self.registry)


class _Counted(Collector):
    """A counter family read from a callable at each scrape."""

    def __init__(
        self, name: str, documentation: str, labels: tuple[str, str],
        read: Callable[[], Mapping[tuple[str, str], int]],
    ) -> None:
        self.name, self.documentation, self.labels, self.read = name, documentation, labels, read

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=list(self.labels))
        for (first, second), count in sorted(self.read().items()):
            family.add_metric([first, second], count)
        yield family


__all__ = [
    "CAPACITY_TYPE",
    "CONTROLLER",
    "CONTROLLERS",
    "DEPROVISIONING",
    "DURATION_BUCKETS",
    "EMPTINESS",
    "GARBAGE_COLLECTION",
    "GO_DEFAULT_BUCKETS",
    "INTERRUPTION",
    "PROVISIONER",
    "RECONCILE_BUCKETS",
    "RESERVATION_EXPIRATION",
    "STATIC_DEPROVISIONING",
    "STATIC_PROVISIONING",
    "TERMINATION",
    "Metrics",
    "Reconcile",
    "Step",
]
