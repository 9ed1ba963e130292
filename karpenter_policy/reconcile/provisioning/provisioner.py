"""Provisioning: pending pods in, EC2 instances, Nodes and bindings out (Karpenter's provisioner).

Woken by the cluster state whenever a pod *becomes* pending (created, or marked Unschedulable by kube-scheduler), it
batches: the first such pod opens a window, each further one extends it, and it closes after `batch_idle` seconds
without one (1 s) or `batch_max` after it opened (10 s). Then every pod pending at that moment — read from the state
when the window closes, not when it opened — goes to the scheduler with the nodes that have room, the nodes being
launched, the DaemonSets and the node claim templates of the constraint sets in force (their admitted types at the
cloud's live offerings): the same code as `check --workloads`. Each new node of the plan is launched (all at once) —
a NodePool's after its NodeClaim is written (v1.14.1's provisioner `Create`; the launch fills it, insufficient
capacity deletes it, `launch_failed`) —, its Node registered and its pods bound; pods the plan puts on existing
nodes are bound (no kube-scheduler) or nominated. Only a launch's own batch is bound to a node whose kubelet has not
joined yet (`nodes.kubelet_joined`): pods a later batch plans onto such a node are nominated and *held* — retried
every `retry_interval`, and at once when its kubelet joins — so that a node that never joins (`liveness` deletes it)
takes no more pods than it was launched for. A NodePool's node is written with Karpenter v1's
`karpenter.sh/unregistered:NoExecute` taint, and no pod is bound there until its NodeClaim registers (`claimstatus`
removes the taint: v1.14.1's registration.go:93-103): its launch's pods wait in flight. A claim whose every offering
lacked capacity has its pods scheduled again in the same pass without the offerings the cloud just refused. Pods no
provisioner can take get a Warning Event `FailedScheduling` with the scheduler's reason, once per reason — a pod
Karpenter v1.14.1 ignores for its claims (`inputs.volumed`) on NodePools alone in v1.14.1's words ("Failed to
schedule pod, persistentvolumeclaim bound to non-existent persistentvolume (…)", `PodFailedToScheduleEvent`). A pod
with a claim is held while the claims, volumes and classes cannot be read (an error in the step's result, logged
once per reason), and looked at again every `retry_interval`.

**No pod is lost** — the invariant the tests hold it to: a provisionable pod that is not planned onto a launch in
flight is always either in an open batch window or covered by a retry that is due. A pod that becomes pending
opens or extends a window (whatever a pass is doing at that moment: the pass takes the window before it reads
the pods, so a pod that arrives meanwhile opens the next one); a batch that leaves pods pending (no provisioner
takes them, a launch failed) sets a retry `retry_interval` later; a new version of the constraint sets, a start
and a leader take-over (:meth:`Provisioner.resume`) open a window for whatever is pending; a launch dropped from
the in-flight registry (its Node never came) opens one for its pods.

While a window is open and quiet the batch is planned ahead (`ahead`); when it closes and nothing changed, that
plan is used and the launches start at once. While no window is open, the node claim templates are kept warm
(:meth:`Provisioner.warm`): built when the constraint sets change and looked at every :data:`WARM_INTERVAL`, so
that the first burst after a start, a new version of the sets or a refresh of the cloud's offerings does not wait
for the instance table to be built (0.3–0.7 s for the catalog's 1,392 types) inside its batch window.

As Karpenter's provisioner it records `karpenter_provisioner_scheduling_duration_seconds` (each scheduling of a
batch, inputs included) and `…_scheduling_simulation_duration_seconds` (each run of the scheduler), counts a claim
it launches for as a machine created (`karpenter_machines_created{reason="provisioning"}`; a disruption's
replacements with the command's reason), launched, registered (`karpenter_nodes_created`), and one that found no
capacity as terminated (`insufficient_capacity`), and nominates the pods it plans onto a node (an Event
`Nominated`, rate-limited as Karpenter's).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence

from karpenter_policy.api.v1.static import LEFT_OUT, NO_DYNAMIC_NODEPOOLS
from karpenter_policy.cloud.errors import CloudError, ConfigurationError, InsufficientCapacity, Throttled
from karpenter_policy.cloud.provider import Instance, LaunchRequest
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import pool_ref
from karpenter_policy.reconcile import events, logs
from karpenter_policy.reconcile.claims import objects as claim_objects
from karpenter_policy.reconcile.claims.conditions import LAUNCH_FAILED, LAUNCHED
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.provisioning import registration
from karpenter_policy.reconcile.provisioning.ahead import PlanAhead
from karpenter_policy.reconcile.provisioning.batcher import Batcher
from karpenter_policy.reconcile.provisioning.binder import Binder, Binding
from karpenter_policy.reconcile.provisioning.inputs import (
    SchedulingInputs,
    budgets_needed,
    inputs_version,
    scheduling_inputs,
)
from karpenter_policy.reconcile.provisioning.launcher import Launcher, LaunchOutcome, launch_request
from karpenter_policy.reconcile.provisioning.launchliveness import LAUNCH_TIMEOUT, LAUNCH_TIMEOUT_REASON
from karpenter_policy.reconcile.result import BatchWindow, LaunchedNode, ReconcileResult
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.inflight import InFlightNode
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord
from karpenter_policy.reconcile.templates import Templates
from karpenter_policy.scheduling import ClaimPlan, Plan, Pod, PodFailure, SchedulerOptions
from karpenter_policy.scheduling.plan import one_line
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.reservedclaims import RESERVED
from karpenter_policy.scheduling.vectors import as_resources

PROVISIONER = logs.logger("provisioner")

#: Seconds between two looks at the node claim templates while no window is open (see the module docstring): a
#: look costs a comparison when the cloud's answers are the ones the templates were built from.
WARM_INTERVAL = 30.0

NODE = logs.logger("node")

REASON_LAUNCHED = "Launched"
#: Karpenter's reason for the machines it creates for pending pods (`metrics.ProvisioningReason`).
PROVISIONING = "provisioning"


class Provisioner:
    """See the module docstring. `wake`: the event that wakes the provisioning thread (the constraint-set
    ConfigMap's `changed`, which its informer sets; a new one by default)."""

    def __init__(self, context: Context, wake: threading.Event | None = None) -> None:
        self.context = context
        options = context.options
        self.batcher = Batcher(options.batch_idle, options.batch_max, context.clock)
        self.ahead = PlanAhead(self.batcher, options.batch_idle, context.clock)
        self.launcher = Launcher(context.cloud, options.launch_parallelism, context.clock)
        self.binder = Binder(context.cluster, options.bind_parallelism)
        # v1.14.1's provisioner schedules with `DisableReservedCapacityFallback` (provisioner.go:393): a pod whose
        # reservations are promised to other claims waits for the next pass (its disruption simulations fall back)
        self.scheduler_options = SchedulerOptions(options.strategy, reserved_fallback=False)
        self._lock = threading.Lock()
        self._retry_at: float | None = None
        self._sets_changed = False
        self._warm_at = 0.0  # when the templates are next looked at, while no window is open
        self._reported: dict[str, str] = {}  # pod uid → the reason last reported (Event and log once per reason)
        self._nominated: dict[str, str] = {}  # pod uid → the node it was nominated to
        self._announced: set[str] = set()  # pods `notify` announced before the state saw them (not triggered twice)
        self._failing: dict[str, float] = {}  # NodeClaim name → when its launches began failing (not for capacity)
        self._budgets_outage = logs.Outage()  # the PodDisruptionBudgets' list failing: logged once, and once back
        self.wake = wake or threading.Event()  # set when the provisioning thread has something to do
        context.state.subscribe(self._on_change)

    # --- what wakes it -------------------------------------------------------------------------------------

    def _on_change(self, change: Change) -> None:
        """The state saw a pod become pending, a node with pods begin to be deleted (or be marked for deletion), or
        the kubelet of a node pods wait for join: open or extend the batch window (runs under the state's lock)."""
        if change.kind == "node":
            after = change.after
            began = isinstance(after, NodeRecord) and after.deleting and not (
                isinstance(change.before, NodeRecord) and change.before.deleting
            )
            # a disruption command's node marked for deletion (`ClusterState.mark_for_deletion`: the same record)
            marked = isinstance(after, NodeRecord) and change.before is after and (
                self.context.state.marked_for_deletion(after.name)
            )
            if isinstance(after, NodeRecord) and (began or marked):
                if self.context.state.workload_pods_on(after.name):
                    self._trigger()  # its pods are placed again (`inputs.moving`): room for them, launched if need be
                return
            if isinstance(after, NodeRecord) and after.joined and not (
                isinstance(change.before, NodeRecord) and change.before.joined
            ) and after.name in self._nominated.copy().values():
                self._trigger()
            return
        if change.kind != "pod" or not isinstance(change.after, PodRecord):
            return
        state = self.context.state
        if not state.is_pending(change.after.uid):
            return
        before = change.before
        if isinstance(before, PodRecord) and before.provisionable(state.unschedulable_only):
            return  # pending before too: its window or retry is already there
        with self._lock:
            if change.after.uid in self._announced:
                self._announced.discard(change.after.uid)
                return  # announced when it was created: the window it opened is already there
        self._trigger()

    def notify(self, uid: str = "") -> None:
        """A pod (`uid`) became pending, as a watch event tells before the state shows it (a simulation's
        driver): open or extend the batch window now, and not again when the state sees the pod."""
        if uid:
            with self._lock:
                self._announced.add(uid)
                if len(self._announced) > 100_000:  # announced pods that never showed up (deleted at once)
                    self._announced.clear()
        self._trigger()

    def _trigger(self) -> None:
        if self.batcher.trigger():  # a window opened: the thread waits for it to close (due) from now on
            self.wake.set()

    def resume(self) -> None:
        """A start or a leader take-over: whatever is pending now gets a window of its own."""
        if self.pending_pods():
            self._trigger()

    def sets_changed(self) -> None:
        """A new version of the constraint sets: pods still pending are tried again at once."""
        with self._lock:
            self._sets_changed = True
        self._warm_at = 0.0
        self.wake.set()

    def relaunch(self, pods: Sequence[str]) -> None:
        """Launches dropped from the in-flight registry leave these pods (uids) pending again."""
        state = self.context.state
        if any(state.is_pending(uid) for uid in pods):
            self._trigger()

    def next_due(self) -> float | None:
        """When the provisioner has something to do on its own: a window closes, a plan can be made ahead for it,
        or a retry is due."""
        due = self.batcher.due()
        ahead = self.ahead.due() if self.context.options.speculate else None
        for other in (ahead, self._retry_at):
            if other is not None:
                due = other if due is None else min(due, other)
        return due

    def pending_pods(self) -> list[PodRecord]:
        """The provisionable pods not planned onto a launch in flight."""
        planned = self.context.inflight.planned()
        return [p for p in self.context.state.pending() if p.uid not in planned]

    def unschedulable(self) -> frozenset[str]:
        """The pending pods (uids) the last batch that tried them found no place for (or could not read): they wait
        for a retry, and disruption does not wait for them (as Karpenter disrupts while they stay pending)."""
        return frozenset(self._reported.copy())  # a copy in one step: the provisioning thread may add to it

    def nominations(self) -> dict[str, str]:
        """Pending pod uid → the existing node the provisioner planned it onto, for kube-scheduler to bind
        (Karpenter's nominated nodes: disruption leaves them alone)."""
        return self._nominated.copy()

    # --- a pass --------------------------------------------------------------------------------------------

    def reconcile(self, result: ReconcileResult) -> None:
        """Report unreadable pods, close a due window and provision for it (or plan ahead)."""
        context = self.context
        pending = self.pending_pods()
        readable = self._readable(pending)
        result.pending = readable
        context.metrics.pods_pending.set(readable)
        self._forget(pending)
        window = self._take(pending)
        if window is None:
            if context.options.speculate and pending:
                self._plan_ahead()
            if context.options.speculate and self.batcher.due() is None:
                self.warm()
            return
        result.batch = window
        self._provision(result)
        self._warm_at = context.clock() + WARM_INTERVAL  # the pass has just built them
        context.metrics.reconcile_duration.observe(context.clock() - result.started)

    def warm(self) -> None:
        """Build the node claim templates now if they are due to be looked at (see the module docstring), so that
        the pass closing the next window finds them built; a cloud that cannot answer is left to that pass. Not a
        due time of its own: in real time the provisioning thread polls (`Provisioning.poll`); in virtual time
        (simulations) a look between events changes nothing, so none is scheduled."""
        now = self.context.clock()
        if now < self._warm_at:
            return
        self._warm_at = now + WARM_INTERVAL
        try:
            self.context.template_sets()
        except CloudError:
            return

    def _readable(self, pending: list[PodRecord]) -> int:
        """How many of the pending pods the scheduler can read; the others are reported (once per reason)."""
        state = self.context.state
        count = 0
        unreadable = []
        for record in pending:
            try:
                state.scheduling_pod(record)
            except PodSpecError as error:
                unreadable.append((record, f"{error.message} (at spec.{'.'.join(map(str, error.path))})"))
                continue
            count += 1
        self._report_unreadable(unreadable)
        return count

    def _forget(self, pending: list[PodRecord]) -> None:
        """A pod that is no longer pending is reported again if it ever is (and for another reason)."""
        waiting = {p.uid for p in pending}
        self._reported = {uid: why for uid, why in self._reported.items() if uid in waiting}
        self._nominated = {uid: node for uid, node in self._nominated.items() if uid in waiting}

    def _take(self, pending: list[PodRecord]) -> BatchWindow | None:
        now = self.context.clock()
        with self._lock:
            retry_due = self._retry_at is not None and now >= self._retry_at
            again = bool(pending) and self.batcher.due() is None and (self._sets_changed or retry_due)
            self._sets_changed = False
        if again:
            self.batcher.trigger()
            self._retry_at = None  # the batch this opens is the retry (the pass that closes it sets the next one)
        if not pending:
            self._retry_at = None
        window = self.batcher.take()
        if window is not None and not pending and not self._deleting_pods():
            self.ahead.take()
            return None  # the pods that opened it are gone (deleted, or bound by someone else)
        return window

    def _deleting_pods(self) -> bool:
        """Whether a node being deleted runs pods other than DaemonSets' (their room is provisioned for)."""
        state = self.context.state
        return any(state.workload_pods_on(node.name) for node in state.deleting_nodes())

    def _inputs(self, assigned: dict[str, tuple[str, Pod]] | None = None) -> SchedulingInputs:
        context = self.context
        return scheduling_inputs(
            context.state, context.inflight, assigned, pdbs=self._budgets(), now=context.wall_clock(),
        )

    def _budgets(self) -> Sequence[Obj]:
        """The PodDisruptionBudgets, read (outside the state's lock: a LIST must never hold the informers back) only
        when a NodePool's node being deleted runs pods. A list that fails reads as no budget: every such pod is
        placed again — room provisioned for a pod a budget would have kept, never none for one that moves; logged
        once per outage (`logs.Outage`), and once when the list works again."""
        context = self.context
        if not budgets_needed(context.state):
            return ()
        try:
            budgets = context.cluster.list(objects.POD_DISRUPTION_BUDGET).items
        except ClusterError as error:
            if self._budgets_outage.failed():
                PROVISIONER.warning(
                    "PodDisruptionBudgets unavailable (%s): the pods of nodes being deleted are all placed again",
                    error, extra=context.fields(),
                )
            return ()
        if failures := self._budgets_outage.worked():
            PROVISIONER.info("PodDisruptionBudgets listed again after %d failed list(s)", failures,
                             extra=context.fields())
        return budgets

    def _plan_ahead(self) -> None:
        def plan(templates: Templates, inputs: SchedulingInputs) -> Plan:
            return self._solve(inputs, templates, [*inputs.pending, *inputs.moving])

        try:
            self.ahead.maybe(self._inputs, self.context.loaded, self.context.template_sets, plan)
        except CloudError:
            return  # the pass that closes the window will say so

    def _solve(self, inputs: SchedulingInputs, templates: Templates, pods: list[Pod]) -> Plan:
        started = time.perf_counter()
        options = dataclasses.replace(self.scheduler_options, topology=templates.topology)
        plan = inputs.scheduler(templates.templates, options).solve(pods)
        self.context.metrics.scheduling_simulation_duration.observe(time.perf_counter() - started)
        return plan

    def _provision(self, result: ReconcileResult) -> None:
        context = self.context
        scheduling = time.perf_counter()  # Karpenter's scheduling duration: the inputs read, then the plan made
        ahead = self.ahead.take()
        unchanged = ahead is not None and ahead.inputs.version == inputs_version(context.state, context.inflight)
        inputs = ahead.inputs if ahead is not None and unchanged else self._inputs()  # not read twice: nothing moved
        PROVISIONER.info(
            "found %d provisionable pod(s)", len(inputs.pending), extra=context.fields(pods=len(inputs.pending))
        )
        planned_ahead = ahead is not None and ahead.fits(inputs, context.loaded)
        if ahead is not None:
            context.metrics.plans_ahead.labels(str(planned_ahead).lower()).inc()
        try:
            templates = ahead.templates if ahead is not None and planned_ahead else context.template_sets()
        except CloudError as error:
            context.error(result.errors, PROVISIONER, f"could not read the cloud's offerings, {error}")
            self._retry_at = context.clock() + context.options.retry_interval
            return
        self._report_held(inputs.held, result)
        pods = [*inputs.pending, *inputs.moving]
        moving = frozenset(pod.uid for pod in inputs.moving)  # placed, never bound: they run until drained
        assigned: dict[str, tuple[str, Pod]] = {}  # uid → (existing node, pod), this pass
        retry: list[ClaimPlan] = []
        deferred = False  # a pod waiting for reserved capacity (strict mode): tried again, never reported
        for round_ in range(1 + context.options.replans):
            if round_ > 0:  # some claims found no capacity: their pods again, without the refused offerings
                scheduling = time.perf_counter()
                try:
                    templates = context.template_sets()
                except CloudError as error:
                    context.error(result.errors, PROVISIONER, f"could not read the cloud's offerings, {error}")
                    break
                again = {pod.uid for pod in pods}
                inputs = self._inputs(assigned)
                pods = [pod for pod in [*inputs.pending, *inputs.moving] if pod.uid in again]
                if not pods:
                    break
            if round_ == 0 and ahead is not None and planned_ahead:
                plan = ahead.plan  # planned while the window was quiet, on exactly these inputs
            else:
                plan = self._solve(inputs, templates, pods)
            context.metrics.scheduling_duration.observe(time.perf_counter() - scheduling)
            result.plans.append(plan)
            deferred |= self._report_failures(plan, inputs, result, templates, moving)
            # launches first: binding hundreds of pods to existing nodes must not hold the CreateFleet calls back
            retry = self._launch(plan.claims, templates, result, moving)
            self._place_on_existing(plan, inputs, assigned, result, moving)
            if not retry:
                break
            pods = [pod for claim in retry for pod in claim.pods]
        context.metrics.pods_unschedulable.set(len(result.unschedulable))
        # Pods still pending (held for a node not joined yet among them): try again later.
        left = bool(result.unschedulable or result.errors or retry or result.held or inputs.held or deferred)
        self._retry_at = context.clock() + context.options.retry_interval if left else None

    # --- reporting -----------------------------------------------------------------------------------------

    def _report_failures(
        self, plan: Plan, inputs: SchedulingInputs, result: ReconcileResult, templates: Templates,
        moving: frozenset[str] = frozenset(),
    ) -> bool:
        """The pending pods the plan found no place for (a pod of a node being deleted is not reported: it runs); True
        when some wait for reserved capacity — v1.14.1's `ReservedOfferingError`: no Event, no error line, not counted
        unschedulable (`Results.Record` skips them, provisioner.go:428 logs them at debug), tried again next pass."""
        static = sorted(pool for pool, why in templates.left_out.items() if why == LEFT_OUT)
        no_dynamic = not templates.templates and bool(static) and bool(plan.failures)
        if no_dynamic:  # v1.14.1's Schedule on ErrNodePoolsNotFound: one line, every pending pod marked with it
            PROVISIONER.info(NO_DYNAMIC_NODEPOOLS, extra=self.context.fields(nodepools=static))
        deferred = [
            f.pod.key for f in plan.failures.values()
            if f.pod.uid not in moving and any(r.kind == RESERVED for r in f.reasons.values())
        ]
        if deferred:
            PROVISIONER.debug(
                "deferring scheduling decision for provisionable pod(s) to future simulation due to limited reserved "
                "offering capacity", extra=self.context.fields(pods=deferred[:5]),
            )
        waiting = frozenset(deferred)
        for failure in plan.failures.values():
            if failure.pod.uid in moving or failure.pod.key in waiting:
                continue
            message = failure.message()
            if no_dynamic and not failure.reasons and not failure.refused:
                message = f"{NO_DYNAMIC_NODEPOOLS}: {', '.join(static)}: {LEFT_OUT}"
            if failure.pod.uid in inputs.volume_ignored and failure.refused == failure.pod.shape.refused_v1:
                message = f"Failed to schedule pod, {failure.refused}"  # v1.14.1's PodFailedToScheduleEvent
            result.unschedulable[failure.pod.key] = message
            self._report_pod(inputs.records.get(failure.pod.uid), failure, message)
        return bool(deferred)

    def _report_pod(self, record: PodRecord | None, failure: PodFailure, message: str) -> None:
        uid = failure.pod.uid
        if self._reported.get(uid) == message:
            return
        self._reported[uid] = message
        PROVISIONER.error(  # a log line is one line: the Event keeps the reasons one per line
            "could not schedule pod, %s", one_line(message), extra=self.context.fields(pod=failure.pod.key)
        )
        if record is not None:
            self.context.events.publish(events.failed_scheduling(record.obj, message))

    def _report_unreadable(self, unreadable: list[tuple[PodRecord, str]]) -> None:
        for record, why in unreadable:
            message = f"cannot read the pod spec: {why}"
            if self._reported.get(record.uid) != message:
                self._reported[record.uid] = message
                PROVISIONER.error("could not schedule pod, %s", message, extra=self.context.fields(pod=record.key))
                self.context.events.publish(events.failed_scheduling(record.obj, message))

    def _report_held(self, held: list[tuple[PodRecord, str]], result: ReconcileResult) -> None:
        """Pods with a claim held while the volume kinds cannot be read: one error a reason in the result (logged
        once per pod and reason)."""
        for why in dict.fromkeys(why for _, why in held):
            pods = [record.key for record, reason in held if reason == why]
            result.errors.append(f"holding {len(pods)} pod(s) with claims ({', '.join(pods[:5])}): {why}")
        for record, why in held:
            message = f"cannot read its claims' volumes: {why}"
            if self._reported.get(record.uid) != message:
                self._reported[record.uid] = message
                PROVISIONER.error("holding pod, %s", message, extra=self.context.fields(pod=record.key))

    # --- acting on the plan --------------------------------------------------------------------------------

    def _place_on_existing(
        self, plan: Plan, inputs: SchedulingInputs, assigned: dict[str, tuple[str, Pod]], result: ReconcileResult,
        moving: frozenset[str] = frozenset(),
    ) -> None:
        context = self.context
        for node_name, placed in sorted(plan.existing.items()):
            pods = [pod for pod in placed if pod.uid not in moving]  # the room a running pod keeps: nothing to do
            if not pods:
                continue
            for pod in pods:
                assigned[pod.uid] = (node_name, pod)
            entry = context.inflight.get(node_name)
            known = context.state.node(node_name)
            if known is None or not known.joined:  # its kubelet has not joined: bound once it does (or never)
                result.held[node_name] = tuple(p.key for p in pods)
                self._nominate_existing(node_name, pods, inputs)
            elif entry is not None:  # a node being launched: its pods are the controller's to bind
                entry.pods.update((pod.uid, pod) for pod in pods)
                if entry.registered:
                    self.bind(node_name, pods, entry, result)
            elif context.options.bind_existing:
                self.bind(node_name, pods, None, result)
            else:
                result.nominated[node_name] = tuple(p.key for p in pods)
                self._nominate_existing(node_name, pods, inputs)

    def _nominate_existing(self, node_name: str, pods: Sequence[Pod], inputs: SchedulingInputs) -> None:
        """Nominate pods to a node that is there (an Event `Nominated` once per node a pod is planned onto)."""
        for pod in pods:
            if self._nominated.get(pod.uid) != node_name:
                self._nominated[pod.uid] = node_name
                record = inputs.records.get(pod.uid)
                if record is not None:
                    self.context.events.publish(events.nominated(record.obj, node_name))

    def _launch(
        self, claims: Sequence[ClaimPlan], templates: Templates, result: ReconcileResult,
        moving: frozenset[str] = frozenset(),
    ) -> list[ClaimPlan]:
        """Launch every claim, register and bind (but the `moving` pods: they run on a node being deleted, and go
        to the node once evicted and pending again); the claims that found no capacity at all."""
        if not claims:
            return []
        context = self.context
        PROVISIONER.info(
            "computed new node(s) to fit pod(s)",
            extra=context.fields(nodes=len(claims), pods=sum(len(c.pods) for c in claims)),
        )
        requests = []
        for claim in claims:
            template = templates.template(claim.template)
            # A token of its own for pods of a node being deleted: the same pods' first launch (when they were
            # pending) had the token of their uids, and EC2 would answer it with that instance — the node going.
            tokened = (dataclasses.replace(claim, template_hash=f"{claim.template_hash}/moving")
                       if any(pod.uid in moving for pod in claim.pods) else claim)
            request = launch_request(context.options.cluster_name, tokened, template, templates.sets[claim.template])
            requests.append(request)
            context.metrics.claim_created(claim.template, PROVISIONING, PROVISIONING, claim.min_values_relaxed)
            PROVISIONER.info(
                "launching node with %d pod(s) requesting %s from types %s",
                len(claim.pods),
                logs.resources_text(as_resources(claim.requests)),
                logs.options_text([o.instance_type for o in claim.options]),
                extra=context.fields(provisioner=claim.template),
            )
        written = self._write_claims(claims, requests, templates, result)
        kept = [(c, r, stored) for c, r, (ok, stored) in zip(claims, requests, written, strict=True) if ok]
        outcomes = self.launcher.launch([r for _, r, _ in kept])
        retry = []
        for (claim, _, stored), outcome in zip(kept, outcomes, strict=True):
            if outcome.instance is None:
                if self.launch_failed(claim, outcome, result, stored):
                    retry.append(claim)
                continue
            self.launched(claim, outcome, templates, result, stored=stored, moving=moving)
        return retry

    def _write_claims(
        self, claims: Sequence[ClaimPlan], requests: Sequence[LaunchRequest], templates: Templates,
        result: ReconcileResult,
    ) -> list[tuple[bool, Obj | None]]:
        """The NodeClaim of each NodePool launch, written before the launch as v1.14.1's provisioner `Create` does
        (`claims.objects.planned_claim`): (True, the claim as stored); (True, None) for a Provisioner's launch or a
        cluster that does not serve NodeClaims (launched without one); (False, None) when the write failed (not
        launched: its pods are planned again at the next pass)."""
        written: list[tuple[bool, Obj | None]] = []
        for claim, request in zip(claims, requests, strict=True):
            constraint_set = templates.sets[claim.template]
            if not constraint_set.is_nodepool:
                written.append((True, None))
                continue
            planned = claim_objects.planned_claim(
                constraint_set, request.client_token, claim.requirements,
                node_info.format_resource_vector(claim.requests), [o.instance_type for o in claim.options],
                claim.min_values,
            )
            try:
                written.append((True, self.context.claims.create(planned)))
            except ClusterError as error:
                self.context.error(result.errors, PROVISIONER, f"could not create nodeclaim, {error}",
                                   provisioner=claim.template, nodeclaim=objects.name(planned))
                written.append((False, None))
        return written

    def launch_replacements(
        self, claims: Sequence[ClaimPlan], salt: str, result: ReconcileResult, reason: str = "", v1_reason: str = ""
    ) -> list[str] | str:
        """Launch a disruption command's replacements and register their Nodes; no pod is bound to them (their
        pods still run on the nodes they replace). The names, or why a launch failed. `salt` makes the launches'
        client tokens the command's own; `reason` is the command's (`consolidation/replace`: the machines it
        creates are counted with it; a NodePool's NodeClaims with `v1_reason`, v1's: `underutilized`, `drifted`). A
        static NodePool's claims (static drift's replacement, the static provisioning's launches: `reconcile.static`)
        launch from its template (`Context.static_template_sets`), which no scheduling run is offered."""
        context = self.context
        templates = context.template_sets()
        if any(claim.template not in templates.sets for claim in claims):
            templates = templates.with_sets_of(context.static_template_sets())
        salted = []
        for claim in claims:
            if claim.template not in templates.sets:
                return f"{pool_ref(claim.template)} is no longer in the constraint sets"
            # A token of its own: the same pods may later need a launch of their own, which must not get this one.
            salted.append(dataclasses.replace(claim, template_hash=f"{claim.template_hash}/{salt}"))
        requests = [
            launch_request(context.options.cluster_name, c, templates.template(c.template), templates.sets[c.template])
            for c in salted
        ]
        for claim in salted:
            context.metrics.claim_created(claim.template, reason, v1_reason, claim.min_values_relaxed)
        written = self._write_claims(salted, requests, templates, result)
        if not all(ok for ok, _ in written):
            for _, stored in written:
                if stored is not None:
                    self._drop_claim(objects.name(stored))
            return "could not create the replacements' nodeclaims"
        names: list[str] = []
        failed: list[str] = []
        outcomes = self.launcher.launch(requests)
        for claim, outcome, (_, stored) in zip(salted, outcomes, written, strict=True):
            if outcome.instance is None:
                self.launch_failed(claim, outcome, result, stored)
                failed.append(str(outcome.error))
                continue
            names.append(self.launched(claim, outcome, templates, result, bind=False, stored=stored))
        return "; ".join(failed) if failed else names

    def _drop_claim(self, name: str) -> None:
        """Delete a NodeClaim whose launch did not happen and let it go at once (no instance: `finalize` removes the
        finalizer of a claim without a providerID); a failure is logged (termination finalizes it later)."""
        try:
            self.context.claims.delete(name)
            self.context.claims.release(name)
        except ClusterError as error:
            PROVISIONER.warning("could not delete nodeclaim %s, %s", name, error,
                                extra=self.context.fields(nodeclaim=name))

    def launch_failed(
        self, claim: ClaimPlan, outcome: LaunchOutcome, result: ReconcileResult, stored: Obj | None = None
    ) -> bool:
        """Log and count a failed launch; whether it failed for capacity alone (worth re-planning). Its NodeClaim
        (`stored`) goes as v1.14.1's launch.go has it: deleted on insufficient capacity; otherwise Launched Unknown
        `LaunchFailed` is written, then it is deleted too (here the pods are planned again, not the claim
        relaunched; failing for `LAUNCH_TIMEOUT`, it is v1.14.1's launch timeout: `_launch_timed_out`)."""
        error = outcome.error
        assert error is not None
        if stored is not None:
            name = objects.name(stored)
            if not isinstance(error, InsufficientCapacity):
                try:
                    self.context.claims.launch_failed(name, str(error))
                except ClusterError as failure:
                    PROVISIONER.warning("could not write nodeclaim %s, %s", name, failure,
                                        extra=self.context.fields(nodeclaim=name))
                self._launch_timed_out(stored, str(error))
            else:
                self._failing.pop(name, None)  # a new claim for v1.14.1 (it deletes this one): timed afresh
            self._drop_claim(name)
        metrics = self.context.metrics
        reason = "cloud"
        if isinstance(error, InsufficientCapacity):
            reason = "insufficient_capacity"
            for failed in error.failed:
                metrics.insufficient_capacity.labels(claim.template, failed.capacity_type).inc()
            # as Karpenter deletes the machine (v0.31) or the NodeClaim (v1.14.1's launch.go)
            capacity = objects.labels(stored).get(wk.CAPACITY_TYPE, "") if stored is not None else ""
            metrics.claim_disrupted(claim.template, reason, "insufficient_capacity", capacity)
        elif isinstance(error, ConfigurationError):
            reason = "configuration"
        elif isinstance(error, Throttled):
            reason = "throttled"
        metrics.launch_errors.labels(claim.template, reason).inc()
        self.context.error(
            result.errors, PROVISIONER, f"could not launch node, {error}", provisioner=claim.template,
            pods=len(claim.pods),
        )
        return isinstance(error, InsufficientCapacity)

    def _launch_timed_out(self, stored: Obj, message: str) -> None:
        """v1.14.1 keeps a claim whose launch failed (not for capacity) and launches it again until `LaunchTimeout`
        (liveness.go): then it is deleted, a failure for its NodePool's `NodeRegistrationHealthy` with the
        `LaunchFailed` reason and message. Here the claim is deleted at each failure and the same pods planned again
        name the same claim: a claim of that name failing `LAUNCH_TIMEOUT` after its first failure, with no launch
        between, is that timeout."""
        context = self.context
        name, now = objects.name(stored), context.clock()
        if len(self._failing) > 10_000:
            self._failing.clear()
        since = self._failing.setdefault(name, now)
        if now - since < LAUNCH_TIMEOUT:
            return
        del self._failing[name]
        labels = objects.labels(stored)
        context.metrics.nodeclaims_disrupted.labels(
            LAUNCH_TIMEOUT_REASON, labels.get(wk.NODEPOOL, ""), labels.get(wk.CAPACITY_TYPE, "")
        ).inc()
        launched = {"type": LAUNCHED, "status": "Unknown", "reason": LAUNCH_FAILED, "message": message[:300]}
        context.registration_health.failed({**stored, "status": {"conditions": [launched]}})

    def launched(
        self, claim: ClaimPlan, outcome: LaunchOutcome, templates: Templates, result: ReconcileResult,
        bind: bool = True, stored: Obj | None = None, moving: frozenset[str] = frozenset(),
    ) -> str:
        """Fill its NodeClaim (`stored`, written before the launch) with what the launch resolved, register the Node
        of a launched instance and (`bind`) bind the claim's pods to it; the Node's name."""
        context = self.context
        metrics = context.metrics
        instance = outcome.instance
        assert instance is not None
        template = templates.template(claim.template)
        constraint_set = templates.sets[claim.template]
        metrics.launched(claim.template, instance.capacity_type)
        metrics.launch_duration.labels(claim.template).observe(outcome.seconds)
        for failed in instance.failed_offerings:
            metrics.insufficient_capacity.labels(claim.template, failed.capacity_type).inc()
        if instance.failed_offerings:
            refused = "; ".join(str(f) for f in instance.failed_offerings[:5])
            PROVISIONER.info(
                "fell back to the next offering after insufficient capacity: %s", refused,
                extra=context.fields(provisioner=claim.template, refused=len(instance.failed_offerings)),
            )
        node = node_info.node_object(instance, template, constraint_set, claim.requirements)
        planned = {pod.uid: pod for pod in claim.pods if pod.uid not in moving} if bind else {}
        entry = InFlightNode(instance, node, claim.template, context.clock(), planned)
        if stored is not None:
            self._failing.pop(objects.name(stored), None)
            self._fill_claim(stored, node, instance)
            entry.claim_created = True
            node["metadata"]["ownerReferences"] = [claim_objects.node_reference(stored)]
        context.inflight.add(entry)
        launched_offering = (instance.instance_type, instance.zone)
        price = next((o.price for o in outcome.request.options if (o.instance_type, o.zone) == launched_offering), None)
        result.launched.append(LaunchedNode(
            entry.name, instance.id, instance.instance_type, instance.zone, instance.capacity_type, claim.template,
            tuple(p.key for p in claim.pods if p.uid not in moving) if bind else (), price,
        ))
        text = (
            f"launched instance {instance.id}, type {instance.instance_type}, zone {instance.zone}, "
            f"capacity {instance.capacity_type}"
        )
        PROVISIONER.info(text, extra=context.fields(provisioner=claim.template, node=entry.name, pods=len(claim.pods)))
        self.register(entry, result)
        if entry.registered:
            context.event(entry.node, REASON_LAUNCHED, text)
            if bind:
                self._nominate(entry.name, claim.pods)
                self.bind(entry.name, claim.pods, entry, result)
        return entry.name

    def _fill_claim(self, stored: Obj, node: Obj, instance: Instance) -> None:
        """Write what the launch resolved on its NodeClaim (launch.go `PopulateNodeClaimDetails`, Launched True);
        a failure is logged: the claim stays Launched Unknown while its Node registers."""
        name = objects.name(stored)
        try:
            self.context.claims.launched(name, claim_objects.launched_status(node, instance),
                                         claim_objects.node_labels(node))
        except ClusterError as error:
            PROVISIONER.warning("could not write the launch on nodeclaim %s, %s", name, error,
                                extra=self.context.fields(nodeclaim=name))

    def _nominate(self, node: str, pods: Sequence[Pod]) -> None:
        """Karpenter's `Nominated` Event for pods planned onto a node being launched for them."""
        for pod in pods:
            record = self.context.state.pod(pod.uid)
            if record is not None:
                self.context.events.publish(events.nominated(record.obj, node))

    def _awaiting_registration(self, node: str, entry: InFlightNode | None) -> bool:
        """Whether the node carries the unregistered taint, as the state shows it (else as the launch wrote it)."""
        record = self.context.state.node(node)
        if record is not None:
            return node_info.awaiting_registration(record.obj)
        return entry is not None and node_info.awaiting_registration(entry.node)

    def register(self, entry: InFlightNode, result: ReconcileResult) -> None:
        error = registration.register(self.context.cluster, entry, self.context.claims)
        if error is not None:  # retried on the next pass
            self.context.error(result.errors, NODE, f"could not register node {entry.name}, {error}", node=entry.name)
        else:
            self.context.metrics.registered(entry.template, created=not entry.adopted)

    def bind(self, node: str, pods: Sequence[Pod], entry: InFlightNode | None, result: ReconcileResult) -> None:
        """Bind the pods to the node — unless it still carries `karpenter.sh/unregistered` (a NodePool's node whose
        claim has not registered: v1.14.1 keeps every pod off it until then, registration.go:93-103): a launch's pods
        are bound once it registers (`lifecycle.settle`), another node's are held and planned again."""
        context = self.context
        if self._awaiting_registration(node, entry):
            if entry is None:  # not a launch in flight, whose pods `settle` binds: planned again after a while
                result.held[node] = tuple(sorted({*result.held.get(node, ()), *(p.key for p in pods)}))
            return
        bindings = [Binding(p.namespace, p.name, p.uid, node) for p in pods]
        bound = []
        for outcome in self.binder.bind(bindings):
            if outcome.settled and entry is not None:
                entry.bound.add(outcome.binding.uid)
            if outcome.outcome == "bound":
                bound.append(f"{outcome.binding.namespace}/{outcome.binding.pod}")
            elif not outcome.settled:
                context.error(
                    result.errors, PROVISIONER, f"could not bind pod to node {node}, {outcome.error}",
                    pod=f"{outcome.binding.namespace}/{outcome.binding.pod}",
                )
        if bound:
            result.bound[node] = tuple(sorted({*result.bound.get(node, ()), *bound}))
            context.metrics.pods_bound.inc(len(bound))
            PROVISIONER.info("Bound %d pod(s) to node %s", len(bound), node, extra=context.fields(node=node))


__all__ = ["PROVISIONING", "REASON_LAUNCHED", "Provisioner"]
