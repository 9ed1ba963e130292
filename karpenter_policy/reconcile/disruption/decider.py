"""Disruption decisions: which nodes of ours should go for expiry, drift or consolidation, and what replaces them.

Karpenter v0.31's deprovisioning, on the scheduling core that provisions (`scheduling/`): every "would these pods
fit elsewhere?" is a scheduling run with the candidate nodes taken out and their pods pending. In this order, the
first method that finds something decides (one command at a time):

1. **expiration** — a node older than its provisioner's `ttlSecondsUntilExpired` (the oldest first; never before
   :data:`EXPIRY_FLOOR`, ten minutes, whatever the TTL);
2. **drift** — a node whose provisioner is gone from the constraint sets, whose node hash (labels, taints,
   kubelet, node template: `ConstraintSet.node_hash`) differs from its set's, whose labels no longer satisfy
   its set's requirements (an instance type no longer admitted, a zone or capacity type removed), or whose image
   is no longer the one its node template resolves (a new AMI release): a merged policy change rolls the fleet,
   empty drifted nodes first and all at once;
3. **consolidation** (provisioners with `consolidation.enabled`) — empty nodes are deleted; then several nodes
   whose pods fit on the others plus at most one new node (multi-node), then one node at a time (single-node):
   delete it when its pods fit on the others, replace it when one strictly cheaper node takes them; never spot
   by spot; the $/h saved is part of the decision.

Expiry and drift replace with as many new nodes as the pods need (none when they fit on the others) and skip a
node whose pods would not all schedule. A node is never a candidate while being deleted, before it is
initialized, when annotated `karpenter.sh/do-not-evict` pods run on it, or when a PodDisruptionBudget allows no
disruption of one of its pods; `karpenter.sh/do-not-consolidate` keeps it from consolidation only. Pods that
would be placed on a node not yet initialized do not count as placed.

This module decides; :mod:`~karpenter_policy.reconcile.disruption.deprovisioner` carries a decision out (replacements
launched and initialized first, then the candidates deleted through the termination finalizer).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.kube import disruption as budgets
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import known_price
from karpenter_policy.model.requirements import Operator, Requirements
from karpenter_policy.reconcile.disruption.view import DisruptionView
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.records import PodRecord
from karpenter_policy.reconcile.templates import Templates
from karpenter_policy.reconcile.termination.terminator import DO_NOT_EVICT
from karpenter_policy.scheduling import ClaimPlan, Plan, Pod, RunningPods, Scheduler, SchedulerOptions
from karpenter_policy.scheduling.running import WithoutNodes
from karpenter_policy.scheduling.vectors import Vector, add, fits, subtract

EXPIRATION = "expiration"
DRIFT = "drift"
CONSOLIDATION = "consolidation"
DELETE = "delete"
REPLACE = "replace"
DO_NOT_CONSOLIDATE = "karpenter.sh/do-not-consolidate"
SPOT = "spot"
#: No node expires before it has run this long, whatever its provisioner's ttlSecondsUntilExpired (compile warns,
#: `ttl-churn`, below an hour): with a TTL of 0 every node would be replaced as soon as it is initialized, and its
#: replacement after it, without end; with the floor, a node is replaced at most every ten minutes.
EXPIRY_FLOOR = 600
#: Multi-node consolidation looks at this many candidates at most (Karpenter's limit).
MULTI_NODE_LIMIT = 100


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node of ours that could go: what it runs (`pods`, DaemonSets' left out) and what it costs."""

    name: str
    provisioner: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None  # $/h of its offering; None: no price data
    pods: tuple[Pod, ...]
    disruption_cost: float
    created: dt.datetime | None
    consolidatable: bool  # its provisioner consolidates and the node is not annotated do-not-consolidate

    def describe(self) -> str:
        """As Karpenter logs a machine: `name/type/capacity-type`."""
        return f"{self.name}/{self.instance_type}/{self.capacity_type}"


@dataclass(frozen=True, slots=True)
class Command:
    """A decision: delete `candidates`, after launching `replacements` (their pods are the candidates')."""

    method: str  # expiration | drift | consolidation
    candidates: tuple[Candidate, ...]
    replacements: tuple[ClaimPlan, ...] = ()
    why: str = ""
    savings: float | None = None  # $/h saved (consolidation; None: no price data)

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


