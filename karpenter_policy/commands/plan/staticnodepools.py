"""What a change does to HEAD's static NodePools (`spec.replicas`), as Karpenter v1.14.1 would carry it out: with its
`StaticCapacity` feature gate on (`plan --feature-gates StaticCapacity=true`), the nodes its static provisioning adds
to reach `replicas` within `limits.nodes` and those its static deprovisioning removes when `replicas` goes down, in
its order (`reconcile.static.deprovisioning`'s: not-empty last, a `do-not-disrupt` pod's node after the others,
cheapest to disrupt first; empty nodes — DaemonSets' pods only — first); gate on or off, each drifted node's static
drift (core pkg/controllers/disruption/staticdrift.go): replaced one for one by a node of the NodePool's template,
or waiting while the NodePool is over `replicas` (for ever with the gate off: nothing scales it down) or while
`limits.nodes` leaves no room for the replacement. What they become in the waves (`StaticWork`, carried out by
`nodepoolwaves`): the nodes added launched at the start (the template's cheapest offering, as `reconcile.staticclaim`
launches it), the nodes removed deleted at once and drained, their pods provisioned for on HEAD's dynamic NodePools,
and each drifted node replaced one for one by a node of the template, its pods moving onto it — never a scheduling
simulation (v1.14.1 never simulates static drift); a drifted node that expires within the horizon goes by expiry
alone (it deletes it first; v1.14.1's static drift may replace it before: a documented difference, docs/plan.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.v1.objects import is_static
from karpenter_policy.commands.diff import DiffError
from karpenter_policy.commands.plan.drift import NodeDrift, PolicySide
from karpenter_policy.commands.plan.fleet import Fleet, FleetNode
from karpenter_policy.commands.plan.waves import Replacement
from karpenter_policy.kube.evictioncost import disruption_cost
from karpenter_policy.scheduling import NodeClaimTemplate
from karpenter_policy.scheduling.scheduler import cheapest_launch

#: The most nodes one static NodePool's `replicas` may have `plan` add (each is a node of its room and waves): a
#: larger count is refused, naming the NodePool, never run out of memory.
MAX_ADDED_NODES = 100_000

__all__ = ["StaticNodePool", "StaticWork", "static_launches", "static_nodepools", "static_nodes", "static_work"]

#: A drifted static node's verdicts.
REPLACED = "static drift: replaced one for one by a node of its NodePool's template"
#: A drifted static node whose template launches nothing (it admits no instance type HEAD's catalog offers).
NO_LAUNCH = "static drift waits: its NodePool's template admits no instance type to launch"


@dataclass(frozen=True, slots=True)
class StaticWork:
    """What the waves carry out for the static NodePools: the nodes launched at the start (`added`), the nodes
    deleted at once (`removed`, in v1.14.1's order), each drifted node's one-for-one replacement (`replaced`), and
    the static NodePools' nodes (`nodes`: never a drift simulation's candidate — one that expires goes by expiry)."""

    added: tuple[Replacement, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: Mapping[str, Replacement] = field(default_factory=dict)
    nodes: frozenset[str] = frozenset()
    #: the static NodePools' templates (by `Replacement.provisioner`): the nodes added join the room as theirs
    templates: Mapping[str, NodeClaimTemplate] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        """Whether the waves have anything of it to carry out."""
        return bool(self.added or self.removed or self.replaced)


def static_launches(templates: Mapping[str, NodeClaimTemplate]) -> dict[str, Replacement | None]:
    """Each static NodePool's new node (by NodePool name): its template's cheapest allowed offering, as
    `reconcile.staticclaim` launches it (None: the template admits no type to launch)."""
    out: dict[str, Replacement | None] = {}
    for name, template in templates.items():
        chosen = cheapest_launch(template.table, template.types, template.zone, template.capacity_type)
        out[name] = None if chosen is None else Replacement(template.name, chosen.instance_type, chosen.zone,
                                                            chosen.capacity_type, chosen.price)
    return out


@dataclass(frozen=True, slots=True)
class StaticNodePool:
    """One static NodePool of HEAD: its nodes in the snapshot (not being deleted), `replicas` on each side (BASE None:
    not static there), `limits.nodes`, the nodes added and removed (gate on), and each drifted node's static drift."""

    name: str
    nodes: int
    base_replicas: int | None
    head_replicas: int
    limit: int | None
    gate: bool
    added: int = 0
    removed: tuple[str, ...] = ()
    drift: tuple[tuple[str, str], ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        return {
            "nodepool": self.name, "nodes": self.nodes,
            "replicas": {"base": self.base_replicas, "head": self.head_replicas}, "limit": self.limit,
            "static_capacity": self.gate, "added": self.added, "removed": list(self.removed),
            "drift": [{"node": node, "verdict": verdict} for node, verdict in self.drift],
        }

    @property
    def replicas_text(self) -> str:
        """`BASE → HEAD` when the change sets another `replicas`, else HEAD's."""
        changed = self.base_replicas not in (None, self.head_replicas)
        return f"{self.base_replicas} → {self.head_replicas}" if changed else str(self.head_replicas)

    def lines(self) -> list[str]:
        """The text form: a headline, then one line per drifted node."""
        replicas = self.replicas_text
        what = []
        if self.added:
            what.append(f"{self.added} node(s) added")
        if self.removed:
            what.append(f"{len(self.removed)} removed ({', '.join(self.removed)})")
        if not self.gate and self.nodes != self.head_replicas:
            what.append("none added or removed: the StaticCapacity gate is off (--feature-gates StaticCapacity=true)")
        limit = f", limits.nodes {self.limit}" if self.limit is not None else ""
        head = f"static NodePool {self.name}: {self.nodes} node(s), replicas {replicas}{limit}"
        return [head + (f": {'; '.join(what)}" if what else ""), *(f"  {n}: {v}" for n, v in self.drift)]


def _replicas(nodepool: Mapping[str, Any] | None) -> int | None:
    spec = (nodepool or {}).get("spec")
    return int(spec["replicas"]) if isinstance(spec, Mapping) and is_static(spec) else None


def _limit(nodepool: Mapping[str, Any]) -> int | None:
    limits = (nodepool.get("spec") or {}).get("limits") or {}
    value = limits.get("nodes") if isinstance(limits, Mapping) else None
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None  # a quantity with a suffix: admission refuses none, the plan reads it as no limit


def static_nodes(fleet: Fleet, head: PolicySide) -> dict[str, FleetNode]:
    """The snapshot's nodes (not being deleted) of HEAD's static NodePools, by name."""
    static = {name for name, doc in head.nodepools.items() if _replicas(doc) is not None}
    return {n: node for n, node in fleet.nodes.items() if node.nodepool in static and not node.deleting}


def _removed(fleet: Fleet, nodes: list[FleetNode], count: int) -> tuple[str, ...]:
    """v1.14.1's static deprovisioning order (`getDeprovisioningCandidates`: every node of the snapshot is launched,
    so no unresolved claim comes first): empty nodes by name, then the others — a `do-not-disrupt` pod's last —
    by their pods' eviction costs × the lifetime left (taken as whole here: the snapshot's expiry is the waves'),
    then name."""
    empty, others = [], []
    for node in sorted(nodes, key=lambda n: n.name):
        pods = fleet.pods_on.get(node.name, [])
        held = any(p.do_not_disrupt for p in pods)
        daemons = all(p.workload.split("/")[1:2] == ["DaemonSet"] for p in pods)
        if not pods or (daemons and not held):
            empty.append(node.name)
        else:
            others.append((held, sum(disruption_cost(p.obj) for p in pods), node.name))
    return tuple([*empty, *(name for _, _, name in sorted(others))][:count])


def static_nodepools(
    fleet: Fleet, drift: Mapping[str, NodeDrift], base: PolicySide, head: PolicySide, gate: bool,
    launches: Mapping[str, Replacement | None] | None = None,
) -> list[StaticNodePool]:
    """HEAD's static NodePools with what the change does to them (see the module docstring), by name; `launches`
    (`static_launches`; None: not known) tells a drifted node whose template launches nothing waiting."""
    out = []
    for name in sorted(head.nodepools):
        doc = head.nodepools[name]
        replicas = _replicas(doc)
        if replicas is None:
            continue
        nodes = [n for n in fleet.nodes.values() if n.nodepool == name and not n.deleting]
        limit = _limit(doc)
        added = 0
        removed_: tuple[str, ...] = ()
        after = len(nodes)
        if gate and len(nodes) < replicas:
            added = max(0, min(replicas - len(nodes), (limit - len(nodes)) if limit is not None else replicas))
            if added > MAX_ADDED_NODES:  # every added node is a node of the plan's room and waves
                raise DiffError(
                    f"NodePool {name}: spec.replicas {replicas} would have static provisioning add {added} nodes, "
                    f"more than plan models ({MAX_ADDED_NODES:,}); set limits.nodes to bound it"
                )
            after = len(nodes) + added
        elif gate and len(nodes) > replicas:
            removed_ = _removed(fleet, nodes, len(nodes) - replicas)
            after = replicas
        verdicts = []
        for node in sorted(nodes, key=lambda n: n.name):
            found = drift.get(node.name)
            if node.name in removed_ or found is None or not found.drifted or found.expires:
                continue
            if after > replicas:
                verdict = (f"static drift waits: {after} nodes, over its {replicas} replicas"
                           + ("" if gate else " (nothing scales it down with the StaticCapacity gate off)"))
            elif limit is not None and after + 1 > limit:
                verdict = f"static drift waits: limits.nodes {limit} leaves no room for its replacement"
            elif launches is not None and launches.get(name) is None:
                verdict = NO_LAUNCH
            else:
                verdict = REPLACED
            verdicts.append((node.name, verdict))
        out.append(StaticNodePool(name, len(nodes), _replicas(base.nodepools.get(name)), replicas, limit, gate,
                                  added, removed_, tuple(verdicts)))
    return out


def static_work(statics: Sequence[StaticNodePool], launches: Mapping[str, Replacement | None],
                nodes: Collection[str] = (), templates: Mapping[str, NodeClaimTemplate] | None = None) -> StaticWork:
    """The waves' part of `statics` (see `StaticWork`; `nodes`: the static NodePools' nodes, `static_nodes`;
    `templates`: their templates, as `static_launches` was given them): a NodePool whose template launches nothing
    adds no node."""
    added: list[Replacement] = []
    removed: list[str] = []
    replaced: dict[str, Replacement] = {}
    for pool in statics:
        launch = launches.get(pool.name)
        if launch is not None:
            added += [launch] * pool.added
        removed += pool.removed
        for node, verdict in pool.drift:
            if verdict == REPLACED and launch is not None:
                replaced[node] = launch
    by_name = {template.name: template for template in (templates or {}).values()}
    return StaticWork(tuple(added), tuple(removed), replaced, frozenset(nodes), by_name)
