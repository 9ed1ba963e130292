"""Prometheus metrics of the controller (prometheus-client), in a registry of its own per controller.

* `karpenter_policy_pods_pending` — provisionable pods the last pass saw (pods already planned onto a node being
  launched are not pending); `karpenter_policy_pods_unschedulable` — those no constraint set can take.
* `karpenter_policy_nodes_launched_total{provisioner, capacity_type}` — instances launched.
* `karpenter_policy_launch_duration_seconds{provisioner}` — one launch, from the cloud call to the instance
  (CreateFleet and the offerings it fell back to), histogram.
* `karpenter_policy_insufficient_capacity_total{provisioner, capacity_type}` — offerings the cloud refused for lack
  of capacity (each is then unavailable for 3 minutes).
* `karpenter_policy_launch_errors_total{provisioner, reason}` — launches that failed: `insufficient_capacity`
  (every offering), `configuration`, `throttled`, `cloud`.
* `karpenter_policy_pods_bound_total` — pods the controller bound.
* `karpenter_policy_reconcile_duration_seconds` — one pass that scheduled a batch, histogram.
* `karpenter_policy_plans_ahead_total{used}` — plans made ahead while a batch window was quiet, and whether the
  pass closing the window used it (`true`) or something had changed (`false`: it planned again).
* `karpenter_policy_constraint_sets` — constraint sets in force; `karpenter_policy_constraint_set_refusals_total` —
  versions refused (unreadable, hash mismatch, wrong region).
* interruption (`--interruption-queue`, see `interruption`): `karpenter_policy_interruption_received_messages_total
  {message_type}` (Karpenter's kinds; `NoOpKind` for events not acted on),
  `karpenter_policy_interruption_malformed_messages_total` (unreadable, deleted),
  `karpenter_policy_interruption_deleted_messages_total`, `karpenter_policy_interruption_actions_performed_total
  {action_type}` (`CordonAndDrain`, `NoAction`, per node), `karpenter_policy_interruption_message_latency_seconds`
  (from the event's time to its handling), `karpenter_policy_interruption_queue_errors_total{operation}` (receive,
  delete).
* the watches (`watch_counters`): `karpenter_policy_watch_malformed_answers_total{kind, problem}` and
  `karpenter_policy_malformed_objects_total{kind, reason}`.
* garbage collection (see `garbage`): `karpenter_policy_garbage_collected_total{object}` — instances terminated
  for having no Node (`instance`), Nodes deleted for having no instance (`node`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series next to every counter

LAUNCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LATENCY_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Metrics:
    """The controller's metrics (see the module docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
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
        self._interruption_and_garbage(registry)

    def _interruption_and_garbage(self, registry: CollectorRegistry) -> None:
        self.interruption_received = Counter(
            "karpenter_policy_interruption_received_messages",
            "Interruption messages read from the queue, by kind (NoOpKind: not acted on).",
            ["message_type"],
            registry=registry,
        )
        self.interruption_malformed = Counter(
            "karpenter_policy_interruption_malformed_messages",
            "Interruption messages that could not be read (deleted without action).",
            registry=registry,
        )
        self.interruption_deleted = Counter(
            "karpenter_policy_interruption_deleted_messages",
            "Messages deleted from the interruption queue.",
            registry=registry,
        )
        self.interruption_actions = Counter(
            "karpenter_policy_interruption_actions_performed",
            "Actions taken on nodes for interruption messages.",
            ["action_type"],
            registry=registry,
        )
        self.interruption_latency = Histogram(
            "karpenter_policy_interruption_message_latency_seconds",
            "From an interruption event's time to the controller acting on it.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.interruption_queue_errors = Counter(
            "karpenter_policy_interruption_queue_errors",
            "Failed calls to the interruption queue, by operation.",
            ["operation"],
            registry=registry,
        )
        self.garbage_collected = Counter(
            "karpenter_policy_garbage_collected",
            "Instances terminated for having no Node (instance) and Nodes deleted for having no instance (node).",
            ["object"],
            registry=registry,
        )

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

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


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


__all__ = ["Metrics"]
