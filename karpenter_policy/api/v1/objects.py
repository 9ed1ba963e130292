"""Typed Karpenter v1 objects — `NodePool` (`karpenter.sh/v1`) and `EC2NodeClass` (`karpenter.k8s.aws/v1`) — and
the one scheduling view the engine uses of a NodePool: a v1alpha5-shaped Provisioner.

Build them only from documents `api.v1.admission.admit` accepted (defaults applied; the constructors trust the
types). The engine (the solver, the limits check, the scheduler) speaks `api.objects.Provisioner`; a NodePool
becomes one through `provisioner_document` (the document form the proofs read, term by term, at the NodePool's own
lines: `nodepool_path` maps each path back) and `NodePool.provisioner` (the typed form the scheduler reads). What
v1 changes, the view says:

* no default requirements (Karpenter v1 adds none: v0.31's on-demand / amd64 / c,m,r / generation > 2 are gone);
* requirements are the template's requirements ∩ its labels (`NewNodeClaimTemplate` in core
  pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go), with `Gte`/`Lte` (`model.requirements`);
* its nodes carry `karpenter.sh/nodepool: <name>` and never `karpenter.sh/provisioner-name` (`kind` NodePool:
  `Provisioner.owner_label`);
* the kubelet settings, AMI family and block devices come from the referenced EC2NodeClass;
* limits keep `nodes` (a count of nodes, `spec.limits.nodes`) beside the resources: the scheduler launches no
  node of the NodePool beyond it (`scheduling.templates.NodeClaimTemplate.node_limit`), and `nodes: 0` is a
  `limits` warning (`proof.limits`).

`minValues`, disruption, expiry and termination grace are carried as they are (`NodePool.min_values`,
`NodePool.disruption`); the view does not need them. `spec.replicas` makes a NodePool static (`is_static`, v1.14.1's
`IsStatic`): the view carries it (`spec.replicas`) so that every reader of the view can leave such a NodePool out of
placement, as v1.14.1's provisioner does with the StaticCapacity feature gate off (docs/v1.md, "Static NodePools").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from karpenter_policy.api.objects import Provisioner, taints_of
from karpenter_policy.api.v1.crds import EC2NODECLASS_API_VERSION, EC2NODECLASS_KIND, NODEPOOL_KIND
from karpenter_policy.model.minvalues import merged_min_values
from karpenter_policy.model.nodeclassfit import CPU_OPTIONS, NETWORK_INTERFACES
from karpenter_policy.model.requirements import Requirement
from karpenter_policy.model.resources import NODES, ResourceList, parse_resource_list
from karpenter_policy.model.taints import Taint

__all__ = [
    "AMI_ALIAS_FAMILIES",
    "Disruption",
    "EC2NodeClass",
    "NodeClassRef",
    "NodePool",
    "NodePoolRequirement",
    "arithmetic_family",
    "is_static",
    "nodepool_path",
    "provisioner_document",
]

Path = tuple[str | int, ...]

#: `spec.limits.nodes`: a limit on the number of nodes, not a resource of a node.
NODES_LIMIT: Final = NODES

#: The AMI family an `amiSelectorTerms` alias names (`al2023@latest` → AL2023): `AMIFamilyFromAlias` in aws
#: pkg/apis/v1/ec2nodeclass.go at v1.14.1.
AMI_ALIAS_FAMILIES: Final[Mapping[str, str]] = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}

#: The v0.31 family whose node arithmetic (`model.amifamily`) stands in for a family v0.31 did not have: the OS is
#: what matters most (a Windows2025 node runs Windows); AL2023's v1.14 arithmetic is not modelled, and like any
#: family `model.amifamily` does not know it reads as AL2 (docs/v1.md).
_ARITHMETIC_FAMILIES: Final[Mapping[str, str]] = {"Windows2025": "Windows2022"}


def arithmetic_family(family: str | None) -> str | None:
    """The family whose node arithmetic (`model.amifamily`) a node of `family` is counted with (see above)."""
    return None if family is None else _ARITHMETIC_FAMILIES.get(family, family)

#: Where each field of the Provisioner-shaped document is in the NodePool (longest prefix first). The kubelet
#: and the node template are the EC2NodeClass's: a finding on them is placed at the NodePool's nodeClassRef.
_PATHS: Final[tuple[tuple[Path, Path], ...]] = (
    (("spec", "limits", "resources"), ("spec", "limits")),
    (("spec", "requirements"), ("spec", "template", "spec", "requirements")),
    (("spec", "labels"), ("spec", "template", "metadata", "labels")),
    (("spec", "annotations"), ("spec", "template", "metadata", "annotations")),
    (("spec", "taints"), ("spec", "template", "spec", "taints")),
    (("spec", "startupTaints"), ("spec", "template", "spec", "startupTaints")),
    (("spec", "kubeletConfiguration"), ("spec", "template", "spec", "nodeClassRef")),
    (("spec", "provider"), ("spec", "template", "spec", "nodeClassRef")),
    (("spec",), ("spec", "template", "spec")),
)


def is_static(spec: Mapping[str, Any]) -> bool:
    """Whether a NodePool's spec (or its scheduling view's) makes it static: `spec.replicas` set — core
    pkg/utils/nodepool/nodepool.go `IsStatic` at v1.14.1 (`Spec.Replicas != nil`; 0 is static too)."""
    return spec.get("replicas") is not None


def nodepool_path(path: Sequence[str | int]) -> Path:
    """Where the field at `path` of `provisioner_document`'s result is in the NodePool it came from
    (`("spec", "requirements", 2, "values", 0)` → `("spec", "template", "spec", "requirements", 2, "values", 0)`)."""
    path = tuple(path)
    for view, own in _PATHS:
        if path[: len(view)] == view:
            return own + path[len(view):]
    return path


@dataclass(frozen=True, slots=True)
class NodePoolRequirement:
    """One requirement of `spec.template.spec.requirements`, with v1's `minValues` (None: not set)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    min_values: int | None = None

    def requirement(self) -> Requirement:
        """The model's set for this term (`Gte`/`Lte` read as their integer equivalents). ValueError: malformed
        (admission refuses such a NodePool)."""
        return Requirement.new(self.key, self.operator, self.values)

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodePoolRequirement:
        min_values = raw.get("minValues")
        return cls(
            key=str(raw.get("key", "")),
            operator=str(raw.get("operator", "")),
            values=tuple(str(v) for v in raw.get("values") or []),
            min_values=min_values if isinstance(min_values, int) and not isinstance(min_values, bool) else None,
        )


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    """`spec.template.spec.nodeClassRef`: the node class a NodePool's nodes launch with."""

    group: str
    kind: str
    name: str

    @property
    def is_ec2_node_class(self) -> bool:
        """Whether it names an EC2NodeClass (the AWS provider's; another provider's class is not ours to read)."""
        return self.group == EC2NODECLASS_API_VERSION.split("/")[0] and self.kind == EC2NODECLASS_KIND

    @classmethod
    def from_api(cls, raw: Mapping[str, Any]) -> NodeClassRef:
        """The reference as written (a missing field reads as "")."""
        return cls(str(raw.get("group", "")), str(raw.get("kind", "")), str(raw.get("name", "")))

    @classmethod
    def of_nodepool(cls, doc: Mapping[str, Any]) -> NodeClassRef | None:
        """The `spec.template.spec.nodeClassRef` of a NodePool document — as stored, or a cluster snapshot's, not
        checked — (None: there is none, or a level is not a mapping)."""
        node: Any = doc
        for part in ("spec", "template", "spec", "nodeClassRef"):
            node = node.get(part) if isinstance(node, Mapping) else None
        return cls.from_api(node) if isinstance(node, Mapping) else None


