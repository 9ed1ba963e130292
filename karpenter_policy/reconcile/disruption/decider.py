"""Disruption decisions: which nodes of ours should go for expiry, drift or consolidation, and what replaces them.

Karpenter v0.31's deprovisioning, on the scheduling core that provisions (`scheduling/`): every "would these pods
fit elsewhere?" is a scheduling run with the candidate nodes taken out and their pods pending, together with the
pods still pending in the cluster (Karpenter's `simulateScheduling`: they take room too; their own failures do not
count) and the pods of the nodes being deleted — the commands under way and any node with a deletion timestamp —
(v1.14.1's `deletingNodes.CurrentlyReschedulablePods`: the room they will take is not offered twice; they may count
on a replacement not yet initialized; their failures count, as `AllNonPendingPodsScheduled`). In this order, the
first stage that finds something decides (one command a decision):

1. **expiration** — nodes whose creation plus their provisioner's `ttlSecondsUntilExpired` has passed (Karpenter
   v0.31's machine expiration: `GetExpirationTime`, creation timestamp + TTL, whatever the TTL — compile warns
   below an hour, `ttl-churn`): the empty ones all at once, else one at a time, the most expired first. A
   replacement is a new node: its own TTL starts at its creation, and it is a candidate only once initialized,
   so even a TTL of 0 replaces one node at a time, each after its replacement is up (as Karpenter does);
2. **drift** — a node whose provisioner is gone from the constraint sets, whose node hash (labels, taints,
   kubelet, node template: `ConstraintSet.node_hash`) differs from its set's, whose labels no longer satisfy
   its set's requirements (an instance type no longer admitted, a zone or capacity type removed), or whose image
   is no longer the one its node template resolves (a new AMI release) — a NodePool's node by v1.14.1's rules
   (`drift_reason`), then its instance's security groups, subnet, capacity reservation or placement group no longer
   its class's (`network_drift`): a
   Provisioner's empty ones all at once, else one at a time, the earliest drifted first (when this controller first
   saw it drifted); a NodePool's one a command, the empty ones first (v1.14.1: its commands run side by side). A
   static NodePool's drifted node goes first, by v1.14.1's static drift (core pkg/controllers/disruption/
   staticdrift.go, whatever the StaticCapacity gate): one command a node, replaced one for one by a node of its
   template (`staticclaim`, no simulation), within its budget, never while its active and pending-disruption
   claims exceed `replicas` (a scale-down first), and only while `limits.nodes` leaves room for the replacement
   (`state.nodepoolcounts`); its nodes are never drift-replaced by the simulation nor consolidated
   (`OwnedByStaticNodePool`);
3. **consolidation** (provisioners with `consolidation.enabled`, nodes without `karpenter.sh/do-not-consolidate`)
   — *empty*: every empty node at once; *multi-node*: the most nodes (at least 2, up to 100, lowest disruption
   cost first) whose pods fit on the others plus at most one new node; *single-node*: one node at a time. A
   NodePool's nodes by v1.14.1's rules (:mod:`~karpenter_policy.reconcile.disruption.balanced`): empty when no pod's
   eviction cost is positive, highest price per unit of reschedule cost first, single-node one pool at a time in
   turn, and a `Balanced` pool's moves scored. A node
   is deleted when its pods fit on the others, replaced when one node whose every type's worst launch price is
   below the price of what goes takes them (:mod:`~karpenter_policy.reconcile.disruption.pricing`); never a
   spot node by a node that may be spot; several nodes never by a type among them that costs as much as one of
   them (deleting fewer nodes does that with less disruption).

Expiry and drift replace with as many new nodes as the pods need (none when they fit on the others) and skip a node
whose pods would not all schedule. A node is never a candidate while being deleted, before it is initialized, with
the `karpenter.sh/do-not-disrupt` annotation, while nominated for a pending pod, when a pod on it is annotated
`karpenter.sh/do-not-evict` or `karpenter.sh/do-not-disrupt` (a NodePool's node: any running pod, a DaemonSet's or a
mirror too, whose `karpenter.sh/do-not-disrupt` holds it — "true", or a positive duration not yet run out since its
startTime, the decision waking up when it does (`api.v1.donotdisrupt`) —, as v1.14.1's `ValidatePodsDisruptable`; v1
ignores `do-not-evict`), or when a PodDisruptionBudget allows no disruption of one of its pods (an unhealthy pod
under `unhealthyPodEvictionPolicy: AlwaysAllow` aside) — except that drift takes a NodePool's node those pods block
when its NodeClaim has a `terminationGracePeriod` (v1.14.1's eventual disruption class: the period bounds the
drain), planning no replacement for the pods Karpenter cannot tell when they will go (`state.rescheduled.replaceable`).
Pods that would be placed on a node not yet initialized do not count as placed. A pod with a claim moves with its
volumes (their zone in its required terms, as Karpenter's simulation injects volume topology: `view.volumed_pod`);
while the volume kinds cannot be listed, its node is not a candidate ("cannot read its pods' volumes: …" — unknown,
never "no volumes"). A candidate's disruption cost is its pods' (Karpenter's eviction cost) scaled by the fraction
of its lifetime left before it expires (`lifetimeRemaining`).

This module decides; :mod:`~karpenter_policy.reconcile.disruption.recheck` checks a consolidation again after its
wait, and :mod:`~karpenter_policy.reconcile.disruption.deprovisioner` carries a decision out (candidates cordoned,
replacements launched and initialized first, then the candidates deleted through the termination finalizer).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.api.v1 import budgets as v1budgets
from karpenter_policy.api.v1.donotdisrupt import DoNotDisrupt, do_not_disrupt, start_time
from karpenter_policy.api.v1.goduration import parse_go_duration
from karpenter_policy.api.v1.statichash import static_drift, static_hash_annotations
from karpenter_policy.cloud.provider import Instance, Network
from karpenter_policy.kube import disruption as budgets
from karpenter_policy.kube import objects
from karpenter_policy.kube.disruption import Budget
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.pools import pool_name
from karpenter_policy.model.requirements import Operator, Requirements
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.disruption import balanced, pricing
from karpenter_policy.reconcile.disruption.budgets import allowances, budget_figures, within_budgets
from karpenter_policy.reconcile.disruption.view import DisruptionView
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.nodepoolcounts import node_counts, node_limit_left
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord
from karpenter_policy.reconcile.state.rescheduled import movable, replaceable, rescheduled
from karpenter_policy.reconcile.staticclaim import static_claim
from karpenter_policy.reconcile.templates import Templates
from karpenter_policy.scheduling import ClaimPlan, Plan, Pod, RunningPods, Scheduler, SchedulerOptions, TemplateParts
from karpenter_policy.scheduling.running import WithoutNodes
from karpenter_policy.scheduling.vectors import Vector, subtract

EXPIRATION = "expiration"
DRIFT = "drift"
CONSOLIDATION = "consolidation"
#: The stages of a decision, in Karpenter's order (its deprovisioners): the first that finds a command decides.
EMPTY = "empty"
MULTI_NODE = "multi-node"
SINGLE_NODE = "single-node"
STAGES = (EXPIRATION, DRIFT, EMPTY, MULTI_NODE, SINGLE_NODE)
#: Karpenter v1.14.1's disruption methods' reasons, as its metrics label them (`strings.ToLower(Reason())`).
V1_EMPTY = "empty"
V1_DRIFTED = "drifted"
V1_UNDERUTILIZED = "underutilized"
DELETE = "delete"
REPLACE = "replace"
#: Multi-node consolidation looks at this many candidates at most (Karpenter's limit).
MULTI_NODE_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node of ours that could go: what it runs (`pods`: the pods that would move — DaemonSets', static, finished
    and terminating pods left out) and what it costs."""

    name: str
    provisioner: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None  # $/h of its offering, available now or not; None: no price data
    pods: tuple[Pod, ...]
    disruption_cost: float  # its pods' eviction cost, scaled by the fraction of its lifetime left
    created: dt.datetime | None
    consolidatable: bool  # its provisioner consolidates and the node is not annotated do-not-consolidate
    #: it may be consolidated while it runs pods (a NodePool's `WhenEmpty` policy: only once empty)
    underutilized: bool = True
    #: Why expiry and consolidation may not take it — a pod whose `do-not-disrupt` holds it, or a PodDisruptionBudget
    #: that allows no eviction — when drift may all the same: its NodeClaim has a `terminationGracePeriod`, which
    #: bounds the drain (v1.14.1's eventual disruption class); "" for every other candidate.
    eventual: str = ""
    #: a NodePool's node (Karpenter v1.14.1's consolidation rules), not a Provisioner's (v0.31.1's)
    nodepool: bool = False
    #: 1 plus its reschedulable pods' positive eviction costs (v1.14.1 `RescheduleDisruptionCost`; a NodePool's node)
    reschedule_cost: float = balanced.PER_NODE_BASE_DISRUPTION_COST
    #: a static NodePool's node (v1.14.1 `OwnedByStaticNodePool`): static drift alone may take it
    static: bool = False

    @property
    def empty(self) -> bool:
        """Whether consolidation's emptiness takes it: a Provisioner's node without pods to move (v0.31.1); a
        NodePool's without a pod whose eviction cost is positive (v1.14.1 `Candidate.IsEmpty`)."""
        return balanced.is_empty(self.reschedule_cost) if self.nodepool else not self.pods

    def describe(self) -> str:
        """As Karpenter logs a machine: `name/type/capacity-type`."""
        return f"{self.name}/{self.instance_type}/{self.capacity_type}"


