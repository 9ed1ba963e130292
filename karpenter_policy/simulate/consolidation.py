"""What consolidation would do now to a snapshot's fleet (`plan` with BASE = HEAD): this project's controller's own
disruption decisions (`reconcile/disruption/decider.py`, Karpenter v0.31's consolidation deprovisioners: empty,
multi-node, single-node) run on the snapshot — Karpenter's ordered moves. A Provisioner's command runs alone,
carried out on the state before the next is decided (v0.31.1); NodePools' commands run side by side as the
controller's queue holds them (`reconcile/disruption/queue.py`, Karpenter v1.14.1's orchestration queue): a command
started, the next is decided at once, with the nodes of the commands under way left out and counted in their
NodePool's budget (`Inputs.disrupting`) and their replacements no candidates (`Inputs.protected`; not initialized,
no room for a candidate's pods); a Provisioner's command waits until none is under way. In virtual seconds from the
plan's start, a command starts once held for validation (the controller's 15 s) and is done once its replacements
are initialized (`Timing.node_startup`) and its nodes drained (`waves.drain_of`); when nothing more can start, time
moves to the next command done (the moves started after it are of the next `wave`). A NodePool's command's pods stay
bound to its nodes until the drain, and each later decision places them again (v1.14.1's `SimulateScheduling`,
core pkg/controllers/disruption/helpers.go:99).

The snapshot is fed to the controller's :class:`~karpenter_policy.reconcile.state.cluster.ClusterState` as its
informers would feed it, after one translation: a node of a HEAD Provisioner is *adopted* — annotated with its
constraint set's hash, as if this controller had registered it (Karpenter registered it), and given its Ready
condition when the snapshot has no conditions (the plan reads such a node as Ready) and its type's allocatable from
the catalog when the snapshot has none. Whether it is initialized is what the snapshot says (Karpenter's
`karpenter.sh/initialized` label): one without it is given no conditions, so that the controller too counts it
not initialized — never a candidate, and no room for the pods of one (Karpenter v0.31 takes and counts only
initialized nodes).

A NodePool's node follows Karpenter v1.14.1 as the controller decides for it (`consolidationPolicy`, budgets per
reason — `Empty`, `Underutilized` —, `do-not-disrupt` only when "true"): it is consolidatable once the NodePool's
`consolidateAfter` has passed since its NodeClaim's `status.lastPodEventTime` (else since its creation; `Never`:
never), and a node that takes pods in a move has a pod event then — it is not consolidatable again within the moves
(`consolidateAfter` has not passed; `0s` excepted). Why such a node is not a candidate reads in v1.14.1's words
(`disruption/consolidation.go` `ShouldDisrupt`, `disruption/emptiness.go`, `state/statenode.go`
`ValidateNodeDisruptable`, `disruption/events/events.go`). Its candidates go by price over reschedule cost, highest
first, as v1.14.1's `sortCandidates` (the decider's `balanced.ordered`; single-node one NodePool at a time in turn).

A command is carried out as the controller ends it: a Provisioner's pods go where its scheduling simulation put them
(room on other nodes, or the new node it launches, the cheapest offering of the command's options); a NodePool's,
at its drain, where the provisioner's simulation then puts them (initialized nodes first, a replacement in flight
when none has room, a new node — `provisioning-N` — only when nothing else takes them), the nodes taking them
having a pod event then; and the nodes are gone. A replacement is a candidate of a later command only once
initialized: a Provisioner's at once (its move is complete when its replacement is up), a NodePool's once its
command is done. Expiry and drift are left out (decided from the consolidation stages on: BASE = HEAD changes nothing).

The snapshot's PersistentVolumeClaims, PersistentVolumes and StorageClasses feed the state's volume index, each kind
the snapshot read marked listed (`commands.plan.volumes.kinds_read`): the controller's simulation keeps a pod in its
volume's zone, so a move that would take it out is not offered. A kind the snapshot did not read is not listed:
the controller does not disrupt a node whose pods' volumes it cannot read ("cannot read its pods' volumes").

The work is bounded by a budget in seconds over all the moves (`plan --consolidation-timeout`), passed to each
decision as its multi-node and single-node budgets (the controller's, Karpenter's 1 and 3 minutes, per decision):
past it, the moves found so far, with a note.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import functools
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence

from karpenter_policy.api.constraintset import ConstraintSet, provider_settings
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.api.v1 import budgets as v1budgets
from karpenter_policy.api.v1.objects import NodePool
from karpenter_policy.api.v1.static import LEFT_OUT
from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.proof.placement import HOURS_PER_MONTH
from karpenter_policy.commands.compile.nodepools import nodepool_constraint_set
from karpenter_policy.commands.plan.consolidation import Consolidation, Move, NotCandidate
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import Fleet, FleetNode
from karpenter_policy.commands.plan.pdbstate import PdbBudgets
from karpenter_policy.commands.plan.snapshot import Snapshot
from karpenter_policy.commands.plan.volumes import kinds_read
from karpenter_policy.commands.plan.waves import Timing, drain_of
from karpenter_policy.kube import objects
from karpenter_policy.kube.budgetcounts import BudgetCounts
from karpenter_policy.kube.objects import Obj
from karpenter_policy.kube.volumes import VOLUME_KINDS
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import allocatable
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.pools import owner_labels, pool_name
from karpenter_policy.model.resources import CPU
from karpenter_policy.reconcile.disruption.budgets import budget_mapping
from karpenter_policy.reconcile.disruption.decider import (
    DRIFT,
    WHEN_EMPTY,
    Candidate,
    Command,
    Decider,
    Decision,
    Inputs,
    consolidatable_in,
    consolidation_policy,
)
from karpenter_policy.reconcile.disruption.queue import Commands, Underway, runs_side_by_side
from karpenter_policy.reconcile.disruption.view import disruption_view
from karpenter_policy.reconcile.options import DEFAULT_VALIDATION
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import Change, ClusterState
from karpenter_policy.reconcile.state.records import NodeRecord
from karpenter_policy.reconcile.state.rescheduled import movable
from karpenter_policy.reconcile.templates import Templates
from karpenter_policy.scheduling import ClaimPlan, InstanceTable, NodeClaimTemplate, Plan, SchedulerOptions
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.templates import by_weight
from karpenter_policy.scheduling.vectors import as_resources

__all__ = ["MAX_MOVES", "consolidate_now"]

#: Commands looked for at most (each one removes a node at least, so a fleet of this many nodes is never cut short).
MAX_MOVES = 1000
#: Karpenter v0.31.1's words for the nodes it does not take (`deprovisioning/types.go` `NewCandidate`,
#: `deprovisioning/consolidation.go` `ShouldDeprovision`).
NOT_INITIALIZED = "state node isn't initialized"
#: Karpenter v1.14.1's (`state/statenode.go` `ValidateNodeDisruptable`).
V1_NOT_INITIALIZED = "node isn't initialized"
#: The plan's default timing (`plan --node-startup`, `--pod-startup`).
TIMING = Timing()


def _constraint_sets(head: PolicySide, catalog: Catalog, notes: list[str]) -> dict[str, ConstraintSet]:
    """HEAD's Provisioners as the controller would run them (their sets, as `compile` makes them); one that cannot
    be made is a note, and its nodes are not the controller's."""
    sets: dict[str, ConstraintSet] = {}
    for name, document in sorted(head.nodepools.items()):
        try:
            pool = NodePool.from_document(document)
            ref = pool.node_class_ref
            node_class = head.node_classes.get(ref.name) if ref is not None and ref.is_ec2_node_class else None
            # ValueError too for another provider's class (`api.v1.managed`): the AWS provider leaves its nodes alone
            constraint_set = nodepool_constraint_set(pool, node_class, version="plan", sources=(), catalog=catalog)
        except ValueError as error:
            notes.append(f"nodepool {name} cannot be run by the controller ({error}): its nodes are left out")
            continue
        sets[constraint_set.pool] = constraint_set
    for name, document in sorted(head.provisioners.items()):
        try:
            provisioner = Provisioner.from_document(document)
        except ValueError as error:
            notes.append(f"provisioner {name} cannot be run by the controller ({error}): its nodes are left out")
            continue
        template = head.node_templates.get(provisioner.provider_ref.name) if provisioner.provider_ref else None
        provider = provider_settings(provisioner, (template.get("spec") or {}) if template is not None else None)
        sets[name] = ConstraintSet.of(provisioner, version="plan", sources=(), region=catalog.region,
                                      provider=provider, instance_types=catalog)
    return sets


