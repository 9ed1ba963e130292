"""The simulation: the real controller on an in-memory cluster and moto's EC2, one virtual clock, scenario steps.

:class:`Simulation` builds, in this order: moto's server (`server`), the account the node templates select
(`account`), the AWS provider (`cloud.aws`, the code `reconcile` runs, pointed at the loopback server with dummy
credentials given to its boto3 session only), an in-memory cluster with the kubelets' stand-in, and the
controller (`reconcile.controller`, every time source on the virtual clock, launches in plan order so that the
same scenario launches the same instances).

:meth:`Simulation.run` plays a scenario: timed steps, in order. The first creates the workloads as their
manifests are written (DaemonSets as DaemonSet objects, the others as their replicas' pods); a step scales
workloads and may bring a new version of the constraint sets (a policy change, taken by the controller's next
pass as a constraint source's new version would be). A step without a time starts :data:`STEP_GAP` virtual
seconds after the previous one settled; a step with one (`at`, virtual seconds from the start) starts then,
whatever is still under way — that is how a long scenario (scaling up and down, a job every ten minutes, a policy
change half-way) is written. A step's pods are announced to the controller as a watch would announce them, then
the driver moves the clock from one event to the next — a batch window closing, a retry, a node becoming Ready
(:data:`NODE_STARTUP` seconds after its launch), an empty node's TTL — running, at each, the kubelets, a
controller pass and the kubelets again, and sampling the cluster. A step settles when nothing is left to happen
or the next timed step is due; pods that a batch could not place (no provisioner takes them, a launch failed) are
tried once more when the controller's retry comes, and the step settles if that changes nothing (a disruption
command decided, launching its replacements or deleting its nodes is a change: a batch that only placed its pods
again — they run until drained — does not stop the step while the command goes on).

The driver also stands in for the controllers of a cluster that the simulation has none of, at every event:
workload controllers keep each workload at its wanted number of live pods (a pod evicted or lost with its node is
replaced by a new one), the pod garbage collector deletes the pods of a node that is gone, and the pods of a
workload with a run time (`Workload.run_seconds`: a Job's, a Spark executor's) complete — phase Succeeded — that
long after they started; a step's `start` starts more of them (a job run). A step's `interrupt` sends spot
interruption warnings for random spot nodes, which the controller's interruption controller takes (see `spot`), and
AWS reclaims each instance two minutes later. What happened to each pod and node is kept (`timeline`): pending
time per pod, nodes launched and deleted, the dollars spent. `run(steps, until=…)` ends the run at that moment.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.workloads import Workload, scale_key
from karpenter_policy.catalog import Catalog
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import AlreadyExists
from karpenter_policy.model import labels as wk
from karpenter_policy.model.minvalues import STRICT
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.constraints import FixedSource, Loaded
from karpenter_policy.reconcile.controller import ReconcileResult
from karpenter_policy.reconcile.options import DEFAULT_IDLE_SECONDS, DEFAULT_MAX_SECONDS
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.reconcile.state.pods import ShapeCache
from karpenter_policy.scheduling import COST
from karpenter_policy.simulate.aws import MotoCloud
from karpenter_policy.simulate.clock import VirtualClock
from karpenter_policy.simulate.declaredgroups import DeclaredGroup
from karpenter_policy.simulate.measure import Measurement, NodeRow, Sample, measure
from karpenter_policy.simulate.scene import Scene
from karpenter_policy.simulate.server import SimulationUnavailable
from karpenter_policy.simulate.spot import Interruption, SpotInterruptions
from karpenter_policy.simulate.timeline import Figures, Timeline, figures
from karpenter_policy.simulate.workloads import (
    ORDINAL_ANNOTATION,
    WORKLOAD_ANNOTATION,
    daemon_set_object,
    ephemeral_claims,
    replica_pod,
    run_time_of,
    volume_kind,
)

LOG = logging.getLogger("karpenter_policy.simulation")

#: Seconds from a launch to the node being Ready (its pods start then): about what an EKS node takes.
NODE_STARTUP = 45.0
#: Quiet virtual seconds between a settled step and the next one (and after the last), so that charts show steps.
STEP_GAP = 30.0
#: A step never runs longer than this in virtual time, nor for more passes (a safety net, not a behaviour).
STEP_LIMIT_SECONDS = 3600.0
STEP_LIMIT_PASSES = 10_000
CLUSTER_NAME = "simulated"
#: Given to the boto3 session of the simulation only (never to the environment): moto accepts any.
DUMMY_CREDENTIALS = ("simulated", "simulated", "simulated")


class SimulationError(Exception):
    """The simulation cannot run with these inputs (a message for the user)."""


@dataclass(frozen=True, slots=True)
class Step:
    """A scenario step: `label` for people, `replicas` by workload (`scale_key` form), `constraints`: a new version
    of the constraint sets from this step on (same region), `at`: when it starts, in virtual seconds from the start
    (None: :data:`STEP_GAP` after the previous step settled). The first step of a run creates every workload with
    its manifest's replicas, then applies its own. `start`: more pods of workloads with a run time, by workload
    (a job run: each pod completes once it has run its time); `interrupt`: how many random spot nodes get a spot
    interruption warning at the step's start."""

    label: str
    replicas: Mapping[str, int] = field(default_factory=dict)
    constraints: Loaded | None = None
    at: float | None = None
    start: Mapping[str, int] = field(default_factory=dict)
    interrupt: int = 0