@dataclass(frozen=True, slots=True)
class Command:
    """A decision: delete `candidates`, after launching `replacements` (their pods are the candidates'). `stage`:
    the stage that found it (one of :data:`STAGES`)."""

    method: str  # expiration | drift | consolidation
    candidates: tuple[Candidate, ...]
    replacements: tuple[ClaimPlan, ...] = ()
    why: str = ""
    savings: float | None = None  # $/h saved (consolidation; None: no price data)
    stage: str = ""

    @property
    def action(self) -> str:
        return REPLACE if self.replacements else DELETE

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.candidates)

    @property
    def reason(self) -> str:
        """Karpenter's reason for the command (its metrics' and Events'): `<method>/<action>`."""
        return f"{self.method}/{self.action}"

    @property
    def v1_reason(self) -> str:
        """Karpenter v1.14.1's reason for the command as its metrics label it (`pretty.ToSnakeCase` of `Empty`,
        `Underutilized`, `Drifted`; forceful expiry's `expired`)."""
        if self.method == CONSOLIDATION:
            return "empty" if self.stage == EMPTY else "underutilized"
        return "drifted" if self.method == DRIFT else "expired"

    @property
    def consolidation_type(self) -> str:
        """Karpenter v1.14.1's `ConsolidationType()`: `empty`, `multi`, `single`, or none (drift)."""
        if self.method != CONSOLIDATION:
            return ""
        return {EMPTY: "empty", MULTI_NODE: "multi", SINGLE_NODE: "single"}.get(self.stage, "")

    def message(self) -> str:
        """Karpenter's log line for the command, with why and the saving."""
        machines = ", ".join(c.describe() for c in self.candidates)
        text = f"deprovisioning via {self.method} {self.action}, terminating {len(self.candidates)} machines {machines}"
        if self.replacements:
            types = sorted({o.instance_type for r in self.replacements for o in r.options})
            capacity = sorted({o.capacity_type for r in self.replacements for o in r.options})
            shown = ", ".join(types[:5]) + (f" and {len(types) - 5} other(s)" if len(types) > 5 else "")
            text += (
                f" and replacing with {len(self.replacements)} {'/'.join(capacity)} machine(s) from types {shown}"
            )
        if self.why:
            text += f" ({self.why})"
        if self.savings is not None:
            text += f", saving ${self.savings:.4f}/h"
        return text


@dataclass(frozen=True, slots=True)
class Move:
    """A consolidation move a Balanced NodePool scored: by `stage` (single- or multi-node), the nodes, whether every
    Balanced pool approved it, and each one's score."""

    stage: str
    names: tuple[str, ...]
    approved: bool
    scores: tuple[balanced.Score, ...]
    #: (NodePool, its consolidation policy) of each pool among the nodes
    pools: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class Decision:
    command: Command | None = None
    #: node name → why it cannot be disrupted now (a budget, do-not-evict, pods that would not schedule …).
    blocked: dict[str, str] = field(default_factory=dict)
    #: seconds until the next node expires or a pod's do-not-disrupt duration runs out (None: none will).
    expires_in: float | None = None
    #: pod uid → the pod and its `karpenter.sh/do-not-disrupt` as read, for each pod whose reading v1.14.1 publishes
    #: an Event of (`events.do_not_disrupt`: invalid, a duration holding it, a duration run out).
    do_not_disrupt_read: dict[str, tuple[PodRecord, DoNotDisrupt]] = field(default_factory=dict)
    #: why the decision stopped before it looked at everything ("": it did not): a budget that ran out, or
    #: something more urgent.
    stopped: str = ""
    #: Something more urgent happened (pods became pending): the decision stopped, and acts on nothing.
    cut_short: bool = False
    #: what Karpenter v0.31's metrics tell of it: per method that looked (expiration, drift, consolidation — its
    #: three stages together), the Provisioners' candidates it found eligible and the seconds it took; the
    #: consolidations of Provisioners' nodes its budget stopped (`multi-machine`, `single-machine`).
    eligible: dict[str, int] = field(default_factory=dict)
    evaluated: dict[str, float] = field(default_factory=dict)
    timeouts: list[str] = field(default_factory=list)
    #: whether a Provisioner's set is in force (else v0.31's figures above tell nothing: no series of them), and a
    #: NodePool's (else v1.14.1's below tell nothing)
    provisioners: bool = True
    nodepools: bool = False
    #: the same as Karpenter v1.14.1 tells them for the NodePools' nodes (only when a NodePool's set is in force):
    #: per method's reason (`empty`, `drifted`, `underutilized`) the NodePools' candidates it found eligible, per
    #: (reason, consolidation type) the seconds the method took, and the consolidation types its budget stopped
    #: (`multi`, `single`) — `karpenter_voluntary_disruption_eligible_nodes`, `…_decision_evaluation_duration_seconds`
    #: and `…_consolidation_timeouts_total` (core pkg/controllers/disruption/controller.go `disrupt`).
    v1_eligible: dict[str, int] = field(default_factory=dict)
    v1_evaluated: dict[tuple[str, str], float] = field(default_factory=dict)
    v1_timeouts: list[str] = field(default_factory=list)
    #: the consolidation moves a Balanced NodePool scored (v1.14.1's `consolidation_moves_total`, its score
    #: histogram and `ConsolidationApproved` Events)
    moves: list[Move] = field(default_factory=list)
    #: (NodePool, reason) → its budgets' allowed disruptions and its nodes disrupting, for each reason a method
    #: read (v1.14.1's `karpenter_nodepools_allowed_disruptions` and `…_nodes_consuming_budgets`)
    budgets: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def interrupted(self, inputs: Inputs) -> bool:
        """Whether the decision must stop now (something more urgent happened); notes why once."""
        if not self.cut_short and inputs.interrupted():
            self.cut_short = True
            self.stop("the decision stopped: pods became pending (provisioning goes first)")
        return self.cut_short

    def stop(self, why: str) -> None:
        """Note why a part of the decision stopped early."""
        self.stopped = f"{self.stopped}; {why}" if self.stopped else why