def _templates(sets: Mapping[str, ConstraintSet], catalog: Catalog) -> tuple[Templates, list[str]]:
    table = InstanceTable.of_catalog(catalog)
    out, notes = Templates(), []
    for name, constraint_set in sets.items():
        if constraint_set.is_static:  # as the controller's templates (`Context.template_sets`): never consolidated
            out.left_out[name] = LEFT_OUT
            notes.append(f"nodepool {pool_name(name)} is static: its nodes are not consolidated")
            continue
        try:
            out.templates.append(NodeClaimTemplate.from_constraint_set(table, constraint_set))
        except ValueError as error:  # a kubelet setting the node arithmetic cannot read
            kind = "nodepool" if constraint_set.is_nodepool else "provisioner"
            notes.append(f"{kind} {pool_name(name)} cannot launch ({error}): its nodes are not consolidated")
            continue
        out.sets[name] = constraint_set
    out.templates.sort(key=by_weight)
    return out, notes


def _resources(instance_type: InstanceType | None) -> dict[str, str]:
    if instance_type is None:
        return {}
    return {k: (f"{v}m" if k == CPU else str(v)) for k, v in allocatable(instance_type).items()}


def _adopted(node: Obj, constraint_set: ConstraintSet, types: Mapping[str, InstanceType]) -> Obj:
    adopted = copy.deepcopy(node)
    metadata = adopted.setdefault("metadata", {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), node_info.ANNOTATION_HASH: constraint_set.hash}
    if not isinstance(adopted.get("status"), dict):  # a status of another shape tells nothing: none, as the state's
        adopted["status"] = {}
    status = adopted["status"]
    if objects.labels(node).get(wk.INITIALIZED) != "true":
        status["conditions"] = []  # Karpenter has not initialized it: to the controller, not yet initialized either
    elif not status.get("conditions"):
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    if not status.get("allocatable"):
        resources = _resources(types.get(objects.labels(node).get(wk.INSTANCE_TYPE, "")))
        status["allocatable"] = status["capacity"] = resources
    return adopted


