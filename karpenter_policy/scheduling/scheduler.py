"""The scheduler: pending pods in, a :class:`~karpenter_policy.scheduling.plan.Plan` out. Pure: no I/O.

It follows Karpenter v0.31's `Scheduler.Solve`: pods are queued by cpu then memory, largest first; each goes to
the first existing node that takes it (initialized nodes first, then by name), else to a node claim already in
the plan, else to a new claim from the first node claim template (by weight, then name) that can launch a node for it
within its remaining limits; a pod that fits nowhere is relaxed one soft constraint at a time and queued again,
until a full pass over the queue makes no progress. Topology spread and pod (anti-)affinity narrow the domains
of each node a pod joins; DaemonSets add their requests to every node whose template they fit.

Two packing strategies share that loop:

* ``karpenter`` — Karpenter's own rule: a pod tries the claims with the fewest pods first, a claim keeps every
  type that can still hold its pods, and the cheapest of those is launched. Kept for comparison.
* ``cost`` (default) — claims are filled in the order they were made (first fit), and each new claim is capped at
  the price of the instance type that serves the waiting pods of its kind most cheaply, in whole pods of their
  mean size (for pods all of one size, the remainder that does not fill a node counted at the cheapest type that
  holds it; see `_Run._cap`). Nodes fill up to an efficient size instead of growing to the largest type and
  being right-sized after, which wastes the tail of every node. After packing, pairs of claims are re-split
  (`resplit`): the pods that take part in no topology group are shared out again where that is cheaper. Packing
  is greedy, so Karpenter's rule is run on the same batch too and its plan kept when it is better (fewer pods
  pending, then cheaper, then fewer nodes): the cost plan is never dearer than Karpenter's. The semantics are
  Karpenter's either way: every pod's requirements, taints, topology, host ports and the templates' weights and
  limits hold.

A v1 NodePool's `minValues` holds on every claim (`nodes.NodeClaim`): the price cap never narrows a claim below it,
re-splitting leaves such claims alone, and, under the Strict policy, a claim whose cheapest
:data:`MAX_INSTANCE_TYPES` types (what Karpenter sends to launch) do not meet it is dropped and its pods fail as
Karpenter v1.14.1's `Results.TruncateInstanceTypes` fails them (core pkg/controllers/provisioning/scheduling/
scheduler.go).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.model.minvalues import unmet_text
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.taints import PREFER_NO_SCHEDULE, Taint, untolerated
from karpenter_policy.scheduling.firstfit import FirstFit
from karpenter_policy.scheduling.floor import CostFloor
from karpenter_policy.scheduling.instances import InstanceTable, indices
from karpenter_policy.scheduling.nodes import ExistingNode, Fit, NodeClaim
from karpenter_policy.scheduling.openclaims import OpenClaims
from karpenter_policy.scheduling.packing import balanced_order, follow_dependencies, targets_first
from karpenter_policy.scheduling.plan import ClaimPlan, Plan, PodFailure, refused_message
from karpenter_policy.scheduling.pods import Attempt, Pod
from karpenter_policy.scheduling.reasons import (
    Refusal,
    limits_text,
    no_type_refusal,
    requirements_refusal,
    taint_refusal,
)
from karpenter_policy.scheduling.reservedclaims import NOT_RESERVED, RESERVED, RunReservations
from karpenter_policy.scheduling.resplit import resplit
from karpenter_policy.scheduling.running import ClusterPod, PodsForTopology
from karpenter_policy.scheduling.templateindex import TemplateIndex
from karpenter_policy.scheduling.templates import NodeClaimTemplate, by_weight
from karpenter_policy.scheduling.topology import (
    DomainSources,
    GroupKeys,
    Topology,
    TopologyRules,
    template_domain_taints,
)
from karpenter_policy.scheduling.vectors import CPU_I, EFA_I, MEMORY_I, ONE_POD, ZERO, Vector, add, subtract

COST = "cost"
KARPENTER = "karpenter"
STRATEGIES = (COST, KARPENTER)
HOSTNAME_PREFIX = "hostname-placeholder-"
#: How much dearer than a claim's chosen type its fallback instance types may be (cost strategy).
FALLBACK_PRICE_FACTOR = 1.5
#: How many claims that could take a pod the cost strategy compares (the first ones, in creation order).
BEST_FIT_CANDIDATES = 5
#: Packing runs that move pods left pending next to the pods they depend on (cost strategy).
REPAIRS = 2
#: How often (in pods placed) a run of Karpenter's rule beside the cost plan asks whether it can still be cheaper.
FLOOR_EVERY = 32
#: $/h a floor must exceed the cost plan's price by to stop that run (far above the sums' rounding error).
FLOOR_MARGIN = 1e-6
#: The instance types Karpenter v1.14.1 lists on a NodeClaim, cheapest first (`MaxInstanceTypes` in core
#: pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go); under Strict, minValues must hold among them.
MAX_INSTANCE_TYPES = 600


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    strategy: str = COST
    #: whose topology spread rules the run follows: v0.31's (Provisioners) or v1.14.1's (NodePools); a caller
    #: planning on NodePools says so (`check --workloads`: any NodePool in the repository)
    topology: TopologyRules = TopologyRules.V0_31
    #: capacity reservations: v1.14.1's fallback mode (its default) or, false, its provisioner's strict mode
    #: (`DisableReservedCapacityFallback`: `scheduling.reservedclaims`)
    reserved_fallback: bool = True


def queue_order(pod: Pod) -> tuple[int, int, int, str]:
    """Karpenter's queue: cpu descending, then memory descending, then creation order."""
    return (-pod.requests[CPU_I], -pod.requests[MEMORY_I], pod.order, pod.key)


def topology_domains(templates: Sequence[NodeClaimTemplate], nodes: Sequence[ExistingNode]) -> dict[str, set[str]]:
    """The universe of topology domains (Karpenter's provisioner-wide domains): the domains of every template
    (:attr:`NodeClaimTemplate.domains`) and the labels of existing nodes."""
    domains: dict[str, set[str]] = {}
    for template in templates:
        for key, values in template.domains.items():
            domains.setdefault(key, set()).update(values)
    for node in nodes:
        for key, value in node.labels.items():
            domains.setdefault(key, set()).add(value)
    return domains


def _with_node_labels(domains: dict[str, set[str]], nodes: Sequence[ExistingNode]) -> Mapping[str, Collection[str]]:
    """`domains` and the label values of `nodes` (`domains` itself when there are no nodes; never changed)."""
    if not nodes:
        return domains
    merged = {key: set(values) for key, values in domains.items()}
    for node in nodes:
        for key, value in node.labels.items():
            merged.setdefault(key, set()).add(value)
    return merged