@dataclass(frozen=True, slots=True)
class Inputs:
    """What one decision looks at: the cluster as the decision's start saw it (`view`), the node claim templates of the
    sets in force, the cluster's PodDisruptionBudgets and the time. `clock` and the budgets bound the decision:
    multi-node consolidation stops at `multi_node_budget` seconds of it, single-node consolidation at
    `single_node_budget` (Karpenter's 1 and 3 minutes), with what they found so far."""

    view: DisruptionView
    templates: Templates
    budgets: Sequence[Obj]
    now: dt.datetime
    protected: frozenset[str] = frozenset()  # nodes another command is using (its replacements)
    #: (provisioner, instance type) → the image a node launched now would get (None: cannot tell).
    images: Callable[[str, str], str | None] = lambda provisioner, instance_type: None
    clock: Callable[[], float] = time.monotonic
    single_node_budget: float = math.inf
    multi_node_budget: float = math.inf
    #: True once something more urgent happened (pods became pending): the decision stops at once.
    interrupted: Callable[[], bool] = lambda: False
    #: The pods still pending (every simulation places them too, as Karpenter's does).
    pending: Sequence[Pod] = ()
    #: The nodes the provisioner planned a pending pod onto (Karpenter's nominated nodes): not candidates.
    nominated: frozenset[str] = frozenset()
    #: By node, when a pod last started or stopped using it (a NodePool's `consolidateAfter` counts from then).
    pod_events: Mapping[str, dt.datetime] = field(default_factory=dict)
    #: Instance id → the instance as the cloud reports it now (None: unknown), for a NodePool node's network drift.
    instances: Callable[[str], Instance | None] = lambda instance_id: None
    #: Provisioner → the subnets and security groups its node class resolves to now (None: cannot tell).
    networks: Callable[[str], Network | None] = lambda provisioner: None
    #: Provisioner → the instance types its node class offers now, offerings available or not (None: cannot tell).
    instance_types: Callable[[str], Sequence[InstanceType] | None] = lambda provisioner: None
    #: The nodes NodePools' commands under way disrupt: not candidates, not offered to a simulation, and each uses up
    #: its NodePool's budget (v1.14.1's `MarkedForDeletion`, core pkg/controllers/disruption/helpers.go).
    disrupting: frozenset[str] = frozenset()
    #: The static NodePools' templates (`Context.static_template_sets`): static drift's, never a simulation's.
    static: Templates = field(default_factory=Templates)
    #: Each of `budgets`, in their order, as counted now over the view's pods by a caller that keeps the counts up to
    #: date (`kube.budgetcounts.BudgetCounts`); None: the decision counts them over every pod.
    pdb_budgets: Sequence[Budget] | None = None


#: A NodePool's consolidation policies (core pkg/apis/v1/nodepool.go at v1.14.1) and `consolidateAfter: Never`.
WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
NEVER = "Never"


class _V1Timer:
    """The seconds each of Karpenter v1.14.1's consolidation methods took within one stage of the decision (emptiness,
    multi-node, single-node), into `decision.v1_evaluated` when `on`: each lap is the time since the last."""

    def __init__(self, decision: Decision, on: bool) -> None:
        self.decision, self.on = decision, on
        self._since = time.perf_counter()

    def lap(self, reason: str, consolidation_type: str, record: bool = True) -> None:
        now = time.perf_counter()
        if self.on and record:
            self.decision.v1_evaluated[reason, consolidation_type] = now - self._since
        self._since = now


def consolidation_policy(constraint_set: ConstraintSet) -> str:
    """A NodePool set's `consolidationPolicy` (admission defaulted it: WhenEmptyOrUnderutilized)."""
    disruption = (constraint_set.nodepool or {}).get("disruption") or {}
    return str(disruption.get("consolidationPolicy") or WHEN_EMPTY_OR_UNDERUTILIZED)


def consolidatable_in(inputs: Inputs, node: NodeRecord, constraint_set: ConstraintSet) -> float | None:
    """Seconds until a NodePool's node becomes consolidatable (≤ 0: it is), None when its NodePool never
    consolidates (`consolidateAfter: Never`). Karpenter v1.14.1 marks a NodeClaim Consolidatable once
    `consolidateAfter` has passed since its last pod event — a pod bound to it or leaving it — or, with none, since
    it was initialized (`Consolidation.Reconcile` in core pkg/controllers/nodeclaim/disruption/consolidation.go;
    `IsUnderConsolidateAfter`, pkg/utils/disruption/disruption.go). The controller counts from the last pod event it
    saw, else from the node's creation (it keeps no initialization time: a node is a candidate only once
    initialized anyway)."""
    disruption = (constraint_set.nodepool or {}).get("disruption") or {}
    after = disruption.get("consolidateAfter")
    if after is None or str(after) == NEVER:
        return None
    try:
        seconds = parse_go_duration(str(after)).total_seconds()
    except ValueError:  # admission refused such a set: never here, and never a reason to consolidate
        return None
    since = inputs.pod_events.get(node.name) or _created(node.obj)
    if since is None:
        return 0.0 if seconds <= 0 else seconds
    return seconds - (inputs.now - since).total_seconds()


def _created(node: Obj) -> dt.datetime | None:
    stamp = objects.creation_timestamp(node)
    if not stamp:
        return None
    try:
        return objects.parse_time(stamp)
    except ValueError:
        return None


def lifetime_remaining(ttl: int | None, created: dt.datetime | None, now: dt.datetime) -> float:
    """The fraction of a node's lifetime (its TTL) left before it expires, in [0, 1] (1 without a TTL; 0 with a
    TTL of 0, expired from its creation): Karpenter scales a candidate's disruption cost by it
    (`lifetimeRemaining`), so that, pods being equal, the node closer to expiry goes first."""
    if ttl is None or created is None:
        return 1.0
    if ttl <= 0:
        return 0.0
    left = ttl - (now - created).total_seconds()
    return min(max(left / ttl, 0.0), 1.0)


