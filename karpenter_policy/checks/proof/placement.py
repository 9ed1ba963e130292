"""`check --workloads`: which provisioner launches a node for each workload, on which instance types — or why none
can — and what the workloads' nodes cost, decided by the scheduler (`scheduling/`), the very code the controller
runs, on the provisioners `check` proved.

* **The plan** (`schedule`): every replica of every workload packed together onto new nodes (the `cost` strategy:
  see docs/scheduling.md), as Karpenter v0.31 decides (by weight, then name; taints; requirements; offerings;
  limits; requests plus the DaemonSet overhead; topology — pod affinity finds the pods it follows, anti-affinity
  and spread see the siblings —; host ports; relaxation step by step). A workload's verdict is its share of the
  plan (`outcome`): schedulable when every replica is placed, else how many are not and why.
* **Each workload's pod on its own** against every provisioner (`scheduling.evaluate`): the reasons of the
  provisioners tried before the one that takes it, every provisioner that could take it (the `overlap` and
  `shadowed` findings), its instance types and the cheapest launch.
* **Capacity** (`capacity_of`): the plan's nodes per provisioner with
  type, zone, capacity type, pods and utilisation, and the fleet's $/h — and each workload's part of it
  (`Capacity.bills`): the provisioners and node types its pods land on and its share of the bill, each node's
  price divided among the workloads on it by their pods' requests (the larger of the cpu and the memory share of
  the node's allocatable). A month is 730 h, as infracost counts it.

Findings (rule ids of `api.violations`): `workload-unschedulable` (error, at the pod template), `overlap` (warning:
equal-weight provisioners that both take a workload), `shadowed` (warning: a provisioner every workload it could take
goes to a higher-weight one), `multi-arch` (warning: `proof.architectures`), `placement-group-partition` (warning: a
partition a placement group may lack, `workloadhints`). `limits` warnings come from
`proof.limits`, run by every `check`.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from karpenter_policy.api.kinds import PROVISIONER_KIND
from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.api.v1.launchsettings import offline_placement_offerings
from karpenter_policy.api.v1.static import LEFT_OUT, NO_DYNAMIC_NODEPOOLS
from karpenter_policy.api.violations import ERROR, OVERLAP, SHADOWED, WARNING, WORKLOAD_UNSCHEDULABLE
from karpenter_policy.api.workloads import scale_key
from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.catalog.table import table_for
from karpenter_policy.checks.findings import Finding, Location, Report
from karpenter_policy.checks.options import OptionError
from karpenter_policy.checks.proof.architectures import multi_arch_findings
from karpenter_policy.checks.proof.outcome import WorkloadOutcome, outcomes, plan_passes, replicas_of
from karpenter_policy.checks.proof.provisioners import CheckedProvisioner, provisioner_ref
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.checks.proof.workloadhints import (
    label_hint_findings,
    partition_findings,
    topology_key_findings,
)
from karpenter_policy.checks.source.runtimeclasses import KIND as RUNTIME_CLASS
from karpenter_policy.checks.source.workloads import LocatedWorkload, read_workloads
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.model.minvalues import STRICT
from karpenter_policy.model.pools import PROVISIONER_NOUN, pool_key, pool_ref, pools_noun
from karpenter_policy.model.resources import ResourceList
from karpenter_policy.model.spelling import nearest_name
from karpenter_policy.scheduling import (
    InstanceTable,
    NodeClaimTemplate,
    Plan,
    Pod,
    Refusal,
    Scheduler,
    SchedulerOptions,
    TopologyRules,
)
from karpenter_policy.scheduling.evaluate import Candidate, Evaluation, Evaluator, evaluation_key
from karpenter_policy.scheduling.plan import ClaimPlan, ranked_refusals, refusals_message, refused_message
from karpenter_policy.scheduling.pods import PodShape
from karpenter_policy.scheduling.reasons import format_resource
from karpenter_policy.scheduling.templates import name_order
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, as_resources

_SHOWN = 3
_NO_PROVISIONER = "no Provisioner among the policies admits an instance type"
#: Hours in a month, as infracost (and AWS's pricing calculator) counts them: 24 × 365 / 12.
HOURS_PER_MONTH = 730
#: The cheapest offering of a fitting type: what Karpenter would launch first.
Launch = ChosenOffering


# --- the templates ------------------------------------------------------------------------------------------


def templates_for(
    checked: Sequence[CheckedProvisioner], table: InstanceTable, min_values_policy: str = STRICT
) -> list[NodeClaimTemplate]:
    """The scheduler's node claim template of each proven provisioner (one that is not proven admits no type, and says
    why when it takes nothing); a NodePool's keeps its minValues under `min_values_policy`. A static NodePool has
    none: Karpenter v1.14.1 leaves it out of scheduling, StaticCapacity gate on or off (`api.v1.static`). A class with a
    `placementGroupSelector` offers partitions 1 … 7 (`offline_placement_offerings`: no cloud is asked)."""
    return [_template(c, table, min_values_policy) for c in checked if not c.static]


def static_templates_for(
    checked: Sequence[CheckedProvisioner], table: InstanceTable, min_values_policy: str = STRICT
) -> dict[str, NodeClaimTemplate]:
    """The static NodePools' templates by NodePool name (`templates_for`'s, never offered to a scheduling run): what
    Karpenter v1.14.1's static provisioning and static drift launch from (`scheduling.NewNodeClaimTemplate(np)`)."""
    return {c.name: _template(c, table, min_values_policy) for c in checked if c.static}