def _launched(name: str, claim: ClaimPlan, constraint_set: ConstraintSet, types: Mapping[str, InstanceType], *,
              initialized: bool) -> Obj:
    """The Node a command's replacement becomes: its launch choice's type, zone and capacity type; `initialized`
    (Karpenter's `karpenter.sh/initialized` label) or not yet."""
    launch = claim.launch
    instance_type = launch.instance_type if launch is not None else ""
    labels = {**constraint_set.labels, wk.HOSTNAME: name, wk.INSTANCE_TYPE: instance_type,
              wk.ZONE: launch.zone if launch is not None else "", wk.CAPACITY_TYPE:
              launch.capacity_type if launch is not None else wk.CAPACITY_ON_DEMAND,
              **owner_labels(constraint_set.pool), **({wk.INITIALIZED: "true"} if initialized else {}),
              "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    resources = {k: str(v) for k, v in as_resources(claim.allocatable).items()}  # its template's node arithmetic
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {},
            "status": {"allocatable": resources, "capacity": resources}}
    return _adopted(node, constraint_set, types)


def _initialized(node: Obj) -> Obj:
    """A launched node once Karpenter has initialized it: labelled so, and Ready."""
    metadata = node["metadata"]
    return {**node, "metadata": {**metadata, "labels": {**metadata["labels"], wk.INITIALIZED: "true"}},
            "status": {**node["status"], "conditions": [{"type": "Ready", "status": "True"}]}}


