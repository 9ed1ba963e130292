"""Node claim templates: what one provisioner can launch, as the scheduler sees it.

A :class:`NodeClaimTemplate` carries a provisioner's requirements (its labels and `karpenter.sh/provisioner-name`
folded in, as Karpenter's `NodeClaimTemplate`), taints, limits, weight, node OS and node shapes, and the mask of
instance types it may launch: those admitted (by `check`'s proof, or by the constraint set's reviewed list), that
satisfy its requirements and have an offering in its zones and capacity types. Built from a Provisioner (the CI
checks) or from a compiled ConstraintSet (the controller), so both decide with the same object. A v1 NodePool's
template also carries its `minValues` and the operator's `--min-values-policy` (`model.minvalues`): under Strict, a
NodePool whose own requirements leave fewer distinct values than a minValues asks launches nothing, as Karpenter
v1.14.1's `NewScheduler` skips it (core pkg/controllers/provisioning/scheduling/scheduler.go). A v1 NodePool's nodes
offer `vpc.amazonaws.com/efa` (v1.14.1's `efas`), and when its EC2NodeClass sets `networkInterfaces` or enables
nested virtualization its types are only those that can launch with them (`model.nodeclassfit`); none left: the
template is unavailable, with the field named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import NodeConfiguration
from karpenter_policy.model.allocatable import node_configuration as node_configuration
from karpenter_policy.model.amifamily import node_os
from karpenter_policy.model.minvalues import BEST_EFFORT, STRICT, unmet_text
from karpenter_policy.model.nodeclassfit import CPU_OPTIONS, NETWORK_INTERFACES, launchable
from karpenter_policy.model.pools import owner_label
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.resources import NODES, parse_quantity
from karpenter_policy.model.taints import Taint
from karpenter_policy.scheduling.instances import (
    TYPE_KEYS,
    V1_TYPE_KEYS,
    InstanceTable,
    NodeShapes,
    ShapeFunction,
    bits,
)
from karpenter_policy.scheduling.shapes import configuration_key, shape_function
from karpenter_policy.scheduling.vectors import INDEX, ZERO, Vector, amount


@dataclass(eq=False)
class NodeClaimTemplate:
    """One provisioner, ready to schedule with (see the module docstring)."""

    name: str
    requirements: Requirements
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    labels: Mapping[str, str]
    limits: Mapping[str, Decimal]
    weight: int
    os: str
    types: int  # the instance types it may launch (bits of the table)
    shapes: NodeShapes
    table: InstanceTable
    kubelet: Mapping[str, Any] | None = None
    hash: str = ""  # the constraint set's hash (stamped on nodes: drift)
    unavailable: str = ""  # why it admits no type, when the caller knows better (e.g. the solver timed out)
    overhead: Vector = ZERO  # the DaemonSet pods its nodes run, set per scheduling run
    daemon_sets: tuple[str, ...] = ()
    #: v1 `minValues` by key (a NodePool's; empty for a Provisioner) and how the scheduler keeps it
    min_values: Mapping[str, int] = field(default_factory=dict)
    min_values_policy: str = STRICT
    #: The labels its types carry (`instances.V1_TYPE_KEYS` for a v1 NodePool) and those a pod may select though
    #: its requirements do not name them (`model.labels.V1_WELL_KNOWN_LABELS` for a v1 NodePool): v0.31's for a
    #: Provisioner, whose nodes never had v1.14.1's new labels.
    type_keys: frozenset[str] = TYPE_KEYS
    well_known: frozenset[str] = wk.WELL_KNOWN_LABELS
    #: a v1 NodePool's (Karpenter v1.14.1 reads the pods it refuses: `PodShape.refused_v1`), not a Provisioner's
    v1: bool = False
    #: values every type of its EC2NodeClass carries beyond the catalog's labels, by key: its placement group's id
    #: and partitions (v1.14.1's `InjectOfferings`, the offerings per partition of placement_group_resolver.go) —
    #: topology domains, never requirements its claims are written with (EC2 picks the partition of a claim no pod
    #: and no spread pins to one)
    offered: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    _zone: Requirement = field(init=False)
    _capacity_type: Requirement = field(init=False)
    _domains: dict[str, frozenset[str]] | None = field(default=None, init=False, repr=False)
    #: `floor`'s lowest price per unit of a resource, by (resource, types, overhead of it): the same every run
    unit_prices: dict[tuple[int, int, int], float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._zone = self.requirements.get_or_exists(wk.ZONE)
        self._capacity_type = self.requirements.get_or_exists(wk.CAPACITY_TYPE)

    @property
    def domains(self) -> Mapping[str, frozenset[str]]:
        """The topology domains a node of this template may be in (Karpenter's `NewScheduler` domains): per key,
        the zones and capacity types its types are offered in that its requirements allow, the label values of
        the types it may launch, its OS, the values of its other `In` requirements, and the values its types are
        offered with (`offered`: a placement group's id and partitions) that its requirements allow. Computed
        once: what it depends on (table, types, requirements, OS, offered) is fixed when the template is built."""
        if self._domains is None:
            found: dict[str, set[str]] = {wk.ZONE: set(), wk.CAPACITY_TYPE: set()}
            for zone, capacity in self.table.offered_pairs(self.types):
                if self._zone.has(zone) and self._capacity_type.has(capacity):
                    found[wk.ZONE].add(zone)
                    found[wk.CAPACITY_TYPE].add(capacity)
            for key, values in self.table.label_values(self.types, self.type_keys).items():
                found.setdefault(key, set()).update(values)
            found.setdefault(wk.OS, set()).add(self.os)
            for key in self.requirements:
                requirement = self.requirements[key]
                if requirement.operator() == Operator.IN and key not in (wk.ZONE, wk.CAPACITY_TYPE, wk.HOSTNAME):
                    found.setdefault(key, set()).update(requirement.values)
            for key, offered in self.offered.items():  # v1.14.1 intersects them with the NodePool's requirements
                allowed = self.requirements.get_or_exists(key)
                found.setdefault(key, set()).update(v for v in offered if allowed.has(v))
            self._domains = {key: frozenset(values) for key, values in found.items()}
        return self._domains

    def unoffered(self, requirements: Requirements) -> str | None:
        """Why `requirements` allow none of the values the template's types are offered with on some key of
        `offered` (v1.14.1: no instance type's requirements intersect the pod's); None when they allow one."""
        for key, values in sorted(self.offered.items()):
            wanted = requirements.get_or_exists(key)
            if not any(wanted.has(value) for value in values):
                return f"{key}: its EC2NodeClass's placement group offers {', '.join(values)} only"
        return None

    @property
    def zone(self) -> Requirement:
        return self._zone

    @property
    def relaxes_min_values(self) -> bool:
        """Whether a new claim of this template may lower its minValues to what its types offer (BestEffort)."""
        return self.min_values_policy == BEST_EFFORT

    @property
    def capacity_type(self) -> Requirement:
        return self._capacity_type

    @property
    def node_limit(self) -> int | None:
        """`limits.nodes` (a NodePool's `spec.limits.nodes`): at most this many nodes, planned and running; None: no
        limit. Karpenter v1.14.1's scheduler refuses a new NodeClaim once it is used up ("node limits have been
        exhausted for nodepool": `addToNewNodeClaim` in core pkg/controllers/provisioning/scheduling/scheduler.go,
        each node counting 1: `StateNode.Capacity` in pkg/controllers/state/statenode.go)."""
        value = self.limits.get(NODES)
        return None if value is None else int(value)

    @property
    def limited(self) -> dict[int, int]:
        """The limits as vector amounts, by resource index (resources the scheduler does not track are left out)."""
        return limited_amounts(self.limits)

    @classmethod
    def build(
        cls,
        table: InstanceTable,
        *,
        name: str,
        requirements: Requirements,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Taint] = (),
        startup_taints: Iterable[Taint] = (),
        limits: Mapping[str, Decimal] | None = None,
        weight: int = 0,
        kubelet: Mapping[str, Any] | None = None,
        node: NodeConfiguration | None = None,
        admitted: Iterable[str] | None = None,
        hash: str = "",
        shape: tuple[str, ShapeFunction] | None = None,
        owner_label: str = wk.PROVISIONER_NAME,
        owner: str | None = None,
        min_values: Mapping[str, int] | None = None,
        min_values_policy: str = STRICT,
        offered: Mapping[str, tuple[str, ...]] | None = None,
    ) -> NodeClaimTemplate:
        """A template over `table`; `node` is its nodes' configuration (default: from `kubelet` alone, AL2);
        `admitted` restricts the types to those named (default: every type the requirements allow); `shape`
        replaces the AWS node-shape arithmetic by (a key, a function) — synthetic instance types in tests and
        benchmarks; `owner_label`: the label naming `name` on its nodes (a v1 NodePool's `karpenter.sh/nodepool`,
        whose nodes never have v0.31's `karpenter.sh/provisioner-name`) and `owner` its value (default: `name`);
        `min_values`, `min_values_policy`: a NodePool's (see the module docstring); `offered`: see the field.
        ValueError names a malformed kubelet field."""
        if node is None:
            node = NodeConfiguration.of(kubelet)
        os = node_os(node.ami_family)
        labels = dict(labels or {})
        full = requirements.add(
            *(Requirement.new(k, Operator.IN, [v]) for k, v in sorted(labels.items())),
            *owner_requirements(owner_label, name if owner is None else owner),
        )
        v1 = owner_label != wk.PROVISIONER_NAME
        type_keys, well_known = (V1_TYPE_KEYS, wk.V1_WELL_KNOWN_LABELS) if v1 else (TYPE_KEYS, wk.WELL_KNOWN_LABELS)
        if v1 and not node.offers_efa:
            node = dataclasses.replace(node, offers_efa=True)
        types = table.mask_of(full, os=os, type_keys=type_keys)
        if admitted is not None:
            types &= table.mask_of_names(admitted)
        unavailable = ""
        if v1 and types and (node.interfaces is not None or node.nested_virtualization):
            types &= launchable_mask(table, node)
            if not types:
                unavailable = unlaunchable_text(node)
        shapes = node_shapes(table, node) if shape is None else table.shapes(shape[0], shape[1])
        min_values = dict(min_values or {})
        if types and min_values and min_values_policy != BEST_EFFORT:
            unmet = table.unmet_min_values(min_values, types)
            if unmet:  # Karpenter's NoCompatibleInstanceTypes event, and the error it logs
                types = 0
                unavailable = (
                    "NodePool requirements filtered out all compatible available instance types due to minValues "
                    f"incompatibility: {unmet_text(unmet)} (the Strict minValues policy)"
                )
        return cls(
            name=name,
            requirements=full,
            taints=tuple(taints),
            startup_taints=tuple(startup_taints),
            labels=labels,
            limits=dict(limits or {}),
            weight=weight,
            os=os,
            types=types,
            shapes=shapes,
            table=table,
            kubelet=kubelet,
            hash=hash,
            unavailable=unavailable,
            min_values=min_values,
            min_values_policy=min_values_policy,
            type_keys=type_keys,
            well_known=well_known,
            v1=v1,
            offered=dict(offered or {}),
        )

    @classmethod
    def from_provisioner(
        cls,
        table: InstanceTable,
        provisioner: Provisioner,
        *,
        node_template: Mapping[str, Any] | None = None,
        admitted: Iterable[str] | None = None,
        name: str | None = None,
        min_values_policy: str = STRICT,
        offered: Mapping[str, tuple[str, ...]] | None = None,
    ) -> NodeClaimTemplate:
        """The template of a (defaulted) Provisioner; `node_template` is the spec of the AWSNodeTemplate it
        references, or its inline provider (AMI family, block device mappings); `name`: the template's name when
        not the provisioner's (a NodePool's `NodePool/<name>`; its nodes' label still names the NodePool; its
        `minValues` kept under `min_values_policy`); `offered`: see the field. ValueError names a bad field."""
        node = node_configuration(provisioner.kubelet, node_template)
        return cls.build(
            table,
            name=provisioner.name if name is None else name,
            requirements=provisioner.requirements,
            labels=provisioner.labels,
            taints=provisioner.taints,
            startup_taints=provisioner.startup_taints,
            limits=provisioner.limits,
            weight=provisioner.weight,
            kubelet=provisioner.kubelet,
            node=node,
            admitted=admitted,
            owner_label=provisioner.owner_label,
            owner=provisioner.name,
            min_values=provisioner.min_values,
            min_values_policy=min_values_policy,
            offered=offered,
        )

    @classmethod
    def from_constraint_set(
        cls,
        table: InstanceTable,
        constraint_set: ConstraintSet,
        min_values_policy: str = STRICT,
        offered: Mapping[str, tuple[str, ...]] | None = None,
    ) -> NodeClaimTemplate:
        """The template of a compiled set: it launches only the instance types the set admits (what was
        reviewed), in the offerings the live table has; named by its pool key (a NodePool's `NodePool/<name>`,
        whose nodes carry `karpenter.sh/nodepool`, its `minValues` kept under `min_values_policy`); `offered`: what
        the cloud adds to its types (its placement group)."""
        return cls.build(
            table,
            name=constraint_set.pool,
            requirements=constraint_set.requirements_model(),
            labels=constraint_set.labels,
            taints=constraint_set.taints,
            startup_taints=constraint_set.startup_taints,
            limits={k: parse_quantity(v) for k, v in constraint_set.limits.items()},
            weight=constraint_set.weight,
            kubelet=constraint_set.kubelet,
            node=node_configuration(constraint_set.kubelet, constraint_set.node_template),
            admitted=constraint_set.admitted,
            hash=constraint_set.hash,
            owner_label=owner_label(constraint_set.pool),
            owner=constraint_set.name,
            min_values=constraint_set.min_values,
            min_values_policy=min_values_policy,
            offered=offered,
        )


def by_weight(template: NodeClaimTemplate) -> tuple[int, tuple[int, ...]]:
    """The templates' order, as a sort key: the heaviest first; equal weights by name — a Provisioner's A to Z (the
    order v0.31.1 lists them in, which its sort by weight alone keeps or not), a v1 NodePool's Z to A, as v1.14.1's
    `OrderByWeight` (pkg/utils/nodepool/nodepool.go:161) puts "the NodePool with the name later in the alphabet"
    first (docs/scheduling.md, "Queue")."""
    return -template.weight, name_order(template.name, descending=template.v1)


def name_order(name: str, *, descending: bool) -> tuple[int, ...]:
    """A sort key for `name`, A to Z or Z to A (Go's byte order of the UTF-8 text: code point order), comparable
    between both directions: the code points, negated when descending, and an end mark that keeps a name before
    the longer names it begins when ascending (`a`, `ab`, `b`) and after them when descending (`b`, `ab`, `a`), as
    Go's string comparison orders them."""
    if descending:
        return (*(-ord(c) for c in name), 1)
    return (*(ord(c) for c in name), -1)


def owner_requirements(owner_label: str, name: str) -> tuple[Requirement, ...]:
    """What a node of provisioner (or NodePool) `name` is as to the owner labels: `owner_label In [name]`; a
    NodePool's nodes (Karpenter v1) also lack `karpenter.sh/provisioner-name`, so a pod still selecting a v0.31
    provisioner by name never lands on them (aws/karpenter-provider-aws#5645)."""
    owner = Requirement.new(owner_label, Operator.IN, [name])
    if owner_label == wk.PROVISIONER_NAME:
        return (owner,)
    return owner, Requirement.new(wk.PROVISIONER_NAME, Operator.DOES_NOT_EXIST)


def launchable_mask(table: InstanceTable, node: NodeConfiguration) -> int:
    """The types of `table` that can launch with the node's EC2NodeClass `networkInterfaces` and `cpuOptions`
    (Karpenter v1.14.1's `IsCompatibleWithNodeClass`, `model.nodeclassfit.launchable`, from the catalog's facts)."""
    return bits(
        i for i, it in enumerate(table.types) if launchable(it, node.interfaces, node.nested_virtualization)
    )


def unlaunchable_text(node: NodeConfiguration, subject: str = "no instance type the requirements admit") -> str:
    """Why no type of a template that `launchable_mask` emptied can launch: the EC2NodeClass field(s) that gate."""
    fields = [f"{NETWORK_INTERFACES} ({len(node.interfaces)})"] if node.interfaces is not None else []
    fields += [f"{CPU_OPTIONS}.nestedVirtualization: enabled"] if node.nested_virtualization else []
    return (
        f"{subject} can launch with the EC2NodeClass's " + " and ".join(fields)
        + " (Karpenter v1.14.1's IsCompatibleWithNodeClass: network cards, device indexes, EFA interfaces, ENA, "
        "nested virtualization)"
    )


def node_shapes(table: InstanceTable, node: NodeConfiguration) -> NodeShapes:
    """Every type's capacity and allocatable on nodes configured as `node` (cached by the table)."""
    return table.shapes(configuration_key(node), shape_function(node), shareable=True)


def limited_amounts(limits: Mapping[str, Decimal]) -> dict[int, int]:
    """Limits as vector amounts, by resource index (resources the scheduler does not track are left out)."""
    return {INDEX[name]: amount(name, value) for name, value in limits.items() if name in INDEX}