@dataclass(slots=True)
class Decision:
    command: Command | None = None
    #: node name → why it cannot be disrupted now (a budget, do-not-evict, pods that would not schedule …).
    blocked: dict[str, str] = field(default_factory=dict)
    #: seconds until the next node expires (None: none will).
    expires_in: float | None = None
    #: why the decision stopped before it looked at everything ("": it did not).
    stopped: str = ""
    #: what Karpenter's metrics tell of it: per method looked at, the candidates it found eligible and the seconds
    #: it took; the consolidations its budget stopped (`multi-machine`, `single-machine`).
    eligible: dict[str, int] = field(default_factory=dict)
    evaluated: dict[str, float] = field(default_factory=dict)
    timeouts: list[str] = field(default_factory=list)

    def interrupted(self, inputs: Inputs) -> bool:
        """Whether the decision must stop now (something more urgent happened); notes why once."""
        if not self.stopped and inputs.interrupted():
            self.stopped = "the decision stopped: pods became pending (provisioning goes first)"
        return bool(self.stopped)


@dataclass(frozen=True, slots=True)
class Inputs:
    """What one decision looks at: the cluster as the decision's start saw it (`view`), the node templates of the
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


def offering_price(
    templates: Templates, provisioner: str, instance_type: str, zone: str, capacity: str
) -> float | None:
    """$/h of one offering as the provisioner's template prices it (None: unknown type or no price data)."""
    if provisioner not in templates.sets:
        return None
    table = templates.template(provisioner).table
    position = table.position.get(instance_type)
    if position is None:
        return None
    for price, z, c in table.offerings[position]:
        if table.zones[z] == zone and table.capacity_types[c] == capacity:
            return known_price(price)
    return None


def _created(node: Obj) -> dt.datetime | None:
    stamp = objects.creation_timestamp(node)
    if not stamp:
        return None
    try:
        return objects.parse_time(stamp)
    except ValueError:
        return None