class _Run:
    """One run: the state, the decider, and the moves so far."""

    def __init__(self, snapshot: Snapshot, fleet: Fleet, head: PolicySide, catalog: Catalog, now: dt.datetime,
                 timing: Timing) -> None:
        self.fleet, self.now, self.timing = fleet, now, timing
        #: the commands under way (the controller's queue) and when each finishes, in seconds from `now`
        self.underway = Commands()
        self.finishes: dict[int, float] = {}
        self.clock, self.wave = 0.0, 0
        self.fleet_pods = {p.key: p for pods in fleet.pods_on.values() for p in pods}
        self.types = {t.name: t for t in catalog}
        self.result = Consolidation()
        self.sets = _constraint_sets(head, catalog, self.result.notes)
        self.templates, notes = _templates(self.sets, catalog)
        self.result.notes += notes
        self.state = ClusterState()
        self.pdbs = list(snapshot.pdbs)
        #: the budgets' counts, moved by every pod change the state applies from here on (the snapshot's pods too)
        self.pdb_counts = BudgetCounts(self.pdbs)
        self.state.subscribe(self._counted)
        self.decider = Decider(SchedulerOptions())
        self.workload = {p.key: p.workload for pods in fleet.pods_on.values() for p in pods}
        #: when a pod was last bound to or left each node (Karpenter v1's consolidateAfter counts from it)
        self.pod_events = {name: node.claim.last_pod_event for name, node in fleet.nodes.items()
                           if node.claim is not None and node.claim.last_pod_event is not None}
        for node in snapshot.nodes:
            fleet_node = fleet.nodes.get(objects.name(node))
            owner = fleet_node.owner if fleet_node is not None else None
            constraint_set = self.sets.get(owner) if owner is not None else None
            adopted = _adopted(node, constraint_set, self.types) if constraint_set is not None else node
            self.state.apply(objects.NODE, "ADDED", adopted)
        read = kinds_read(snapshot)
        for volume_kind in VOLUME_KINDS:  # a kind read is the cluster's; one not read is unknown, never "none"
            for item in snapshot.of_kind(volume_kind.kind):
                self.state.apply(volume_kind, "ADDED", item)
            if volume_kind.kind in read:
                self.state.volumes_listed(volume_kind)
        for kind, items in ((objects.DAEMON_SET, snapshot.daemon_sets), (objects.POD, snapshot.pods)):
            for item in items:
                self.state.apply(kind, "ADDED", item)
        self._launches = self._provisioned = 0

    def _counted(self, change: Change) -> None:
        """A pod's change moves the budgets' counts (`kube.budgetcounts`)."""
        if change.kind == "pod":
            self.pdb_counts.change(change.before.obj if change.before is not None else None,
                                   change.after.obj if change.after is not None else None)

    def inputs(self) -> Inputs:
        view = disruption_view(self.state)
        pending = []
        for record in self.state.pending():
            try:
                pending.append(self.state.scheduling_pod(record))
            except PodSpecError:
                continue
        return Inputs(view, self.templates, self.pdbs, self.now, self.underway.protected(), pending=pending,
                      pod_events=self.pod_events, disrupting=self.underway.disrupting(),
                      pdb_budgets=self.pdb_counts.budgets())

    def not_candidates(self, blocked: Mapping[str, str]) -> None:
        """Why each Karpenter node left after the moves is not taken: the last decision's reasons (a budget,
        do-not-evict, what a single-node attempt found …), else Karpenter's own words for it (v0.31.1's for a
        Provisioner's node, v1.14.1's for a NodePool's)."""
        found = dict(blocked)
        inputs = self.inputs()
        for record in self.state.nodes():
            if not record.ours or record.name in found:
                continue
            constraint_set = self.sets.get(record.provisioner or "")
            if constraint_set is not None and constraint_set.is_nodepool:
                why = _nodepool_reason(inputs, record, constraint_set, bool(movable(self.state.pods_on(record.name))))
                if why:
                    found[record.name] = why
                continue
            if not record.initialized:
                found[record.name] = NOT_INITIALIZED
            elif constraint_set is not None and not constraint_set.consolidation_enabled:
                found[record.name] = f'Provisioner "{constraint_set.name}" has consolidation disabled'
            elif record.annotations.get(wk.DO_NOT_CONSOLIDATE) == "true":
                found[record.name] = f"{wk.DO_NOT_CONSOLIDATE} annotation exists"
        for name, node in self.fleet.nodes.items():
            if node.nodepool is None and node.provisioner is not None and node.provisioner not in self.sets:
                found.setdefault(name, f'provisioner "{node.provisioner}" can\'t be resolved for state node')
        self.result.not_candidates = [NotCandidate(n, why) for n, why in sorted(found.items())]

    def start(self, command: Command, inputs: Inputs) -> None:
        """The command under way: its replacements launched (initialized later when it runs beside others, at once
        when alone) and its nodes marked for deletion. A Provisioner's command is carried out before the next
        decision (v0.31.1), so its pods go where its simulation put them now. A NodePool's command's pods stay bound
        to its nodes until the drain (:meth:`finish`), as v1.14.1's: each later decision's simulation places them
        again (`SimulateScheduling`'s `deletingNodes.CurrentlyReschedulablePods`, core
        pkg/controllers/disruption/helpers.go:99)."""
        evicted: Counter[str] = Counter()
        for candidate in command.candidates:
            for pod in candidate.pods:
                evicted[self.workload.get(pod.key, pod.key)] += 1
        side_by_side = runs_side_by_side(command)
        moving = {pod.uid for c in command.candidates for pod in c.pods}
        targets: dict[str, str] = {}
        if not side_by_side:
            targets = _targets(self.decider.simulate(inputs, command.candidates), command.candidates)
        launched, names = [], []
        for claim in command.replacements:
            self._launches += 1
            name = f"consolidation-{self._launches}"
            node = _launched(name, claim, self.sets[claim.template], self.types, initialized=not side_by_side)
            self.state.apply(objects.NODE, "ADDED", node)
            if not side_by_side:
                targets.update({pod.uid: name for pod in claim.pods if pod.uid in moving})
            launched.append(claim.instance_type)
            names.append(name)
        self.state.mark_for_deletion(command.names)  # as the controller's queue starts it (`MarkForDeletion`)
        if not side_by_side:
            self._bind(command, targets)
        saved = command.savings * HOURS_PER_MONTH if command.savings is not None else None
        self.clock += DEFAULT_VALIDATION  # each consolidation is held 15 s and checked again before it starts
        start = self.now + dt.timedelta(seconds=self.clock) if side_by_side else None
        self.result.moves.append(Move(command.stage, command.action, command.names, tuple(launched), saved,
                                      dict(evicted), command.why, self.wave if side_by_side else None, start))
        underway = Underway(command, names, self.clock)
        self.underway.start(underway)
        self.finishes[id(underway)] = self.clock + self.seconds(command, bool(names))

    def _bind(self, command: Command, targets: Mapping[str, str]) -> None:
        """The command's pods bound to the nodes `targets` names (pod uid → node); a node that takes pods has a pod
        event then. A pod without a target — a DaemonSet's or a finished pod — goes with its node."""
        for name in sorted(command.names):
            for record in self.state.pods_on(name):
                target = targets.get(record.uid)
                if target is None:
                    continue
                moved = {**record.obj, "spec": {**record.obj["spec"], "nodeName": target}}  # the rest shared
                self.pod_events[target] = self.now
                self.state.apply(objects.POD, "MODIFIED", moved)

    def _drained(self, command: Command) -> None:
        """A NodePool's command drained: its pods, evicted, are placed as the provisioner's simulation places them
        now — the room of the nodes left (first fit, as the plan's waves place a drain's pods), the replacements in
        flight counted as v1.14.1's provisioner counts them, the other nodes being deleted keeping their pods' room
        (`deletingNodes.CurrentlyReschedulablePods`) — and kube-scheduler binds them there. A pod only a new node
        takes gets one, launched for it as provisioning launches (`provisioning-N`, initialized when it binds); one
        nothing takes is left pending."""
        plan = self.decider.simulate(self.inputs(), command.candidates)
        targets = _targets(plan, command.candidates)
        for claim in plan.claims:
            pods = [pod for pod in claim.pods if pod.uid not in targets]
            if not pods:
                continue
            self._provisioned += 1
            name = f"provisioning-{self._provisioned}"
            node = _launched(name, claim, self.sets[claim.template], self.types, initialized=True)
            self.state.apply(objects.NODE, "ADDED", node)
            targets.update({pod.uid: name for pod in pods})
        self._bind(command, targets)
        moving = {pod.uid for c in command.candidates for pod in c.pods}
        for name in sorted(command.names):  # nothing takes them: pending (unbound) from the drain on
            for record in self.state.pods_on(name):
                if record.uid in moving and record.uid not in targets:
                    pending = {**record.obj, "spec": {k: v for k, v in record.obj["spec"].items() if k != "nodeName"}}
                    self.state.apply(objects.POD, "MODIFIED", pending)

    @functools.cached_property
    def pdb_budgets(self) -> PdbBudgets:
        """The snapshot's PodDisruptionBudgets, as the waves read them (worked out once, when a drain is timed)."""
        return PdbBudgets(self.fleet.pdbs, self.fleet.pod_objects)

    def seconds(self, command: Command, launches: bool) -> float:
        """How long a command takes from its start until its nodes are gone: its replacements initialized
        (`--node-startup`), then its nodes drained — the longest drain of its nodes, PodDisruptionBudgets taking
        their pods a few at a time (`waves.drain_of`, as the rollout's waves)."""
        drain = 0.0
        for candidate in command.candidates:
            node = self.fleet.nodes.get(candidate.name) or FleetNode(  # one the moves launched: no annotation
                candidate.name, candidate.provisioner, candidate.instance_type, candidate.zone,
                candidate.capacity_type, None, {}, {})
            pods = [self.fleet_pods[pod.key] for pod in candidate.pods if pod.key in self.fleet_pods]
            found = drain_of(node, pods, self.pdb_budgets, self.timing, v1=True)
            # a drain something blocks is no candidate of the decider's (do-not-disrupt, a PDB allowing none)
            drain = max(drain, found.seconds if found.blocked is None else self.timing.pod_startup)
        return (self.timing.node_startup if launches else 0.0) + drain

    def finish(self, underway: Underway) -> None:
        """The command ends as the controller's does: its replacements initialized, its nodes (and what is left on
        them: DaemonSets' pods) gone."""
        for name in underway.replacements:
            launched = self.state.node(name)
            if launched is not None and not launched.initialized:
                self.state.apply(objects.NODE, "MODIFIED", _initialized(launched.obj))
        if underway.nodepools:
            self._drained(underway.command)
        self.underway.finish(underway)
        del self.finishes[id(underway)]
        for name in sorted(underway.command.names):
            for pod in self.state.pods_on(name):
                self.state.apply(objects.POD, "DELETED", pod.obj)
            node = self.state.node(name)
            if node is not None:
                self.state.apply(objects.NODE, "DELETED", node.obj)

    def finish_before(self, moment: float, *, until: bool = False) -> None:
        """Every command under way that finished before `moment` (with `until`: by then) finishes; the moves
        started from now on are of the next wave when one did. A command that ends as the next decision starts is
        still under way for it (Karpenter decides again as soon as a command starts, before its queue has looked
        at it)."""
        done = [u for u in self.underway if self.finishes[id(u)] < moment or (until and self.finishes[id(u)] <= moment)]
        for underway in done:
            self.finish(underway)
        if done:
            self.wave += 1

    def finish_next(self) -> None:
        """Virtual time moves on to when the first command under way finishes, and those done by then finish."""
        self.clock = max(self.clock, min(self.finishes.values()))
        self.finish_before(self.clock, until=True)

    def drain(self) -> None:
        """Every command under way finishes (the moves stop here)."""
        while self.underway:
            self.finish_next()

    def placement(self) -> dict[str, str]:
        """Every live pod's node at the end (pending pods aside)."""
        return {record.key: record.node for record in self.state.pods() if record.node}