class Decider:
    """Finds the next command (see the module docstring). It remembers when it first saw each node drifted (the
    order drift goes in)."""

    def __init__(
        self, scheduler_options: SchedulerOptions, on_simulation: Callable[[float], None] = lambda seconds: None
    ) -> None:
        self.scheduler_options = scheduler_options
        self.on_simulation = on_simulation  # the seconds of each scheduling simulation (a metric)
        self._drifted_since: dict[str, dt.datetime] = {}
        self._drift_reasons: dict[str, str] = {}
        #: Node uid → when its instance type was last found offered (checked again after TYPE_CHECK_INTERVAL).
        self._type_found: dict[str, dt.datetime] = {}
        #: The NodePools single-node consolidation did not reach when its budget last ran out: first next time.
        self._unseen_pools: frozenset[str] = frozenset()
        #: what the simulations read of their templates alone, for the last templates simulated with (a decision's
        #: simulations share them: `scheduling.TemplateParts`)
        self._parts: TemplateParts | None = None

    # --- candidates ----------------------------------------------------------------------------------------

    def candidates(self, inputs: Inputs, decision: Decision) -> list[Candidate]:
        """Our initialized nodes that may be disrupted; the others that are blocked go to `decision.blocked`."""
        view = inputs.view
        counted = inputs.pdb_budgets  # kept up to date by the caller, else counted over every pod now
        if counted is None:
            counted = budgets.disruption_budgets(inputs.budgets, view.pods) if inputs.budgets else []
        exhausted = [  # the budgets that allow no disruption now (each computed once, not once per pod)
            pdb for pdb, budget in zip(inputs.budgets, counted, strict=True) if budget.disruptions_allowed < 1
        ]
        found = []
        for name, node in sorted(view.nodes.items()):
            if not node.ours or node.deleting or name in inputs.protected or name in inputs.disrupting:
                continue
            if not node.initialized:
                continue
            why = self._node_blocked(node, inputs.nominated)
            if why:
                decision.blocked[name] = why
                continue
            on_node = view.pods_on(name)
            pods = movable(on_node)
            if any(p.claims for p in pods):  # their volumes' zones bind where they may go: unknown is not "none"
                unavailable = view.volumes_unavailable()
                if unavailable is not None:
                    decision.blocked[name] = f"cannot read its pods' volumes: {unavailable}"
                    continue
            why = self._pods_blocked(node, pods, on_node, exhausted, inputs.now, decision)
            if why:
                decision.blocked[name] = why  # for expiry and consolidation (Karpenter's graceful class)
                if not self._eventual(view, node):
                    continue
                pods = [p for p in pods if replaceable(p, inputs.budgets, inputs.now)]
            candidate = self._candidate(inputs, node, pods, eventual=why)
            constraint_set = inputs.templates.sets.get(candidate.provisioner)
            if constraint_set is not None and not candidate.consolidatable and constraint_set.is_nodepool:
                wait = consolidatable_in(inputs, node, constraint_set)  # decide again once it is
                if wait is not None and wait > 0:
                    decision.expires_in = wait if decision.expires_in is None else min(decision.expires_in, wait)
            found.append(candidate)
        return found

    @staticmethod
    def _eventual(view: DisruptionView, node: NodeRecord) -> bool:
        """Whether drift may take the node although a pod blocks it: a NodePool's node whose NodeClaim has a
        `terminationGracePeriod` (v1.14.1's `NewCandidate` with the eventual disruption class) — one that termination
        can read (a Go duration): a claim whose field is anything else (written by hand; v1.14.1's CRD refuses it)
        would hold the drain for ever, so its node stays blocked as any other."""
        if wk.NODEPOOL not in node.labels:
            return False
        name = claim_of_node(node.obj)
        claim = view.state.claim(name) if name is not None else None
        spec = claim.obj.get("spec") if claim is not None else None
        period = spec.get("terminationGracePeriod") if isinstance(spec, dict) else None
        if not isinstance(period, str):
            return False
        try:
            parse_go_duration(period)
        except ValueError:
            return False
        return True

    @staticmethod
    def _candidate(inputs: Inputs, node: NodeRecord, pods: list[PodRecord], eventual: str = "") -> Candidate:
        labels = node.labels
        provisioner = node.provisioner or ""
        if provisioner in inputs.static.sets:  # static drift's alone: never consolidated (OwnedByStaticNodePool)
            static_set = inputs.static.sets[provisioner]
            created = _created(node.obj)
            return Candidate(
                name=node.name, provisioner=provisioner, instance_type=labels.get(wk.INSTANCE_TYPE, ""),
                zone=labels.get(wk.ZONE, ""), capacity_type=labels.get(wk.CAPACITY_TYPE, ""), price=None,
                pods=tuple(pod for p in pods if (pod := inputs.view.scheduling_pod(p)) is not None),
                disruption_cost=sum(p.disruption_cost for p in pods) * lifetime_remaining(
                    static_set.ttl_seconds_until_expired, created, inputs.now),
                created=created, consolidatable=False, underutilized=False, eventual=eventual, nodepool=True,
                reschedule_cost=balanced.reschedule_cost(p.disruption_cost for p in pods), static=True,
            )
        constraint_set = inputs.templates.sets.get(provisioner)
        instance_type = labels.get(wk.INSTANCE_TYPE, "")
        zone = labels.get(wk.ZONE, "")
        capacity = labels.get(wk.CAPACITY_TYPE, "")
        created = _created(node.obj)
        ttl = constraint_set.ttl_seconds_until_expired if constraint_set is not None else None
        consolidatable = (
            constraint_set is not None
            and constraint_set.consolidation_enabled
            and node.annotations.get(wk.DO_NOT_CONSOLIDATE) != "true"
        )
        underutilized = consolidatable
        if constraint_set is not None and constraint_set.is_nodepool:  # Karpenter v1.14.1's rules
            wait = consolidatable_in(inputs, node, constraint_set)
            consolidatable = wait is not None and wait <= 0
            underutilized = consolidation_policy(constraint_set) != WHEN_EMPTY  # Balanced too
        return Candidate(
            name=node.name,
            provisioner=provisioner,
            instance_type=instance_type,
            zone=zone,
            capacity_type=capacity,
            price=pricing.offering_price(inputs.templates, provisioner, instance_type, zone, capacity),
            pods=tuple(pod for p in pods if (pod := inputs.view.scheduling_pod(p)) is not None),
            disruption_cost=sum(p.disruption_cost for p in pods) * lifetime_remaining(ttl, created, inputs.now),
            created=created,
            consolidatable=consolidatable,
            underutilized=underutilized,
            eventual=eventual,
            nodepool=constraint_set is not None and constraint_set.is_nodepool,
            reschedule_cost=balanced.reschedule_cost(p.disruption_cost for p in pods),
        )

    @staticmethod
    def _node_blocked(node: NodeRecord, nominated: frozenset[str]) -> str:
        """Why no method may take the node (v1.14.1's `ValidateNodeDisruptable`), "" when one may."""
        value = node.annotations.get(wk.DO_NOT_DISRUPT)
        # v0.31 reads the node's annotation whatever its value; v1.14.1 only "true" (a NodePool's node: its
        # `karpenter.sh/nodepool` label; emptiness_test.go:433 "…annotation set to false" is deleted)
        if value is not None and (value == "true" or wk.NODEPOOL not in node.labels):
            return f"the node has the {wk.DO_NOT_DISRUPT} annotation"
        if node.name in nominated:
            return "nominated for a pending pod"
        return ""

    @staticmethod
    def _pods_blocked(
        node: NodeRecord, pods: Iterable[PodRecord], on_node: Iterable[PodRecord], exhausted: Sequence[Obj],
        now: dt.datetime, decision: Decision,
    ) -> str:
        """Why a pod keeps the node (v1.14.1's `ValidatePodsDisruptable`, v0.31's pod checks), "" when none does."""
        if wk.NODEPOOL in node.labels:
            # v1.14.1's `ValidatePodsDisruptable` (core pkg/controllers/state/statenode.go): every active pod, a
            # DaemonSet's or a mirror too, `do-not-disrupt` only — `do-not-evict` is v0.31's (v1 reads it nowhere)
            # `IsDoNotDisruptActive`: "true", or a duration not yet run out since the pod's startTime (decide
            # again when it runs out); an invalid value is ignored, with its Warning
            for pod in on_node:
                if pod.terminal or pod.deleting:
                    continue
                held = do_not_disrupt(pod.annotations, start_time(pod.obj), now)
                if held.invalid or held.until is not None or held.elapsed:
                    decision.do_not_disrupt_read[pod.uid] = (pod, held)
                if held.active:
                    if held.until is not None:
                        wait = (held.until - now).total_seconds()
                        decision.expires_in = wait if decision.expires_in is None else min(decision.expires_in, wait)
                    return f"pod {pod.key} has the {wk.DO_NOT_DISRUPT} annotation"
        else:
            for pod in pods:
                for annotation in (wk.DO_NOT_EVICT, wk.DO_NOT_DISRUPT):
                    if pod.annotations.get(annotation) == "true":
                        return f"pod {pod.key} has the {annotation} annotation"
        for pod in pods:
            for pdb in exhausted:
                if budgets.selects(pdb, pod.obj) and not budgets.evicts_unhealthy(pdb, pod.obj):
                    return f"PodDisruptionBudget {objects.namespace(pdb)}/{objects.name(pdb)} prevents pod evictions"
        return ""

    # --- the decision ----------------------------------------------------------------------------------------

    def decide(self, inputs: Inputs, after: str | None = None) -> Decision:
        """The next command, from the first stage that finds one (`after`: start at the stage after that one, as
        Karpenter goes on to the next deprovisioner when a consolidation fails its validation)."""
        decision = Decision()
        decision.provisioners = any(not s.is_nodepool for s in inputs.templates.sets.values())
        decision.nodepools = any(s.is_nodepool for s in inputs.templates.sets.values())
        stages = STAGES[STAGES.index(after) + 1:] if after is not None else STAGES
        candidates = self.candidates(inputs, decision)
        if DRIFT in stages:
            self._note_drift(inputs)
        methods = ((EXPIRATION, self._expiration), (DRIFT, self._drift), (CONSOLIDATION, self._consolidation))
        for name, method in methods:
            if decision.interrupted(inputs):
                break
            started = time.perf_counter()
            command = method(inputs, candidates, decision, stages)
            if name in decision.eligible:  # the method looked (one of its stages is among these)
                decision.evaluated[name] = time.perf_counter() - started
                if name == DRIFT and decision.nodepools:
                    decision.v1_evaluated[V1_DRIFTED, ""] = decision.evaluated[name]
            if command is not None:
                decision.command = command
                break
        if decision.cut_short:
            decision.command = None  # a command from a decision that was cut short is not acted on
        return decision

    @staticmethod
    def _allowance(inputs: Inputs, reason: str, decision: Decision) -> dict[str, int]:
        """By NodePool, how many more of its nodes may be disrupted for `reason` now (Karpenter v1's budgets:
        `disruption.budgets`, less the nodes disrupting — commands under way among them); a Provisioner's nodes are
        not limited. The figures go to `decision.budgets`."""
        view, sets = inputs.view, {**inputs.templates.sets, **inputs.static.sets}
        figures = budget_figures(view.nodes.values(), sets, reason, inputs.now, inputs.disrupting)
        for pool, counted in figures.items():
            decision.budgets[pool_name(pool), reason] = counted
        return allowances(figures)

    def simulate(self, inputs: Inputs, candidates: Sequence[Candidate]) -> Plan:
        """Where the candidates' pods, the pods of the nodes being deleted and the pods still pending would go with
        the candidates gone (new claims where nothing has room), as v1.14.1's `SimulateScheduling` (core
        pkg/controllers/disruption/helpers.go): the nodes being deleted — those of the commands under way
        (`Inputs.disrupting`) and any node with a deletion timestamp — are not offered, their pods
        (:meth:`deleting_pods`) are placed again, so that the room they will take is not offered twice; the
        commands' replacements are offered (not initialized yet, only those pods may count on them:
        :meth:`unplaceable`). Only the nodes with room for the smallest of those pods are offered; every other node
        still counts against its provisioner's limits and gives its labels as topology domains."""
        names = {c.name for c in candidates}
        view = inputs.view
        deleting = self.deleting_nodes(inputs) - names
        pods = [pod for c in candidates for pod in c.pods] + self.deleting_pods(inputs, deleting) + list(inputs.pending)
        smallest: Vector | None = None
        for pod in pods:
            smallest = pod.requests if smallest is None else tuple(map(min, smallest, pod.requests))
        taken = names | deleting
        offered = view.existing.items() if smallest is None else view.with_room(smallest)
        existing = [n for name, n in offered if name not in taken]
        used = dict(view.used)
        for name in names:
            node = view.nodes.get(name)
            if node is not None and node.provisioner in used and not node.deleting:
                used[node.provisioner] = subtract(used[node.provisioner], node.capacity)
        started = time.perf_counter()
        scheduler = Scheduler(
            inputs.templates.templates,
            existing,
            view.daemons,
            WithoutNodes(view.running or RunningPods(), names | deleting),
            view.namespace_labels,
            dataclasses.replace(self.scheduler_options, topology=inputs.templates.topology),
            used=used,
            node_domains=view.domains,
            parts=self._parts,
        )
        self._parts = scheduler.parts  # the same unless the templates changed since the last simulation
        plan = scheduler.solve(pods)
        self.on_simulation(time.perf_counter() - started)
        return plan

    @staticmethod
    def deleting_nodes(inputs: Inputs) -> frozenset[str]:
        """The nodes being deleted (v1.14.1's `MarkedForDeletion`): the commands under way's and those with a
        deletion timestamp."""
        return inputs.disrupting | inputs.view.deleting

    @staticmethod
    def deleting_pods(inputs: Inputs, nodes: Iterable[str]) -> list[Pod]:
        """The pods of `nodes` (being deleted) a simulation places again (`state.rescheduled.rescheduled`: v1.14.1's
        `CurrentlyReschedulablePods` on a NodePool's node, v0.31.1's `GetNodePods` on another), in node order —
        worked out once per decision (the view) for the same nodes, PodDisruptionBudgets and time."""
        view = inputs.view
        key = (frozenset(nodes), id(inputs.budgets), inputs.now)
        known = view.deleting_pods.get(key)
        if known is not None:
            return list(known)
        found = view.deleting_pods[key] = []
        for name in sorted(key[0]):
            node = view.nodes.get(name)
            if node is None:
                continue
            for record in rescheduled(node, view.pods_on(name), inputs.budgets, inputs.now):
                pod = view.scheduling_pod(record)
                if pod is not None:
                    found.append(pod)
        return list(found)

    @staticmethod
    def unplaceable(inputs: Inputs, plan: Plan, candidates: Sequence[Candidate]) -> str:
        """Why the plan does not place every pod of the candidates and of the nodes being deleted on capacity that
        is there or will be launched ("" if it does; the pending pods' own failures do not count, as in Karpenter's
        `AllNonPendingPodsScheduled`). A candidate's pod may not count on a node not initialized yet; a pod of a
        node being deleted may (v1.14.1: the replacement of a command under way is assumed to come up for it)."""
        moving = {pod.uid for c in candidates for pod in c.pods}
        pending = {pod.uid for pod in inputs.pending}
        for failure in plan.failures.values():
            if failure.pod.uid not in pending:
                return f"pod {failure.pod.key} would not schedule: {failure.message()}"
        existing = inputs.view.existing
        for node, pods in plan.existing.items():
            known = existing.get(node)
            if known is None or not known.initialized:
                for pod in pods:
                    if pod.uid in moving:
                        return f"pod {pod.key} would schedule against the non-initialized node {node}"
        return ""

    def _replacing(
        self, method: str, inputs: Inputs, candidate: Candidate, why: str, decision: Decision
    ) -> Command | None:
        """Expiry and drift: the candidate goes, with as many new nodes as its pods need."""
        plan = self.simulate(inputs, [candidate])
        unplaceable = self.unplaceable(inputs, plan, [candidate])
        if unplaceable:
            decision.blocked[candidate.name] = f"{method}: {unplaceable}"
            return None
        return Command(method, (candidate,), tuple(plan.claims), why=why, stage=method)

    def _expiration(
        self, inputs: Inputs, candidates: list[Candidate], decision: Decision, stages: Sequence[str]
    ) -> Command | None:
        expired: list[tuple[float, Candidate, int]] = []
        for candidate in (c for c in candidates if not c.eventual):
            constraint_set = inputs.templates.sets.get(candidate.provisioner)
            ttl = constraint_set.ttl_seconds_until_expired if constraint_set is not None else None
            if ttl is None or candidate.created is None:
                continue
            # In seconds, not datetimes: a TTL may be any int64, far beyond what a datetime can hold.
            left = ttl - (inputs.now - candidate.created).total_seconds()
            expires = inputs.now.timestamp() + left
            if left > 0:
                decision.expires_in = left if decision.expires_in is None else min(decision.expires_in, left)
                continue
            expired.append((expires, candidate, ttl))
        if EXPIRATION not in stages:
            return None
        decision.eligible[EXPIRATION] = len(expired)
        if not expired:
            return None
        ordered = sorted(expired, key=lambda e: (e[0], e[1].name))
        empty = [(candidate, ttl) for _, candidate, ttl in ordered if not candidate.pods]
        if empty:  # all at once: no pod moves (Karpenter's "deprovision all empty expired nodes in parallel")
            why = "; ".join(sorted({f"expired {ttl}s after creation" for _, ttl in empty}))
            return Command(EXPIRATION, tuple(c for c, _ in empty), why=why, stage=EXPIRATION)
        for _, candidate, ttl in ordered:
            if decision.interrupted(inputs):
                return None
            command = self._replacing(EXPIRATION, inputs, candidate, f"expired {ttl}s after creation", decision)
            if command is not None:
                return command
        return None

    def _note_drift(self, inputs: Inputs) -> None:
        """Note when each node of ours was first seen drifted (whether it can be disrupted now or not); forget
        the nodes that are gone or no longer drifted."""
        templates = inputs.templates
        requirements: dict[str, Requirements] = {}  # by provisioner: parsed once per decision
        hashes: dict[str, str] = {}  # by provisioner: its node hash, computed once per decision
        statics: dict[str, dict[str, str]] = {}  # by NodePool: its static-drift hashes, once per decision
        seen: dict[str, dt.datetime] = {}
        reasons: dict[str, str] = {}
        for name, node in inputs.view.nodes.items():
            if not node.ours or node.deleting or not node.initialized:
                continue
            provisioner = node.provisioner or ""
            constraint_set = templates.sets.get(provisioner) or inputs.static.sets.get(provisioner)
            if constraint_set is not None and provisioner not in requirements:
                requirements[provisioner] = Requirements.from_node_selector(constraint_set.requirements)
                if constraint_set.is_nodepool:
                    statics[provisioner] = static_hash_annotations(constraint_set)
                else:
                    hashes[provisioner] = constraint_set.node_hash
            why = drift_reason(node.obj, constraint_set, templates, provisioner, requirements.get(provisioner),
                               hashes.get(provisioner), statics.get(provisioner))
            if not why and constraint_set is not None and constraint_set.is_nodepool:
                why = self._instance_type_drift(inputs, node, provisioner)
            if not why and node_info.ANNOTATION_IMAGE in node.annotations:
                why = image_drift(node.obj, inputs.images(provisioner, node.labels.get(wk.INSTANCE_TYPE, "")))
            if not why and constraint_set is not None and constraint_set.is_nodepool and node.instance_id:
                why = network_drift(inputs.instances(node.instance_id), inputs.networks(provisioner), node.labels)
            if why:
                seen[name] = self._drifted_since.get(name, inputs.now)
                reasons[name] = why
        self._drifted_since, self._drift_reasons = seen, reasons
        uids = {node.uid for node in inputs.view.nodes.values()}
        self._type_found = {uid: at for uid, at in self._type_found.items() if uid in uids}

    def _instance_type_drift(self, inputs: Inputs, node: NodeRecord, provisioner: str) -> str:
        """Core v1.14.1's instance-type-not-found drift (pkg/controllers/nodeclaim/disruption/drift.go `isDrifted`):
        looked at only once the node is an hour old, and then at most every half hour while its type is found (a
        type found is remembered, a type not found or an unknown answer is looked at again at the next decision)."""
        created = _created(node.obj)
        if created is None or inputs.now - created <= TYPE_CHECK_AGE:
            return ""
        found = self._type_found.get(node.uid)
        if found is not None and inputs.now - found < TYPE_CHECK_INTERVAL:
            return ""
        types = inputs.instance_types(provisioner)
        if types is None:
            return ""
        why = instance_type_not_found(node.labels, types)
        if not why:
            self._type_found[node.uid] = inputs.now
        return why

    def drift_reasons(self) -> dict[str, str]:
        """The nodes the last decision saw drifted, with why."""
        return dict(self._drift_reasons)

    def _drift(
        self, inputs: Inputs, candidates: list[Candidate], decision: Decision, stages: Sequence[str]
    ) -> Command | None:
        if DRIFT not in stages:
            return None
        drifted = sorted(
            ((c, self._drift_reasons[c.name]) for c in candidates if c.name in self._drifted_since),
            key=lambda e: (self._drifted_since[e[0].name], e[0].created or inputs.now, e[0].name),
        )
        decision.eligible[DRIFT] = sum(1 for c, _ in drifted if not c.nodepool)  # v0.31's: Provisioners' nodes
        if decision.nodepools:  # Drift's candidates (drift.go `ShouldDisrupt`: a static NodePool's are not)
            decision.v1_eligible[V1_DRIFTED] = sum(1 for c, _ in drifted if c.nodepool and not c.static)
        allowance = self._allowance(inputs, v1budgets.DRIFTED, decision)
        drifted = [(c, why) for c, why in drifted if allowance.get(c.provisioner, 1) > 0]
        static = self._static_drift(inputs, [e for e in drifted if e[0].static])
        if static is not None:
            return static
        drifted = [e for e in drifted if not e[0].static]
        empty = [(c, why) for c, why in drifted if not c.pods and not c.nodepool]
        if empty:  # v0.31.1: a Provisioner's empty drifted nodes all at once
            return Command(DRIFT, tuple(c for c, _ in empty), why="; ".join(sorted({w for _, w in empty})),
                           stage=DRIFT)
        # v1.14.1 (drift.go `ComputeCommands`): one candidate a command, the empty ones first; the next command
        # comes at once, side by side, while the NodePool's budget allows (`deprovisioner`).
        ordered = [e for e in drifted if not e[0].pods] + [e for e in drifted if e[0].pods]
        for candidate, why in ordered:
            if decision.interrupted(inputs):
                return None
            command = self._replacing(DRIFT, inputs, candidate, why, decision)
            if command is not None:
                return command
        return None

    @staticmethod
    def _static_drift(inputs: Inputs, drifted: list[tuple[Candidate, str]]) -> Command | None:
        """v1.14.1's static drift (core pkg/controllers/disruption/staticdrift.go `ComputeCommands`; `drifted`: the
        static NodePools' drifted candidates their budgets allow, in drift order): the first whose NodePool is not
        over its replicas and whose `limits.nodes` leaves room for one more claim, replaced one for one from its
        template. Karpenter computes a NodePool's commands in one go, its over-replicas check before any starts: here
        they come one a decision, side by side, so that check leaves out the claims of the static drift commands
        under way (their replacements, `protected`, and their candidates, pending disruption); the limit counts
        them, as Karpenter's reservation does."""
        if not drifted:
            return None
        claims = inputs.view.state.claims()
        for candidate, why in drifted:
            constraint_set = inputs.static.sets[candidate.provisioner]
            nodepool = pool_name(candidate.provisioner)
            counts = node_counts(claims, nodepool, inputs.view.deleting, inputs.disrupting)
            replacing = sum(1 for c in claims if c.labels.get(wk.NODEPOOL) == nodepool
                            and c.node_name in inputs.protected and c.deletion_timestamp is None)
            if counts.active - replacing > int((constraint_set.nodepool or {})["replicas"]):
                continue  # "We dont want to disrupt nodes until scale down is complete"
            template = inputs.static.template(candidate.provisioner)
            if node_limit_left(counts, template.node_limit, 1) < 1:
                continue
            # its own client token: a node's name may come back (an IP's), the decision's time does not
            replacement = static_claim(template, f"drift-{candidate.name}-{inputs.now:%Y%m%dT%H%M%S.%f}")
            return Command(DRIFT, (candidate,), (replacement,), why=why, stage=DRIFT)
        return None

    # --- consolidation ---------------------------------------------------------------------------------------

    def _consolidation(
        self, inputs: Inputs, candidates: list[Candidate], decision: Decision, stages: Sequence[str]
    ) -> Command | None:
        if not any(stage in stages for stage in (EMPTY, MULTI_NODE, SINGLE_NODE)):
            return None
        eligible = [c for c in candidates if c.consolidatable and not c.eventual]
        # v0.31.1: lowest disruption cost first; v1.14.1: highest price per unit of disruption first.
        v031 = sorted((c for c in eligible if not c.nodepool), key=lambda c: (c.disruption_cost, c.name))
        v1 = cast(list[Candidate], balanced.ordered(c for c in eligible if c.nodepool))
        eligible = v031 + v1
        decision.eligible[CONSOLIDATION] = sum(1 for c in eligible if not c.nodepool)  # v0.31's: Provisioners' nodes
        timer = _V1Timer(decision, decision.nodepools)
        if timer.on:  # Emptiness's candidates, then consolidation's (consolidation.go `ShouldDisrupt`)
            decision.v1_eligible[V1_EMPTY] = sum(1 for c in eligible if c.nodepool and c.empty)
            decision.v1_eligible[V1_UNDERUTILIZED] = sum(
                1 for c in eligible if c.nodepool and c.underutilized and not c.empty
            )
        empty = within_budgets([c for c in eligible if c.empty], self._allowance(inputs, v1budgets.EMPTY, decision))
        timer.lap(V1_EMPTY, "empty", EMPTY in stages)
        if EMPTY in stages and empty:
            savings = pricing.total(c.price for c in empty)
            return Command(CONSOLIDATION, tuple(empty), why="empty", savings=savings, stage=EMPTY)
        # A WhenEmpty NodePool's nodes go only empty; a NodePool's empty node only through emptiness (v1.14.1).
        eligible = [c for c in eligible if c.underutilized and not (c.nodepool and c.empty)]
        allowance = self._allowance(inputs, v1budgets.UNDERUTILIZED, decision)
        eligible = [c for c in eligible if allowance.get(c.provisioner, 1) > 0]
        evaluator = self._evaluator(inputs, [c for c in eligible if c.nodepool])
        if MULTI_NODE in stages:
            deadline = inputs.clock() + inputs.multi_node_budget
            for group in ([c for c in eligible if not c.nodepool], [c for c in eligible if c.nodepool]):
                batch = within_budgets(group, allowance)[:MULTI_NODE_LIMIT]  # at most each NodePool's allowance
                command = self._multi_node(inputs, batch, decision, deadline, evaluator)
                if command is not None:
                    timer.lap(V1_UNDERUTILIZED, "multi")
                    return command
                if decision.cut_short or "multi-machine" in decision.timeouts or "multi" in decision.v1_timeouts:
                    break
            timer.lap(V1_UNDERUTILIZED, "multi")
        if SINGLE_NODE not in stages:
            return None
        single = [c for c in eligible if not c.nodepool] + cast(
            list[Candidate], balanced.interleaved([c for c in eligible if c.nodepool], self._unseen_pools)
        )
        deadline = inputs.clock() + inputs.single_node_budget
        for position, candidate in enumerate(single):
            if decision.interrupted(inputs):
                return None
            if inputs.clock() > deadline:
                decision.stop(
                    f"single-node consolidation stopped after {position} of {len(single)} candidates: "
                    f"its {inputs.single_node_budget:g}s budget ran out"
                )
                # v1.14.1 `PreviouslyUnseenNodePools`: the pools it did not reach go first next time.
                self._unseen_pools = frozenset(c.provisioner for c in single[position:] if c.nodepool)
                if self._unseen_pools:
                    decision.v1_timeouts.append("single")
                if any(not c.nodepool for c in single[position:]):
                    decision.timeouts.append("single-machine")
                timer.lap(V1_UNDERUTILIZED, "single")
                return None
            if not evaluator.can_pass(candidate):
                decision.blocked[candidate.name] = (
                    "consolidation: even deleting it would not pass its NodePool's Balanced score ("
                    + self._best_case(evaluator, candidate) + ")"
                )
                continue
            command = self.consolidate(inputs, [candidate], decision)
            if command is None:
                continue
            if candidate.nodepool:
                approved, scores = evaluator.evaluate([candidate], command.savings)
                pools = evaluator.pools_of([candidate])
                decision.moves.append(Move(SINGLE_NODE, command.names, approved, scores, pools))
                if not approved:
                    decision.blocked[candidate.name] = "consolidation: its NodePool's Balanced score refuses the move ("
                    decision.blocked[candidate.name] += "; ".join(s.message() for s in scores if not s.approved) + ")"
                    continue
            timer.lap(V1_UNDERUTILIZED, "single")
            return command
        self._unseen_pools = frozenset()
        timer.lap(V1_UNDERUTILIZED, "single")
        return None

    @staticmethod
    def _best_case(evaluator: balanced.Evaluator, candidate: Candidate) -> str:
        totals = evaluator.totals.get(candidate.provisioner, balanced.PoolTotals(0.0, 0.0))
        return balanced.score_move(
            candidate.provisioner, balanced.price_of(candidate), candidate.reschedule_cost, totals
        ).message()

    def _evaluator(self, inputs: Inputs, candidates: Sequence[Candidate]) -> balanced.Evaluator:
        """The Balanced scoring of this decision: each Balanced NodePool's totals over all its nodes (computed only
        when a candidate's pool is Balanced)."""
        sets = inputs.templates.sets
        policies = {
            c.provisioner: consolidation_policy(constraint_set)
            for c in candidates
            if (constraint_set := sets.get(c.provisioner)) is not None
        }
        pools = sorted(pool for pool, policy in policies.items() if policy == balanced.BALANCED)
        if not pools:
            return balanced.Evaluator(policies, {})
        view = inputs.view
        wanted = set(pools)
        nodes = [
            (
                name,
                node.provisioner or "",
                pricing.offering_price(
                    inputs.templates, node.provisioner or "", node.labels.get(wk.INSTANCE_TYPE, ""),
                    node.labels.get(wk.ZONE, ""), node.labels.get(wk.CAPACITY_TYPE, ""),
                ),
                balanced.reschedule_cost(p.disruption_cost for p in view.pods_on(name) if not p.daemon),
            )
            for name, node in sorted(view.nodes.items())
            if node.ours and node.provisioner in wanted
        ]
        return balanced.Evaluator(policies, balanced.pool_totals(pools, nodes, candidates))

    def _multi_node(
        self, inputs: Inputs, eligible: list[Candidate], decision: Decision, deadline: float,
        evaluator: balanced.Evaluator | None = None,
    ) -> Command | None:
        """The most candidates (at least 2), first in consolidation order, that can go (binary search, until
        `deadline`: then the best found so far); a NodePool's Balanced score may refuse a batch (v1.14.1
        `firstNConsolidationOption`)."""
        low, high = 2, len(eligible)
        best = None
        best_scores: tuple[balanced.Score, ...] = ()
        rejected: Move | None = None
        while low <= high:
            if decision.interrupted(inputs):
                return None
            if inputs.clock() > deadline:
                decision.stop(f"multi-node consolidation stopped: its {inputs.multi_node_budget:g}s budget ran out")
                if any(c.nodepool for c in eligible):
                    decision.v1_timeouts.append("multi")
                else:
                    decision.timeouts.append("multi-machine")
                break
            middle = (low + high) // 2
            command = self.consolidate(inputs, eligible[:middle], Decision())
            if command is not None and evaluator is not None:
                approved, scores = evaluator.evaluate(command.candidates, command.savings)
                if not approved:
                    rejected = Move(MULTI_NODE, command.names, False, scores, evaluator.pools_of(command.candidates))
                    command = None
                else:
                    best_scores = scores
            if command is not None:
                best = command
                low = middle + 1
            else:
                high = middle - 1
        if best is not None and best_scores and evaluator is not None:
            decision.moves.append(Move(MULTI_NODE, best.names, True, best_scores, evaluator.pools_of(best.candidates)))
        elif best is None and rejected is not None:  # once, for the last batch refused
            decision.moves.append(rejected)
        return best

    def consolidate(self, inputs: Inputs, candidates: Sequence[Candidate], decision: Decision) -> Command | None:
        """The command that consolidates exactly these candidates (Karpenter's `computeConsolidation`), None when
        they cannot go together; a single candidate's reason goes to `decision.blocked`."""
        plan = self.simulate(inputs, candidates)
        single = candidates[0].name if len(candidates) == 1 else None

        def blocked(why: str) -> None:
            if single:
                decision.blocked[single] = f"consolidation: {why}"

        unplaceable = self.unplaceable(inputs, plan, candidates)
        if unplaceable:
            blocked(unplaceable)
            return None
        stage = SINGLE_NODE if single else MULTI_NODE
        price = pricing.total(c.price for c in candidates)
        if not plan.claims:
            why = "its pods fit on other nodes" if single else f"{len(candidates)} nodes' pods fit on other nodes"
            return Command(CONSOLIDATION, tuple(candidates), why=why, savings=price, stage=stage)
        if len(plan.claims) > 1:
            blocked(f"can't remove without creating {len(plan.claims)} nodes")
            return None
        if price is None:
            blocked("no price data for the node")
            return None
        claim = plan.claims[0]
        template = inputs.templates.template(claim.template)
        cheaper = pricing.cheaper_options(template, claim, price)
        if not cheaper:
            blocked("can't replace with a cheaper node")
            return None
        if all(c.capacity_type == wk.CAPACITY_SPOT for c in candidates) and claim.requirements.get_or_exists(
            wk.CAPACITY_TYPE
        ).has(wk.CAPACITY_SPOT):
            blocked("can't replace a spot node with a spot node")
            return None
        if not single:  # several nodes by one of a type among them: deleting fewer does it with less disruption
            ceiling = pricing.same_type_ceiling(((c.instance_type, c.price) for c in candidates), cheaper)
            cheaper = tuple(o for o in cheaper if pricing.worst_launch_price(template, claim, o) < ceiling)
            if not cheaper:
                return None
        replacement = dataclasses.replace(claim, options=cheaper)
        saving = price - min((o.price for o in cheaper if o.price is not None), default=price)
        why = "a cheaper node takes its pods" if single else f"{len(candidates)} nodes' pods fit on fewer"
        return Command(CONSOLIDATION, tuple(candidates), (replacement,), why=why, savings=saving, stage=stage)


