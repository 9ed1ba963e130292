"""What every controller of the reconciler shares: the cluster and the cloud, the cluster state, the launches in
flight, the constraint sets in force, the clocks, the writer of NodePools' NodeClaims (`claims`) and of their
status (`registration_health`: NodeRegistrationHealthy, readiness and counts, with an EC2NodeClass's Ready from what
the cloud resolves of its selectors, `node_class_ready`, and the counts from the state, `nodepool_counts`), the
metrics (and
the gauges read from the state at each scrape: `clustermetrics`), and the helpers that log and record Events (`events`).

One :class:`Context` per controller process; the controllers (`provisioning`, `termination`, `disruption`,
`garbage`, `interruption`) each keep their own bookkeeping and read and write the shared parts through it. The
constraint sets in force are swapped atomically (one reference); the launches in flight carry their own lock.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.api.v1.launchsettings import LaunchSettingsError, launch_settings
from karpenter_policy.api.v1.static import LEFT_OUT
from karpenter_policy.api.v1.statichash import static_hash_annotations
from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import CloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, EventSeverity
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model.pools import is_nodepool, pool_key, pool_name
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.claims import counter, readiness
from karpenter_policy.reconcile.claims.nodepoolstatus import RegistrationHealth
from karpenter_policy.reconcile.claims.writer import ClaimWriter
from karpenter_policy.reconcile.clustermetrics import ClusterMetrics
from karpenter_policy.reconcile.constraints import Loaded
from karpenter_policy.reconcile.events import Event, Recorder
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.inflight import InFlight
from karpenter_policy.reconcile.templates import TemplateBuilder, Templates

CONSTRAINTS = logs.logger("constraints")
#: What the cloud last told of an EC2NodeClass's dependents: its subnets, security groups and AMIs (how many), and
#: whether its instance profile exists; None: never told.
ClassAnswers = tuple[int | None, int | None, int | None, bool | None, bool | None]


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class Context:
    """See the module docstring."""

    cluster: Cluster
    cloud: CloudProvider
    options: ControllerOptions
    state: ClusterState
    region: str
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], dt.datetime] = _utc_now
    metrics: Metrics = field(default_factory=Metrics)
    inflight: InFlight = field(default_factory=InFlight)
    loaded: Loaded | None = None
    _left_out: dict[str, str] = field(default_factory=dict)
    _templates_lock: threading.Lock = field(default_factory=threading.Lock)
    _static_lock: threading.Lock = field(default_factory=threading.Lock)
    _class_answers: dict[str, ClassAnswers] = field(default_factory=dict)  # EC2NodeClass → its dependents last told
    _built: tuple[Templates, Templates] = field(default_factory=lambda: (Templates(), Templates()))  # the last builds

    def __post_init__(self) -> None:
        self.templates = TemplateBuilder(
            self.cloud, self.region, self.options.min_values_policy, reserved_capacity=self.options.reserved_capacity
        )
        # a builder of its own: a builder forgets the tables of the sets its last build did not hold
        self._static_templates = TemplateBuilder(self.cloud, self.region, self.options.min_values_policy)
        self.events = Recorder(self.cluster, self.clock, self.fields)
        self.cluster_metrics = ClusterMetrics(
            self.state, self.metrics, self._sets, self.wall_clock, self.offering_price
        )
        self.claims = ClaimWriter(self.cluster, self.wall_clock, self.fields)
        self.registration_health = RegistrationHealth(
            self.cluster, self.wall_clock, self.fields, self.metrics, self.node_class_ready, self.nodepool_counts,
            self.nodepool_hash,
        )

    def nodepool_hash(self, name: str) -> dict[str, str] | None:
        """The static-drift hash annotations of the NodePool's nodes as its constraint set in force runs it (its
        `karpenter.sh/nodepool-hash`, and its EC2NodeClass's when the set carries the class; None: no set of that
        NodePool)."""
        found = self._sets_by_pool().get(pool_key(name, True))
        return None if found is None else static_hash_annotations(found)

    def _sets_by_pool(self) -> dict[str, ConstraintSet]:
        return {s.pool: s for s in self._sets()}

    def nodepool_counts(self, name: str) -> dict[str, str]:
        """The NodePool's `status.resources` now, from the state (`claims.counter.resources`)."""
        pool = pool_key(name, True)
        with self.state.lock:
            return counter.resources(self.state.used().get(pool), self.state.node_counts().get(pool, 0))

    def node_class_ready(self, node_class: Obj) -> readiness.Verdict:
        """The EC2NodeClass's Ready as aws v1.14.1 would write it, from the AMIs, subnets and security groups it
        resolves to in the cloud now and whether its instance profile and placement group exist
        (`readiness.class_ready`); a dependent the cloud cannot tell keeps its last answer (Unknown before one). A
        spec the launcher cannot carry out counts as resolved here: its NodePools' sets are left out by the
        templates, with that reason."""
        name = objects.name(node_class)
        spec = node_class.get("spec")
        try:
            settings = launch_settings(spec if isinstance(spec, dict) else {})
        except LaunchSettingsError:
            return readiness.Verdict("True", readiness.READY)
        try:
            network = self.cloud.network(settings)
        except CloudError:
            network = None
        try:
            resolved = self.cloud.node_class(settings)
        except CloudError:
            resolved = None
        now: ClassAnswers = (
            None if network is None else len(network.subnets),
            None if network is None else len(network.security_groups),
            None if resolved is None or resolved.images is None else len(resolved.images),
            None if resolved is None else resolved.instance_profile_found,
            None if resolved is None else resolved.placement_group_found,
        )
        last = self._class_answers.get(name, (None, None, None, None, None))
        answers: ClassAnswers = (
            now[0] if now[0] is not None else last[0], now[1] if now[1] is not None else last[1],
            now[2] if now[2] is not None else last[2], now[3] if now[3] is not None else last[3],
            now[4] if now[4] is not None else last[4],
        )
        self._class_answers[name] = answers
        return readiness.class_ready(*answers)

    def _sets(self) -> tuple[ConstraintSet, ...]:
        loaded = self.loaded
        return tuple(loaded.sets) if loaded is not None else ()

    def static_sets(self) -> list[ConstraintSet]:
        """The constraint sets in force of static NodePools (`spec.replicas`), by pool: what the static provisioning
        and deprovisioning controllers keep at their replicas."""
        return sorted((s for s in self._sets() if s.is_static), key=lambda s: s.pool)

    def fields(self, **values: object) -> dict[str, object]:
        """A log line's `extra`: its structured fields and the controller's time."""
        return logs.fields(self.wall_clock(), **values)

    def event(self, involved: Obj, reason: str, message: str, severity: EventSeverity = "Normal") -> None:
        """Record an Event on an object (a failure to record one is logged, never raised)."""
        self.events.publish(Event(involved, severity, reason, message))

    def error(self, errors: list[str], logger: logging.Logger, message: str, **values: object) -> None:
        """Log an error and keep it for the pass's result."""
        errors.append(message)
        logger.error(message, extra=self.fields(**values))

    def template_sets(self) -> Templates:
        """The node claim templates of the constraint sets in force, at the cloud's live offerings (raises CloudError);
        a set left out (another region, no offering, a NodePool of the cluster that is not Ready) is logged once per
        reason; a static NodePool's set is left out too (v1.14.1's provisioner with the StaticCapacity gate off, its
        default: `api.v1.static`), logged once as information, not as an error."""
        loaded = self.loaded
        sets = loaded.sets if loaded is not None else ()
        static = {s.pool for s in sets if s.is_static}
        not_ready = self.registration_health.not_ready()
        gated = {s.pool: not_ready[pool_name(s.pool)] for s in sets
                 if is_nodepool(s.pool) and pool_name(s.pool) in not_ready and s.pool not in static}
        with self._templates_lock:
            templates = self.templates.build([s for s in sets if s.pool not in gated and s.pool not in static])
            for pool, ready in gated.items():  # v1.14.1's provisioner: "ignoring nodepool, not ready"
                templates.left_out[pool] = f"NodePool {pool_name(pool)} is not ready ({ready.reason}: {ready.message})"
            for pool in static:  # NewScheduler: `if nodepoolutils.IsStatic(np) { return false }`
                templates.left_out[pool] = LEFT_OUT
            for name, why in sorted(templates.left_out.items()):
                if self._left_out.get(name) != why:
                    log = CONSTRAINTS.info if name in static else CONSTRAINTS.error
                    log("constraint set %s left out: %s", name, why, extra=self.fields(provisioner=name))
            self._left_out = dict(templates.left_out)
            self._built = (templates, self._built[1])
        return templates

    def static_template_sets(self) -> Templates:
        """The node claim templates of the static NodePools' sets in force (raises CloudError): what the static
        controllers (`reconcile.static`) and static drift launch from — never offered to a scheduling run (v1.14.1's
        `NewScheduler` leaves static NodePools out, gate on or off). A set left out here (another region, a class the
        launcher cannot carry out) is left out by `template_sets` with `LEFT_OUT` already: not logged again."""
        loaded = self.loaded
        sets = [s for s in (loaded.sets if loaded is not None else ()) if s.is_static]
        with self._static_lock:
            built = self._static_templates.build(sets)
            self._built = (self._built[0], built)
            return built

    def offering_price(self, pool: str, instance_type: str, zone: str, capacity_type: str) -> float | None:
        """$/h of that offering of the pool's set as the last templates built priced it (None: not built yet, or
        no such offering) — no cloud call: what a scrape may ask."""
        for templates in self._built:
            price = templates.offering_price(pool, instance_type, zone, capacity_type)
            if price is not None:
                return price
        return None


__all__ = ["Context"]