def consolidate_now(snapshot: Snapshot, fleet: Fleet, head: PolicySide, catalog: Catalog, now: dt.datetime,
                    budget: float = math.inf, timing: Timing = TIMING) -> Consolidation:
    """See the module docstring. `budget`: seconds the moves may take to work out, as the controller bounds each
    decision (Karpenter's multi-node and single-node consolidation budgets), here over all of them together: past
    it, the moves found so far and a note. `timing` times the commands that run side by side."""
    deadline = time.monotonic() + budget  # reading the snapshot into the state counts too
    run = _Run(snapshot, fleet, head, catalog, now, timing)
    while True:
        if len(run.result.moves) >= MAX_MOVES:
            run.drain()
            run.result.notes.append(f"consolidation stopped after {MAX_MOVES} moves")
            break
        left = deadline - time.monotonic()
        if left <= 0:
            run.drain()  # the commands under way end as planned
            blocked = Decision()
            run.decider.candidates(run.inputs(), blocked)  # no simulation: why nodes are not candidates at all
            run.not_candidates(blocked.blocked)
            run.result.notes.append(_stopped(len(run.result.moves), budget))
            break
        run.finish_before(run.clock)  # what is done when the decision starts
        inputs = dataclasses.replace(run.inputs(), single_node_budget=left, multi_node_budget=left)
        decision = run.decider.decide(inputs, after=DRIFT)
        command = decision.command
        if command is not None and (runs_side_by_side(command) or not run.underway):
            run.start(command, inputs)
            if not runs_side_by_side(command):  # a Provisioner's: alone, carried out before the next decision
                run.finish_next()
            continue  # v1.14.1 decides again at once after a command starts (`RequeueImmediately`)
        if run.underway:  # nothing more now (or a Provisioner's command, which waits until none is under way)
            run.finish_next()
            continue
        run.not_candidates(decision.blocked)  # the last decision looked at every stage, on the fleet left
        if decision.timeouts or decision.v1_timeouts:
            run.result.notes.append(_stopped(len(run.result.moves), budget))
        break
    run.result.placement = run.placement()
    run.result.nodes = sorted(record.name for record in run.state.nodes())
    return run.result