class MergedDomains(Mapping[str, Collection[str]]):
    """Topology domains: `base` and, per key, the values `more(key)` gives (asked once per key, when needed)."""

    def __init__(self, base: Mapping[str, Collection[str]], more: Callable[[str], Collection[str]]) -> None:
        self.base = base
        self.more = more
        self._merged: dict[str, Collection[str]] = {}

    def __getitem__(self, key: str) -> Collection[str]:
        found = self._merged.get(key)
        if found is None:
            extra = self.more(key)
            found = self._merged[key] = set(self.base.get(key, ())) | set(extra) if extra else self.base[key]
        return found

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        return iter(self.base)

    def __len__(self) -> int:
        return len(self.base)


@dataclass(frozen=True, slots=True)
class TemplateParts:
    """What a scheduling reads of its templates alone, in their order: their topology domains, the index of which may
    take a pod, the run's topology group keys and (v1.14.1's rules) the taints of the templates offering each
    domain. All fixed when the templates are built (their memos aside, which answer the same whoever asks), so the
    schedulings of the same templates may share them (`Scheduler`'s `parts`: a disruption decision's
    simulations)."""

    templates: tuple[NodeClaimTemplate, ...]
    rules: TopologyRules
    domains: dict[str, set[str]]
    index: TemplateIndex
    group_keys: GroupKeys
    domain_taints: dict[str, dict[str, frozenset[tuple[Taint, ...]]]] | None

    @classmethod
    def of(cls, templates: Iterable[NodeClaimTemplate], rules: TopologyRules) -> TemplateParts:
        ordered = tuple(sorted(templates, key=by_weight))
        return cls(
            ordered, rules, topology_domains(ordered, []),
            TemplateIndex(ordered, frozenset().union(*(t.well_known for t in ordered))), GroupKeys(rules),
            template_domain_taints((t.domains, t.taints) for t in ordered) if rules is TopologyRules.V1_14 else None,
        )

    def serves(self, templates: Sequence[NodeClaimTemplate], rules: TopologyRules) -> bool:
        """Whether these are the parts of `templates` (the same objects, in the same order) under `rules`."""
        return (
            rules is self.rules
            and len(templates) == len(self.templates)
            and all(a is b for a, b in zip(templates, self.templates, strict=True))
        )