def drift_reason(
    node: Obj,
    constraint_set: ConstraintSet | None,
    templates: Templates,
    provisioner: str,
    requirements: Requirements | None = None,
    node_hash: str | None = None,
    static: Mapping[str, str] | None = None,
) -> str:
    """Why a node of ours has drifted from the constraint sets in force ("" when it has not). `requirements`,
    `node_hash` and (a NodePool's) `static` hashes: the set's, when the caller has them (computed here when not).
    A NodePool's node drifts as Karpenter v1.14.1 decides (`_nodepool_drift`), a Provisioner's as v0.31."""
    if constraint_set is None:
        if provisioner in templates.left_out:
            return ""  # its set is there but cannot be used now: not a policy change
        return f"provisioner {provisioner} is no longer in the constraint sets"
    if requirements is None:
        requirements = Requirements.from_node_selector(constraint_set.requirements)
    if constraint_set.is_nodepool:
        return _nodepool_drift(node, constraint_set, requirements, static)
    annotations = objects.metadata(node).get("annotations") or {}
    stamped = annotations.get(node_info.ANNOTATION_NODE_HASH)
    if stamped is not None and stamped != (node_hash if node_hash is not None else constraint_set.node_hash):
        return f"provisioner {provisioner}'s labels, taints, kubelet or node template changed"
    labels = objects.metadata(node).get("labels") or {}
    instance_type = labels.get(wk.INSTANCE_TYPE, "")
    if constraint_set.admitted and instance_type not in constraint_set.admitted:
        return f"instance type {instance_type} is no longer admitted by provisioner {provisioner}"
    return _unsatisfied(requirements, labels)