@dataclass(frozen=True, slots=True)
class StepRecord:
    label: str
    started: float
    settled: float
    measurement: Measurement


@dataclass(slots=True)
class SimulationOptions:
    cluster_name: str = CLUSTER_NAME
    strategy: str = COST
    min_values_policy: str = STRICT
    #: Karpenter's StaticCapacity feature gate (static NodePools' replicas kept: `reconcile.static`).
    static_capacity: bool = False
    batch_idle: float = DEFAULT_IDLE_SECONDS
    batch_max: float = DEFAULT_MAX_SECONDS
    node_startup: float = NODE_STARTUP
    step_gap: float = STEP_GAP
    #: The latest spot price per (instance type, zone); empty: spot priced at on-demand prices.
    spot_prices: Mapping[tuple[str, str], float] = field(default_factory=dict)
    seed: int = 42
    #: The account's placement groups by name (`--placement-group`); one not declared: a partition group of 7.
    placement_groups: Mapping[str, DeclaredGroup] = field(default_factory=dict)


@dataclass(slots=True)
class SimulationResult:
    """What happened: the samples over virtual time, each step settled, the nodes at the end, the pods left
    pending with why, the controller's errors, the account's notes, and the log in Karpenter's format."""

    region: str
    origin: str
    constraint_hash: str
    provisioners: tuple[str, ...]
    samples: list[Sample] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    nodes: tuple[NodeRow, ...] = ()
    unschedulable: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log: str = ""
    spot_priced: bool = False
    timeline: Timeline = field(default_factory=Timeline)
    interruptions: list[Interruption] = field(default_factory=list)
    end: float = 0.0  # virtual seconds: when the run ended

    @property
    def figures(self) -> Figures:
        """Pods scheduled, pending times, nodes launched and deleted, dollars spent up to the end."""
        return figures(self.timeline, self.end)

    @property
    def cost(self) -> float:
        return round(sum(n.price for n in self.nodes if n.price is not None), 6)

    @property
    def pods(self) -> int:
        return sum(n.pods for n in self.nodes)

    @property
    def pending(self) -> int:
        return self.samples[-1].pending if self.samples else 0


def launch_region(loaded: Loaded) -> str:
    regions = sorted({s.region for s in loaded.sets if s.region})
    if len(regions) != 1:
        raise SimulationError(
            f"the constraint sets name {', '.join(regions) or 'no region'}: a simulation runs in one region"
        )
    return regions[0]