class Scheduler:
    """One scheduling run over templates, existing nodes and DaemonSets (see the module docstring)."""

    def __init__(
        self,
        templates: Iterable[NodeClaimTemplate],
        existing: Iterable[ExistingNode] = (),
        daemons: Iterable[Pod] = (),
        cluster_pods: PodsForTopology | Sequence[ClusterPod] = (),
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        options: SchedulerOptions | None = None,
        *,
        used: Mapping[str, Vector] | None = None,
        node_domains: Callable[[str], Collection[str]] | None = None,
        node_counts: Mapping[str, int] | None = None,
        parts: TemplateParts | None = None,
    ) -> None:
        """`existing` are the nodes pods may join. By default they are every node of the cluster, whose
        capacities count against their templates' limits and whose labels are topology domains; a caller that
        offers only the nodes with room gives what every node of each template holds (`used`, by template name),
        how many nodes each runs (`node_counts`: a NodePool's `limits.nodes` counts them) and every node's label
        values by key (`node_domains`). `parts`: :class:`TemplateParts` made before for the same templates and
        topology rules (made here when not, or when they are another's)."""
        self.options = options or SchedulerOptions()
        if self.options.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.options.strategy!r}: one of {', '.join(STRATEGIES)}")
        self.templates = sorted(templates, key=by_weight)
        if parts is None or not parts.serves(self.templates, self.options.topology):
            parts = TemplateParts.of(self.templates, self.options.topology)
        #: what it reads of its templates alone (the caller's, or made here): a later scheduling of the same
        #: templates may take them (`parts`)
        self.parts = parts
        self.daemons = list(daemons)
        # as `fresh` would make them (each run copies a node only when it offers it a pod: `_Run.own`)
        self.existing = [
            n if n.pristine() else n.fresh() for n in sorted(existing, key=lambda n: (not n.initialized, n.name))
        ]
        self._run_start: _RunStart | None = None
        self.cluster_pods = cluster_pods
        self.namespace_labels = namespace_labels or {}
        #: the kinds of template present (no template reads as Provisioners): a pod every kind refuses is left
        #: out (`refusal`); one refused by one kind only is refused by that kind's templates (`fresh_claim`)
        self.nodepools = any(t.v1 for t in self.templates)
        self.provisioners = not self.templates or not all(t.v1 for t in self.templates)
        self._v1_templates = sum(1 << p for p, t in enumerate(self.templates) if t.v1)
        self._v031_templates = sum(1 << p for p, t in enumerate(self.templates) if not t.v1)
        #: the existing nodes (positions in `existing`) of each kind of pool, by their owner label (`ignored_nodes`)
        self._v1_nodes = frozenset(p for p, n in enumerate(self.existing) if n.v1 is True)
        self._v031_nodes = frozenset(p for p, n in enumerate(self.existing) if n.v1 is False)
        self.tolerate_prefer_no_schedule = any(
            t.effect == PREFER_NO_SCHEDULE for template in self.templates for t in template.taints
        )
        for template in self.templates:
            self._daemon_overhead(template)
        #: whether some template's types have reserved offerings (capacity reservations: each run counts them)
        self.reserved = any(wk.CAPACITY_RESERVED in t.table.capacity_types for t in self.templates)
        #: the topology domains of the templates alone (a run adds the existing nodes' labels)
        self.template_domains = parts.domains
        #: which templates may take a pod at all, by the custom labels they define
        self.index = parts.index
        self.node_domains = node_domains
        # every run's topology groups are keyed alike: their keys made once
        self.group_keys = parts.group_keys
        #: v1.14.1's spread domains by the taints of the templates offering them (None: a v0.31 run)
        self.domain_taints = parts.domain_taints
        #: each template's `template_refusal` of a pod, by (template position, id of the pod's attempt, ruled out by
        #: the index), with the attempt (kept alive: its id stays its own): a pod that fits nowhere is refused by
        #: every template again at each retry, and its replicas share their shape's attempts
        self._refusals: dict[tuple[int, int, bool], tuple[Attempt, Refusal | None]] = {}
        self.remaining: dict[str, dict[int, int]] = {t.name: t.limited for t in self.templates}
        #: the existing nodes of each template (its `node_limit` counts them)
        self.nodes: dict[str, int] = dict(node_counts or {})
        for node in self.existing if node_counts is None else ():
            if node.template is not None:
                self.nodes[node.template] = self.nodes.get(node.template, 0) + 1
        if used is None:
            used = {}
            for node in self.existing:  # what existing nodes of a template hold counts against its limits
                if node.template is not None and node.capacity is not None:
                    used[node.template] = add(used.get(node.template, ZERO), node.capacity)
        for name, capacity in used.items():
            limits = self.remaining.get(name)
            if limits is not None:
                for r in limits:
                    limits[r] -= capacity[r]

    # --- set-up ------------------------------------------------------------------------------------------------

    def run_start(self) -> _RunStart:
        """What every run of this scheduling starts from, worked out for the first (see :class:`_RunStart`)."""
        if self._run_start is None:
            existing = self.existing
            domains: Mapping[str, Collection[str]] = _with_node_labels(self.template_domains, existing)
            if self.node_domains is not None:
                domains = MergedDomains(domains, self.node_domains)
            sources = None
            if self.domain_taints is not None:
                sources = DomainSources(self.domain_taints, [(node.labels, node.taints) for node in existing])
            first_fit = FirstFit([(node.allocatable, node.requests) for node in existing])
            self._run_start = _RunStart(first_fit, domains, sources)
        return self._run_start

    def _daemon_overhead(self, template: NodeClaimTemplate) -> None:
        """The requests of the DaemonSet pods a node of the template would run (Karpenter's
        `getDaemonOverhead`): their tolerations cover its taints and their requirements are compatible."""
        total = ZERO
        names = []
        for pod in self.daemons:
            attempt = pod.shape.attempts(False)[0]
            if template.taints and untolerated(template.taints, attempt.tolerations):
                continue
            if not template.requirements.admits(attempt.requirements, template.well_known):
                continue
            total = add(total, pod.requests)
            names.append(pod.owner or pod.name)
        template.overhead = total
        template.daemon_sets = tuple(names)

    # --- the run -----------------------------------------------------------------------------------------------

    def refusal(self, pod: Pod) -> str | None:
        """Why Karpenter never provisions for `pod` on any template kind present (`PodShape.refusal`), None when
        one kind may."""
        return pod.shape.refusal(self.provisioners, self.nodepools)

    def template_refusal(self, position: int, pod: Pod, attempt: Attempt, ruled_out: bool = False) -> Refusal | None:
        """`template_refusal` of the template at `position`, remembered per attempt (the same answer, the same
        object: a refusal's words are worked out once for every pod of the shape)."""
        key = (position, id(attempt), ruled_out)
        found = self._refusals.get(key)
        if found is None:
            found = self._refusals[key] = (attempt, template_refusal(self.templates[position], pod, attempt, ruled_out))
        return found[1]

    def ignoring(self, pod: Pod) -> int:
        """The templates (bits of the order) whose kind's Karpenter ignores `pod` (`PodShape.refused_by`): neither
        their in-flight claims nor new ones take it."""
        shape = pod.shape
        return (self._v031_templates if shape.refused else 0) | (self._v1_templates if shape.refused_v1 else 0)

    def variants(self, pod: Pod, attempt: Attempt, v1: bool | None) -> tuple[Attempt, ...]:
        """What a node or claim of a kind (`v1`: a NodePool's; None: a node of no pool) tries for `attempt`, first
        that fits wins: on a NodePool's, v1.14.1's volume alternatives in turn (`PodShape.attempts_v1`), else the
        attempt itself. A node of no pool is read by the Karpenter that runs: v1.14.1's alternatives when every
        template is a NodePool's (v1.14.1 schedules onto every active node, `provisioner.go` `nodes.Active()`),
        v0.31.1's first term when a Provisioner is among them."""
        if v1 is None:
            v1 = self.nodepools and not self.provisioners
        if v1 and pod.shape.volume_alternatives is not None:
            return pod.shape.attempts_v1(self.tolerate_prefer_no_schedule, attempt.index)
        return (attempt,)

    def candidates(self, pod: Pod, attempt: Attempt) -> int:
        """The templates (bits of the order) that may take `pod` at `attempt` (:class:`TemplateIndex`): a v1
        NodePool's when one of the pod's volume alternatives may be taken."""
        found = self.index.candidates(attempt.requirements, attempt.tolerations)
        if pod.shape.volume_alternatives is None or not self._v1_templates:
            return found
        found &= ~self._v1_templates
        for variant in self.variants(pod, attempt, True):
            found |= self.index.candidates(variant.requirements, variant.tolerations) & self._v1_templates
        return found

    def ignored_nodes(self, pod: Pod) -> frozenset[int]:
        """The existing nodes (positions in `existing`) the pod never joins: those of the kinds of pool whose
        Karpenter ignores it (`PodShape.refused_by`; a node's kind is its owner label, `ExistingNode.v1`). That
        version's Karpenter never schedules the pod anywhere — kube-scheduler may bind it there, but the plan
        predicts Karpenter's placement; a node of neither kind (not Karpenter's) stays open to it."""
        shape = pod.shape
        if shape.refused is None and shape.refused_v1 is None:
            return frozenset()
        if shape.refused is not None and shape.refused_v1 is not None:
            return self._v031_nodes | self._v1_nodes
        return self._v031_nodes if shape.refused is not None else self._v1_nodes

    def solve(self, pods: Sequence[Pod]) -> Plan:
        """Place `pods` (not DaemonSet pods: they only add overhead; not the pods Karpenter refuses, `refusal`:
        they are failures without a template's reason)."""
        refused = {pod.key: reason for pod in pods if not pod.daemon and (reason := self.refusal(pod))}
        plan = self._solve([p for p in pods if not p.daemon and p.key not in refused])
        for pod in pods:
            if pod.key in refused:
                plan.failures[pod.key] = PodFailure(pod, {}, refused=refused[pod.key])
        return plan

    def _solve(self, pods: Sequence[Pod]) -> Plan:
        pending = sorted(pods, key=queue_order)
        if self.options.strategy == KARPENTER or len(pending) < 2:
            return _Run(self, pending).solve()
        # The cost strategy packs in the balanced order; a pod that then fits nowhere (affinity to pods whose
        # node filled up) is moved next to the pods it follows and the packing redone. If pods are still left,
        # Karpenter's queue order gets its chance (largest first, as Karpenter would): the plan with fewer pods
        # pending, then the cheaper, wins.
        order = targets_first(balanced_order(pending), self.namespace_labels)
        plan = _Run(self, order).solve()
        for _ in range(REPAIRS):
            stuck = [f.pod for f in plan.failures.values()]
            if not any(t.required for pod in stuck for t in pod.shape.topology.affinity):
                break
            order = follow_dependencies(order, stuck)
            repaired = _Run(self, order).solve()
            if _plan_order(repaired) < _plan_order(plan):
                plan = repaired
        if plan.failures:
            queued = _Run(self, pending).solve()
            if _plan_order(queued) < _plan_order(plan):
                plan = queued
        # Packing is greedy: on some batches Karpenter's own rule (one claim grown to the cheapest type that holds
        # it) is cheaper, or places more pods (the caps charge a claim's fallback types against the limits). The
        # cost strategy is never worse than it: the better plan wins, the cost plan on ties. A plan that placed
        # every pod on existing nodes launches nothing: none is better (a disruption simulation's usual case).
        if not plan.failures and not plan.claims:
            return plan
        # When the cost plan places every pod at a known price, Karpenter's can only win by being cheaper: its run
        # stops once a floor under its price passes the cost plan's (`floor.py`), with the same answer.
        ceiling = plan.known_cost if not plan.failures and not plan.unpriced else None
        karpenter = _Run(self, pending, KARPENTER).solve_below(ceiling)
        if karpenter is not None and _plan_order(karpenter) < _plan_order(plan):
            plan = karpenter
        return plan