def _template(c: CheckedProvisioner, table: InstanceTable, min_values_policy: str) -> NodeClaimTemplate:
    """The node claim template of one checked provisioner or NodePool (see `templates_for`)."""
    admitted = c.instance_types if c.verdict == Verdict.SAT else ()
    unavailable = (
        "its requirements could not be checked within the time limit (solver-timeout)"
        if c.verdict == Verdict.UNKNOWN
        else "its requirements admit no instance type (see its findings)"
    )
    try:
        template = NodeClaimTemplate.from_provisioner(
            table,
            c.provisioner,
            node_template=c.node_template,
            admitted=admitted,
            name=c.key,
            min_values_policy=min_values_policy,
            offered=offline_placement_offerings(c.node_template),
        )
    except ValueError as error:  # a kubelet or node-template field validation reported
        template = NodeClaimTemplate.from_provisioner(table, c.provisioner, admitted=(), name=c.key)
        unavailable = f"its node configuration cannot be used: {error}"
    template.unavailable = template.unavailable or unavailable  # (its own: minValues under Strict)
    return template


def daemon_pods(workloads: Iterable[LocatedWorkload]) -> list[Pod]:
    """One pod per DaemonSet: what it adds to every node it runs on."""
    return [Pod(w.name, w.shape, owner=w.name, daemon=True) for w in workloads if w.is_daemon_set]