class Simulation:
    """See the module docstring. Use as a context manager (it runs moto's server until closed)."""

    def __init__(
        self,
        loaded: Loaded,
        workloads: Sequence[Workload],
        catalog: Catalog,
        options: SimulationOptions | None = None,
        volume_objects: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.loaded = loaded
        self.workloads = list(workloads)
        #: the scenario's claims, PersistentVolumes and StorageClasses, created with the workloads
        self.volume_objects = list(volume_objects)
        self.options = options or SimulationOptions()
        self.region = launch_region(loaded)
        if catalog.region != self.region:
            raise SimulationError(f"the catalog is for {catalog.region}, the constraint sets for {self.region}")
        clock = VirtualClock()
        self.moto = MotoCloud(
            loaded.sets, catalog, clock, region=self.region, spot_prices=self.options.spot_prices,
            seed=self.options.seed, cluster_name=self.options.cluster_name,
            placement_groups=self.options.placement_groups,
        )
        self.account, self.cloud = self.moto.account, self.moto.provider
        self.scene = Scene(
            loaded, cloud=self.cloud, clock=clock, region=self.region, cluster_name=self.options.cluster_name,
            node_startup=self.options.node_startup,
        )
        self.clock, self.cluster, self.kubelet = clock, self.scene.cluster, self.scene.kubelet
        self.spot = SpotInterruptions(
            self.cluster, self.moto.api, self.clock, region=self.region, seed=self.options.seed
        )
        self.controller = self.scene.controller(
            interruption_queue=self.spot.queue,
            batch_idle=self.options.batch_idle,
            batch_max=self.options.batch_max,
            unschedulable_only=False,
            bind_existing=True,
            strategy=self.options.strategy,
            min_values_policy=self.options.min_values_policy,
            static_capacity=self.options.static_capacity,
        )
        assert isinstance(self.scene.source, FixedSource)
        self.source = self.scene.source
        self.shapes = ShapeCache()
        self.timeline = Timeline()
        self._prices: dict[str, float | None] = {}
        self._ready_at: dict[str, float] = {}
        self._replicas: dict[str, int] = {}  # live pods wanted, by workload (a job's: started, not completed)
        self._finish_at: dict[str, tuple[float, objects.Obj]] = {}  # uid → when it completes, the pod

    def close(self) -> None:
        self.moto.close()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- running ---------------------------------------------------------------------------------------------

    def run(self, steps: Sequence[Step], until: float | None = None) -> SimulationResult:
        """Play `steps`; with `until` (virtual seconds), the last step settles until then and the run ends there
        (without, :data:`STEP_GAP` after the last step settled)."""
        loaded = self.loaded
        result = SimulationResult(
            region=self.region,
            origin=loaded.origin,
            constraint_hash=loaded.hash,
            provisioners=tuple(sorted(s.name for s in loaded.sets)),
            notes=list(self.account.notes),
            spot_priced=bool(self.options.spot_prices),
            timeline=self.timeline,
            interruptions=self.spot.sent,
        )
        captured = io.StringIO()
        handler = logging.StreamHandler(captured)
        handler.setFormatter(logs.KarpenterFormatter(logs.TEXT))
        handler.addFilter(self._virtual_time)
        package = logging.getLogger("karpenter_policy")
        level = package.level
        package.addHandler(handler)
        if package.getEffectiveLevel() > logging.INFO:
            package.setLevel(logging.INFO)
        try:
            for note in self.account.notes:
                LOG.warning("%s", note, extra=logs.fields(self.clock.wall()))
            self.controller.refresh_constraint_sets()
            self._check_times(steps, until)
            for index, step in enumerate(steps):
                if step.at is not None:
                    self.clock.advance_to(step.at)
                elif index > 0:
                    self.clock.advance_to(self.clock.now + self.options.step_gap)
                started = self.clock.now
                self._apply(step, first=index == 0)
                following = steps[index + 1].at if index + 1 < len(steps) else until
                self._settle(result, until=following)
                settled = self.clock.now
                result.steps.append(StepRecord(step.label, started, settled, self._measure(result, record=False)))
            self.clock.advance_to(self.clock.now + self.options.step_gap if until is None else until)
            self._observe()
            final = self._measure(result)
            result.end = self.clock.now
        finally:
            package.removeHandler(handler)
            package.setLevel(level)
        result.nodes = final.nodes
        pending = {pod_info.pod_key(p) for p in self.cluster.list(objects.POD).items if not pod_info.node_name(p)}
        result.unschedulable = {k: v for k, v in sorted(result.unschedulable.items()) if k in pending}
        result.log = captured.getvalue()
        return result

    def _virtual_time(self, record: logging.LogRecord) -> bool:
        """A line logged without the caller's clock (the AWS provider's) gets the virtual time too: the same
        scenario prints the same log."""
        if not hasattr(record, "when"):
            record.when = self.clock.wall()
        return True

    def _check_times(self, steps: Sequence[Step], until: float | None) -> None:
        latest = 0.0
        for step in steps:
            if step.at is not None:
                if step.at < latest:
                    raise SimulationError(f"{step.label}: at {step.at:g} s, before the step before it")
                latest = step.at
        if until is not None and until < latest:
            raise SimulationError(f"the run ends at {until:g} s, before its last step (at {latest:g} s)")

    def _apply(self, step: Step, first: bool) -> None:
        if step.constraints is not None:
            self._change_constraints(step)
        if first:
            self._create_workloads()
        by_key = {scale_key(w.ref): w for w in self.workloads}
        for key in (*step.replicas, *step.start):
            if key not in by_key:
                raise SimulationError(f"{step.label}: no workload {key} among the workloads")
        for key in step.replicas:
            if run_time_of(by_key[key]) is not None:
                raise SimulationError(f"{step.label}: {key} completes after its run time: start pods, not replicas")
        for key in step.start:
            if run_time_of(by_key[key]) is None:
                raise SimulationError(f"{step.label}: {key} has no run time: scale it (replicas), not start")
        for workload in self.workloads:
            wanted = step.replicas.get(scale_key(workload.ref))
            if wanted is None or workload.is_daemon_set:
                continue
            LOG.info(
                "scaling %s from %d to %d replica(s)", workload.ref, self._replicas[workload.ref], wanted,
                extra=logs.fields(self.clock.wall(), step=step.label),
            )
            self._scale(workload, wanted)
        for workload in self.workloads:
            more = step.start.get(scale_key(workload.ref), 0)
            if more > 0:
                LOG.info(
                    "starting %d pod(s) of %s, %g s each", more, workload.ref, run_time_of(workload),
                    extra=logs.fields(self.clock.wall(), step=step.label),
                )
                self._scale(workload, self._replicas[workload.ref] + more)
        if step.interrupt:
            self._interrupt(step)

    def _interrupt(self, step: Step) -> None:
        sent = self.spot.interrupt(step.interrupt)
        for interruption in sent:
            LOG.info(
                "spot interruption warning for node %s (instance %s, %s in %s): reclaimed in %g s",
                interruption.node, interruption.instance_id, interruption.instance_type, interruption.zone,
                interruption.reclaim_at - interruption.at, extra=logs.fields(self.clock.wall(), step=step.label),
            )
        if not sent:
            LOG.info("no spot node to interrupt", extra=logs.fields(self.clock.wall(), step=step.label))

    def _change_constraints(self, step: Step) -> None:
        new = step.constraints
        assert new is not None
        region = launch_region(new)
        if region != self.region:
            raise SimulationError(f"{step.label}: the new constraint sets are for {region}, not {self.region}")
        for note in self.moto.add(new.sets):
            LOG.warning("%s", note, extra=logs.fields(self.clock.wall(), step=step.label))
        LOG.info("constraint sets changed to %s", new.origin, extra=logs.fields(self.clock.wall(), step=step.label))
        self.source.replace(new)

    def _create_workloads(self) -> None:
        namespaces = {w.pod_namespace for w in self.workloads}
        for obj in self.volume_objects:
            kind = volume_kind(obj)
            if kind is not None and kind.namespaced:
                namespaces.add(objects.namespace(dict(obj)) or "default")
        for namespace in sorted(namespaces):
            self.cluster.create(objects.NAMESPACE, {"metadata": {"name": namespace}})
        for obj in self.volume_objects:
            kind = volume_kind(obj)
            if kind is not None:
                self.cluster.create(kind, dict(obj))
        for workload in self.workloads:
            if workload.is_daemon_set:
                self.cluster.create(objects.DAEMON_SET, daemon_set_object(workload))
                LOG.info("created %s", workload.ref, extra=logs.fields(self.clock.wall()))
                continue
            self._replicas[workload.ref] = 0
            LOG.info(
                "created %s with %d replica(s)", workload.ref, workload.replicas, extra=logs.fields(self.clock.wall())
            )
            self._scale(workload, workload.replicas)

    def _pods_of(self, workload: Workload) -> list[objects.Obj]:
        return [
            p
            for p in self.cluster.list(objects.POD, workload.pod_namespace).items
            if objects.annotations(p).get(WORKLOAD_ANNOTATION) == workload.ref
        ]

    def _scale(self, workload: Workload, wanted: int) -> bool:
        """Create or delete pods as the workload's controller would, to `wanted` live pods (not completed, not
        being deleted): new pods get the next free ordinals; scaling down deletes pods without a node first, then
        those not running yet, then the newest. True when it created or deleted one."""
        every = self._pods_of(workload)
        pods = [p for p in every if not pod_info.is_terminal(p) and not objects.is_deleting(p)]
        self._replicas[workload.ref] = wanted
        if wanted == len(pods):
            return False
        if wanted > len(pods):
            used = {objects.annotations(p).get(ORDINAL_ANNOTATION) for p in every}
            ordinal = 0
            for _ in range(wanted - len(pods)):
                while str(ordinal) in used:
                    ordinal += 1
                created = self.cluster.create(objects.POD, replica_pod(workload, ordinal, wanted))
                for claim in ephemeral_claims(created):  # Kubernetes' ephemeral volume controller
                    with contextlib.suppress(AlreadyExists):
                        self.cluster.create(objects.PERSISTENT_VOLUME_CLAIM, claim)
                self.timeline.created(created, workload.ref, self.clock.now)
                self.controller.notify(objects.uid(created))  # what the runner's pod watch does
                ordinal += 1
        else:

            def keep_first(pod: objects.Obj) -> tuple[bool, bool, int]:
                ordinal = int(objects.annotations(pod).get(ORDINAL_ANNOTATION) or 0)
                return (bool(pod_info.node_name(pod)), pod_info.phase(pod) == "Running", -ordinal)

            for pod in sorted(pods, key=keep_first)[: len(pods) - wanted]:
                self.cluster.delete(objects.POD, objects.name(pod), objects.namespace(pod))
        return True

    def _cluster_controllers(self) -> bool:
        """What the cluster's own controllers would do by now (see the module docstring): AWS reclaims the
        instances whose notice is over (the controller's interruption controller takes the queue's messages in its
        step), pods that have run their time complete, the pods of a node that is gone are deleted, and each
        workload gets back to its live pods. True when anything changed."""
        changed = bool(self.spot.reclaim())
        now = self.clock.now
        for uid, (finish_at, pod) in sorted(self._finish_at.items(), key=lambda item: item[1][0]):
            if finish_at > now:
                continue
            del self._finish_at[uid]
            if self._complete(pod):
                changed = True
                ref = objects.annotations(pod).get(WORKLOAD_ANNOTATION, "")
                self._replicas[ref] = max(self._replicas.get(ref, 0) - 1, 0)
        nodes = {objects.name(n) for n in self.cluster.list(objects.NODE).items}
        for pod in self.cluster.list(objects.POD).items:
            bound_to = pod_info.node_name(pod)
            if bound_to and bound_to not in nodes and not pod_info.is_daemon_pod(pod):
                self.cluster.delete(objects.POD, objects.name(pod), objects.namespace(pod))
                changed = True
        for workload in self.workloads:
            if not workload.is_daemon_set and workload.ref in self._replicas:
                changed = self._scale(workload, self._replicas[workload.ref]) or changed
        return changed

    def _complete(self, pod: objects.Obj) -> bool:
        """The pod has run its time: phase Succeeded (False when it is gone meanwhile)."""
        current = self.cluster.get(objects.POD, objects.name(pod), objects.namespace(pod))
        if current is None or objects.uid(current) != objects.uid(pod) or objects.is_deleting(current):
            return False
        ready = {"type": "Ready", "status": "False", "reason": "PodCompleted"}
        status = {"phase": wk.POD_SUCCEEDED, "conditions": [ready]}
        self.cluster.patch(objects.POD, objects.name(pod), {"status": status}, objects.namespace(pod),
                           subresource="status")
        return True

    def _observe(self) -> None:
        """Show the timeline the cluster now; pods of a workload with a run time that just started get their end."""
        pods = self.cluster.list(objects.POD).items
        started = self.timeline.observe(pods, (objects.name(n) for n in self.cluster.list(objects.NODE).items),
                                        self.clock.now, self.shapes)
        if not started:
            return
        runs = {w.ref: run for w in self.workloads if (run := run_time_of(w)) is not None}
        by_uid = {objects.uid(p): p for p in pods}
        for uid in started:
            pod = by_uid[uid]
            run = runs.get(objects.annotations(pod).get(WORKLOAD_ANNOTATION, ""))
            if run is not None:
                self._finish_at[uid] = (self.clock.now + run, pod)

    def _settle(self, result: SimulationResult, until: float | None = None) -> None:
        """Events until nothing is left to happen, or until the next event is at `until` or later (the next timed
        step's moment); see the module docstring."""
        started = self.clock.now
        stalled = False
        for _ in range(STEP_LIMIT_PASSES):
            changed = self._cluster_controllers()
            self.kubelet.sync()
            outcome = self.controller.reconcile_once()
            self._record(outcome, result)
            self.kubelet.sync()
            self._observe()
            self._measure(result)
            disrupted = outcome.disrupted  # a command decided, launched or deleting nodes moves on too
            acted = disrupted is not None and bool(disrupted.decided or disrupted.replacements or disrupted.deleted)
            if outcome.launched or outcome.bound or outcome.interrupted or changed or acted:
                stalled = False
            elif outcome.scheduled:
                stalled = True  # a batch that placed nothing: its pods wait for the retry, which changes nothing
            upcoming = [t for name, t in self._ready_at.items() if t > self.clock.now]
            upcoming += [t for t, _ in self._finish_at.values()]
            reclaim = self.spot.due()
            if reclaim is not None:
                upcoming.append(reclaim)
            if not stalled and outcome.due is not None:
                upcoming.append(outcome.due)
            if not upcoming or min(upcoming) - started > STEP_LIMIT_SECONDS:
                return
            if until is not None and min(upcoming) >= until:
                return
            self.clock.advance_to(min(upcoming))
        LOG.warning("step stopped after %d passes", STEP_LIMIT_PASSES, extra=logs.fields(self.clock.wall()))

    def _record(self, outcome: ReconcileResult, result: SimulationResult) -> None:
        for launched in outcome.launched:
            self._prices[launched.node] = launched.price
            self._ready_at[launched.node] = self.clock.now + self.options.node_startup
            self.timeline.launched(
                launched.node, launched.instance_type, launched.capacity_type, launched.price, self.clock.now
            )
        result.unschedulable.update(outcome.unschedulable)
        for error in outcome.errors:
            if error not in result.errors:
                result.errors.append(error)

    def _measure(self, result: SimulationResult, record: bool = True) -> Measurement:
        measured = measure(self.cluster, self.clock.now, self._prices, self.shapes)
        if record:
            if result.samples and result.samples[-1].at == measured.sample.at:
                result.samples[-1] = measured.sample  # the latest state at one moment
            else:
                result.samples.append(measured.sample)
        return measured


__all__ = [
    "NODE_STARTUP",
    "STEP_GAP",
    "Simulation",
    "SimulationError",
    "SimulationOptions",
    "SimulationResult",
    "SimulationUnavailable",
    "Step",
    "StepRecord",
    "launch_region",
]