class Decider:
    """Finds the next command (see the module docstring)."""

    def __init__(
        self, scheduler_options: SchedulerOptions, on_simulation: Callable[[float], None] = lambda seconds: None
    ) -> None:
        self.scheduler_options = scheduler_options
        self.on_simulation = on_simulation  # the seconds of each scheduling simulation (a metric)

    # --- candidates ----------------------------------------------------------------------------------------

    def candidates(self, inputs: Inputs, decision: Decision) -> list[Candidate]:
        """Our initialized nodes that may be disrupted; the others that are blocked go to `decision.blocked`."""
        view = inputs.view
        exhausted = [  # the budgets that allow no disruption now (each computed once, not once per pod)
            pdb for pdb in inputs.budgets if budgets.disruption_budget(pdb, view.pods).disruptions_allowed < 1
        ] if inputs.budgets else []
        found = []
        for name, node in sorted(view.nodes.items()):
            if not node.ours or node.deleting or name in inputs.protected:
                continue
            if not node.initialized:
                continue
            pods = [p for p in view.pods_on(name) if not p.daemon]
            why = self._blocked(pods, exhausted)
            if why:
                decision.blocked[name] = why
                continue
            labels = node.labels
            provisioner = node.provisioner or ""
            constraint_set = inputs.templates.sets.get(provisioner)
            instance_type = labels.get(wk.INSTANCE_TYPE, "")
            zone = labels.get(wk.ZONE, "")
            capacity = labels.get(wk.CAPACITY_TYPE, "")
            scheduled = tuple(pod for p in pods if (pod := view.scheduling_pod(p)) is not None)
            consolidatable = (
                constraint_set is not None
                and constraint_set.consolidation_enabled
                and node.annotations.get(DO_NOT_CONSOLIDATE) != "true"
            )
            found.append(
                Candidate(
                    name=name,
                    provisioner=provisioner,
                    instance_type=instance_type,
                    zone=zone,
                    capacity_type=capacity,
                    price=offering_price(inputs.templates, provisioner, instance_type, zone, capacity),
                    pods=scheduled,
                    disruption_cost=sum(p.disruption_cost for p in pods),
                    created=_created(node.obj),
                    consolidatable=consolidatable,
                )
            )
        return found

    @staticmethod
    def _blocked(pods: Iterable[PodRecord], exhausted: Sequence[Obj]) -> str:
        for pod in pods:
            if pod.deleting:
                continue
            if pod.annotations.get(DO_NOT_EVICT) == "true":
                return f"pod {pod.key} has the {DO_NOT_EVICT} annotation"
            for pdb in exhausted:
                if budgets.selects(pdb, pod.obj):
                    return f"PodDisruptionBudget {objects.namespace(pdb)}/{objects.name(pdb)} prevents pod evictions"
        return ""

    # --- the decision ----------------------------------------------------------------------------------------

    def decide(self, inputs: Inputs) -> Decision:
        decision = Decision()
        candidates = self.candidates(inputs, decision)
        methods = ((EXPIRATION, self._expiration), (DRIFT, self._drift), (CONSOLIDATION, self._consolidation))
        for name, method in methods:
            if decision.interrupted(inputs):
                break
            started = time.perf_counter()
            command = method(inputs, candidates, decision)
            decision.evaluated[name] = time.perf_counter() - started
            if command is not None:
                decision.command = command
                break
        if decision.stopped and decision.stopped.startswith("the decision stopped"):
            decision.command = None  # a command from a decision that was cut short is not acted on
        return decision

    def simulate(self, inputs: Inputs, candidates: Sequence[Candidate]) -> Plan:
        """Where the candidates' pods would go with the candidates gone (new claims where nothing has room). Only
        the nodes with room for the smallest of those pods are offered; every other node still counts against
        its provisioner's limits and gives its labels as topology domains."""
        names = {c.name for c in candidates}
        view = inputs.view
        pods = [pod for c in candidates for pod in c.pods]
        smallest: Vector | None = None
        for pod in pods:
            smallest = pod.requests if smallest is None else tuple(map(min, smallest, pod.requests))
        existing = [
            n for name, n in view.existing.items()
            if name not in names and (smallest is None or fits(add(n.requests, smallest), n.allocatable))
        ]
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
            WithoutNodes(view.running or RunningPods(), names),
            view.namespace_labels,
            self.scheduler_options,
            used=used,
            node_domains=view.domains,
        )
        plan = scheduler.solve(pods)
        self.on_simulation(time.perf_counter() - started)
        return plan

    def _unplaceable(self, inputs: Inputs, plan: Plan) -> str:
        """Why the plan does not place every pod on capacity that is there or will be launched ("" if it does)."""
        if plan.failures:
            failure = next(iter(plan.failures.values()))
            return f"pod {failure.pod.key} would not schedule: {failure.message()}"
        existing = inputs.view.existing
        for node, pods in plan.existing.items():
            known = existing.get(node)
            if (known is None or not known.initialized) and pods:
                return f"pod {pods[0].key} would schedule against the non-initialized node {node}"
        return ""

    def _replacing(
        self, method: str, inputs: Inputs, candidate: Candidate, why: str, decision: Decision
    ) -> Command | None:
        """Expiry and drift: the candidate goes, with as many new nodes as its pods need."""
        if not candidate.pods:
            return Command(method, (candidate,), why=why)
        plan = self.simulate(inputs, [candidate])
        unplaceable = self._unplaceable(inputs, plan)
        if unplaceable:
            decision.blocked[candidate.name] = f"{method}: {unplaceable}"
            return None
        return Command(method, (candidate,), tuple(plan.claims), why=why)

    def _expiration(self, inputs: Inputs, candidates: list[Candidate], decision: Decision) -> Command | None:
        expired: list[tuple[float, Candidate, int]] = []
        for candidate in candidates:
            constraint_set = inputs.templates.sets.get(candidate.provisioner)
            ttl = constraint_set.ttl_seconds_until_expired if constraint_set is not None else None
            if ttl is None or candidate.created is None:
                continue
            # In seconds, not datetimes: a TTL may be any int64, far beyond what a datetime can hold. A node
            # runs at least EXPIRY_FLOOR whatever the TTL: 0 would replace every node, and its replacement, at once.
            left = max(ttl, EXPIRY_FLOOR) - (inputs.now - candidate.created).total_seconds()
            expires = inputs.now.timestamp() + left
            if left > 0:
                decision.expires_in = left if decision.expires_in is None else min(decision.expires_in, left)
                continue
            expired.append((expires, candidate, ttl))
        decision.eligible[EXPIRATION] = len(expired)
        for _, candidate, ttl in sorted(expired, key=lambda e: (e[0], e[1].name)):
            if decision.interrupted(inputs):
                return None
            command = self._replacing(EXPIRATION, inputs, candidate, f"expired {ttl}s after creation", decision)
            if command is not None:
                return command
        return None

    def _drift(self, inputs: Inputs, candidates: list[Candidate], decision: Decision) -> Command | None:
        drifted = []
        requirements: dict[str, Requirements] = {}  # by provisioner: parsed once per decision
        hashes: dict[str, str] = {}  # by provisioner: its node hash, computed once per decision
        for candidate in candidates:
            node = inputs.view.nodes[candidate.name].obj
            constraint_set = inputs.templates.sets.get(candidate.provisioner)
            if constraint_set is not None and candidate.provisioner not in requirements:
                requirements[candidate.provisioner] = Requirements.from_node_selector(constraint_set.requirements)
                hashes[candidate.provisioner] = constraint_set.node_hash
            why = drift_reason(node, constraint_set, inputs.templates, candidate.provisioner,
                               requirements.get(candidate.provisioner), hashes.get(candidate.provisioner))
            if not why and node_info.ANNOTATION_IMAGE in objects.annotations(node):
                why = image_drift(node, inputs.images(candidate.provisioner, candidate.instance_type))
            if why:
                drifted.append((candidate, why))
        decision.eligible[DRIFT] = len(drifted)
        empty = [(c, why) for c, why in drifted if not c.pods]
        if empty:
            return Command(DRIFT, tuple(c for c, _ in empty), why="; ".join(sorted({w for _, w in empty})))
        for candidate, why in drifted:
            if decision.interrupted(inputs):
                return None
            command = self._replacing(DRIFT, inputs, candidate, why, decision)
            if command is not None:
                return command
        return None

    # --- consolidation ---------------------------------------------------------------------------------------

    def _consolidation(self, inputs: Inputs, candidates: list[Candidate], decision: Decision) -> Command | None:
        eligible = sorted((c for c in candidates if c.consolidatable), key=lambda c: (c.disruption_cost, c.name))
        decision.eligible[CONSOLIDATION] = len(eligible)
        empty = [c for c in eligible if not c.pods]
        if empty:
            savings = _total(c.price for c in empty)
            return Command(CONSOLIDATION, tuple(empty), why="empty", savings=savings)
        started = inputs.clock()
        command = self._multi_node(inputs, eligible[:MULTI_NODE_LIMIT], decision, started + inputs.multi_node_budget)
        if command is not None:
            return command
        deadline = inputs.clock() + inputs.single_node_budget
        for position, candidate in enumerate(eligible):
            if decision.interrupted(inputs):
                return None
            if inputs.clock() > deadline:
                decision.stopped = (
                    f"single-node consolidation stopped after {position} of {len(eligible)} candidates: "
                    f"its {inputs.single_node_budget:g}s budget ran out"
                )
                decision.timeouts.append("single-machine")
                return None
            command = self._consolidate(inputs, [candidate], decision)
            if command is not None:
                return command
        return None

    def _multi_node(
        self, inputs: Inputs, eligible: list[Candidate], decision: Decision, deadline: float
    ) -> Command | None:
        """The most candidates (at least 2), first in disruption-cost order, that can go (binary search, until
        `deadline`: then the best found so far)."""
        low, high = 2, len(eligible)
        best = None
        while low <= high:
            if decision.interrupted(inputs):
                return None
            if inputs.clock() > deadline:
                decision.stopped = (
                    f"multi-node consolidation stopped: its {inputs.multi_node_budget:g}s budget ran out"
                )
                decision.timeouts.append("multi-machine")
                break
            middle = (low + high) // 2
            command = self._consolidate(inputs, eligible[:middle], Decision())
            if command is not None:
                best = command
                low = middle + 1
            else:
                high = middle - 1
        return best

    def _consolidate(self, inputs: Inputs, candidates: list[Candidate], decision: Decision) -> Command | None:
        plan = self.simulate(inputs, candidates)
        single = candidates[0].name if len(candidates) == 1 else None
        unplaceable = self._unplaceable(inputs, plan)
        if unplaceable:
            if single:
                decision.blocked[single] = f"consolidation: {unplaceable}"
            return None
        price = _total(c.price for c in candidates)
        if not plan.claims:
            return Command(CONSOLIDATION, tuple(candidates), why="its pods fit on other nodes", savings=price)
        if len(plan.claims) > 1:
            if single:
                decision.blocked[single] = f"consolidation: can't remove without creating {len(plan.claims)} nodes"
            return None
        if price is None:
            if single:
                decision.blocked[single] = "consolidation: no price data for the node"
            return None
        claim = plan.claims[0]
        cheaper = [o for o in claim.options if o.price is not None and o.price < price]
        if all(c.capacity_type == SPOT for c in candidates):
            options = [o for o in cheaper if o.capacity_type != SPOT]
            if cheaper and not options:
                if single:
                    decision.blocked[single] = "consolidation: can't replace a spot node with a spot node"
                return None
            cheaper = options
        if not cheaper:
            if single:
                decision.blocked[single] = "consolidation: can't replace with a cheaper node"
            return None
        replacement = dataclasses.replace(claim, options=tuple(cheaper))
        saving = price - (cheaper[0].price or 0.0)
        why = "a cheaper node takes its pods" if single else f"{len(candidates)} nodes' pods fit on fewer"
        return Command(CONSOLIDATION, tuple(candidates), (replacement,), why=why, savings=saving)