def _nodepool_drift(
    node: Obj, constraint_set: ConstraintSet, requirements: Requirements, static: Mapping[str, str] | None
) -> str:
    """Karpenter v1.14.1's drift of a NodePool's node (core pkg/controllers/nodeclaim/disruption/drift.go
    `isDrifted`), static drift first: the node's NodePool or EC2NodeClass hash differs from its set's now under the
    same hash version (`api.v1.statichash.static_drift`; a missing or stale version is none), then requirement
    drift — the node's labels no longer compatible with the NodePool's requirements, a key the node lacks included
    whether well-known or not (`areRequirementsDrifted`: `Compatible` with no options). Cloud drift (the image) is
    the caller's."""
    annotations = objects.annotations(node)
    why = static_drift(annotations, static if static is not None else static_hash_annotations(constraint_set))
    if why:
        return why
    labels = objects.labels(node)
    incompatible = Requirements.from_labels(dict(labels)).incompatibilities(requirements, frozenset())
    if incompatible:
        return f"RequirementsDrifted: {incompatible[0]} (NodePool {constraint_set.name}'s requirements)"
    return ""


def image_drift(node: Obj, current: str | None) -> str:
    """Why a node's image has drifted ("" when it has not, or the current image cannot be told): the node template
    now resolves another image for its instance type (a new AMI release under the same family or selector)."""
    launched = objects.annotations(node).get(node_info.ANNOTATION_IMAGE)
    if not launched or not current or launched == current:
        return ""
    return f"its image {launched} is no longer the node template's ({current})"


