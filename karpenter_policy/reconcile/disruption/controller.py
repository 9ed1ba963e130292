"""The disruption controller: expiry, drift and consolidation decided and carried out — a Provisioner's commands one
at a time, NodePools' side by side within their budgets (:class:`Deprovisioner`).

It decides only while the cluster is quiet — no pod that provisioning is still working on, no launch in flight, no
node of ours being drained, NodePools' commands under way aside (their replacements launching, their nodes
draining) — and at most every `disruption_interval` seconds, at once after a NodePool's command started. Pods the
last batch found no place for, and pods planned onto an existing node for kube-scheduler to bind, do not keep it
waiting: Karpenter disrupts while unschedulable pods stay pending; every decision places them too (they take
room), and the nodes they were planned onto are not disrupted. A decision reads the
cluster as the state showed it when the decision began (`view`), builds its own node claim templates (a decision on its
own thread must not share the provisioner's, which a scheduling run adjusts), and is bounded in time by
Karpenter's budgets (`ControllerOptions.single_node_budget` and `multi_node_budget`): a decision that runs out
stops with what it found, logged. Replacements are launched through the provisioner's launcher.

In the threaded runner it runs on a thread of its own, so however long a decision takes, provisioning goes on,
and a decision stops the moment pods become pending. A decision that found nothing is not taken again until the
cluster or the constraint sets change, a node expires, or :data:`RECHECK_SECONDS` pass (a new AMI release drifts
nodes without any change in the cluster): an idle cluster of 5,000 nodes costs no decision every 10 s.

What counts as a change follows Karpenter v0.31's cluster state (`state/cluster.go`, `MarkUnconsolidated` and
`ConsolidationState`, read by `deprovisioning/controller.go` and consolidation's `ShouldDeprovision`): a node
added, removed or changed in what a decision reads (not a status heartbeat), and a pod that starts or stops using
a node's capacity (bound, moved, finished, deleted) — not a status update of a pod that stays where it is, which
is most of what a busy cluster sends. And as Karpenter's
deprovisioning loop waits for its cluster state to be synced, a decision waits for the state to be synced and for
the changes to settle — :data:`SETTLE_SECONDS` without one — but not longer than the disruption interval after
the first change it has not seen: under steady churn (pods replaced all the time) it decides once an interval, as
Karpenter's 10 s polling period does, instead of after every change.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import threading
from collections.abc import Callable, Sequence

from karpenter_policy.api.v1.static import LEFT_OUT
from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import Instance, Network
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.pools import pool_name
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.disruption.decider import Command, Decider, Inputs
from karpenter_policy.reconcile.disruption.deprovisioner import Deprovisioner
from karpenter_policy.reconcile.disruption.expiry import expired
from karpenter_policy.reconcile.disruption.view import disruption_view, volumed_pod
from karpenter_policy.reconcile.metrics import DEPROVISIONING
from karpenter_policy.reconcile.provisioning.provisioner import Provisioner
from karpenter_policy.reconcile.result import Disrupted, ReconcileResult
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord
from karpenter_policy.reconcile.templates import TemplateBuilder, Templates
from karpenter_policy.reconcile.termination.terminator import Terminator
from karpenter_policy.scheduling import Pod, SchedulerOptions
from karpenter_policy.scheduling.pods import PodSpecError

NODE = logs.logger("node")
#: A decision that found nothing is taken again at least this often (images resolve anew; see above).
RECHECK_SECONDS = 300.0
#: A decision waits until the cluster has gone this long without a change it cares about (see above).
SETTLE_SECONDS = 1.0
#: While the state is not synced, a decision is looked at again this often (Karpenter's requeue of 1 s).
SYNC_RETRY_SECONDS = 1.0


def marks_unconsolidated(change: Change) -> bool:
    """A change a decision must see again for (Karpenter's `MarkUnconsolidated`): a node added, removed, or changed
    in what a decision reads (labels, annotations, taints, cordon, deletion, readiness, initialization, capacity:
    not a status heartbeat), and a pod that starts or stops using a node's capacity (bound, moved, finished,
    deleted: not a status update of a pod that stays where it is)."""
    if change.kind == "node":
        before, after = change.before, change.after
        if not isinstance(before, NodeRecord) or not isinstance(after, NodeRecord):
            return True
        return not before.same_as_read(after)
    if change.kind != "pod":
        return True
    used = [r.node if isinstance(r, PodRecord) and r.live_on_node else "" for r in (change.before, change.after)]
    return used[0] != used[1]


class Disruption:
    """See the module docstring."""

    def __init__(
        self, context: Context, provisioner: Provisioner, terminator: Terminator,
        synced: Callable[[], bool] = lambda: True,
    ) -> None:
        """`synced`: whether the state has listed every kind it follows (decisions wait for it)."""
        self.context = context
        self.synced = synced
        self.provisioner = provisioner
        self.terminator = terminator
        options = context.options
        self.templates = TemplateBuilder(
            context.cloud, context.region, options.min_values_policy, reserved_capacity=options.reserved_capacity
        )
        decider = Decider(
            SchedulerOptions(options.strategy), on_simulation=context.metrics.scheduling_simulation_duration.observe
        )
        self.deprovisioner = Deprovisioner(
            context.cluster, context.state, decider, context.clock,
            context.fields, interval=options.disruption_interval, validation=options.consolidation_validation,
            replacement_timeout=options.replacement_timeout, metrics=context.metrics, recorder=context.events,
            claims=context.claims,
        )
        self.wake = threading.Event()
        self._lock = threading.Lock()  # one step at a time, whichever thread asks
        self._changed = True  # the cluster changed since the last decision began
        self._first_change: float | None = None  # the first change the next decision will see (None: at start)
        self._last_change = -math.inf  # the latest change a decision cares about
        self._decided: object = None  # the constraint sets the last decision saw
        self._recheck_at = 0.0
        #: by node, when a pod last started or stopped using it (a NodePool's `consolidateAfter` counts from then:
        #: Karpenter v1's `LastPodEventTime`, core pkg/controllers/nodeclaim/podevents/controller.go at v1.14.1)
        self._pod_events: dict[str, dt.datetime] = {}
        self._pod_events_lock = threading.Lock()  # written by the informers' thread, copied by a decision
        context.state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if not marks_unconsolidated(change):
            return  # a pending pod is provisioning's; a bound pod's or a node's status update changes nothing
        if change.kind == "pod":
            at = self.context.wall_clock()
            with self._pod_events_lock:
                for record in (change.before, change.after):
                    if isinstance(record, PodRecord) and record.node:
                        self._pod_events[record.node] = at
        elif change.kind == "node" and change.after is None and isinstance(change.before, NodeRecord):
            with self._pod_events_lock:
                self._pod_events.pop(change.before.name, None)
        now = self.context.clock()
        if not self._changed:
            self._first_change = now
        self._last_change = now
        self._changed = True

    def _pod_events_now(self) -> dict[str, dt.datetime]:
        with self._pod_events_lock:
            return dict(self._pod_events)

    def _settling(self, now: float) -> float | None:
        """When a decision may be taken, if not now: the state is not synced, or changes have not settled (see
        the module docstring)."""
        if not self.synced():
            return now + SYNC_RETRY_SECONDS
        if self._first_change is None:  # changed by a step of its own (it acted), or since start
            self._first_change = now
        first = self._first_change
        due = min(self._last_change + SETTLE_SECONDS, first + self.context.options.disruption_interval)
        return due if now < due else None

    def protected(self) -> frozenset[str]:
        """The replacements of the command under way (emptiness must not count them empty)."""
        return self.deprovisioner.protected()

    def disrupting(self) -> frozenset[str]:
        """The nodes of the commands under way (v1.14.1's pending disruption: the static controllers' counts)."""
        return self.deprovisioner.disrupting()

    def settled_pods(self) -> frozenset[str]:
        """The pending pods (uids) provisioning is done with for now: the last batch found no place for them, or
        planned them onto an existing node for kube-scheduler to bind."""
        provisioner = self.provisioner
        return provisioner.unschedulable() | frozenset(provisioner.nominations())

    def provisioning(self, settled: frozenset[str], own: frozenset[str] = frozenset()) -> bool:
        """Provisioning has work: a pod pending that is not `settled`, or a launch in flight (but the `own`
        replacements of NodePools' commands under way)."""
        context = self.context
        if any(entry.name not in own for entry in context.inflight):
            return True
        return any(p.uid not in settled for p in context.state.pending())

    def quiet(self) -> bool:
        """Nothing else moves: no pod being provisioned, no launch in flight, no node of ours drained — the
        replacements launching and the candidates draining of NodePools' commands under way aside (Karpenter
        v1.14.1's queue: its commands run side by side)."""
        own, draining = self.deprovisioner.protected(), self.deprovisioner.disrupting()
        return not (self.provisioning(self.settled_pods(), own) or self.terminator.draining_other_than(draining))

    # --- as a controller (`reconcile.steps.Reconciler`) ------------------------------------------------------

    name = "disruption"
    label = DEPROVISIONING

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """Expire NodePools' nodes forcefully (`expiry`), then follow the command under way, else decide when quiet
        (:meth:`reconcile`)."""
        next_expiry = self._expire(now, result)
        done = self.reconcile(result)
        result.disrupted = done
        result.errors.extend(done.errors)
        dues = [due for due in (done.due, next_expiry) if due is not None]
        return min(dues, default=None)

    def _expire(self, now: float, result: ReconcileResult) -> float | None:
        """Delete our NodePool nodes past their expireAfter (Karpenter v1's forceful expiry: `expiry`); when the
        next one expires (the controller's clock), None when none will."""
        loaded = self.context.loaded
        if loaded is None or not any(s.is_nodepool for s in loaded.sets):
            return None
        state, context = self.context.state, self.context
        nodes = (node for name in state.node_names() if (node := state.node(name)) is not None)
        found = expired(nodes, {s.pool: s for s in loaded.sets}, context.wall_clock())
        for node in found.nodes:
            try:
                context.cluster.delete(objects.NODE, node.name)
            except NotFound:
                continue
            except ClusterError as error:
                result.errors.append(f"expiry of node {node.name}: {error}")
                continue
            fields = context.fields(node=node.name)
            NODE.info("deleting expired node (expireAfter of %s)", node.provisioner, extra=fields)
            context.metrics.nodeclaims_disrupted.labels(
                "expired", pool_name(node.provisioner or ""), node.labels.get(wk.CAPACITY_TYPE, "")
            ).inc()
        return None if found.next_in is None else now + found.next_in

    def poll(self) -> float | None:
        """Its thread decides again every `disruption_interval` at the latest."""
        return self.context.options.disruption_interval

    def reconcile(self, result: ReconcileResult) -> Disrupted:
        """One step of the deprovisioner: follow the command under way, else decide when quiet."""
        with self._lock:
            return self._step(result)

    def _step(self, result: ReconcileResult) -> Disrupted:
        context = self.context
        deprovisioner = self.deprovisioner
        if context.loaded is None and not deprovisioner.underway:
            return Disrupted()
        now = context.clock()
        idle = not deprovisioner.underway and not deprovisioner.holding
        if idle and not self._changed and self._decided is context.loaded and now < self._recheck_at:
            return Disrupted(due=self._recheck_at)  # nothing changed since a decision that found nothing
        if idle and (settling := self._settling(now)) is not None:
            return Disrupted(due=settling)
        protected, disrupting = self.protected(), deprovisioner.disrupting()

        def inputs() -> Inputs:
            self._changed = False  # a change from now on is seen by the next decision
            self._first_change = None
            self._decided = context.loaded
            self._recheck_at = context.clock() + RECHECK_SECONDS
            budgets = context.cluster.list(objects.POD_DISRUPTION_BUDGET).items
            templates = self._template_sets()
            static = context.static_template_sets()  # static drift's (`decider`): never offered to a simulation
            facts = templates.with_sets_of(static)
            settled = self.settled_pods()
            return Inputs(
                disruption_view(context.state), templates, budgets, context.wall_clock(), protected,
                self._current_images(facts), context.clock,
                context.options.single_node_budget, context.options.multi_node_budget,
                lambda: self.provisioning(settled, protected), self._pending_pods(),
                frozenset(self.provisioner.nominations().values()), self._pod_events_now(),
                *self._network_facts(facts), instance_types=self._offered_types(facts),
                disrupting=disrupting, static=static,
            )

        def launch(command: Command) -> list[str] | str:
            salt = f"{command.method}:{','.join(command.names)}"
            return self.provisioner.launch_replacements(
                command.replacements, salt, result, command.reason, command.v1_reason
            )

        try:
            done = deprovisioner.step(self.quiet(), inputs, launch)
        except (ClusterError, CloudError) as error:
            self._changed = True
            done = Disrupted(errors=[f"could not decide on disruption, {error}"])
            NODE.error(done.errors[0], extra=context.fields())
            done.due = context.clock() + context.options.disruption_interval
            return done
        if done.decided or done.stopped or done.errors or done.abandoned:
            self._changed = True  # it acted, did not finish, or gave a command up: decide again
        elif done.due is not None:
            self._recheck_at = min(self._recheck_at, done.due)  # a node expires, a validation is due
        return done

    def _pending_pods(self) -> list[Pod]:
        """The scheduler's pods of the pods pending now (not planned onto a launch in flight), with their volumes
        (`view.volumed_pod`; one with a claim left out while the volume kinds cannot be read: provisioning holds it)."""
        pods = []
        state = self.context.state
        unavailable = state.volumes_unavailable()
        for record in self.provisioner.pending_pods():
            try:
                pod = state.scheduling_pod(record)
            except PodSpecError:
                continue  # reported by provisioning; nothing to place
            if record.claims:
                if unavailable is not None:
                    continue
                pod = volumed_pod(state, record, pod, pending=True)
            pods.append(pod)
        return pods

    def _template_sets(self) -> Templates:
        """The templates of the sets in force; a static NodePool's set left out, as the provisioner's
        (`Context.template_sets`): its nodes are no candidates for consolidation, emptiness or drift (v1.14.1's
        `OwnedByStaticNodePool`) and no replacement launches on it; static drift reads its set apart
        (`Context.static_template_sets`, `Inputs.static`)."""
        loaded = self.context.loaded
        sets = loaded.sets if loaded is not None else ()
        templates = self.templates.build([s for s in sets if not s.is_static])
        templates.left_out.update((s.pool, LEFT_OUT) for s in sets if s.is_static)
        return templates

    def _network_facts(
        self, templates: Templates
    ) -> tuple[Callable[[str], Instance | None], Callable[[str], Network | None]]:
        """For network drift, asked only when a NodePool node has no other drift: instance id → the instance (one
        list of the cluster's instances per decision; none known when the cloud fails) and provisioner → the
        subnets, security groups, placement group and capacity reservations its node class resolves to (one answer
        per provisioner and decision; with the ReservedCapacity gate off its reservations are not asked about: no
        instance is `reserved` then in v1.14.1, so none drifts for its reservation). The instances are listed afresh
        at each decision, as v1.14.1 skips its instance cache before it concludes capacity-reservation drift."""
        cloud = self.context.cloud
        gate = self.context.options.reserved_capacity
        listed: dict[str, Instance] | None = None
        resolved: dict[str, Network | None] = {}

        def instance(instance_id: str) -> Instance | None:
            nonlocal listed
            if listed is None:
                try:
                    listed = {i.id: i for i in cloud.list(self.context.options.cluster_name)}
                except CloudError:
                    listed = {}
            return listed.get(instance_id)

        def network(provisioner: str) -> Network | None:
            if provisioner not in resolved:
                constraint_set = templates.sets.get(provisioner)
                spec = constraint_set.launch_spec if constraint_set is not None else None
                try:
                    found = cloud.network(spec) if spec is not None else None
                    resolved[provisioner] = (
                        dataclasses.replace(found, reservations=None) if found is not None and not gate else found
                    )
                except CloudError:
                    resolved[provisioner] = None
            return resolved[provisioner]

        return instance, network

    def _offered_types(self, templates: Templates) -> Callable[[str], Sequence[InstanceType] | None]:
        """Provisioner → the instance types its node class offers now (one answer per provisioner and decision;
        None when the cloud cannot tell), for instance-type-not-found drift."""
        known: dict[str, Sequence[InstanceType] | None] = {}
        cloud = self.context.cloud

        def offered(provisioner: str) -> Sequence[InstanceType] | None:
            if provisioner not in known:
                constraint_set = templates.sets.get(provisioner)
                spec = constraint_set.launch_spec if constraint_set is not None else None
                try:
                    known[provisioner] = cloud.instance_types(provider=spec) if spec is not None else None
                except CloudError:
                    known[provisioner] = None
            return known[provisioner]

        return offered

    def _current_images(self, templates: Templates) -> Callable[[str, str], str | None]:
        """(provisioner, instance type) → the image a node launched now would get (one answer per pair and
        decision; None when the cloud cannot tell)."""
        known: dict[tuple[str, str], str | None] = {}
        cloud = self.context.cloud

        def current(provisioner: str, instance_type: str) -> str | None:
            if (provisioner, instance_type) not in known:
                constraint_set = templates.sets.get(provisioner)
                spec = constraint_set.launch_spec if constraint_set is not None else None  # built: it launches
                try:
                    known[provisioner, instance_type] = cloud.current_image(instance_type, spec)
                except CloudError:
                    known[provisioner, instance_type] = None
            return known[provisioner, instance_type]

        return current


__all__ = ["Disruption"]