def _min_values_cap(claim: NodeClaim, prices: Mapping[int, float], cap: float) -> float | None:
    """The least price ≥ `cap` at which the claim's options that cost no more still meet its minValues (a cap
    never takes a claim below them); None when no price does (unpriced types are needed)."""
    table = claim.template.table
    mask = 0
    for price, i in sorted((prices[i], i) for i in indices(claim.options) if i in prices):
        mask |= 1 << i
        if price >= cap and not table.unmet_min_values(claim.min_values, mask):
            return price
    return None


def _plan_order(plan: Plan) -> tuple[int, int, float, int]:
    """Which of two plans is better: fewer pods left pending, then fewer nodes without a price, then cheaper
    (to the billionth of a dollar an hour), then fewer nodes."""
    return len(plan.failures), plan.unpriced, round(plan.known_cost, 9), len(plan.claims)


def _cheapest_holding(types: Sequence[tuple[int, float, int]]) -> Callable[[int], float]:
    """For (pods held, price, type) triples: the price of the cheapest type that holds at least n pods (n at most
    the largest held)."""
    by_held = sorted(types)
    helds = [held for held, _, _ in by_held]
    suffix = [0.0] * len(by_held)
    cheapest = math.inf
    for k in range(len(by_held) - 1, -1, -1):
        cheapest = min(cheapest, by_held[k][1])
        suffix[k] = cheapest
    return lambda n: suffix[bisect.bisect_left(helds, n)]


class _Ask:
    """The type of :data:`_ASK`."""


#: `fresh_claim`'s `wide` when the caller has not asked `template_refusal` itself.
_ASK = _Ask()


def template_refusal(
    template: NodeClaimTemplate, pod: Pod, attempt: Attempt, ruled_out: bool = False
) -> Refusal | None:
    """Why `template` refuses a pod at `attempt` whatever its claims already hold, in `fresh_claim`'s order — it
    admits no type, its kind's Karpenter ignores the pod, taints, requirements (`ruled_out`: the
    :class:`TemplateIndex` says they are incompatible; not checked again) —, None when none of these refuses it.
    Depends only on the template and the pod's shape (its refusals, requests and this attempt of it)."""
    if not template.types:
        return Refusal("unavailable", template.unavailable or "its requirements admit no instance type")
    if (refused := pod.shape.refused_by(template.v1)) is not None:  # this kind's Karpenter ignores the pod
        return Refusal("refused", refused_message(refused))
    if template.taints and untolerated(template.taints, attempt.tolerations):
        return taint_refusal(template, attempt, pod.requests)
    if ruled_out or not template.requirements.admits(attempt.requirements, template.well_known):
        return requirements_refusal(template, attempt, pod.requests)
    if pod.requests[EFA_I] and not template.v1:  # Karpenter v0.31.1 has no EFA resource: its words
        return Refusal("resources", f"no instance type offers {wk.EFA}")
    return None


def fresh_claim(
    template: NodeClaimTemplate,
    pod: Pod,
    attempt: Attempt,
    topology: Topology,
    limits: Mapping[int, int],
    initial_limits: Mapping[int, int],
    number: int,
    ruled_out: bool = False,
    nodes: int = 0,
    wide: Refusal | None | _Ask = _ASK,
    reservations: RunReservations | None = None,
) -> NodeClaim | Refusal:
    """A new claim of `template` holding `pod`, or why the template cannot launch a node for it — checked in
    Karpenter's order (taints and requirements reported first, as the more lasting reasons): the template admits
    no type, taints, requirements, `limits` (what is left of them), then topology, instance types and resources
    on the claim (the last two explained by a deletion-minimal set of requirements). `initial_limits` tells "the
    limits exclude every type" from "the nodes planned before used them up". `ruled_out`: the
    :class:`TemplateIndex` says the requirements are incompatible (they are not checked again). `nodes`: how many
    nodes of the template run or are planned (against its `node_limit`, checked with the other limits). `wide`:
    what `template_refusal` answered for this template, pod, attempt and `ruled_out`, when the caller remembered
    it. `reservations`: the run's capacity reservations (the claim reserves as it takes the pod; the strict mode may
    refuse it)."""
    refusal = template_refusal(template, pod, attempt, ruled_out) if isinstance(wide, _Ask) else wide
    if refusal is not None:
        return refusal
    if template.node_limit is not None and nodes >= template.node_limit:
        return node_limit_refusal(template.node_limit, nodes)
    within = template.shapes.capacity_within(limits) if limits else template.table.everything
    options = template.types & within
    if not options:
        if template.types & template.shapes.capacity_within(initial_limits):
            return Refusal("limits", f"the nodes planned before use up its {limits_text(template, short=True)}")
        return Refusal("limits", limits_text(template))
    claim = NodeClaim.new(template, f"{HOSTNAME_PREFIX}{number:04d}", options, reservations)
    refusal = claim.try_add(pod, attempt, topology)
    if refusal is None:
        claim.created_for = pod.key
        return claim
    if refusal.kind in ("instance-types", "resources") and not pod.shape.extended:
        requests = None if refusal.kind == "instance-types" else add(template.overhead, pod.requests)
        return no_type_refusal(template, attempt.requirements, requests, within)
    return refusal


def truncation_refusal(claim: NodeClaim) -> Refusal | None:
    """Why Karpenter drops a claim whose cheapest :data:`MAX_INSTANCE_TYPES` types do not meet its minValues (the
    Strict policy; `InstanceTypes.Truncate`), None when it keeps it."""
    if not claim.min_values or claim.template.relaxes_min_values:
        return None
    mask = claim.launch_mask()
    if mask.bit_count() <= MAX_INSTANCE_TYPES:
        return None  # nothing is cut: every pod joined it with its minValues met
    table = claim.template.table
    listed = table.ranked(mask, claim.zone, claim.capacity_type)[:MAX_INSTANCE_TYPES]
    unmet = table.unmet_min_values(claim.min_values, table.mask_of_names(o.instance_type for o in listed))
    if not unmet:
        return None
    name = claim.template.name
    return Refusal(
        "min-values",
        f"its node's {MAX_INSTANCE_TYPES} cheapest instance types (what Karpenter lists on a NodeClaim) do not meet "
        f"its minValues: {unmet_text(unmet)}",
        karpenter=lambda: "pod didn’t schedule because NodePool couldn’t meet minValues requirements, validating "
        f"minValues, {unmet_text(unmet)} (NodePool={name})",
    )


def node_limit_refusal(limit: int, nodes: int) -> Refusal:
    """The template's `limits.nodes` is used up by `nodes` running or planned."""
    message = f"its limits.nodes {limit} is used up ({nodes} node{'s' if nodes != 1 else ''} running or planned)"
    return Refusal("limits", message, karpenter=lambda: "node limits have been exhausted for nodepool")