#: Instance-type-not-found drift looks at a node once it is this old, then at most this often while its type is
#: found (core v1.14.1 drift.go: `time.Hour` and its check cache's 30 minutes).
TYPE_CHECK_AGE = dt.timedelta(hours=1)
TYPE_CHECK_INTERVAL = dt.timedelta(minutes=30)


def instance_type_not_found(labels: Mapping[str, str], types: Sequence[InstanceType]) -> str:
    """Why a NodePool node has drifted because its instance type is no longer offered ("" when it has not), as core
    v1.14.1's drift.go `instanceTypeNotFound`: its `node.kubernetes.io/instance-type` label names none of the types
    its node class offers now (no label included), or none of that type's offerings — available or not — is
    compatible with the node's zone and capacity-type labels (a label the node lacks is no constraint; a `reserved`
    node is compatible with on-demand offerings too, as drift.go:135-145 has it)."""
    name = labels.get(wk.INSTANCE_TYPE)
    offered = next((t for t in types if t.name == name), None) if name else None
    if offered is None:
        return f"InstanceTypeNotFound: its instance type {name or '(no label)'} is no longer offered"
    zone, capacity = labels.get(wk.ZONE), labels.get(wk.CAPACITY_TYPE)
    # a reserved node may be demoted to on-demand after its launch: reserved or on-demand offerings both keep it, and
    # its reservation labels are not compared (drift.go:135-145; its reservation is `CapacityReservationDrift`'s)
    accepted = (
        None if capacity is None
        else {wk.CAPACITY_RESERVED, wk.CAPACITY_ON_DEMAND} if capacity == wk.CAPACITY_RESERVED
        else {capacity}
    )
    if not any((zone is None or o.zone == zone) and (accepted is None or o.capacity_type in accepted)
               for o in offered.offerings):
        return (f"InstanceTypeNotFound: {name} is no longer offered in {zone or 'any zone'} as "
                f"{capacity or 'any capacity type'}")
    return ""