def _targets(plan: Plan, candidates: Sequence[Candidate]) -> dict[str, str]:
    """Where `plan` puts the candidates' pods (uid → node) among the nodes there, launched or not."""
    moving = {pod.uid for c in candidates for pod in c.pods}
    return {pod.uid: node for node, pods in plan.existing.items() for pod in pods if pod.uid in moving}


def _nodepool_reason(inputs: Inputs, record: NodeRecord, constraint_set: ConstraintSet, busy: bool) -> str:
    """Why Karpenter v1.14.1 does not take a NodePool's node left after the moves, in its words ("" when it
    would: the last decision found nothing to do with it)."""
    name = pool_name(constraint_set.pool)
    if not record.initialized:
        return V1_NOT_INITIALIZED
    if consolidatable_in(inputs, record, constraint_set) is None:  # consolidateAfter: Never
        return f'NodePool "{name}" has consolidation disabled'
    if busy and consolidation_policy(constraint_set) == WHEN_EMPTY:
        return f'NodePool "{name}" has consolidation policy WhenEmpty, but node is not empty'
    wait = consolidatable_in(inputs, record, constraint_set)
    if wait is not None and wait > 0:
        return (f"not Consolidatable: consolidateAfter has not passed since its last pod event "
                f"({math.ceil(wait):g}s left)")
    reason = v1budgets.UNDERUTILIZED if busy else v1budgets.EMPTY
    allowance = budget_mapping(inputs.view.nodes.values(), inputs.templates.sets, reason, inputs.now)
    if allowance.get(constraint_set.pool, 1) <= 0:
        return f"No allowed disruptions for disruption reason {reason} due to blocking budget"
    return ""


def _stopped(moves: int, budget: float) -> str:
    return (f"consolidation stopped after {moves} move{'' if moves == 1 else 's'}: working out more took longer "
            f"than --consolidation-timeout ({budget:g}s); later moves, and what consolidating the nodes left would "
            "find, are not shown")
