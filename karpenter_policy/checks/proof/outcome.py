"""The plan of every replica, and what it did with each workload: the verdicts of `check --workloads` come from it.

`check --workloads` packs every replica of every workload together (the scheduler's cost strategy, as the
controller would), so pod affinity finds the pods it follows, anti-affinity and spread see their siblings, and
limits are shared. Like the controller, it plans in passes (`plan_passes`): pods a pass leaves pending are planned
again next to the nodes the earlier passes launched, in flight — each with its instance type, zone and capacity type
decided, its labels and its pods counted for topology and limits — until a pass places none. (Karpenter cannot
place two pods with zonal anti-affinity in one pass: the first node may still land in any zone. Once it is in
flight, its zone is known.)

A workload's :class:`WorkloadOutcome` is its share of that plan: how many replicas it has, how many fit nowhere
(and why, for the first of them: the reasons per provisioner at its most relaxed attempt), which provisioners' new
nodes take the others, on which instance types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from karpenter_policy.api.workloads import scale_key
from karpenter_policy.checks.source.workloads import LocatedWorkload
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import ChosenOffering
from karpenter_policy.model.pools import owner_labels
from karpenter_policy.model.requirements import Operator
from karpenter_policy.scheduling import (
    ClaimPlan,
    ClusterPod,
    ExistingNode,
    NodeClaimTemplate,
    Plan,
    Pod,
    Scheduler,
    SchedulerOptions,
)
from karpenter_policy.scheduling.plan import PodFailure, refusals_message, refused_message
from karpenter_policy.scheduling.vectors import add

#: Scheduling passes at most (each places at least one pod more than the one before, or is the last).
PASSES = 16


@dataclass(frozen=True, slots=True)
class WorkloadOutcome:
    """One workload in the plan: `replicas` pods, `unscheduled` of them left pending (`failure`: the first one's
    reasons), `provisioners` whose new nodes take the others (in the scheduler's order: weight, then name), those
    nodes (`nodes`, in the plan's order), and what was relaxed to place the first replica placed (`relaxed`)."""

    replicas: int
    unscheduled: int = 0
    failure: PodFailure | None = None
    provisioners: tuple[str, ...] = ()
    nodes: tuple[ClaimPlan, ...] = ()
    relaxed: tuple[str, ...] = ()

    @property
    def provisioner(self) -> str | None:
        return self.provisioners[0] if self.provisioners else None

    @property
    def instance_types(self) -> tuple[str, ...]:
        """The instance types its nodes may launch, sorted."""
        return tuple(sorted({o.instance_type for node in self.nodes for o in node.options}))

    @property
    def launch(self) -> ChosenOffering | None:
        """The first node's launch."""
        return self.nodes[0].launch if self.nodes else None

    def message(self, nothing: str, pools: Iterable[str] = ()) -> str:
        """The `workload-unschedulable` message (only meaningful when some replica is left pending); `nothing`: what
        to say when there is no provisioner, `pools`: the repository's pool keys then (`refusals_message`)."""
        failure = self.failure
        assert failure is not None
        if failure.refused:
            text = refused_message(failure.refused)
        else:
            text = refusals_message(failure.reasons, failure.relaxed, nothing, pools)
        if self.replicas == 1:
            return text
        if self.unscheduled == self.replicas:
            return f"none of its {self.replicas} replicas can be placed: {text}"
        return f"{self.unscheduled} of its {self.replicas} replicas cannot be placed: {text}"


def replicas_of(workloads: Iterable[LocatedWorkload], scale: Mapping[str, int] | None = None) -> list[list[Pod]]:
    """Every replica of every workload as a pod, per workload (none for a DaemonSet); `scale` overrides replicas by
    workload (`deployment/inflate` or `Deployment/inflate`, case-insensitive kind). Pods are named after their
    workload (`deployment-inflate-0`), distinct even for two workloads of one kind and name."""
    overrides = {scale_key(k): v for k, v in (scale or {}).items()}
    replicas: list[list[Pod]] = []
    names: set[str] = set()
    order = 0
    for workload in workloads:
        if workload.is_daemon_set:
            replicas.append([])
            continue
        count = overrides.get(scale_key(workload.ref), workload.replicas)
        stem = f"{workload.kind.lower()}-{workload.name}"
        while stem in names:  # two workloads of one kind and name (in two files): pods keep distinct names
            stem += "-"
        names.add(stem)
        pods = [Pod(f"{stem}-{i}", workload.shape, owner=workload.ref, order=order + i) for i in range(count)]
        order += count
        replicas.append(pods)
    return replicas


def plan_passes(
    templates: Sequence[NodeClaimTemplate],
    daemons: Sequence[Pod],
    pods: Sequence[Pod],
    options: SchedulerOptions | None = None,
) -> Plan:
    """Every pod of `pods` planned onto new nodes of `templates` (with the DaemonSet pods `daemons` on each), in
    passes (see the module docstring): one plan of every node launched and every pod left pending at the end.
    `options`: every pass's (the topology rules of a repository with NodePools)."""
    plan = Scheduler(templates, daemons=daemons, options=options).solve(pods)
    by_name = {t.name: t for t in templates}
    for _ in range(PASSES - 1):
        # only a pod its topology held back may fit next to nodes in flight: their zones are decided now
        pending = [f.pod for f in plan.failures.values() if any(r.kind == "topology" for r in f.reasons.values())]
        if not pending or not plan.claims:
            break
        nodes = [_in_flight(claim, by_name[claim.template], i) for i, claim in enumerate(plan.claims)]
        running = [
            ClusterPod(pod, node.name, node.labels, node.taints)
            for node, claim in zip(nodes, plan.claims, strict=True)
            for pod in claim.pods
        ]
        again = Scheduler(templates, nodes, daemons, running, options=options).solve(pending)
        if len(again.failures) == len(pending):
            break  # nothing more fits: the failures of the last pass stand
        plan = _joined(plan, nodes, again)
    return plan


def _in_flight(claim: ClaimPlan, template: NodeClaimTemplate, index: int) -> ExistingNode:
    """The node a claim launches, in flight: the launch's instance type, zone and capacity type, its labels (the
    type's, the template's, the claim's single-valued requirements, and its pool's owner label as Karpenter sets
    it: `karpenter.sh/provisioner-name` for a Provisioner; `karpenter.sh/nodepool`, never the former, for a
    NodePool, as core-v1 pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go `NewNodeClaimTemplate`
    labels its NodeClaims), its pods and the DaemonSet pods."""
    table = template.table
    launch = claim.launch
    assert launch is not None
    position = table.position[launch.instance_type]
    labels = table.types[position].labels(template.os)
    labels[wk.ZONE], labels[wk.CAPACITY_TYPE] = launch.zone, launch.capacity_type
    for key in claim.requirements:
        found = claim.requirements[key]
        if found.operator() == Operator.IN and len(found.values) == 1 and not wk.is_restricted_node_label(key):
            labels.setdefault(key, next(iter(found.values)))
    labels.update(template.labels)
    labels.update(owner_labels(template.name))  # a NodePool's node: karpenter.sh/nodepool, never provisioner-name
    name = f"planned-node-{index:04d}"
    labels[wk.HOSTNAME] = name
    return ExistingNode(
        name=name,
        labels=labels,
        taints=template.taints,
        allocatable=template.shapes.allocatable[position],
        requested=claim.requests,
        host_ports=[port for pod in claim.pods for port in pod.shape.host_ports],
        template=template.name,
        initialized=False,
        capacity=template.shapes.capacity[position],
    )


def _joined(plan: Plan, nodes: Sequence[ExistingNode], again: Plan) -> Plan:
    """The plan of both passes: the first pass's claims with the pods the second put on their nodes, then the
    second's new claims; the first's failures the second did not retry, and the second's."""
    index = {node.name: i for i, node in enumerate(nodes)}
    claims = list(plan.claims)
    for name, pods in again.existing.items():
        i = index[name]
        requests = claims[i].requests
        for pod in pods:
            requests = add(requests, pod.requests)
        claims[i] = replace(claims[i], pods=(*claims[i].pods, *pods), requests=requests)
    template_of = {**plan.template_of, **again.template_of}
    for name, pods in again.existing.items():
        for pod in pods:
            template_of[pod.key] = claims[index[name]].template
    retried = {pod.key for pods in again.existing.values() for pod in pods}
    retried |= {pod.key for claim in again.claims for pod in claim.pods} | set(again.failures)
    failures = {key: failure for key, failure in plan.failures.items() if key not in retried}
    failures.update(again.failures)
    return Plan(
        claims=[*claims, *again.claims],
        failures=failures,
        relaxed={**plan.relaxed, **again.relaxed},
        template_of=template_of,
    )


def outcomes(plan: Plan, replicas: Sequence[Sequence[Pod]], order: Sequence[str]) -> list[WorkloadOutcome | None]:
    """Each workload's outcome in `plan` (aligned with `replicas`; None for a workload without pods in it: a
    DaemonSet, or scaled to 0). `order`: the provisioner names in the scheduler's order."""
    claim_of: dict[str, int] = {}
    for index, claim in enumerate(plan.claims):
        for pod in claim.pods:
            claim_of[pod.key] = index
    rank = {name: i for i, name in enumerate(order)}
    found: list[WorkloadOutcome | None] = []
    for pods in replicas:
        if not pods:
            found.append(None)
            continue
        failures = [plan.failures[pod.key] for pod in pods if pod.key in plan.failures]
        claims = sorted({claim_of[pod.key] for pod in pods if pod.key in claim_of})
        names = {plan.claims[i].template for i in claims}
        placed = next((pod for pod in pods if pod.key in claim_of), None)
        found.append(
            WorkloadOutcome(
                replicas=len(pods),
                unscheduled=len(failures),
                failure=failures[0] if failures else None,
                provisioners=tuple(sorted(names, key=lambda n: (rank.get(n, len(rank)), n))),
                nodes=tuple(plan.claims[i] for i in claims),
                relaxed=plan.relaxed.get(placed.key, ()) if placed is not None else (),
            )
        )
    return found


__all__ = ["PASSES", "WorkloadOutcome", "outcomes", "plan_passes", "replicas_of"]