@dataclass(frozen=True, slots=True)
class Disruption:
    """`spec.disruption` after defaulting: the consolidation policy, how long after a node became a candidate,
    and the budgets as written (each a mapping: `nodes`, optional `schedule`, `duration`, `reasons`)."""

    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "0s"
    budgets: tuple[Mapping[str, Any], ...] = ({"nodes": "10%"},)


@dataclass(frozen=True, slots=True)
class NodePool:
    """A NodePool as Karpenter v1.14.1 reads it after admission (defaults applied)."""

    name: str
    requirements: tuple[NodePoolRequirement, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class_ref: NodeClassRef | None = None
    #: `spec.limits` without `nodes` (cpu, memory, …).
    limits: ResourceList = field(default_factory=dict)
    #: `spec.limits.nodes`: at most this many nodes (None: no limit).
    node_limit: int | None = None
    disruption: Disruption = field(default_factory=Disruption)
    expire_after: str | None = "720h"
    termination_grace_period: str | None = None
    weight: int = 0
    #: `spec.replicas`: the node count of a static NodePool (None: a dynamic one).
    replicas: int | None = None

    @property
    def is_static(self) -> bool:
        """`IsStatic` (see `is_static`)."""
        return self.replicas is not None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> NodePool:
        """The NodePool of an admitted `karpenter.sh/v1` NodePool document."""
        spec: Mapping[str, Any] = doc.get("spec") or {}
        template: Mapping[str, Any] = spec.get("template") or {}
        template_metadata: Mapping[str, Any] = template.get("metadata") or {}
        template_spec: Mapping[str, Any] = template.get("spec") or {}
        ref = template_spec.get("nodeClassRef")
        limits: dict[str, Any] = dict(spec.get("limits") or {})
        nodes = limits.pop(NODES_LIMIT, None)
        disruption: Mapping[str, Any] = spec.get("disruption") or {}
        defaults = Disruption()
        return cls(
            name=str((doc.get("metadata") or {}).get("name")),
            requirements=tuple(
                NodePoolRequirement.from_api(r)
                for r in template_spec.get("requirements") or []
                if isinstance(r, Mapping)
            ),
            labels={str(k): str(v) for k, v in (template_metadata.get("labels") or {}).items()},
            annotations={str(k): str(v) for k, v in (template_metadata.get("annotations") or {}).items()},
            taints=taints_of(template_spec),
            startup_taints=taints_of(template_spec, "startupTaints"),
            node_class_ref=NodeClassRef.from_api(ref) if isinstance(ref, Mapping) else None,
            limits=parse_resource_list(limits),
            node_limit=_node_count(nodes),
            disruption=Disruption(
                consolidation_policy=str(disruption.get("consolidationPolicy") or defaults.consolidation_policy),
                consolidate_after=str(disruption.get("consolidateAfter") or defaults.consolidate_after),
                budgets=tuple(dict(b) for b in disruption["budgets"] if isinstance(b, Mapping))
                if isinstance(disruption.get("budgets"), list)
                else defaults.budgets,
            ),
            expire_after=_optional_str(template_spec.get("expireAfter")),
            termination_grace_period=_optional_str(template_spec.get("terminationGracePeriod")),
            weight=int(spec.get("weight") or 0),
            replicas=int(spec["replicas"]) if is_static(spec) else None,
        )

    @property
    def min_values(self) -> dict[str, int]:
        """Each key some requirement sets `minValues` on, with the largest (Karpenter merges terms on one key and
        keeps the larger: `Requirements.Add` in core pkg/scheduling/requirements.go)."""
        return merged_min_values((term.key, term.min_values) for term in self.requirements)

    def provisioner(self, node_class: EC2NodeClass | None = None) -> Provisioner:
        """The scheduling view (see the module docstring): what every proof and the scheduler run on."""
        return Provisioner.from_document(
            provisioner_document(self, node_class), defaulted=False, kind=NODEPOOL_KIND
        )


def _node_count(value: Any) -> int | None:
    """`limits.nodes` as a count (a quantity: `10`, or the string `"10"`)."""
    if value is None:
        return None
    try:
        return int(parse_resource_list({NODES_LIMIT: value})[NODES_LIMIT])
    except (ValueError, KeyError, ArithmeticError):
        return None


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class EC2NodeClass:
    """An EC2NodeClass as Karpenter v1.14.1 reads it after admission: where and how nodes launch."""

    name: str
    ami_selector_terms: tuple[Mapping[str, Any], ...] = ()
    #: `spec.amiFamily`, else the family of an `alias` term (`al2023@latest` → AL2023); None for ids, names,
    #: tags and SSM parameters without an amiFamily (Karpenter then needs one: admission requires it).
    ami_family: str | None = None
    kubelet: Mapping[str, Any] | None = None
    subnet_selector_terms: tuple[Mapping[str, Any], ...] = ()
    security_group_selector_terms: tuple[Mapping[str, Any], ...] = ()
    block_device_mappings: tuple[Mapping[str, Any], ...] = ()
    instance_store_policy: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    role: str | None = None
    instance_profile: str | None = None
    user_data: str | None = None
    metadata_options: Mapping[str, Any] | None = None
    network_interfaces: tuple[Mapping[str, Any], ...] = ()
    cpu_options: Mapping[str, Any] | None = None
    #: `spec.placementGroupSelector` ({name} or {id}), None without one.
    placement_group: Mapping[str, Any] | None = None

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> EC2NodeClass:
        """The EC2NodeClass of an admitted `karpenter.k8s.aws/v1` EC2NodeClass document."""
        spec: Mapping[str, Any] = doc.get("spec") or {}
        terms = tuple(dict(t) for t in spec.get("amiSelectorTerms") or [] if isinstance(t, Mapping))
        kubelet = spec.get("kubelet")
        return cls(
            name=str((doc.get("metadata") or {}).get("name")),
            ami_selector_terms=terms,
            ami_family=_optional_str(spec.get("amiFamily")) or alias_family(terms),
            kubelet=dict(kubelet) if isinstance(kubelet, Mapping) else None,
            subnet_selector_terms=tuple(dict(t) for t in spec.get("subnetSelectorTerms") or []),
            security_group_selector_terms=tuple(dict(t) for t in spec.get("securityGroupSelectorTerms") or []),
            block_device_mappings=tuple(dict(m) for m in spec.get("blockDeviceMappings") or []),
            instance_store_policy=_optional_str(spec.get("instanceStorePolicy")),
            tags={str(k): str(v) for k, v in (spec.get("tags") or {}).items()},
            role=_optional_str(spec.get("role")),
            instance_profile=_optional_str(spec.get("instanceProfile")),
            user_data=_optional_str(spec.get("userData")),
            metadata_options=spec.get("metadataOptions"),
            network_interfaces=tuple(dict(n) for n in spec.get(NETWORK_INTERFACES) or [] if isinstance(n, Mapping)),
            cpu_options=dict(options) if isinstance(options := spec.get(CPU_OPTIONS), Mapping) else None,
            placement_group=_placement_group(spec.get(_PLACEMENT_GROUP)),
        )

    def node_template(self) -> dict[str, Any]:
        """What the engine's node arithmetic reads of a node template (`model.allocatable.node_configuration`):
        the AMI family, the block device mappings, the instance-store policy (RAID0: the nodes' ephemeral storage
        is the instance store, `NodeConfiguration.ephemeral_storage_of`) and, when set, the network interfaces
        (the `efa-only` ones on card 0 are ENIs the pods do not get, `model.allocatable.efa_only_enis`; they all
        decide the EFA offered and which types can launch, `model.nodeclassfit`) the CPU options and the
        `placementGroupSelector` (its partitions are topology domains: `launchsettings.offline_placement_offerings`)."""
        template: dict[str, Any] = {"blockDeviceMappings": [dict(m) for m in self.block_device_mappings]}
        if self.ami_family is not None:
            template["amiFamily"] = arithmetic_family(self.ami_family)
        if self.instance_store_policy is not None:
            template["instanceStorePolicy"] = self.instance_store_policy
        if self.network_interfaces:
            template[NETWORK_INTERFACES] = [dict(n) for n in self.network_interfaces]
        if self.cpu_options is not None:
            template[CPU_OPTIONS] = dict(self.cpu_options)
        if self.placement_group:
            template[_PLACEMENT_GROUP] = dict(self.placement_group)
        return template


#: The EC2NodeClass field naming its placement group (`api.v1.launchsettings.PLACEMENT_GROUP`, which imports this
#: module).
_PLACEMENT_GROUP: Final = "placementGroupSelector"


def _placement_group(selector: object) -> dict[str, Any] | None:
    """A `placementGroupSelector` as read: a non-empty mapping, else None."""
    return dict(selector) if isinstance(selector, Mapping) and selector else None


def alias_family(terms: Sequence[Mapping[str, Any]]) -> str | None:
    """The AMI family the `alias` of `amiSelectorTerms` names (admission allows one alias, alone), else None."""
    for term in terms:
        alias = term.get("alias")
        if isinstance(alias, str):
            return AMI_ALIAS_FAMILIES.get(alias.partition("@")[0].lower())
    return None


def _view_limits(nodepool: NodePool) -> dict[str, str]:
    """The NodePool's limits as the view's `limits.resources`: its resources, and `nodes` when set."""
    limits = {k: format(v, "f") for k, v in nodepool.limits.items()}
    if nodepool.node_limit is not None:
        limits[NODES_LIMIT] = str(nodepool.node_limit)
    return limits


def provisioner_document(nodepool: NodePool, node_class: EC2NodeClass | None = None) -> dict[str, Any]:
    """The NodePool in the form of a v1alpha5 Provisioner document — what the engine's proofs read term by term
    (`checks.proof.solver.terms_of`), with `nodepool_path` to place each field back in the NodePool. Requirements
    in written order (so term indices match; `minValues` kept), labels, taints, limits (`nodes` included), weight,
    and of the EC2NodeClass its kubelet (`kubeletConfiguration`) and node template (`EC2NodeClass.node_template`,
    as an inline `provider`: what the engine reads of a node template)."""
    spec: dict[str, Any] = {
        "requirements": [
            {
                "key": r.key,
                "operator": r.operator,
                **({"values": list(r.values)} if r.values else {}),
                **({"minValues": r.min_values} if r.min_values is not None else {}),
            }
            for r in nodepool.requirements
        ],
        "labels": dict(nodepool.labels),
        "annotations": dict(nodepool.annotations),
        "taints": [t.to_api() for t in nodepool.taints],
        "startupTaints": [t.to_api() for t in nodepool.startup_taints],
        "limits": {"resources": _view_limits(nodepool)},
        "weight": nodepool.weight,
    }
    if nodepool.replicas is not None:
        spec["replicas"] = nodepool.replicas
    if node_class is not None and node_class.kubelet is not None:
        spec["kubeletConfiguration"] = dict(node_class.kubelet)
    if node_class is not None:
        spec["provider"] = node_class.node_template()
    return {"apiVersion": "karpenter.sh/v1", "kind": NODEPOOL_KIND, "metadata": {"name": nodepool.name}, "spec": spec}

