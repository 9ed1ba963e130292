"""Constraint sets: what `compile` writes for each Provisioner and what the reconciler and webhook read.

One `ConstraintSet` per provisioner (the contract between compile and run time, docs/architecture.md): its name,
policy version, source files, the normalised requirements (node-selector form), labels, taints, startup taints, limits
(canonical quantities), TTLs, consolidation, weight, the provider settings it launches with (the AWSNodeTemplate it
references, resolved, or its inline provider), kubelet settings, and the resolved offerings — every catalog instance
type that satisfies the requirements, with the zones x capacity types (and prices) it can be bought in. A
`ConstraintSetIndex` lists every set with its hash.

The wire format is JSON with a `schemaVersion`; `hash` is ``sha256:`` + the SHA-256 of the canonical JSON
(sorted keys, no spaces, UTF-8) of everything else, so a reader can tell a set was not altered in transit.

A Karpenter v1 NodePool compiles to a set too (`origin` NodePool): its scheduling view (`api.v1.objects`) as
requirements, labels, taints and limits (`nodes` included), its EC2NodeClass as the provider (`nodeClassRef`), and
what v1 adds in `nodePool` (minValues, disruption, expireAfter, terminationGracePeriod; `replicas` only for a static
NodePool, so a dynamic NodePool's set and hash are as before). It is stored under its own
key (`nodepool.<name>.json`: a Provisioner and a NodePool of one name, as while migrating, never collide) and its
index entry says `kind: NodePool`. Every reader (`read_wire_data`, `read_compiled`, `ConstraintSet.from_json`)
reads both kinds and checks a NodePool's set as Karpenter v1.14.1 admits the NodePool
(`api.constraintcheck.nodepool_set_problems`). A Provisioner's set
and index entry are as before (no new field: their hashes are unchanged).

`resolve_instance_types` computes the offerings with the model's requirement algebra (Karpenter's
`Requirements.Intersects` against each type's requirements), so the reconciler can recompute or check them
with the catalog alone, without the solver.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from karpenter_policy.api.constraintcheck import PROVIDER_INLINE as PROVIDER_INLINE
from karpenter_policy.api.constraintcheck import PROVIDER_NODE_CLASS as PROVIDER_NODE_CLASS
from karpenter_policy.api.constraintcheck import PROVIDER_REF as PROVIDER_REF
from karpenter_policy.api.constraintcheck import V1ALPHA5_ONLY_FIELDS, nodepool_set_problems, set_problems
from karpenter_policy.api.kinds import PROVISIONER_KIND
from karpenter_policy.api.objects import Provisioner
from karpenter_policy.api.schema import show_value
from karpenter_policy.api.v1.crds import NODEPOOL_KIND
from karpenter_policy.api.v1.launchsettings import launch_settings
from karpenter_policy.api.v1.objects import EC2NodeClass, is_static
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import NodeConfiguration, max_pods
from karpenter_policy.model.amifamily import node_os
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.pools import owner_labels, pool_key
from karpenter_policy.model.requirements import Operator, Requirement, Requirements
from karpenter_policy.model.resources import format_quantity
from karpenter_policy.model.taints import Taint

SCHEMA_VERSION = 2
SET_KIND = "ConstraintSet"
INDEX_KIND = "ConstraintSetIndex"
INDEX_KEY = "index.json"
UNVERSIONED = "unversioned"


#: The label keys every instance type has a requirement on in Karpenter (v0.31 `computeRequirements`): a type
#: without a value for one of them has `DoesNotExist` on it. Zone and capacity type depend on the offering and
#: are matched offering by offering instead.
INSTANCE_TYPE_KEYS: frozenset[str] = frozenset(
    {
        wk.INSTANCE_TYPE,
        wk.ARCH,
        wk.OS,
        wk.REGION,
        wk.INSTANCE_FAMILY,
        wk.INSTANCE_SIZE,
        wk.INSTANCE_CATEGORY,
        wk.INSTANCE_GENERATION,
        wk.INSTANCE_CPU,
        wk.INSTANCE_MEMORY,
        wk.INSTANCE_PODS,
        wk.INSTANCE_HYPERVISOR,
        wk.INSTANCE_ENCRYPTION_IN_TRANSIT,
        wk.INSTANCE_LOCAL_NVME,
        wk.INSTANCE_NETWORK_BANDWIDTH,
        wk.INSTANCE_GPU_NAME,
        wk.INSTANCE_GPU_MANUFACTURER,
        wk.INSTANCE_GPU_COUNT,
        wk.INSTANCE_GPU_MEMORY,
        wk.INSTANCE_ACCELERATOR_NAME,
        wk.INSTANCE_ACCELERATOR_MANUFACTURER,
        wk.INSTANCE_ACCELERATOR_COUNT,
    }
)
_NEGATIVE = (Operator.NOT_IN, Operator.DOES_NOT_EXIST)


class ConstraintSetError(ValueError):
    """A constraint-set document that cannot be read: wrong schema version, missing field, hash mismatch."""


def parse_json(text: str | bytes) -> Any:
    """A JSON document as a reader of sets takes it: ValueError (with the reason) for what is not JSON, nesting
    too deep to read included; `Infinity` and `NaN` are read, for the field checks to name the field."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as error:
        raise ValueError(str(error)) from None