def _total(prices: Iterable[float | None]) -> float | None:
    total = 0.0
    for price in prices:
        if price is None:
            return None
        total += price
    return total


def drift_reason(
    node: Obj,
    constraint_set: ConstraintSet | None,
    templates: Templates,
    provisioner: str,
    requirements: Requirements | None = None,
    node_hash: str | None = None,
) -> str:
    """Why a node of ours has drifted from the constraint sets in force ("" when it has not). `requirements` and
    `node_hash`: the set's, when the caller has them (computed here when not given)."""
    if constraint_set is None:
        if provisioner in templates.left_out:
            return ""  # its set is there but cannot be used now: not a policy change
        return f"provisioner {provisioner} is no longer in the constraint sets"
    annotations = objects.metadata(node).get("annotations") or {}
    stamped = annotations.get(node_info.ANNOTATION_NODE_HASH)
    if stamped is not None and stamped != (node_hash if node_hash is not None else constraint_set.node_hash):
        return f"provisioner {provisioner}'s labels, taints, kubelet or node template changed"
    labels = objects.metadata(node).get("labels") or {}
    instance_type = labels.get(wk.INSTANCE_TYPE, "")
    if constraint_set.admitted and instance_type not in constraint_set.admitted:
        return f"instance type {instance_type} is no longer admitted by provisioner {provisioner}"
    if requirements is None:
        requirements = Requirements.from_node_selector(constraint_set.requirements)
    return _unsatisfied(requirements, labels)


def image_drift(node: Obj, current: str | None) -> str:
    """Why a node's image has drifted ("" when it has not, or the current image cannot be told): the node template
    now resolves another image for its instance type (a new AMI release under the same family or selector)."""
    launched = objects.annotations(node).get(node_info.ANNOTATION_IMAGE)
    if not launched or not current or launched == current:
        return ""
    return f"its image {launched} is no longer the node template's ({current})"


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
    "DO_NOT_CONSOLIDATE",
    "DRIFT",
    "EXPIRATION",
    "REPLACE",
    "Candidate",
    "Command",
    "Decider",
    "Decision",
    "Inputs",
    "drift_reason",
    "image_drift",
    "offering_price",
]