_SPOT = Requirement.new(wk.CAPACITY_TYPE, Operator.IN, [wk.CAPACITY_SPOT])


def _launch_capacity_type(
    table: InstanceTable, mask: int, zone: Requirement, capacity_type: Requirement
) -> Requirement:
    """Spot whenever the requirements allow spot and some type of `mask` is offered as spot (Karpenter's rule),
    else what the requirements allow."""
    allows_both = capacity_type.has(wk.CAPACITY_SPOT) and capacity_type.has(wk.CAPACITY_ON_DEMAND)
    if allows_both and mask & table.offering_mask(zone, _SPOT):
        return _SPOT
    return capacity_type


def launch_options(
    table: InstanceTable, mask: int, zone: Requirement, capacity_type: Requirement
) -> tuple[ChosenOffering, ...]:
    """The types of `mask` with their cheapest allowed offering, cheapest first — on spot whenever the
    requirements allow spot and some type is offered as spot (Karpenter's rule), else on-demand."""
    return tuple(table.ranked(mask, zone, _launch_capacity_type(table, mask, zone, capacity_type)))


def cheapest_launch(
    table: InstanceTable, mask: int, zone: Requirement, capacity_type: Requirement
) -> ChosenOffering | None:
    """The first of :func:`launch_options` (without listing the others)."""
    return table.cheapest(mask, zone, _launch_capacity_type(table, mask, zone, capacity_type))


#: A kind of pods (the cost strategy's caps): the requirements and tolerations they are written with.
_Kind = tuple[Requirements, tuple[object, ...]]
#: Refusals that hold for every claim of the template, whatever it already holds.
_TEMPLATE_WIDE = frozenset({"unavailable", "refused", "taint", "requirements"})


@dataclass(frozen=True, slots=True)
class _RunStart:
    """What each run of one scheduling starts from — the same for all of them, so made once (`Scheduler.run_start`):
    the first-fit index of the existing nodes as they are (each run walks and updates a copy), the topology domains
    (the templates' and the nodes' labels; read only) and, for v1.14.1's spread groups, where they take them from."""

    first_fit: FirstFit
    domains: Mapping[str, Collection[str]]
    sources: DomainSources | None