#: The longest problem a refusal line quotes (a rule's message may quote a value of any length).
MAX_PROBLEM = 400


def _first(problems: Sequence[str]) -> str:
    """One line for the problems of a document: the first (its middle elided beyond MAX_PROBLEM characters: the
    field comes first and the reason last), and how many more."""
    problem = problems[0]
    if len(problem) > MAX_PROBLEM:
        problem = problem[: MAX_PROBLEM // 2] + " … " + problem[-(MAX_PROBLEM // 2 - 3) :]
    more = len(problems) - 1
    return problem + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def canonical_json(data: Any) -> str:
    """The one spelling of `data` that hashes are computed over: sorted keys, no spaces, no NaN, UTF-8."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(data: Any) -> str:
    """`sha256:` and the hex digest of the data's canonical JSON (what the sets' and the index's hashes are)."""
    return "sha256:" + hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


# --- resolved offerings -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolvedInstanceType:
    """A catalog instance type a provisioner may launch, with the offerings its requirements allow.

    `offerings` is sorted (capacity type, zone) and holds (capacity type, zone, price in USD/hour; None: no price
    data).
    """

    name: str
    vcpu: int
    memory_mib: int
    pods: int
    gpus: int
    price_on_demand: float | None
    offerings: tuple[tuple[str, str, float | None], ...]

    def zones(self, capacity_type: str | None = None) -> tuple[str, ...]:
        """The zones it is offered in (of `capacity_type` only when given), sorted."""
        return tuple(sorted({z for c, z, _ in self.offerings if capacity_type is None or c == capacity_type}))

    def capacity_types(self) -> tuple[str, ...]:
        """The capacity types it is offered as, sorted."""
        return tuple(sorted({c for c, _, _ in self.offerings}))

    def to_json(self) -> dict[str, Any]:
        """The type as a constraint set holds it: its offerings by capacity type, then zone, with their prices."""
        offerings: dict[str, dict[str, float | None]] = {}
        for capacity_type, zone, price in self.offerings:
            offerings.setdefault(capacity_type, {})[zone] = price
        return {
            "name": self.name,
            "vcpu": self.vcpu,
            "memoryMiB": self.memory_mib,
            "pods": self.pods,
            "gpus": self.gpus,
            "priceOnDemand": self.price_on_demand,
            "offerings": offerings,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ResolvedInstanceType:
        """The type a constraint set holds (:meth:`to_json`'s form)."""
        offerings = tuple(
            sorted(
                (
                    (str(capacity_type), str(zone), None if price is None else float(price))
                    for capacity_type, zones in dict(data["offerings"]).items()
                    for zone, price in dict(zones).items()
                ),
                key=lambda offering: offering[:2],
            )
        )
        price = data.get("priceOnDemand")
        return cls(
            name=str(data["name"]),
            vcpu=int(data["vcpu"]),
            memory_mib=int(data["memoryMiB"]),
            pods=int(data["pods"]),
            gpus=int(data["gpus"]),
            price_on_demand=None if price is None else float(price),
            offerings=offerings,
        )


def _label_values(instance_type: InstanceType, key: str) -> tuple[str, ...] | None:
    """The values of `key` (one of INSTANCE_TYPE_KEYS, or for a NodePool of `model.labels.V1_INSTANCE_LABELS`) a
    node of this type has (None: the label is absent); pods, region and OS are decided per provisioner and filled
    in by the caller. One key at a time: a provisioner's requirements name a few keys, and this is asked of every
    catalog type for every provisioner."""
    value = instance_type.linux_labels.get(key)
    if value is not None:
        return (value,)
    if key in wk.V1_INSTANCE_LABELS:  # asked for a NodePool only
        launched = wk.V1_LAUNCH_LABELS.get(key)
        v1_value = instance_type.v1_labels.get(key)
        return launched if launched is not None else (v1_value,) if v1_value is not None else None
    if key == wk.ARCH and instance_type.architectures:
        return tuple(instance_type.architectures)
    return None


def node_configuration_of(kubelet: Mapping[str, Any] | None, ami_family: str | None) -> NodeConfiguration:
    """The node configuration of a (validated) provisioner; a kubelet field the arithmetic refuses is left out
    rather than failing the compile (validation reports it)."""
    try:
        return NodeConfiguration.of(kubelet, ami_family)
    except ValueError:
        return NodeConfiguration.of(None, ami_family)


def _admits(requirement: Requirement, values: tuple[str, ...] | None) -> bool:
    """Karpenter's Intersects for one key: the type's values and the requirement share a value, or both sides
    are negative (the type lacks the label, the requirement is NotIn / DoesNotExist)."""
    if values is None:
        return requirement.operator() in _NEGATIVE
    return any(requirement.has(value) for value in values)


def resolve_instance_types(
    requirements: Requirements,
    instance_types: Iterable[InstanceType],
    region: str,
    kubelet: Mapping[str, Any] | None = None,
    ami_family: str | None = None,
    v1: bool = False,
) -> tuple[ResolvedInstanceType, ...]:
    """Every instance type (sorted by name) whose labels satisfy `requirements` and that has at least one
    available offering in an allowed zone and capacity type, with those offerings.

    `kubelet` and the node template's `ami_family` decide the pods (and so the instance-pods label: one
    max-pods rule, `model.allocatable.max_pods`) and the nodes' OS (``windows`` for the Windows families). `v1`
    (a NodePool's): the types carry the labels Karpenter v1.14.1 added too (`model.labels.V1_INSTANCE_LABELS`;
    every type both tenancies), which a v1alpha5 Provisioner's do not.
    """
    node = node_configuration_of(kubelet, ami_family)
    os = node_os(node.ami_family)
    keys = INSTANCE_TYPE_KEYS | wk.V1_INSTANCE_LABELS if v1 else INSTANCE_TYPE_KEYS
    checked = [(key, requirements[key]) for key in requirements if key in keys]
    zone = requirements.get_or_exists(wk.ZONE)
    capacity = requirements.get_or_exists(wk.CAPACITY_TYPE)
    resolved: list[ResolvedInstanceType] = []
    decided: dict[str, tuple[str, ...]] = {wk.REGION: (region,), wk.OS: (os,)}
    for instance_type in instance_types:
        pods: int | None = None
        admitted = True
        for key, requirement in checked:
            if key == wk.INSTANCE_PODS:
                pods = max_pods(instance_type, node)
                values: tuple[str, ...] | None = (str(pods),)
            else:
                values = decided[key] if key in decided else _label_values(instance_type, key)
            if not _admits(requirement, values):
                admitted = False
                break
        if not admitted:
            continue
        offerings = tuple(
            sorted(
                (
                    (o.capacity_type, o.zone, o.price)
                    for o in instance_type.offerings
                    if o.available and zone.has(o.zone) and capacity.has(o.capacity_type)
                ),
                key=lambda offering: offering[:2],
            )
        )
        if not offerings:
            continue
        if pods is None:
            pods = max_pods(instance_type, node)
        resolved.append(
            ResolvedInstanceType(
                name=instance_type.name,
                vcpu=instance_type.vcpu,
                memory_mib=instance_type.memory_mib,
                pods=pods,
                gpus=instance_type.gpu_count,
                price_on_demand=instance_type.price_on_demand,
                offerings=offerings,
            )
        )
    resolved.sort(key=lambda r: r.name)
    return tuple(resolved)


# --- the constraint set -------------------------------------------------------------------------------------

#: The key of a set compiled from a NodePool: `nodepool.` before its name. A Provisioner's name is a DNS-1035 label
#: (no dot), so no Provisioner's key is ever one of these.
NODEPOOL_KEY_PREFIX = "nodepool."


def set_key(name: str, kind: str = PROVISIONER_KIND) -> str:
    """The file name / ConfigMap data key of the set of the `kind` object `name`."""
    return f"{NODEPOOL_KEY_PREFIX if kind == NODEPOOL_KIND else ''}{name}.json"


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """The launch settings of a provisioner: the AWSNodeTemplate it references (`source` providerRef, `spec`
    None when the template was not among the compiled files) or its inline `provider` (`source` inline)."""

    source: str
    name: str | None
    spec: Mapping[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        """The settings as a constraint set holds them."""
        return {"source": self.source, "name": self.name, "spec": self.spec}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProviderSettings:
        """The settings a constraint set holds (:meth:`to_json`'s form)."""
        spec = data.get("spec")
        name = data.get("name")
        return cls(str(data["source"]), None if name is None else str(name), None if spec is None else dict(spec))


def provider_settings(
    provisioner: Provisioner, node_template_spec: Mapping[str, Any] | None
) -> ProviderSettings | None:
    """A Provisioner's launch settings: by reference, with `node_template_spec` (its AWSNodeTemplate's spec; None:
    not among the policies), or inline; None when it has neither."""
    if provisioner.provider_ref is not None:
        spec = dict(node_template_spec) if node_template_spec is not None else None
        return ProviderSettings(PROVIDER_REF, provisioner.provider_ref.name, spec)
    if provisioner.provider is not None:
        return ProviderSettings(PROVIDER_INLINE, None, dict(provisioner.provider))
    return None


def _taints_to_json(taints: Sequence[Taint]) -> list[dict[str, str]]:
    return [taint.to_api() for taint in taints]


def _taints_from_json(data: Any) -> tuple[Taint, ...]:
    return tuple(Taint.from_api(t) for t in data or [])


#: A TTL is a Go int64 in Karpenter's API: the API server refuses a larger one.
MAX_TTL_SECONDS = 2**63 - 1


def _ttl(value: Any, name: str) -> int | None:
    """A TTL of a constraint-set document: None, or an integer of 0 … MAX_TTL_SECONDS (ValueError otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TTL_SECONDS:
        raise ValueError(f"{name} must be an integer of 0 to {MAX_TTL_SECONDS}, not {str(value)[:40]!r}")
    return value


class _Hashed:
    """A document whose JSON form carries the sha256 of its content (everything but the hash itself)."""

    __slots__ = ()

    def content(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def hash(self) -> str:
        return content_hash(self.content())

    def to_json(self) -> dict[str, Any]:
        content = self.content()
        return {**content, "hash": content_hash(content)}

    def dumps(self) -> str:
        """The canonical (compact) JSON text, hash included."""
        return canonical_json(self.to_json())


@dataclass(frozen=True, slots=True)
class ConstraintSet(_Hashed):
    """Everything the reconciler and the webhook need of one provisioner (docs/architecture.md).

    `admitted` are the names of the instance types it may launch (what its reviewers saw); `instance_types` is
    the audit listing of those with their offerings and prices when compiled (files only: the wire form and sets
    read from it carry none). The hash covers the policy — requirements, settings, node template, admitted names —
    and not the listing: a price that changes does not change a set (nor drift its nodes).
    """

    name: str
    version: str
    sources: tuple[str, ...]
    region: str
    requirements: tuple[Mapping[str, Any], ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Mapping[str, str] = field(default_factory=dict)
    ttl_seconds_after_empty: int | None = None
    ttl_seconds_until_expired: int | None = None
    consolidation_enabled: bool = False
    weight: int = 0
    provider: ProviderSettings | None = None
    kubelet: Mapping[str, Any] | None = None
    admitted: tuple[str, ...] = ()
    instance_types: tuple[ResolvedInstanceType, ...] = ()
    schema_version: int = SCHEMA_VERSION
    #: The kind of object compiled: Provisioner, or NodePool (then `nodepool` holds what v1 adds).
    origin: str = PROVISIONER_KIND
    nodepool: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        """Its file name and ConfigMap data key (`set_key`)."""
        return set_key(self.name, self.origin)

    @property
    def is_nodepool(self) -> bool:
        """Compiled from a Karpenter v1 NodePool."""
        return self.origin == NODEPOOL_KIND

    @property
    def is_static(self) -> bool:
        """Compiled from a static NodePool (`nodePool.replicas`: `api.v1.objects.is_static`), which the controller
        and `simulate` leave out of scheduling as Karpenter v1.14.1 does with the StaticCapacity gate off."""
        return self.is_nodepool and is_static(self.nodepool or {})

    @property
    def pool(self) -> str:
        """Its pool key (`model.pools`): the name of its node claim template, of its nodes' pool, of its limits."""
        return pool_key(self.name, self.is_nodepool)

    @property
    def min_values(self) -> dict[str, int]:
        """A NodePool's `minValues` by key (none for a Provisioner)."""
        raw = (self.nodepool or {}).get("minValues") or {}
        return {str(key): int(value) for key, value in raw.items()}

    def node_labels(self) -> dict[str, str]:
        """The labels its nodes carry besides the instance's: the set's labels and the owner label
        (`karpenter.sh/provisioner-name`, or a NodePool's `karpenter.sh/nodepool` and the label naming its node
        class, `karpenter.k8s.aws/ec2nodeclass`: `NewNodeClaimTemplate` in core
        pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go at v1.14.1)."""
        labels = {**self.labels, **owner_labels(self.pool)}
        if self.is_nodepool and self.provider is not None and self.provider.name:
            labels[NODE_CLASS_LABEL] = self.provider.name
        return labels

    @property
    def node_template(self) -> Mapping[str, Any]:
        """What the node arithmetic reads of its node template (AMI family, block devices): a Provisioner's
        AWSNodeTemplate (or inline provider) spec, a NodePool's EC2NodeClass as `EC2NodeClass.node_template`."""
        spec = (self.provider.spec or {}) if self.provider is not None else {}
        if self.is_nodepool:
            return EC2NodeClass.from_document({"spec": spec}).node_template()
        return spec

    @property
    def launch_spec(self) -> Mapping[str, Any] | None:
        """What the cloud provider launches with (the AWSNodeTemplate shape; None: no node template): a NodePool's
        EC2NodeClass as `api.v1.launchsettings.launch_settings` says it (LaunchSettingsError: it cannot)."""
        spec = self.provider.spec if self.provider is not None else None
        if spec is None or not self.is_nodepool:
            return spec
        return launch_settings(spec)

    def content(self) -> dict[str, Any]:
        """Every field the hash covers, in wire form."""
        content = {
            "schemaVersion": self.schema_version,
            "kind": SET_KIND,
            "name": self.name,
            "version": self.version,
            "sources": list(self.sources),
            "region": self.region,
            "requirements": [dict(term) for term in self.requirements],
            "labels": dict(sorted(self.labels.items())),
            "annotations": dict(sorted(self.annotations.items())),
            "taints": _taints_to_json(self.taints),
            "startupTaints": _taints_to_json(self.startup_taints),
            "limits": dict(sorted(self.limits.items())),
            "ttlSecondsAfterEmpty": self.ttl_seconds_after_empty,
            "ttlSecondsUntilExpired": self.ttl_seconds_until_expired,
            "consolidation": {"enabled": self.consolidation_enabled},
            "weight": self.weight,
            "provider": None if self.provider is None else self.provider.to_json(),
            "kubelet": None if self.kubelet is None else dict(self.kubelet),
            "admitted": sorted(self.admitted),
        }
        return content if self.origin == PROVISIONER_KIND else _nodepool_content(content, self.nodepool)

    @property
    def node_hash(self) -> str:
        """The hash of what shapes a node once launched — labels, annotations, taints, startup taints, kubelet
        settings, the node template (AMI family and selector, launch template, user data, subnets, security
        groups, tags …) and the region — as Karpenter's provisioner hash covers the spec less requirements,
        limits, TTLs, weight and consolidation. A node whose hash differs has drifted; requirements are checked
        against the node's labels instead (a node that still satisfies them has not)."""
        content = self.content()
        keys = ("labels", "annotations", "taints", "startupTaints", "kubelet", "provider", "region")
        return content_hash({key: content[key] for key in keys})

    def to_json(self) -> dict[str, Any]:
        """The file form: the content, the audit listing of the admitted types, and the hash."""
        content = self.content()
        return {**content, "instanceTypes": [it.to_json() for it in self.instance_types], "hash": content_hash(content)}

    @classmethod
    def of(
        cls,
        provisioner: Provisioner,
        *,
        version: str,
        sources: Sequence[str],
        region: str,
        provider: ProviderSettings | None,
        instance_types: Iterable[InstanceType],
        ami_family: str | None = None,
        nodepool: Mapping[str, Any] | None = None,
    ) -> ConstraintSet:
        """The set of a (defaulted) provisioner, its offerings resolved against `instance_types`; of a NodePool
        when `provisioner` is its scheduling view (kind NodePool: `nodepool` holds what v1 adds, `ami_family` is
        its EC2NodeClass's, which an alias may name)."""
        family = str((provider.spec or {}).get("amiFamily") or "") if provider is not None else ""
        family = ami_family or family
        resolved = resolve_instance_types(
            provisioner.requirements, instance_types, region, provisioner.kubelet, family or None,
            v1=provisioner.kind == NODEPOOL_KIND,
        )  # fmt: skip
        return cls(
            name=provisioner.name,
            version=version,
            sources=tuple(sorted(set(sources))),
            region=region,
            requirements=tuple(provisioner.requirements.to_node_selector()),
            labels=dict(provisioner.labels),
            annotations=dict(provisioner.annotations),
            taints=provisioner.taints,
            startup_taints=provisioner.startup_taints,
            limits=canonical_limits(provisioner.limits),
            ttl_seconds_after_empty=provisioner.ttl_seconds_after_empty,
            ttl_seconds_until_expired=provisioner.ttl_seconds_until_expired,
            consolidation_enabled=provisioner.consolidation_enabled,
            weight=provisioner.weight,
            provider=provider,
            kubelet=None if provisioner.kubelet is None else dict(provisioner.kubelet),
            admitted=tuple(it.name for it in resolved),
            instance_types=resolved,
            origin=NODEPOOL_KIND if provisioner.kind == NODEPOOL_KIND else PROVISIONER_KIND,
            nodepool=None if provisioner.kind != NODEPOOL_KIND else dict(nodepool or {}),
        )

    def requirements_model(self) -> Requirements:
        """The requirements as the model's set algebra (for scheduling and admission)."""
        return Requirements.from_node_selector(self.requirements)

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], verify: bool = True
    ) -> ConstraintSet:
        """Read a set written by `to_json` (or a wire set whose admitted names and node template were filled in
        by `read_wire_data`), a Provisioner's or a NodePool's; `verify` checks the hash. Raises ConstraintSetError."""
        if not isinstance(data, Mapping):
            raise ConstraintSetError("a constraint set must be a JSON object")
        version = data.get("schemaVersion")
        if version != SCHEMA_VERSION:
            raise ConstraintSetError(
                f"unsupported constraint-set schemaVersion {show_value(version)} (expected {SCHEMA_VERSION}: compile "
                "the policies again with this version of karpenter-policy)"
            )
        if data.get("kind") != SET_KIND:
            raise ConstraintSetError(f"not a {SET_KIND}: kind is {show_value(data.get('kind'))}")
        of_nodepool = data.get("origin") == NODEPOOL_KIND or "nodePool" in data
        problems = nodepool_set_problems(data) if of_nodepool else set_problems(data)
        if problems:
            raise ConstraintSetError(_first(problems))
        try:
            provider = data.get("provider")
            kubelet = data.get("kubelet")
            built = cls(
                name=str(data["name"]),
                version=str(data["version"]),
                sources=tuple(str(s) for s in data["sources"]),
                region=str(data["region"]),
                requirements=tuple(dict(term) for term in data["requirements"]),
                labels={str(k): str(v) for k, v in dict(data["labels"]).items()},
                annotations={str(k): str(v) for k, v in dict(data.get("annotations") or {}).items()},
                taints=_taints_from_json(data["taints"]),
                startup_taints=_taints_from_json(data["startupTaints"]),
                limits={str(k): str(v) for k, v in dict(data["limits"]).items()},
                ttl_seconds_after_empty=_ttl(data.get("ttlSecondsAfterEmpty"), "ttlSecondsAfterEmpty"),
                ttl_seconds_until_expired=_ttl(data.get("ttlSecondsUntilExpired"), "ttlSecondsUntilExpired"),
                consolidation_enabled=bool(dict(data.get("consolidation") or {}).get("enabled")),
                weight=int(data["weight"]),
                provider=None if provider is None else ProviderSettings.from_json(provider),
                kubelet=None if kubelet is None else dict(kubelet),
                admitted=tuple(str(n) for n in data["admitted"]),
                instance_types=tuple(ResolvedInstanceType.from_json(t) for t in data.get("instanceTypes") or ()),
                origin=NODEPOOL_KIND if of_nodepool else PROVISIONER_KIND,
                nodepool=dict(data["nodePool"]) if of_nodepool else None,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ConstraintSetError(f"malformed constraint set: {type(error).__name__}: {error}") from None
        if verify and data.get("hash") != built.hash:
            raise ConstraintSetError(
                f"constraint set {built.name}: hash {show_value(data.get('hash'))} does not match its content "
                f"({built.hash})"
            )
        return built

    @classmethod
    def loads(cls, text: str | bytes, verify: bool = True) -> ConstraintSet:
        """A constraint set from its JSON text (`verify`: its hash checked);
        ConstraintSetError when it is not one."""
        try:
            data = parse_json(text)
        except ValueError as error:
            raise ConstraintSetError(f"not JSON: {error}") from None
        return cls.from_json(data, verify)


#: The label naming a NodePool's node class on its nodes (`NodeClassLabelKey` of the EC2NodeClass group and kind, core
#: pkg/apis/v1/labels.go at v1.14.1).
NODE_CLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
#: The v1alpha5 fields a NodePool's set leaves out: v1 says the same in `nodePool` (expireAfter, disruption).
_V1ALPHA5_ONLY = tuple(sorted(V1ALPHA5_ONLY_FIELDS))


def _nodepool_content(content: dict[str, Any], nodepool: Mapping[str, Any] | None) -> dict[str, Any]:
    """The content of a NodePool's set: a Provisioner's less `_V1ALPHA5_ONLY`, with `origin` and `nodePool`."""
    kept = {key: value for key, value in content.items() if key not in _V1ALPHA5_ONLY}
    return {**kept, "origin": NODEPOOL_KIND, "nodePool": dict(nodepool or {})}


def canonical_limits(limits: Mapping[str, Any]) -> dict[str, str]:
    """Limits as canonical quantity strings (`2k` and `2000` spell the same limit once)."""
    return {name: format_quantity(value) for name, value in sorted(limits.items())}


# --- the index ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexEntry:
    name: str
    version: str
    hash: str
    weight: int
    key: str
    #: Provisioner (not written: as before NodePools), or NodePool.
    kind: str = PROVISIONER_KIND

    def to_json(self) -> dict[str, Any]:
        """The entry as the index holds it."""
        entry: dict[str, Any] = {
            "name": self.name, "version": self.version, "hash": self.hash, "weight": self.weight, "key": self.key
        }  # fmt: skip
        return entry if self.kind == PROVISIONER_KIND else {**entry, "kind": self.kind}


INDEX_FIELDS = frozenset({"schemaVersion", "kind", "catalog", "sets", "hash"})
ENTRY_FIELDS = frozenset({"name", "version", "hash", "weight", "key"})
#: A set's weight: Karpenter's 1-100, or 0 for a Provisioner without one.
MAX_WEIGHT = 100


def _entry_problems(index: int, entry: Any, seen: set[tuple[str, str]]) -> Iterator[str]:
    where = f"sets[{index}]"
    of_nodepool = isinstance(entry, Mapping) and entry.get("kind") == NODEPOOL_KIND
    fields = ENTRY_FIELDS | {"kind"} if of_nodepool else ENTRY_FIELDS
    if not isinstance(entry, Mapping) or entry.keys() != fields:
        yield f"{where} must be a mapping of {', '.join(sorted(fields))}"
        return
    name, weight = entry["name"], entry["weight"]
    if of_nodepool and (not isinstance(name, str) or not wk.is_dns1123_subdomain(name)):
        yield f"{where}.name {show_value(name)} is not a NodePool name (a DNS-1123 subdomain)"
        return
    if not of_nodepool and (not isinstance(name, str) or not wk.is_dns1035_label(name)):
        yield f"{where}.name {show_value(name)} is not a Provisioner name (a DNS-1035 label)"
        return
    kind = NODEPOOL_KIND if of_nodepool else PROVISIONER_KIND
    if (kind, name) in seen:
        yield f"{where}: {name} is listed twice"
    seen.add((kind, name))
    key = set_key(name, kind)
    if entry["key"] != key or key == INDEX_KEY:
        yield f"{where}.key {show_value(entry['key'])} is not {key!r}, where compile writes the set {name}"
    for text in ("version", "hash"):
        if not isinstance(entry[text], str):
            yield f"{where}.{text} must be a string, not {show_value(entry[text])}"
    if type(weight) is not int or not 0 <= weight <= MAX_WEIGHT:
        yield f"{where}.weight must be an integer of 0 to {MAX_WEIGHT}, not {show_value(weight)}"


def index_problems(data: Mapping[str, Any]) -> list[str]:
    """Why an index (its compact wire extras removed) cannot be used, first problem first: a field it does not
    have, an entry of another shape, a name twice or not a Provisioner (or NodePool) name, a key that is not the
    name's, a weight beyond Karpenter's."""
    problems = [f"unknown field {show_value(key)}" for key in sorted(map(str, data)) if key not in INDEX_FIELDS]
    problems += [f"missing required field {key!r}" for key in sorted(INDEX_FIELDS - data.keys())]
    catalog = data.get("catalog")
    if not isinstance(catalog, Mapping):
        problems.append(f"catalog must be a mapping, not {show_value(catalog)}")
    entries = data.get("sets")
    if not isinstance(entries, list):
        problems.append(f"sets must be a list, not {show_value(entries)}")
        return problems
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        problems += _entry_problems(index, entry, seen)
    return problems


def entry_mismatch(entry: IndexEntry, constraint_set: ConstraintSet) -> str | None:
    """How a set differs from what its index entry says of it (kind, name, version, weight, hash); None when it
    does not."""
    for what, listed, own in (
        ("kind", entry.kind, constraint_set.origin),
        ("name", entry.name, constraint_set.name),
        ("version", entry.version, constraint_set.version),
        ("weight", entry.weight, constraint_set.weight),
        ("hash", entry.hash, constraint_set.hash),
    ):
        if listed != own:
            return f"{what} {show_value(own)} is not the index's {show_value(listed)}"
    return None


@dataclass(frozen=True, slots=True)
class ConstraintSetIndex(_Hashed):
    """Every compiled set with its hash, sorted by name; `catalog` identifies the catalog the offerings came
    from (region, number of types, hash of the catalog file)."""

    entries: tuple[IndexEntry, ...]
    catalog: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def of(cls, sets: Iterable[ConstraintSet], catalog: Mapping[str, Any]) -> ConstraintSetIndex:
        """The index of these sets (by name), with `catalog`: what identifies the catalog they were compiled against."""
        entries = tuple(
            IndexEntry(s.name, s.version, s.hash, s.weight, s.key, s.origin)
            for s in sorted(sets, key=lambda s: (s.name, s.origin != PROVISIONER_KIND))
        )
        return cls(entries, dict(catalog))

    def content(self) -> dict[str, Any]:
        """What the index's hash covers: its schema version, kind, catalog and entries."""
        return {
            "schemaVersion": self.schema_version,
            "kind": INDEX_KIND,
            "catalog": dict(sorted(self.catalog.items())),
            "sets": [entry.to_json() for entry in self.entries],
        }

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], verify: bool = True
    ) -> ConstraintSetIndex:
        """An index from its JSON form (`verify`: its hash checked);
        ConstraintSetError when it is not one."""
        if not isinstance(data, Mapping) or data.get("kind") != INDEX_KIND:
            raise ConstraintSetError(f"not a {INDEX_KIND}")
        if data.get("schemaVersion") != SCHEMA_VERSION:
            raise ConstraintSetError(
                f"unsupported index schemaVersion {show_value(data.get('schemaVersion'))} (expected {SCHEMA_VERSION})"
            )
        problems = index_problems(data)
        if problems:
            raise ConstraintSetError(_first(problems))
        entries = tuple(
            IndexEntry(e["name"], e["version"], e["hash"], e["weight"], e["key"], e.get("kind", PROVISIONER_KIND))
            for e in data["sets"]
        )
        built = cls(entries, dict(data["catalog"]))
        if verify and data.get("hash") != built.hash:
            shown = show_value(data.get("hash"))
            raise ConstraintSetError(f"index hash {shown} does not match its content ({built.hash})")
        return built