def network_drift(instance: Instance | None, network: Network | None, labels: Mapping[str, str] | None = None) -> str:
    """Why a NodePool node's instance has drifted from the subnets, security groups and placement group its
    EC2NodeClass resolves to now ("" when it has not, or when either side cannot be told), as aws v1.14.1's
    pkg/cloudprovider/drift.go `isNodeClassDrifted` decides after the AMI: `areSecurityGroupsDrifted` first — the
    instance's set of groups is not the class's (more, fewer or others) —, then `isSubnetDrifted` — the instance's
    subnet is not among the class's —, then `isCapacityReservationDrifted` — a reserved instance's reservation
    (`CapacityReservationId` of a `capacity-reservations-only` launch, as DescribeInstances reports it now: an
    instance EC2 moved to on-demand has none and does not drift) is not among those the class selects now —, then
    `isPlacementGroupDrifted` — the node's `placement-group-id` label (none: "") is not the id of the group the class
    resolves to (none: ""): a selector added, removed or changed. Nothing resolving (Karpenter's "no subnets are
    discovered" / "no security groups" errors), reservations the cloud could not tell, an instance the cloud does not
    know, or a field it did not report decide nothing."""
    if instance is None or network is None:
        return ""
    groups = instance.security_groups
    if groups is not None and network.security_groups and frozenset(groups) != network.security_groups:
        return (f"SecurityGroupDrift: its security groups {', '.join(sorted(groups)) or '(none)'} are not its "
                f"EC2NodeClass's ({', '.join(sorted(network.security_groups))})")
    if instance.subnet_id and network.subnets and instance.subnet_id not in network.subnets:
        return (f"SubnetDrift: its subnet {instance.subnet_id} is not among its EC2NodeClass's "
                f"({', '.join(sorted(network.subnets))})")
    reservation = instance.reservation_id if instance.capacity_type == wk.CAPACITY_RESERVED else ""
    if reservation and network.reservations is not None and reservation not in network.reservations:
        return (f"CapacityReservationDrift: its capacity reservation {reservation} is not among its EC2NodeClass's "
                f"({', '.join(sorted(network.reservations)) or 'none'})")
    if labels is not None and network.placement_group is not None:
        launched = labels.get(wk.PLACEMENT_GROUP_ID, "")
        if launched != network.placement_group:
            return (f"PlacementGroupDrift: its placement group {launched or '(none)'} is not its EC2NodeClass's "
                    f"({network.placement_group or 'none'})")
    return ""


def _unsatisfied(requirements: Requirements, labels: Mapping[str, str]) -> str:
    for key in requirements:
        requirement = requirements[key]
        value = labels.get(key)
        if value is None:
            if requirement.operator() in (Operator.NOT_IN, Operator.DOES_NOT_EXIST):
                continue
            if key not in wk.WELL_KNOWN_LABELS:
                return f"the node lacks label {key} its provisioner now requires"
            continue  # a well-known key the node does not carry (e.g. a hostname): nothing to compare
        if not requirement.has(value):
            return f"label {key}={value} no longer satisfies {requirement}"
    return ""


__all__ = [
    "CONSOLIDATION",
    "DELETE",
    "DRIFT",
    "EMPTY",
    "EXPIRATION",
    "MULTI_NODE",
    "REPLACE",
    "SINGLE_NODE",
    "STAGES",
    "Candidate",
    "Command",
    "Decider",
    "Decision",
    "Inputs",
    "Move",
    "drift_reason",
    "image_drift",
    "instance_type_not_found",
    "lifetime_remaining",
    "network_drift",
]