# --- verdicts -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a workload goes.

    `provisioner`: the one that launches a node for it (None: unschedulable). `instance_types`: the types of
    that provisioner that fit it (sorted by name). `reasons`: provisioner name → why it refused the workload,
    for every provisioner tried before the chosen one (all of them when unschedulable), at the deciding
    variant of the pod. `candidates`: every provisioner that could take it at that variant, in Karpenter's
    order; `alternatives`: the candidates of the chosen one's weight (v0.31 picks among Provisioners arbitrarily,
    v1.14.1 takes the NodePool named last: `_tie_text`).
    `relaxed`: what Karpenter relaxed before it fit (or, unschedulable, everything it tried relaxing).
    `requests`: the pod's requests; `overhead`: the DaemonSet requests on the chosen provisioner's nodes.
    `outcome`: what the plan of every replica did with the workload's pods (None: it has none in the plan). A
    replica the plan leaves pending makes the workload unschedulable (`reasons`, `relaxed`: that replica's); a pod
    that goes nowhere alone but is placed in the plan (it follows pods of other workloads) has the provisioner and
    instance types of the plan's nodes.
    """

    workload: LocatedWorkload
    provisioner: str | None
    instance_types: tuple[str, ...] = ()
    reasons: Mapping[str, Refusal] = field(default_factory=dict)
    candidates: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    relaxed: tuple[str, ...] = ()
    launch: Launch | None = None
    requests: ResourceList = field(default_factory=dict)
    overhead: ResourceList = field(default_factory=dict)
    daemon_sets: tuple[str, ...] = ()
    outcome: WorkloadOutcome | None = None
    #: what the pod alone decided (the claim's options, zones and capacity types: what PlacementTests compare)
    chosen: Candidate | None = field(default=None, compare=False, repr=False)
    #: why Karpenter ignores the workload's pods on every kind of pool present (`Scheduler.refusal`: v0.31's
    #: words for Provisioners, v1.14.1's for NodePools), None when it provisions for them
    refused: str | None = None
    #: what is said when there is no provisioner to refuse it (`nothing_to_place`)
    nothing: str = _NO_PROVISIONER
    #: the pool keys of the repository (whose kind names the pools in the message: `pools_noun`)
    pools: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return self.workload.ref

    @property
    def file(self) -> str:
        return self.workload.file

    @property
    def line(self) -> int:
        return self.workload.line

    @property
    def column(self) -> int:
        return self.workload.column

    @property
    def schedulable(self) -> bool:
        return self.provisioner is not None and (self.outcome is None or not self.outcome.unscheduled)

    def message(self) -> str:
        """The `workload-unschedulable` message (only meaningful when not schedulable), the most relevant
        provisioner's reason first (`ranked_reasons`)."""
        if self.refused:
            return refused_message(self.refused)
        if self.outcome is not None and self.outcome.failure is not None:
            return self.outcome.message(self.nothing, self.pools)
        return refusals_message(self.reasons, self.relaxed, self.nothing, self.pools)

    @property
    def stranded(self) -> tuple[int, int]:
        """(replicas left pending, replicas) — a workload without pods in the plan counts as one replica."""
        outcome = self.outcome
        if outcome is not None:
            return outcome.unscheduled, outcome.replicas
        return (0 if self.schedulable else 1), 1

    def ranked_reasons(self) -> list[tuple[str, Refusal]]:
        """The refusals, the most relevant provisioner first: one that refused for want of room (limits, sizes,
        topology, ports) accepted the pod's taints and requirements — the one the workload targets — before one
        whose requirements or taints keep the pod away; ties in the scheduler's order."""
        return ranked_refusals(self.reasons)

    def lead(self) -> str:
        """`Job/model-training (1 of its 2 replicas) — provisioner gpu: …`: the line a report leads with when the
        workload cannot be placed (the most relevant pool's reason: `NodePool/gpu: …` for a NodePool)."""
        pending, replicas = self.stranded
        text = self.ref + (f" ({pending} of its {replicas} replicas)" if 0 < pending < replicas else "")
        return f"{text} — {self.leading_reason()}"

    def leading_reason(self) -> str:
        """`provisioner gpu: …` (`NodePool/gpu: …`): why the most relevant pool (`ranked_reasons`) refuses the
        workload."""
        if self.refused:
            return refused_message(self.refused)
        ranked = self.ranked_reasons()
        if not ranked:
            return self.nothing
        name, refusal = ranked[0]
        return f"{pool_ref(name)}: {refusal}"

    def planned(self) -> list[tuple[str, int]]:
        """(provisioner, pods of this workload) of the plan's nodes, most pods first then the scheduler's order;
        empty when the workload has no pod in the plan."""
        outcome = self.outcome
        if outcome is None:
            return []
        counts: dict[str, int] = {name: 0 for name in outcome.provisioners}
        for node in outcome.nodes:
            counts[node.template] = counts.get(node.template, 0) + sum(1 for p in node.pods if p.owner == self.ref)
        order = list(counts)
        return sorted(counts.items(), key=lambda item: (-item[1], order.index(item[0])))

    def summary(self) -> str:
        """`Deployment/inflate → Provisioner/default: 412 instance types, e.g. c5.large (us-east-1a, spot)` — the
        plan's provisioners when the plan packs its pods elsewhere than its pod alone would go (onto nodes of
        other workloads): `Deployment/web → Provisioner/kspark (1 pod): c6a.2xlarge (us-east-1a, spot); alone:
        Provisioner/default, 714 instance types`."""
        if self.provisioner is None:
            return f"{self.ref}: unschedulable"
        count = len(self.instance_types)
        alone = f"{provisioner_ref(self.provisioner)}: {count} instance type" + ("s" if count != 1 else "")
        planned = self.planned()
        outcome = self.outcome
        if planned and [name for name, _ in planned] != [self.provisioner] and outcome is not None:
            where = ", ".join(f"{provisioner_ref(name)} ({_pod_count(pods)})" for name, pods in planned)
            text = f"{self.ref} → {where} in the plan, next to other workloads' pods"
            if outcome.launch is not None:
                launch = outcome.launch
                text += f": {launch.instance_type} ({launch.zone}, {launch.capacity_type})"
            text += f"; alone it would go to {alone}"
        else:
            text = f"{self.ref} → {alone}"
            if self.launch is not None:
                text += f", e.g. {self.launch.instance_type} ({self.launch.zone}, {self.launch.capacity_type})"
        if self.relaxed:
            text += f" (relaxed as Karpenter does: {', '.join(self.relaxed)})"
        if self.alternatives:
            text += f"; also matches {', '.join(self.alternatives)} of the same weight"
        return text

    def to_json(self) -> dict[str, object]:
        data = self.workload.to_json()
        data.update(
            {
                "provisioner": self.provisioner,
                "schedulable": self.schedulable,
                "count": len(self.instance_types),
                "instance_types": list(self.instance_types),
                "candidates": list(self.candidates),
                "alternatives": list(self.alternatives),
                "relaxed": list(self.relaxed),
                "requests": {k: format_resource(k, v) for k, v in sorted(self.requests.items())},
            }
        )
        if self.outcome is not None and self.outcome.unscheduled:
            data["unscheduled"] = self.outcome.unscheduled
        if self.schedulable:  # the kinds only: the words are worked out on demand (`reasons[name].message`)
            data["refused_by"] = {name: r.kind for name, r in self.reasons.items()}
        else:
            data["reasons"] = {name: _reason_json(r) for name, r in self.reasons.items()}
            if self.refused:
                data["refused"] = self.refused
        if self.overhead:
            data["daemonset_overhead"] = {k: format_resource(k, v) for k, v in sorted(self.overhead.items())}
            data["daemonsets"] = list(self.daemon_sets)
        if self.launch is not None:
            data["launch"] = self.launch.to_json()
        return data


def _reason_json(refusal: Refusal) -> dict[str, object]:
    """A refusal in the JSON output: its kind and message, the fix when there is one, and Karpenter's own sentence
    when the message says it in other words (`karpenter`: what to search Karpenter's code and issues for)."""
    data: dict[str, object] = {"kind": refusal.kind, "message": refusal.message}
    if (fix := refusal.fix) is not None:
        data["fix"] = fix
    if (karpenter := refusal.karpenter) is not None and karpenter != refusal.message:
        data["karpenter"] = karpenter
    return data


@dataclass(slots=True)
class Schedule:
    """The placements of a set of workloads, with what the overlap and shadowed findings need: for each
    workload (by position), the provisioners (by name) that could take it at its deciding variant; and the plan
    of every replica the verdicts come from."""

    placements: list[Placement]
    could_take: list[tuple[str, ...]]
    provisioners: list[CheckedProvisioner]
    plan: Plan = field(default_factory=Plan)
    #: the label keys the provisioners' nodes may have (the scheduler's topology domains)
    domain_keys: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class _Alone:
    """A pod template evaluated on its own (`evaluate`), shared by the workloads with that template."""

    evaluation: Evaluation | None  # None: Karpenter refuses the pod (`refused`: why)
    could: tuple[str, ...]
    refused: str | None = None


def _alone(workload: LocatedWorkload, evaluator: Evaluator) -> _Alone:
    pod = Pod(workload.name, workload.shape, owner=workload.ref)
    refused = evaluator.scheduler.refusal(pod)
    if refused:
        return _Alone(None, (), refused)
    evaluation = evaluator.evaluate(pod)
    return _Alone(evaluation, tuple(c.template.name for c in evaluation.candidates))


def _placement(
    workload: LocatedWorkload,
    alone: _Alone,
    outcome: WorkloadOutcome | None,
    templates: Mapping[str, NodeClaimTemplate],
) -> Placement:
    """The verdict on a workload: the plan's (`outcome`: schedulable when every replica is placed), told with what
    its pod alone says — the provisioner that launches a node for it, the reasons of those tried before — or, when
    the pod alone goes nowhere (it follows pods of other workloads), with the plan's nodes."""
    requests = workload.shape.scheduling.resource_requests
    evaluation = alone.evaluation
    if evaluation is None:
        return Placement(workload, None, requests=requests, outcome=outcome, refused=alone.refused)
    failure = outcome.failure if outcome is not None else None
    chosen = evaluation.chosen
    relaxed = evaluation.attempt.relaxed if outcome is None else (failure or outcome).relaxed
    if chosen is not None:
        template = chosen.template
        instance_types, launch = chosen.instance_types, chosen.launch
    elif outcome is not None and outcome.provisioner is not None:
        template = templates[outcome.provisioner]
        instance_types, launch = outcome.instance_types, outcome.launch
    else:
        reasons = failure.reasons if failure is not None else evaluation.refusals
        return Placement(workload, None, reasons=reasons, relaxed=relaxed, requests=requests, outcome=outcome)
    before = {}
    for t in templates.values():  # the scheduler's order
        if t is template:
            break
        if t.name in evaluation.refusals:
            before[t.name] = evaluation.refusals[t.name]
    return Placement(
        workload,
        template.name,
        instance_types=instance_types,
        reasons=failure.reasons if failure is not None else before,
        candidates=alone.could,
        alternatives=tuple(
            c.template.name
            for c in evaluation.candidates
            if c.template is not template and c.template.weight == template.weight
        ),
        relaxed=relaxed,
        launch=launch,
        requests=requests,
        overhead=as_resources(template.overhead),
        daemon_sets=template.daemon_sets,
        outcome=outcome,
        chosen=chosen,
    )


def plan_of(
    templates: Sequence[NodeClaimTemplate],
    workloads: Sequence[LocatedWorkload],
    replicas: Sequence[Sequence[Pod]],
    options: SchedulerOptions | None = None,
) -> Plan:
    """The plan of every replica (`replicas`, per workload) on new nodes of `templates` (those of the proven
    provisioners), in passes (`outcome.plan_passes`)."""
    return plan_passes(templates, daemon_pods(workloads), [pod for pods in replicas for pod in pods], options)


def nothing_to_place(
    checked: Sequence[CheckedProvisioner], templates: Sequence[NodeClaimTemplate], pools: Sequence[str] = (),
) -> str:
    """What a pod that no template refused (there is none) is told: Karpenter v1.14.1's `no dynamic nodepools
    found` when the static NodePools left out (`templates_for`) were all there was, else that no provisioner (no
    NodePool, no pool: `pools_noun` of `pools`, by default the checked ones' keys) admits an instance type."""
    static = [c.key for c in checked if c.static]
    if templates or not static:
        noun = pools_noun(pools or [c.key for c in checked], 1)
        return _NO_PROVISIONER if noun == PROVISIONER_NOUN else f"no {noun} among the policies admits an instance type"
    return f"{NO_DYNAMIC_NODEPOOLS}: {', '.join(static)}: {LEFT_OUT}"


def scheduler_options(checked: Sequence[CheckedProvisioner]) -> SchedulerOptions:
    """The options workloads are planned with: Karpenter v1.14.1's topology rules when the repository holds a
    NodePool — also beside Provisioners (a repository mid-migration is checked as the v1 Karpenter that will read
    it schedules: that Karpenter reads every spread constraint's matchLabelKeys and node inclusion policies) — and
    v0.31's otherwise."""
    v1 = any(c.provisioner.kind == NODEPOOL_KIND for c in checked)
    return SchedulerOptions(topology=TopologyRules.V1_14 if v1 else TopologyRules.V0_31)


def schedule(
    checked: Sequence[CheckedProvisioner],
    workloads: Sequence[LocatedWorkload],
    catalog: Catalog | None = None,
    scale: Mapping[str, int] | None = None,
    priced: Catalog | None = None,
    min_values_policy: str = STRICT,
    declared: Sequence[str] = (),
) -> Schedule:
    """Each workload's verdict (DaemonSets only add overhead), from the plan of every replica (`scale` overrides
    replicas; `priced`: the catalog the plan is priced with, default `catalog`), with what the findings need.
    `checked` come from `check_paths` (only proven provisioners can take anything); `catalog` must be the one they
    were checked against (default: the embedded catalog). `min_values_policy`: Karpenter's `--min-values-policy`
    for the NodePools' minValues. `declared`: pool keys of the policies read, checked or not, whose kind names the
    pools in a message when none was checked (every one invalid: `declared_pools`)."""
    catalog = catalog if catalog is not None else load_catalog()
    options = scheduler_options(checked)
    made = templates_for(checked, InstanceTable.of_catalog(catalog), min_values_policy)
    scheduler = Scheduler(made, daemons=daemon_pods(workloads), options=options)
    replicas = replicas_of(workloads, scale)
    pricing = scheduler.templates
    if priced is not None and priced is not catalog:
        pricing = templates_for(checked, InstanceTable.of_catalog(priced), min_values_policy)
    alone: dict[PodShape, _Alone] = {}
    alike: dict[Hashable, _Alone] = {}  # by `evaluation_key`: pod templates that only differ in names and labels
    evaluator = Evaluator(scheduler)
    for workload in workloads:  # each pod template alone first: the plan's many claims would crowd the caches
        if workload.is_daemon_set or workload.shape in alone:
            continue
        key = evaluation_key(workload.shape)
        known = alike.get(key)
        if known is None:
            known = alike[key] = _alone(workload, evaluator)
        elif known.evaluation is not None:
            known = _Alone(known.evaluation.for_pod(workload.shape, scheduler.tolerate_prefer_no_schedule),
                           known.could)
        alone[workload.shape] = known
    plan = plan_of(pricing, workloads, replicas, options)
    templates = {t.name: t for t in scheduler.templates}
    pools = tuple(c.key for c in checked) or tuple(declared)
    nothing = nothing_to_place(checked, made, pools)
    found = outcomes(plan, replicas, list(templates))
    placements: list[Placement] = []
    could_take: list[tuple[str, ...]] = []
    for workload, outcome in zip(workloads, found, strict=True):
        if workload.is_daemon_set:
            continue
        known = alone[workload.shape]
        placements.append(replace(_placement(workload, known, outcome, templates), nothing=nothing, pools=pools))
        could_take.append(known.could)
    return Schedule(placements, could_take, list(checked), plan, frozenset(scheduler.template_domains))


def schedule_workloads(
    checked: Sequence[CheckedProvisioner], workloads: Sequence[LocatedWorkload], catalog: Catalog | None = None
) -> list[Placement]:
    """Where each workload (DaemonSets excepted) would go, in the given order."""
    return schedule(checked, workloads, catalog).placements


# --- capacity -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapacityNode:
    """One node of the capacity plan."""

    provisioner: str
    instance_type: str
    zone: str
    capacity_type: str
    pods: int
    workloads: Mapping[str, int]  # workload ref → its pods on the node
    cpu_utilisation: float
    memory_utilisation: float
    price: float | None  # None: no price data
    shares: Mapping[str, float] = field(default_factory=dict)  # workload ref → its part of the node's price (sum 1)

    def to_json(self) -> dict[str, object]:
        return {
            "provisioner": self.provisioner,
            "instance_type": self.instance_type,
            "zone": self.zone,
            "capacity_type": self.capacity_type,
            "pods": self.pods,
            "workloads": dict(sorted(self.workloads.items())),
            "cpu_utilisation": round(self.cpu_utilisation, 4),
            "memory_utilisation": round(self.memory_utilisation, 4),
            "price": self.price,
        }


@dataclass(frozen=True, slots=True)
class Landing:
    """Where some of a workload's pods run: nodes of one provisioner, instance type and capacity type."""

    provisioner: str
    instance_type: str
    capacity_type: str
    pods: int

    def to_json(self) -> dict[str, object]:
        return {
            "provisioner": self.provisioner,
            "instance_type": self.instance_type,
            "capacity_type": self.capacity_type,
            "pods": self.pods,
        }


@dataclass(frozen=True, slots=True)
class WorkloadBill:
    """One workload's part of the capacity plan: where its pods land (most pods first), its share of its nodes'
    $/h (None: one of them has no price data) and its pods that fit nowhere."""

    workload: str
    pods: int
    landings: tuple[Landing, ...]
    cost: float | None
    unscheduled: int = 0

    @property
    def monthly(self) -> float | None:
        return None if self.cost is None else self.cost * HOURS_PER_MONTH

    def where(self, provisioner: Callable[[str], str] = str) -> str:
        """`default · c6a.4xlarge spot`; several: `kspark · c6a.8xlarge spot (52 pods), c5.9xlarge spot (8)`;
        `provisioner` spells the provisioners' names (Markdown quotes them)."""
        if not self.landings:
            return "nowhere"
        parts: list[str] = []
        previous = ""
        for landing in self.landings:
            text = f"{landing.instance_type} {landing.capacity_type}"
            parts.append(text if landing.provisioner == previous else f"{provisioner(landing.provisioner)} · {text}")
            previous = landing.provisioner
        if len(parts) > 1:
            parts = [f"{part} ({_pod_count(landing.pods) if i == 0 else landing.pods})"
                     for i, (part, landing) in enumerate(zip(parts, self.landings, strict=True))]
        return ", ".join(parts)

    def to_json(self, total: float | None) -> dict[str, object]:
        cost, monthly = self.cost, self.monthly
        return {
            "workload": self.workload,
            "pods": self.pods,
            "nodes": [landing.to_json() for landing in self.landings],
            "cost_per_hour": None if cost is None else round(cost, 6),
            "cost_per_month": None if monthly is None else round(monthly, 2),
            "share": None if cost is None or not total else round(cost / total, 4),
            "unscheduled": self.unscheduled,
        }


@dataclass(frozen=True, slots=True)
class Capacity:
    """What the workloads' replicas need as new nodes: the nodes, the fleet's $/h, how prices were known (`pricing`:
    spot is priced from a spot-price source when one was given, else at the on-demand price — `estimated`), and
    the pods that fit nowhere (workload ref → count). Nodes without a price (the catalog has no price data for
    `region`) are counted in `unpriced`: then the cost is unknown, never a guess."""

    nodes: tuple[CapacityNode, ...]
    pods: int
    pricing: str
    estimated: bool
    unscheduled: Mapping[str, int] = field(default_factory=dict)
    region: str = ""

    @property
    def unpriced(self) -> int:
        return sum(1 for n in self.nodes if n.price is None)

    @property
    def cost(self) -> float | None:
        """$/h of the nodes; None when some node has no price data."""
        return _total([n.price for n in self.nodes])

    @property
    def monthly(self) -> float | None:
        """$/month (730 h) of the nodes; None when some node has no price data."""
        cost = self.cost
        return None if cost is None else cost * HOURS_PER_MONTH

    def bills(self) -> list[WorkloadBill]:
        """Each workload's part of the plan (see the module docstring), the dearest first, then by name; a workload
        with no pod placed is there with its unscheduled pods."""
        pods: dict[str, int] = defaultdict(int)
        landings: dict[str, dict[tuple[str, str, str], int]] = defaultdict(lambda: defaultdict(int))
        costs: dict[str, float | None] = defaultdict(float)
        for node in self.nodes:
            for workload, count in node.workloads.items():
                pods[workload] += count
                landings[workload][(node.provisioner, node.instance_type, node.capacity_type)] += count
                known = costs[workload]
                share = node.shares.get(workload, 0.0)
                costs[workload] = None if known is None or node.price is None else known + node.price * share
        bills = [
            WorkloadBill(
                workload,
                pods[workload],
                tuple(
                    Landing(*key, count)
                    for key, count in sorted(landings[workload].items(), key=lambda item: (-item[1], item[0]))
                ),
                costs[workload] if workload in pods else 0.0,
                self.unscheduled.get(workload, 0),
            )
            for workload in set(pods) | set(self.unscheduled)
        ]
        return sorted(bills, key=lambda b: (b.cost is None, -(b.cost or 0.0), b.workload))

    def to_json(self) -> dict[str, object]:
        cost, monthly = self.cost, self.monthly
        return {
            "nodes": [n.to_json() for n in self.nodes],
            "node_count": len(self.nodes),
            "pods": self.pods,
            "cost_per_hour": None if cost is None else round(cost, 6),
            "cost_per_month": None if monthly is None else round(monthly, 2),
            "workloads": [bill.to_json(cost) for bill in self.bills()],
            "unpriced_nodes": self.unpriced,
            "pricing": self.pricing,
            "estimated": self.estimated,
            "unscheduled": dict(sorted(self.unscheduled.items())),
        }

    def groups(self) -> list[tuple[str, str, str, str, int, int, float, float, float | None]]:
        """Nodes of the same provisioner, type, zone and capacity type together: (provisioner, type, zone, capacity
        type, nodes, pods, mean cpu, mean memory utilisation, $/h or None without price data), by provisioner then
        cost (unpriced last)."""
        grouped: dict[tuple[str, str, str, str], list[CapacityNode]] = defaultdict(list)
        for node in self.nodes:
            grouped[(node.provisioner, node.instance_type, node.zone, node.capacity_type)].append(node)
        rows = []
        for (provisioner, instance_type, zone, capacity_type), nodes in grouped.items():
            count = len(nodes)
            rows.append(
                (
                    provisioner,
                    instance_type,
                    zone,
                    capacity_type,
                    count,
                    sum(n.pods for n in nodes),
                    sum(n.cpu_utilisation for n in nodes) / count,
                    sum(n.memory_utilisation for n in nodes) / count,
                    _total([n.price for n in nodes]),
                )
            )
        rows.sort(key=lambda r: (r[0], r[8] is None, -(r[8] or 0.0), r[1], r[2], r[3]))
        return rows

    def summary(self) -> str:
        cost = self.cost_text()
        text = f"capacity: {self.pods} pod{'s' if self.pods != 1 else ''} on {len(self.nodes)} new node"
        text += f"{'s' if len(self.nodes) != 1 else ''}, {cost}"
        if self.unpriced < len(self.nodes) or not self.nodes:  # how the prices were known, when some were
            text += f"; {self.pricing}"
        left = sum(self.unscheduled.values())
        if left:
            text += f"; {left} pod{'s' if left != 1 else ''} fit nowhere"
        return text

    def table(self, markdown: bool = False) -> list[str]:
        """The grouped nodes as text table lines, or as a Markdown table narrow enough for a pull-request comment
        (cpu and memory in one column, $/month without $/h). The first column is headed `provisioner`, `nodepool`
        (every node a NodePool's) or `pool` (both: `pools_noun`)."""
        groups = self.groups()
        pool = pools_noun((node.provisioner for node in self.nodes), 1).lower()
        if markdown:
            lines = [f"| {pool} | instance type | zone | capacity | nodes | pods | cpu · memory | $/month |",
                     "|---|---|---|---|---:|---:|---:|---:|"]
            return lines + [
                f"| {p} | {t} | {z} | {c} | {n} | {pods} | {cpu:.0%} · {memory:.0%} | "
                f"{'?' if price is None else money(price * HOURS_PER_MONTH)} |"
                for p, t, z, c, n, pods, cpu, memory, price in groups
            ]
        header = [pool, "instance type", "zone", "capacity", "nodes", "pods", "cpu", "memory", "$/h",
                  "$/month"]
        rows = [
            [p, t, z, c, str(n), str(pods), f"{cpu:.0%}", f"{memory:.0%}", "?" if price is None else f"{price:.3f}",
             "?" if price is None else f"{price * HOURS_PER_MONTH:,.2f}"]
            for p, t, z, c, n, pods, cpu, memory, price in groups
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        right = set(range(4, len(header)))

        def line(row: Sequence[str]) -> str:
            cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
            return "  ".join(cells).rstrip()

        return [line(header), *(line(r) for r in rows)]

    def cost_text(self) -> str:
        """`$1.23/h, $897.90 a month (estimated)`, or what is known when some node has no price data."""
        cost = self.cost
        if cost is not None:
            text = f"{money(cost)}/h, {money(cost * HOURS_PER_MONTH)} a month"
            return text + (" (estimated)" if self.estimated else "")
        priced = len(self.nodes) - self.unpriced
        text = f"cost unknown: no price data for {self.region or 'the region'}"
        if priced:
            known = sum(n.price for n in self.nodes if n.price is not None)
            text += f" ({self.unpriced} of {len(self.nodes)} nodes; the others {money(known)}/h)"
        return text


def _pod_count(count: int) -> str:
    return f"{count} pod{'s' if count != 1 else ''}"


def money(amount: float) -> str:
    """`$1,718.86`: dollars as every cost report of check and diff writes them."""
    return f"${amount:,.2f}"


def _total(prices: Sequence[float | None]) -> float | None:
    """The sum of `prices`; None when one is unknown."""
    known = [p for p in prices if p is not None]
    return sum(known) if len(known) == len(prices) else None


def pods_of(workloads: Iterable[LocatedWorkload], scale: Mapping[str, int] | None = None) -> list[Pod]:
    """Every replica of every workload (DaemonSets aside) as a pod (`outcome.replicas_of`, flattened)."""
    return [pod for pods in replicas_of(workloads, scale) for pod in pods]


def unknown_scale_targets(scale: Mapping[str, int] | None, workloads: Iterable[LocatedWorkload]) -> str | None:
    """Why `--scale` cannot be applied (a KIND/NAME no workload is, with the nearest one), None when it can: a
    usage error, as `simulate` makes it, not a silent no-op."""
    known = sorted({scale_key(w.ref) for w in workloads})
    for ref in scale or {}:
        if scale_key(ref) not in known:
            guess = nearest_name(scale_key(ref), known)
            hint = f"; did you mean {guess}?" if guess else ""
            return f"--scale {ref}: no such workload{hint} (found: {', '.join(known) or 'none'})"
    return None


def _shares(claim: ClaimPlan) -> dict[str, float]:
    """Each workload's part of a node's price: its pods' requests, each pod counted at the larger of its cpu and
    its memory share of the node's allocatable (pods that request neither: by count)."""
    weights: dict[str, float] = defaultdict(float)
    for pod in claim.pods:
        weights[pod.owner] += max(
            (pod.requests[i] / claim.allocatable[i] for i in (CPU_I, MEMORY_I) if claim.allocatable[i]), default=0.0
        )
    total = sum(weights.values())
    if not total:
        weights = defaultdict(float)
        for pod in claim.pods:
            weights[pod.owner] += 1.0
        total = sum(weights.values())
    return {owner: weight / total for owner, weight in sorted(weights.items())}


def capacity_of(plan: Plan, pricing: str, estimated: bool, region: str = "") -> Capacity:
    nodes = []
    for claim in plan.claims:
        launch = claim.launch
        if launch is None:
            continue
        owners: dict[str, int] = defaultdict(int)
        for pod in claim.pods:
            owners[pod.owner] += 1
        nodes.append(
            CapacityNode(
                provisioner=claim.template,
                instance_type=launch.instance_type,
                zone=launch.zone,
                capacity_type=launch.capacity_type,
                pods=len(claim.pods),
                workloads=dict(owners),
                cpu_utilisation=claim.requests[CPU_I] / claim.allocatable[CPU_I] if claim.allocatable[CPU_I] else 0.0,
                memory_utilisation=(
                    claim.requests[MEMORY_I] / claim.allocatable[MEMORY_I] if claim.allocatable[MEMORY_I] else 0.0
                ),
                price=launch.price,
                shares=_shares(claim),
            )
        )
    unscheduled: dict[str, int] = defaultdict(int)
    for failure in plan.failures.values():
        unscheduled[failure.pod.owner] += 1
    spot = any(n.capacity_type == "spot" for n in nodes)
    return Capacity(
        nodes=tuple(nodes),
        pods=sum(n.pods for n in nodes),
        pricing=pricing
        or ("spot priced at the on-demand price (no spot prices given)" if spot else "on-demand prices"),
        estimated=estimated and spot,
        unscheduled=dict(unscheduled),
        region=region,
    )


# --- findings -----------------------------------------------------------------------------------------------


def _provisioner_location(checked: CheckedProvisioner) -> Location:
    return Location(checked.file, checked.line, checked.column)


def workload_findings(result: Schedule) -> list[Finding]:
    """`workload-unschedulable`, `overlap` and `shadowed` findings of a schedule."""
    findings: list[Finding] = []
    for placement in result.placements:
        if not placement.schedulable:
            w = placement.workload
            findings.append(
                Finding(WORKLOAD_UNSCHEDULABLE, ERROR, placement.message(), w.file, w.line, w.column, w.ref)
            )
    findings += _overlap_findings(result)
    findings += _shadowed_findings(result)
    return findings


def _tie_text(a: CheckedProvisioner, b: CheckedProvisioner) -> str:
    """Which of two equal-weight pools Karpenter launches from: two v1 NodePools, the one the scheduler's own order
    puts first (`scheduling.templates.name_order`, v1.14.1's `OrderByWeight`: the name later in the alphabet) — a
    rename moves the workload; otherwise either (v0.31.1 sorts by weight alone, `sort.Slice`, which keeps no order
    among equals)."""
    if a.kind == b.kind == NODEPOOL_KIND:
        later = min(a, b, key=lambda c: name_order(c.name, descending=True))
        return (
            f"Karpenter v1.14.1 launches from {later.object_ref}, the name later in the alphabet, "
            "so renaming either moves the workload"
        )
    return "Karpenter picks either one"


def _overlap_findings(result: Schedule) -> list[Finding]:
    by_name = {c.key: c for c in result.provisioners}
    pairs: dict[tuple[str, str], list[Placement]] = defaultdict(list)
    for placement in result.placements:
        if placement.provisioner is None or not placement.alternatives:
            continue
        group = [placement.provisioner, *placement.alternatives]
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                ordered = sorted((a, b), key=lambda n: (by_name[n].file, by_name[n].line, n))
                pairs[(ordered[0], ordered[1])].append(placement)
    findings = []
    for (a, b), placements in sorted(pairs.items()):
        first, second = by_name[a], by_name[b]
        example = placements[0]
        others = len(placements) - 1
        also = f" (and {others} other workload{'s' if others != 1 else ''})" if others else ""
        weight = first.provisioner.weight
        message = (
            f"same weight ({weight}) as {provisioner_ref(b)}, and both can launch a node for {example.ref}{also}: "
            f"{_tie_text(first, second)}; give one a higher weight or make their requirements exclusive"
        )
        related = (_provisioner_location(second), Location(example.file, example.line, example.column))
        findings.append(
            Finding(OVERLAP, WARNING, message, first.file, first.line, first.column, first.object_ref, related)
        )
    return findings


def _shadowed_findings(result: Schedule) -> list[Finding]:
    weights = {c.key: c.provisioner.weight for c in result.provisioners}
    by_name = {c.key: c for c in result.provisioners}
    could: dict[str, list[Placement]] = defaultdict(list)
    chosen: set[str] = set()
    for placement, names in zip(result.placements, result.could_take, strict=True):
        if placement.provisioner is not None:
            chosen.add(placement.provisioner)
        for name in names:
            could[name].append(placement)
    findings = []
    for checked in result.provisioners:
        name = checked.key
        taken = could.get(name, [])
        if not taken or name in chosen:
            continue
        weight = weights[name]
        if not all(p.provisioner is not None and weights[p.provisioner] > weight for p in taken):
            continue
        winners: dict[str, int] = defaultdict(int)
        for p in taken:
            assert p.provisioner is not None
            winners[p.provisioner] += 1
        ranked = sorted(winners.items(), key=lambda item: (-item[1], item[0]))
        listed = ", ".join(
            f"{provisioner_ref(winner)} (weight {weights[winner]}) takes {count}" for winner, count in ranked[:_SHOWN]
        )
        if len(ranked) > _SHOWN:
            listed += f" and {len(ranked) - _SHOWN} others"
        message = (
            f"no workload reaches this {pools_noun((name,))} (weight {weight}): every workload it could launch a node "
            f"for ({len(taken)}, e.g. {taken[0].ref}) goes to a higher-weight "
            f"{pools_noun((w for w, _ in ranked), 1)}: {listed}"
        )
        related = tuple(_provisioner_location(by_name[w]) for w, _ in ranked[:_SHOWN])
        findings.append(
            Finding(SHADOWED, WARNING, message, checked.file, checked.line, checked.column, checked.object_ref, related)
        )
    return findings


# --- the check ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class WorkloadCheck:
    """What `check --workloads` found: each workload's verdict (file order) and the capacity plan."""

    placements: list[Placement]
    capacity: Capacity | None = None


def check_workloads(
    report: Report,
    checked: Sequence[CheckedProvisioner],
    paths: Sequence[str],
    catalog: Catalog | None = None,
    counted_files: Iterable[str] = (),
    scale: Mapping[str, int] | None = None,
    pricing: str = "",
    estimated: bool = True,
    capacity_catalog: Catalog | None = None,
    min_values_policy: str = STRICT,
) -> WorkloadCheck:
    """`check --workloads PATHS`: read the workloads, place them, plan their capacity (priced from
    `capacity_catalog`, default `catalog`); add the findings (and the files and kinds read, except `counted_files`
    already counted) to `report`; NodePools keep minValues under `min_values_policy`. Raises
    :class:`OptionError` for a `scale` that names no workload."""
    catalog = catalog if catalog is not None else load_catalog()
    found = read_workloads(paths)
    report.findings.extend(found.findings)
    report.could_not_run = report.could_not_run or found.could_not_run
    already = set(counted_files)
    report.files += sum(1 for f in found.files if f not in already)
    report.kinds.update(found.kinds)
    read = [(w.file, w.kind) for w in found.workloads] + [(f, RUNTIME_CLASS) for f in found.runtime_class_files]
    read += found.volume_files
    for file, kind in read:  # a file that is a policy file too: validate counted it as skipped
        if file in already and report.skipped.get(kind, 0) > 0:
            report.skipped[kind] -= 1
            if not report.skipped[kind]:
                del report.skipped[kind]
    unknown = unknown_scale_targets(scale, found.workloads)
    if unknown is not None:
        raise OptionError(unknown)
    priced = capacity_catalog if capacity_catalog is not None else catalog
    gc.freeze()  # what was read stays alive while the plan is made: the collector need not walk it again and again
    try:
        result = schedule(checked, found.workloads, catalog, scale, priced, min_values_policy, declared_pools(report))
    finally:
        gc.unfreeze()
    report.findings.extend(workload_findings(result))
    v1_labels = wk.V1_INSTANCE_LABELS if any(c.provisioner.kind == NODEPOOL_KIND for c in checked) else frozenset()
    report.findings.extend(label_hint_findings(found.label_uses, table_for(catalog), v1_labels))
    report.findings.extend(topology_key_findings(found.topology_keys, result.domain_keys))
    if any(offline_placement_offerings(c.node_template) for c in checked):
        report.findings.extend(partition_findings(found.label_uses, found.topology_keys))
    report.findings.extend(multi_arch_findings(result.placements, InstanceTable.of_catalog(catalog)))
    capacity = capacity_of(result.plan, pricing, estimated, priced.region)
    return WorkloadCheck(result.placements, capacity)


def declared_pools(report: Report) -> tuple[str, ...]:
    """One pool key per kind of pool the report counts among the documents read, valid or not (named by the kind:
    only the kind matters to `pools_noun`): an invalid NodePool is not checked, and a pod that nothing can take is
    then told that no NodePool admits an instance type, not no Provisioner."""
    return tuple(pool_key(kind, kind == NODEPOOL_KIND) for kind in (PROVISIONER_KIND, NODEPOOL_KIND)
                 if report.kinds.get(kind))


def placement_info_lines(placements: Sequence[Placement]) -> list[str]:
    """One `file:line:col: info: …` line per schedulable workload (the unschedulable ones are errors)."""
    return [f"{p.file}:{p.line}:{p.column}: info: {p.summary()}" for p in placements if p.schedulable]


__all__ = [
    "HOURS_PER_MONTH",
    "Capacity",
    "CapacityNode",
    "Landing",
    "Launch",
    "Placement",
    "Refusal",
    "Schedule",
    "WorkloadBill",
    "WorkloadCheck",
    "check_workloads",
    "money",
    "placement_info_lines",
    "pods_of",
    "schedule",
    "schedule_workloads",
    "static_templates_for",
    "templates_for",
    "unknown_scale_targets",
    "workload_findings",
]