# --- the wire form (the ConfigMap) --------------------------------------------------------------------------

#: The index's extra keys in the wire form: the type table the sets' bitmaps index, and the node templates.
WIRE_TYPES = "types"
WIRE_NODE_TEMPLATES = "nodeTemplates"


def _bitmap(names: Iterable[str], position: Mapping[str, int], size: int) -> str:
    bits = bytearray((size + 7) // 8)
    for name in names:
        i = position[name]
        bits[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(bits)).decode("ascii")


def _names(bitmap: str, table: Sequence[str]) -> tuple[str, ...]:
    try:
        bits = base64.b64decode(bitmap.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as error:
        raise ConstraintSetError(f"admittedBits is not base64: {error}") from None
    if len(bits) != (len(table) + 7) // 8:
        raise ConstraintSetError(f"admittedBits has {len(bits)} bytes for a type table of {len(table)} names")
    return tuple(name for i, name in enumerate(table) if bits[i // 8] >> (i % 8) & 1)


def wire_data(sets: Sequence[ConstraintSet], index: ConstraintSetIndex) -> dict[str, str]:
    """The compact form of compiled sets for a ConfigMap: `index.json` (the index, plus the sorted table of every
    admitted type name and each node template once, by the hash of its spec) and one `<name>.json` per set
    without the audit listing, its admitted types as a bitmap over the table and its node template by reference.
    Each set keeps its hash: a reader rebuilds the set and verifies it (`read_wire_data`)."""
    table = sorted({name for s in sets for name in s.admitted})
    position = {name: i for i, name in enumerate(table)}
    templates: dict[str, Any] = {}
    data: dict[str, str] = {}
    for constraint_set in sets:
        content = constraint_set.content()
        digest = content_hash(content)
        del content["admitted"]
        content["admittedBits"] = _bitmap(constraint_set.admitted, position, len(table))
        provider = content.get("provider")
        if provider is not None and provider.get("spec") is not None:
            ref = content_hash(provider["spec"])
            templates[ref] = provider["spec"]
            content["provider"] = {**provider, "spec": None, "specRef": ref}
        data[constraint_set.key] = canonical_json({**content, "hash": digest})
    index_json = index.to_json()
    index_json[WIRE_TYPES] = table
    index_json[WIRE_NODE_TEMPLATES] = dict(sorted(templates.items()))
    data[INDEX_KEY] = canonical_json(index_json)
    return data


def _wire_set(raw: str, table: Sequence[str], templates: Mapping[str, Any]) -> ConstraintSet:
    """A set of the compact wire form, its admitted names and node template filled in from the index's table."""
    try:
        content = parse_json(raw)
    except ValueError as error:
        raise ConstraintSetError(f"not JSON: {error}") from None
    if not isinstance(content, dict):
        raise ConstraintSetError("not a JSON object")
    bits = content.pop("admittedBits", None)
    if not isinstance(bits, str):
        raise ConstraintSetError("no admittedBits")
    if "admitted" in content:
        raise ConstraintSetError("unknown field admitted (the wire form has admittedBits)")
    content["admitted"] = list(_names(bits, table))
    provider = content.get("provider")
    if isinstance(provider, dict) and "specRef" in provider:
        ref = provider.pop("specRef")
        if not isinstance(ref, str) or ref not in templates:
            raise ConstraintSetError(f"provider.specRef {show_value(ref)} is not a node template of the index")
        if provider.get("spec") is not None:
            raise ConstraintSetError("provider has both spec and specRef")
        provider["spec"] = templates[ref]
    return ConstraintSet.from_json(content)


def _checked_against(entry: IndexEntry, constraint_set: ConstraintSet) -> ConstraintSet:
    mismatch = entry_mismatch(entry, constraint_set)
    if mismatch is not None:
        raise ConstraintSetError(mismatch)
    return constraint_set


def read_wire_data(
    data: Mapping[str, str]
) -> tuple[ConstraintSetIndex, list[ConstraintSet]]:
    """The index and sets of a ConfigMap's data written by `wire_data`, every set checked (`ConstraintSet.from_json`)
    and every hash verified (the index's own, and each set's against its content and the index's entry, which
    must also name it, with its kind, version and weight). Raises ConstraintSetError naming the key."""
    raw_index = data.get(INDEX_KEY)
    if raw_index is None:
        raise ConstraintSetError(f"no {INDEX_KEY} key: is it the ConfigMap `compile` writes?")
    try:
        index_json = parse_json(raw_index)
    except ValueError as error:
        raise ConstraintSetError(f"{INDEX_KEY}: not JSON: {error}") from None
    if not isinstance(index_json, dict):
        raise ConstraintSetError(f"{INDEX_KEY}: not a JSON object")
    table = index_json.pop(WIRE_TYPES, None)
    templates = index_json.pop(WIRE_NODE_TEMPLATES, None)
    if not isinstance(table, list) or not isinstance(templates, dict):
        raise ConstraintSetError(f"{INDEX_KEY}: no type table or node templates (not the compact wire form)")
    if not all(isinstance(name, str) for name in table):
        raise ConstraintSetError(f"{INDEX_KEY}: {WIRE_TYPES} must be a list of instance-type names")
    try:
        index = ConstraintSetIndex.from_json(index_json)
    except ConstraintSetError as error:
        raise ConstraintSetError(f"{INDEX_KEY}: {error}") from None
    sets = []
    for entry in index.entries:
        raw = data.get(entry.key)
        if raw is None:
            raise ConstraintSetError(f"{entry.key}: listed in the index but missing")
        try:
            sets.append(_checked_against(entry, _wire_set(raw, table, templates)))
        except ConstraintSetError as error:
            raise ConstraintSetError(f"{entry.key}: {error}") from None
    return index, sets


class _Files(Mapping[str, str]):
    """The files of a folder by name, read when asked for (a mounted ConfigMap: only the keys its index names, once
    the index was checked, are ever read)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __getitem__(self, name: str) -> str:
        path = self.folder / name
        if not path.is_file():
            raise KeyError(name)
        return _read(path)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(p.name for p in self.folder.iterdir()))

    def __len__(self) -> int:
        return sum(1 for _ in self.folder.iterdir())


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConstraintSetError(f"{path}: cannot read: {error}") from None


def read_compiled(
    directory: str | os.PathLike[str]
) -> tuple[ConstraintSetIndex, list[ConstraintSet]]:
    """The index and sets `compile -o DIR` wrote (DIR, or its `constraintsets/`), or the constraint-set ConfigMap
    mounted as a directory (one file per key, the wire form): every set checked and every hash verified, as
    `read_wire_data`. Raises ConstraintSetError naming the file."""
    base = Path(directory)
    folder = next((d for d in (base / "constraintsets", base) if (d / INDEX_KEY).is_file()), None)
    if folder is None:
        raise ConstraintSetError(f"{base}: no constraintsets/{INDEX_KEY} or {INDEX_KEY}: is it `compile -o` output?")
    try:
        index_json = parse_json(_read(folder / INDEX_KEY))
    except ValueError as error:
        raise ConstraintSetError(f"{folder / INDEX_KEY}: not JSON: {error}") from None
    if isinstance(index_json, dict) and WIRE_TYPES in index_json:  # a mounted ConfigMap
        try:
            return read_wire_data(_Files(folder))
        except ConstraintSetError as error:
            raise ConstraintSetError(f"{folder}: {error}") from None
    try:
        index = ConstraintSetIndex.from_json(index_json)
    except ConstraintSetError as error:
        raise ConstraintSetError(f"{folder / INDEX_KEY}: {error}") from None
    sets = []
    for entry in index.entries:
        text = _read(folder / entry.key)
        try:
            sets.append(_checked_against(entry, ConstraintSet.loads(text)))
        except ConstraintSetError as error:
            raise ConstraintSetError(f"{folder / entry.key}: {error}") from None
    return index, sets