class _Run:
    """The state of one `Scheduler.solve`."""

    def __init__(self, scheduler: Scheduler, pods: list[Pod], strategy: str | None = None) -> None:
        self.s = scheduler
        self.pods = pods
        self.strategy = strategy or scheduler.options.strategy
        start = scheduler.run_start()
        #: the scheduler's nodes (pristine, shared by its runs) until the run offers one a pod: then its own copy
        self.existing = list(scheduler.existing)
        self._owned = bytearray(len(self.existing))
        self.first_fit = start.first_fit.copy()
        self.claims: list[NodeClaim] = []
        self._grown: int | None = None  # Karpenter's rule: the claim that took the last pod (`_fewest_pods_first`)
        self._ordered = 0  # Karpenter's rule: how many claims `_fewest_pods_first` has put in order
        # cost strategy: the claims that may still take a pod, of every template, in creation order and indexed by
        # their room and template (`openclaims.py`)
        self.open = OpenClaims()
        self._slot: dict[int, int] = {}  # id(claim) → its slot in `open`
        self.capped: dict[int, list[NodeClaim]] = {}  # cost strategy: every claim made with a price cap
        self._created: dict[int, int] = {}  # id(claim) → its creation number (the order open claims are tried in)
        self.remaining = {name: dict(limits) for name, limits in scheduler.remaining.items()}
        self.nodes = dict(scheduler.nodes)  # nodes of each template, running and planned
        self.topology = Topology(
            start.domains, scheduler.cluster_pods, scheduler.namespace_labels, scheduler.group_keys, start.sources
        )
        self.attempt_of: dict[str, int] = {}
        self._attempts: dict[str, Attempt] = {}  # pod key → its current attempt (`attempt`, remembered)
        self.errors: dict[str, dict[str, Refusal]] = {}
        # pod key → the number of its kind (`_signature`, numbered in the run's order): the dicts below are keyed
        # by it, not by the requirements (hashed and compared for every look-up)
        self._kinds: dict[str, int] = {}
        self._demand: dict[int, Vector] = {}
        self._waiting: dict[int, int] = {}  # how many pods `_demand` sums
        self._mixed: set[int] = set()  # kinds whose pods' requests differ
        self._requests: dict[int, Vector] = {}  # a request of each kind
        self._smallest: Vector | None = None
        self._hostnames = 0
        # capacity reservations: the run's count, only when a template's types have reserved offerings
        self.reserved = (
            RunReservations.for_tables(
                (t.table for t in scheduler.templates), strict=not scheduler.options.reserved_fallback
            )
            if scheduler.reserved
            else None
        )

    def attempt(self, pod: Pod) -> Attempt:
        found = self._attempts.get(pod.key)
        if found is None:
            attempts = pod.shape.attempts(self.s.tolerate_prefer_no_schedule)
            found = self._attempts[pod.key] = attempts[self.attempt_of.get(pod.key, 0)]
        return found

    def solve(self) -> Plan:
        plan = self.solve_below(None)
        assert plan is not None
        return plan

    def solve_below(self, ceiling: float | None) -> Plan | None:
        """The run's plan; None, when a `ceiling` is given, as soon as the plan cannot cost less than it (at most
        that: a plan no cheaper than `ceiling`, of however many pods, is not wanted)."""
        floor = CostFloor(self.s.templates, self.existing, self.pods) if ceiling is not None else None
        limit = math.inf if ceiling is None else ceiling + FLOOR_MARGIN
        queue = deque(self.pods)
        kinds = self._kinds
        numbers: dict[_Kind, int] = {}
        members: dict[int, list[Vector]] = {}  # kind → its pods' requests
        demand, waiting = self._demand, self._waiting
        tolerate = self.s.tolerate_prefer_no_schedule
        for pod in queue:
            tried = pod.shape.attempts(tolerate)
            attempt = self._attempts[pod.key] = tried[self.attempt_of.get(pod.key, 0)]
            self.topology.update(pod, attempt)
            signature = (tried[0].requirements, tried[0].tolerations)  # `_signature`
            kind = kinds[pod.key] = numbers.setdefault(signature, len(numbers))
            members.setdefault(kind, []).append(pod.requests)
        for kind, vectors in members.items():
            demand[kind] = tuple(map(sum, zip(*vectors, strict=True)))
            waiting[kind] = len(vectors)
            self._requests[kind] = vectors[0]
            if any(v != vectors[0] for v in vectors):
                self._mixed.add(kind)
        if members:  # the smallest request of each resource
            sizes = {v for vectors in members.values() for v in vectors}
            self._smallest = tuple(min(amounts) for amounts in zip(*sizes, strict=True))
        last_length: dict[str, int] = {}
        placed = 0
        plan = Plan()
        attempts = self._attempts
        while queue:
            pod = queue[0]
            if last_length.get(pod.key) == len(queue):
                break  # a full pass without progress
            queue.popleft()
            attempt = attempts.get(pod.key) or self.attempt(pod)
            errors = self.add(pod, attempt)
            if errors is None:
                if attempt.relaxed:
                    plan.relaxed[pod.key] = attempt.relaxed
                kind = kinds[pod.key]
                demand[kind] = subtract(demand[kind], pod.requests)
                waiting[kind] -= 1
                if floor is not None:
                    floor.placed(pod)
                    placed += 1
                    if placed % FLOOR_EVERY == 0 and floor.of(self.claims) > limit:
                        return None
                continue
            self.errors[pod.key] = errors
            # v1.14.1's `trySchedule`: a pod waiting for reserved capacity keeps its preferences
            relaxed = not any(r.kind == RESERVED for r in errors.values()) and self.relax(pod)
            queue.append(pod)
            if relaxed:
                last_length.clear()
                self.topology.update(pod, self.attempt(pod))
            else:
                last_length[pod.key] = len(queue)
        for pod in queue:
            plan.failures[pod.key] = PodFailure(pod, self.errors.get(pod.key, {}), self.attempt(pod).relaxed)
        for node in self.existing:
            if node.pods:
                plan.existing[node.name] = list(node.pods)
        if self.strategy == COST:
            resplit(self.claims, self.remaining, self._bystander, self.attempt, self._charge)
        plan.claims = []
        for claim in self.claims:
            refusal = truncation_refusal(claim)
            if refusal is None:
                plan.claims.append(self._finish(claim))
                if claim.min_values_relaxed:
                    relaxation = claim.min_values_relaxation()
                    for pod in claim.pods:
                        plan.relaxed[pod.key] = (*plan.relaxed.get(pod.key, ()), relaxation)
                continue
            for pod in claim.pods:
                plan.failures[pod.key] = PodFailure(pod, {claim.template.name: refusal}, self.attempt(pod).relaxed)
        for finished in plan.claims:
            for pod in finished.pods:
                plan.template_of[pod.key] = finished.template
        return plan

    def relax(self, pod: Pod) -> bool:
        attempts = pod.shape.attempts(self.s.tolerate_prefer_no_schedule)
        index = self.attempt_of.get(pod.key, 0)
        if index + 1 >= len(attempts):
            return False
        self.attempt_of[pod.key] = index + 1
        self._attempts.pop(pod.key, None)
        return True

    def _bystander(self, pod: Pod) -> bool:
        """The pod may move between claims without changing any topology count: it has no host ports and takes
        part in no topology group."""
        return not pod.shape.topology.host_ports and self.topology.bystander(pod, self.attempt(pod))

    def _signature(self, pod: Pod) -> _Kind:
        """The pod's kind: the requirements and tolerations it is written with (its first attempt's)."""
        first = pod.shape.attempts(self.s.tolerate_prefer_no_schedule)[0]
        return first.requirements, first.tolerations

    # --- placing one pod ---------------------------------------------------------------------------------------

    def add(self, pod: Pod, attempt: Attempt) -> dict[str, Refusal] | None:
        """Place the pod (None) or give each template's reason."""
        ignored = self.s.ignored_nodes(pod)
        for position in self.first_fit.candidates(pod.requests):  # the first existing node that takes it
            if ignored and position in ignored:
                continue  # a node of a kind whose Karpenter ignores the pod
            node = self.existing[position] if self._owned[position] else self.own(position)
            if any(node.try_add(pod, a, self.topology) is None for a in self.s.variants(pod, attempt, node.v1)):
                self.first_fit.update(position, node.allocatable, node.requests)
                return None
        candidates = self.s.candidates(pod, attempt) & ~self.s.ignoring(pod)
        if self.strategy == KARPENTER:
            self._fewest_pods_first()
            topology = self.topology
            refuses = self._quick_refusal(pod, attempt)  # as in `_best_fit`
            index = self.s.index
            for position, claim in enumerate(self.claims):
                if refuses is not None and claim.pods and refuses(claim.requirements):
                    continue
                maybe = index.admits_maybe(claim.template, candidates)
                if maybe and any(claim.try_add(pod, a, topology, refusal_asked=True) is None
                                 for a in self.s.variants(pod, attempt, claim.template.v1)):  # fmt: skip
                    self._grown = position
                    return None
        elif self._best_fit(pod, attempt, candidates):
            return None
        errors = self._new_claim(pod, attempt, candidates)
        if errors is not None and self.strategy == COST and self._beyond_caps(pod, attempt, errors):
            return None
        return errors

    def own(self, position: int) -> ExistingNode:
        """The run's own copy of the existing node at `position`, made the first time the run offers it a pod (a
        refusal changes nothing, but a placement does): the scheduler's stays as it is for its other runs."""
        node = self.existing[position] = self.s.existing[position].fresh()
        self._owned[position] = 1
        return node

    def _fewest_pods_first(self) -> None:
        """Karpenter's rule: order the claims by their pods, fewest first, ties in the order they were in (a stable
        sort, as Go's sort mostly is). Since the last time, one claim took a pod (`_grown`) or one was made (at the
        end): that one moves to where a stable sort puts it, the others keep their order."""
        claims = self.claims
        grown, self._grown = self._grown, None
        if grown is not None:  # it goes behind the claims after it with fewer pods than it has now
            claim = claims[grown]
            count = len(claim.pods)
            last = grown
            while last + 1 < len(claims) and len(claims[last + 1].pods) < count:
                last += 1
            if last > grown:
                claims[grown:last + 1] = [*claims[grown + 1:last + 1], claim]
        while self._ordered < len(claims):  # a new claim goes in front of the claims with more pods
            made = self._ordered
            claim = claims[made]
            count = len(claim.pods)
            first = made
            while first > 0 and len(claims[first - 1].pods) > count:
                first -= 1
            if first < made:
                claims[first:made + 1] = [claim, *claims[first:made]]
            self._ordered += 1

    def _claims_of(self, by_template: Mapping[int, list[NodeClaim]], candidates: int) -> Iterable[NodeClaim]:
        """The claims of `by_template` of the candidate templates, in creation order."""
        lists = [claims for p, claims in by_template.items() if candidates >> p & 1 and claims]
        if len(lists) == 1:
            return lists[0]
        created = self._created
        return heapq.merge(*lists, key=lambda claim: created[id(claim)])

    def _open_holding(self, requests: Vector, candidates: int) -> Iterator[NodeClaim]:
        """The open claims of the candidate templates that may have room for `requests` (:class:`OpenClaims`: all of
        theirs while the run has few), in creation order: every open claim a scan would find accepting a pod of
        these requests, lazily."""
        return self.open.claims(requests, candidates)

    def _best_fit(self, pod: Pod, attempt: Attempt, candidates: int) -> bool:
        """A pod nothing else depends on joins the open claim it leaves most evenly used (cpu against memory, at
        the type the claim would launch then); ties go to the claim made first. Only the claims of templates that
        may take the pod are asked (:class:`TemplateIndex`), and of those only the ones with room for it
        (:class:`OpenClaims`)."""
        chosen = self._choose(pod, attempt, self._open_holding(pod.requests, candidates))
        if chosen is None:
            return False
        claim, fit = chosen
        claim.commit(fit, self.topology)
        self._maybe_close(claim)
        return True

    def _choose(self, pod: Pod, attempt: Attempt, claims: Iterable[NodeClaim]) -> tuple[NodeClaim, Fit] | None:
        """Best fit's choice among `claims` (in creation order; stops at the :data:`BEST_FIT_CANDIDATES`-th that
        accepts the pod): the claim the pod leaves most evenly used, with what it becomes. Changes nothing."""
        best = math.inf
        chosen: tuple[NodeClaim, Fit] | None = None
        feasible = 0
        topology = self.topology
        # the claims whose domains the pod's groups leave nothing, refused first: the counts do not change during
        # the scan, so what they allow is worked out once (most claims a pod with topology is offered end here)
        refuses = self._quick_refusal(pod, attempt)
        # The claims come in creation order, so a tie in evenness goes to the one found first: only a strictly more
        # even claim replaces it.
        for claim in claims:  # lazily: the scan stops at the 5th that fits
            if feasible == BEST_FIT_CANDIDATES:
                break
            if refuses is not None and claim.pods and refuses(claim.requirements):
                continue
            for variant in self.s.variants(pod, attempt, claim.template.v1):  # v1.14.1: the first alternative
                fit = claim.check(pod, variant, topology, refusal_asked=True)
                if not isinstance(fit, Refusal):
                    break
            if isinstance(fit, Refusal):
                continue
            feasible += 1
            template = claim.template
            launch = template.table.cheapest_type(fit.options, fit.zone, fit.capacity_type)
            if launch < 0:
                continue
            allocatable = template.shapes.allocatable[launch]
            cpu = fit.requests[CPU_I] / allocatable[CPU_I] if allocatable[CPU_I] else 0.0
            memory = fit.requests[MEMORY_I] / allocatable[MEMORY_I] if allocatable[MEMORY_I] else 0.0
            evenness = abs(cpu - memory)
            if chosen is None or evenness < best:
                best, chosen = evenness, (claim, fit)
        return chosen

    def _quick_refusal(self, pod: Pod, attempt: Attempt) -> Callable[[Requirements], bool] | None:
        """`Topology.refusal` of the pod's groups, asked of each claim before the full check; None when the pod
        takes part in none — or has v1.14.1's volume alternatives: the attempt's domains are v0.31.1's reading
        then, narrower than what a NodePool's claim tries (the full check decides, with each alternative)."""
        if pod.shape.volume_alternatives is not None or not self.topology.involves(pod):
            return None
        return self.topology.refusal(pod, attempt)

    def _beyond_caps(self, pod: Pod, attempt: Attempt, refusals: Mapping[str, Refusal]) -> bool:
        """A pod no claim and no template takes within the price caps may still fit a claim grown past its cap
        (a pod with affinity to pods on a full claim): the caps are a packing preference, never a reason to
        leave a pod pending. Tried on every capped claim, in creation order — but not on the claims of a template
        that refused the pod for a reason every claim of it shares (its taints, its requirements, no type)."""
        candidates = 0
        for position, template in enumerate(self.s.templates):
            refusal = refusals.get(template.name)
            if refusal is None or refusal.kind not in _TEMPLATE_WIDE:
                candidates |= 1 << position
        for claim in list(self._claims_of(self.capped, candidates)):
            if claim.price_cap is None:
                continue
            template = claim.template
            if not claim.uncapped & template.shapes.fitting(add(claim.requests, pod.requests)):
                continue  # no type, however dear, holds the pod too
            limits = self.remaining[template.name]
            table = template.table
            widened = (
                claim.uncapped
                & table.type_mask(claim.requirements, os=template.os, type_keys=template.type_keys)
                & table.offering_mask(claim.zone, claim.capacity_type)
                & template.shapes.fitting(claim.requests)
            )
            if limits:  # no further than the limits allow, counting what the claim is already charged
                widened &= template.shapes.capacity_within({r: limits[r] + claim.charged.get(r, 0) for r in limits})
            if not widened & ~claim.options:
                continue
            before = (claim.options, claim.launchable, claim.price_cap)
            claim.set_options(widened)
            claim.launchable, claim.price_cap = -1, None
            if any(claim.try_add(pod, a, self.topology) is None
                   for a in self.s.variants(pod, attempt, template.v1)):  # fmt: skip
                if limits:
                    self._charge(limits, claim)
                self._moved(claim)
                return True
            claim.set_options(before[0])
            claim.launchable, claim.price_cap = before[1], before[2]
        return False

    def _maybe_close(self, claim: NodeClaim) -> None:
        """Stop offering a claim that cannot take even the smallest pod of the run any more; else keep its room in
        the index up to date (it took a pod)."""
        smallest = self._smallest or ONE_POD
        if not claim.options & claim.template.shapes.fitting(add(claim.requests, smallest)):
            self.open.close(self._slot[id(claim)])
        else:
            self.open.update(self._slot[id(claim)], claim)

    def _moved(self, claim: NodeClaim) -> None:
        """A claim's requests or options changed outside best fit (its cap lifted): its room again, if open."""
        slot = self._slot.get(id(claim))
        if slot is not None:
            self.open.update(slot, claim)

    def _new_claim(self, pod: Pod, attempt: Attempt, candidates: int) -> dict[str, Refusal] | None:
        """A new claim of the first template that can launch a node for the pod (None), or each template's
        reason. Templates the index rules out are refused without being asked; each template tried still takes
        a hostname number, so plans do not depend on the index."""
        refused: dict[int, Refusal] = {}
        base = self._hostnames
        waits = False  # strict mode: a template's reserved capacity refused the pod, no lower one is tried
        for position, template in enumerate(self.s.templates):
            if candidates >> position & 1:
                for variant in self.s.variants(pod, attempt, template.v1):  # v1.14.1: the first alternative
                    claim = self._fresh_claim(position, template, pod, variant, base + position + 1)
                    if not isinstance(claim, Refusal):
                        self._commit_claim(position, claim, pod, base + position + 1)
                        return None
                    refused[position] = claim
                    if claim.kind == RESERVED:
                        waits = True
                        break
                if waits:
                    break
        self._hostnames = base + len(self.s.templates)
        errors: dict[str, Refusal] = {}
        for position, template in enumerate(self.s.templates):
            refusal = refused.get(position)
            if refusal is None:  # ruled out by the index: its reason, in the order fresh_claim checks them
                refusal = self.s.template_refusal(position, pod, attempt, ruled_out=True)
                if refusal is None and waits:
                    continue  # not tried: a template before it waits for its reserved capacity
                assert refusal is not None
            errors[template.name] = refusal
        return errors

    def _fresh_claim(
        self, position: int, template: NodeClaimTemplate, pod: Pod, attempt: Attempt, number: int
    ) -> NodeClaim | Refusal:
        limits = self.remaining[template.name]
        nodes = self.nodes.get(template.name, 0)
        wide = self.s.template_refusal(position, pod, attempt)
        return fresh_claim(
            template, pod, attempt, self.topology, limits, self.s.remaining[template.name], number, nodes=nodes,
            wide=wide, reservations=self.reserved,
        )

    def _commit_claim(self, position: int, claim: NodeClaim, pod: Pod, number: int) -> None:
        """Add a new claim (of the template at `position`, hostname `number`: the run's last) to the run."""
        self._hostnames = number
        if self.strategy == COST:
            self._cap(claim, pod)
            self._created[id(claim)] = len(self._created)
            self._slot[id(claim)] = self.open.add(claim, 1 << position)
            if claim.price_cap is not None:
                self.capped.setdefault(position, []).append(claim)
            self._maybe_close(claim)
        self.claims.append(claim)
        self.nodes[claim.template.name] = self.nodes.get(claim.template.name, 0) + 1
        limits = self.remaining[claim.template.name]
        if limits:
            self._charge(limits, claim)

    def _capacity_type(self, claim: NodeClaim) -> Requirement:
        """The capacity types the claim is priced and launched as: `reserved` only while it holds a reservation."""
        if self.reserved is None or self.reserved.held(claim.hostname):
            return claim.capacity_type
        return claim.capacity_type.intersection(NOT_RESERVED)

    def _charge(self, limits: dict[int, int], claim: NodeClaim) -> None:
        """Count the claim against the template's limits at the largest capacity it may launch (Karpenter's
        `subtractMax`); a claim charged before is charged the difference."""
        capacity = claim.template.shapes.capacity
        may_launch = indices(claim.options if claim.launchable == -1 else claim.launchable | claim.options)
        for r in limits:
            largest = max(capacity[i][r] for i in may_launch)
            limits[r] -= largest - claim.charged.get(r, 0)
            claim.charged[r] = max(largest, claim.charged.get(r, 0))

    # --- the cost strategy -------------------------------------------------------------------------------------

    def _cap(self, claim: NodeClaim, pod: Pod) -> None:
        """Cap the new claim at the price of the type that serves the waiting pods of its kind most cheaply,
        counted in whole pods of their mean size: one node of type t holds held(t) of the n waiting pods (at least
        the pod that opened the claim, at most all of them). When the pods of the kind are all of one size, t
        minimises what they cost on nodes of t: ⌊n / held(t)⌋ nodes of t and the remainder on the cheapest single
        type that holds it — price per share alone is blind to that remainder (five 1-vCPU pods: a type that
        holds three at the best price per pod leaves two for more nodes, dearer than one node for all five).
        When their sizes differ, the remainder is not known from the mean: t minimises price(t) × n / held(t).
        Among types of equal cost, the one holding the most pods (fewer nodes), then the cheapest, then the first
        by name."""
        template = claim.template
        table = template.table
        capacity_type = self._capacity_type(claim)
        prices = table.prices(claim.zone, capacity_type)
        kind = self._kinds.get(pod.key)
        demand = self._demand.get(kind, pod.requests) if kind is not None else pod.requests
        waiting = max(1, self._waiting.get(kind, 1) if kind is not None else 1)
        wanted = [r for r, amount in enumerate(pod.requests) if amount > 0 and demand[r] > 0]
        allocatable = template.shapes.allocatable
        overhead = template.overhead
        types: list[tuple[int, float, int]] = []  # (held, price, type)
        for i in indices(claim.options):
            price = prices.get(i)
            if price is None:
                continue
            held = waiting
            room = allocatable[i]
            for r in wanted:  # whole pods of the mean size: floor(room × waiting / demand)
                pods = (room[r] - overhead[r]) * waiting // demand[r]
                if pods < held:
                    held = pods
            types.append((held if held > 1 else 1, price, i))
        if not types:
            return
        tail = None if kind in self._mixed else _cheapest_holding(types)
        best: tuple[float, int, float, str] | None = None
        chosen = -1
        for held, price, i in types:
            if tail is None:  # pods of several sizes: what the remainder takes is unknown, price per share
                total = price * waiting / held
            else:
                full, rest = divmod(waiting, held)
                total = full * price + (tail(rest) if rest else 0.0)
            rounded = round(total, 9)
            if best is not None and rounded > best[0]:
                continue  # (most types: dearer, decided without the rest of the score)
            score = (rounded, -held, price, table.names[i])
            if best is None or score < best:
                best, chosen = score, i
        if chosen < 0:
            return
        cap: float | None = prices[chosen]
        if claim.min_values:
            cap = _min_values_cap(claim, prices, prices[chosen])
        if cap is None:
            return  # only unpriced types would meet minValues: the claim is not capped
        claim.price_cap = cap
        claim.uncapped = claim.options
        # The claim is packed within the cap; at launch it also lists the types up to FALLBACK_PRICE_FACTOR × the
        # cap that hold its pods, for when the cheapest has no capacity (charged against the limits already).
        claim.launchable = claim.options & table.at_most(
            claim.price_cap * FALLBACK_PRICE_FACTOR, claim.zone, capacity_type
        )
        claim.set_options(claim.options & table.at_most(claim.price_cap, claim.zone, capacity_type))

    # --- the result --------------------------------------------------------------------------------------------

    def _finish(self, claim: NodeClaim) -> ClaimPlan:
        template = claim.template
        table = template.table
        requirements = Requirements(r for k, r in claim.requirements.items() if k != wk.HOSTNAME)
        options: tuple[ChosenOffering, ...] = ()
        if self.reserved is not None:  # `FinalizeScheduling`: into the reservations it holds
            options = self.reserved.launch_options(claim.hostname, claim.launch_mask())
            if options:
                requirements = self.reserved.finalized(claim.hostname, requirements)
        if not options:
            options = launch_options(table, claim.launch_mask(), claim.zone, self._capacity_type(claim))
        allocatable = ZERO
        if options:
            allocatable = template.shapes.allocatable[table.position[options[0].instance_type]]
        return ClaimPlan(
            template=template.name,
            pods=tuple(claim.pods),
            requirements=requirements,
            options=options,
            requests=claim.requests,
            allocatable=allocatable,
            template_hash=template.hash,
            min_values_relaxed=claim.min_values_relaxed,
            min_values=dict(claim.min_values),
        )


def solve(
    pods: Sequence[Pod],
    templates: Iterable[NodeClaimTemplate],
    existing: Iterable[ExistingNode] = (),
    daemons: Iterable[Pod] = (),
    strategy: str = COST,
) -> Plan:
    """One scheduling run (see :class:`Scheduler`)."""
    return Scheduler(templates, existing, daemons, options=SchedulerOptions(strategy)).solve(pods)


__all__ = [
    "COST", "KARPENTER", "MAX_INSTANCE_TYPES", "STRATEGIES", "Scheduler", "SchedulerOptions", "TemplateParts", "solve",
]
