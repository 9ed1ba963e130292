"""A workload's landing set, in terms that survive renaming pools (`diff --equivalent`).

Where a workload may land is not "the pool named X": a refactor that merges twelve pools into four, moves files or
renames pools must be judged by what the nodes are. So a workload's landing set is the set of nodes a pod of it
may get — every (instance type, zone, capacity type) offering, with the labels and taints that node carries —
over every pool that could take the pod on its own (`scheduling.evaluate`'s candidates: the pool's requirements
intersected with the pod's, its taints tolerated, its resources fitting; the same evaluation `check --workloads`
and `migrate --workloads` place workloads with). For each candidate, its instance-type options and the zones and
capacity types its claim allows give the offerings, each available offering of the catalog. The node's labels are
the pool's own (`karpenter.sh/provisioner-name` and `karpenter.sh/nodepool` left out: they name the pool), its
taints and startup taints as written. Each offering keeps the pool that admits it (the first in the scheduler's
order), for the report's file:line.

`compare_landings` says, per workload, whether both sides' sets are equal, and otherwise gives a counter-example:
the cheapest node one side admits and the other does not; `named_v1_labels` gives that node's values of the labels
only Karpenter v1.14.1 sets (`model.labels.V1_INSTANCE_LABELS`) that the other side's NodePools name — a label with
no v0.31 counterpart is a function of the instance type, not one of the node's labels above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.proof.placement import templates_for
from karpenter_policy.checks.proof.provisioners import CheckedProvisioner
from karpenter_policy.checks.proof.solver import terms_of
from karpenter_policy.checks.source.workloads import LocatedWorkload
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import price_key
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate, Pod, Scheduler
from karpenter_policy.scheduling.evaluate import Evaluator

__all__ = ["LandingNode", "LandingSet", "NodeDifference", "compare_landings", "landing_sets", "named_v1_labels"]

#: The labels that name the pool: a rename changes them and nothing else.
POOL_NAME_LABELS = frozenset({wk.PROVISIONER_NAME, "karpenter.sh/nodepool"})


@dataclass(frozen=True, slots=True, order=True)
class LandingNode:
    """One node a workload may land on: an offering and what the node carries."""

    instance_type: str
    zone: str
    capacity_type: str
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[str, ...] = ()

    def describe(self) -> str:
        text = f"{self.instance_type} {self.capacity_type} in {self.zone}"
        labels = ", ".join(f"{k}={v}" for k, v in self.labels)
        taints = ", ".join(self.taints)
        extra = [f"labels {labels}"] if labels else []
        extra += [f"taints {taints}"] if taints else []
        return f"{text} ({'; '.join(extra)})" if extra else text


@dataclass(frozen=True, slots=True)
class LandingSet:
    """The nodes one workload may land on, each with the pool (its `CheckedProvisioner`) that admits it."""

    workload: LocatedWorkload
    nodes: Mapping[LandingNode, CheckedProvisioner]
    refused: str = ""  # why no pool takes it, when none does


@dataclass(frozen=True, slots=True)
class NodeDifference:
    """A node one side admits for the workload and the other does not: `first` says which side admits it."""

    node: LandingNode
    first: bool
    pool: CheckedProvisioner


def _node_of(template: NodeClaimTemplate) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    labels = tuple(sorted((k, v) for k, v in template.labels.items() if k not in POOL_NAME_LABELS))
    taints = tuple(sorted(f"{t.key}={t.value}:{t.effect}" for t in template.taints))
    startup = tuple(sorted(f"{t.key}={t.value}:{t.effect} (startup)" for t in template.startup_taints))
    return labels, taints + startup


def landing_sets(
    checked: Sequence[CheckedProvisioner], workloads: Sequence[LocatedWorkload], catalog: Catalog
) -> list[LandingSet]:
    """The landing set of each workload (DaemonSets left out) on the pools `checked` (module doc)."""
    evaluator = Evaluator(Scheduler(templates_for(checked, InstanceTable.of_catalog(catalog))))
    pools = {c.key: c for c in checked}
    found: list[LandingSet] = []
    for workload in workloads:
        if workload.is_daemon_set:
            continue
        pod = Pod(workload.name, workload.shape, owner=workload.ref)
        if evaluator.scheduler.refusal(pod):
            found.append(LandingSet(workload, {}, "Karpenter refuses its pods"))
            continue
        evaluation = evaluator.evaluate(pod)
        nodes: dict[LandingNode, CheckedProvisioner] = {}
        for candidate in evaluation.candidates:
            labels, taints = _node_of(candidate.template)
            pool = pools[candidate.template.name]
            for name in candidate.instance_types:
                instance_type = catalog.get(name)
                for offering in instance_type.offerings if instance_type is not None else ():
                    if not offering.available:
                        continue
                    if candidate.zone is not None and not candidate.zone.has(offering.zone):
                        continue
                    if candidate.capacity_type is not None and not candidate.capacity_type.has(offering.capacity_type):
                        continue
                    node = LandingNode(name, offering.zone, offering.capacity_type, labels, taints)
                    nodes.setdefault(node, pool)
        refused = "" if nodes else "no pool takes it"
        found.append(LandingSet(workload, nodes, refused))
    return found


def _price_rank(node: LandingNode, catalog: Catalog) -> tuple[float, LandingNode]:
    instance_type = catalog.get(node.instance_type)
    prices = [
        o.price
        for o in (instance_type.offerings if instance_type is not None else ())
        if (o.zone, o.capacity_type) == (node.zone, node.capacity_type)
    ]
    return price_key(prices[0] if prices else None), node


def compare_landings(first: LandingSet, second: LandingSet, catalog: Catalog) -> NodeDifference | None:
    """None when both sets hold the same nodes; else the cheapest node only one of them holds."""
    only_first = set(first.nodes) - set(second.nodes)
    only_second = set(second.nodes) - set(first.nodes)
    if not only_first and not only_second:
        return None
    candidates = [(*_price_rank(n, catalog), True) for n in only_first]
    candidates += [(*_price_rank(n, catalog), False) for n in only_second]
    _, node, in_first = min(candidates)
    pool = first.nodes[node] if in_first else second.nodes[node]
    return NodeDifference(node, in_first, pool)


def named_v1_labels(node: LandingNode, pools: Sequence[CheckedProvisioner], catalog: Catalog) -> tuple[str, ...]:
    """`key=value` of the node's instance type for each label of Karpenter v1.14.1 (`V1_INSTANCE_LABELS`, but the
    tenancy, which a node takes from its launch) that a requirement of `pools` names, by key; `key` alone ("no
    <key>") when the type lacks it."""
    keys = {t.key for pool in pools for t in terms_of(pool.document)} & wk.V1_INSTANCE_LABELS
    instance_type = catalog.get(node.instance_type)
    values = instance_type.v1_labels if instance_type is not None else {}
    return tuple(
        f"{key}={values[key]}" if key in values else f"no {key}"
        for key in sorted(keys - wk.V1_LAUNCH_LABELS.keys())
    )
