"""Typed Provisioner (v1alpha5) and AWSNodeTemplate (v1alpha1) objects, built from validated documents.

These are what the solver, the compiler, the webhook and (later) the reconciler work with: requirements as the
model's set algebra, taints as model taints, limits as exact quantities. Build them only from documents that
passed the schema and `validate_*` (the constructors trust the types).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.defaults import default_requirements
from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PROVISIONER_KIND
from karpenter_policy.model import labels as wk
from karpenter_policy.model.minvalues import merged_min_values
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.resources import ResourceList, parse_resource_list
from karpenter_policy.model.taints import Taint

VERSION_ANNOTATION = "karpenter-policy/version"


@dataclass(frozen=True, slots=True)
class ProviderRef:
    name: str
    kind: str = NODE_TEMPLATE_KIND
    api_version: str = "karpenter.k8s.aws/v1alpha1"


def taints_of(spec: Mapping[str, Any], field_name: str = "taints") -> tuple[Taint, ...]:
    """The taints a validated Provisioner spec lists under `field_name` (`taints` or `startupTaints`), as model
    taints: what the compiler, the pinning rules and the webhook read of them."""
    return tuple(Taint.from_api(t) for t in spec.get(field_name) or [])


@dataclass(frozen=True, slots=True)
class Provisioner:
    """A Provisioner as Karpenter sees it after defaulting.

    `requirements` are the spec's requirements (defaulted) intersected with its labels; `node_selector` keeps the
    spec's requirement terms as written (plus defaults) for manifests.
    """

    name: str
    requirements: Requirements
    node_selector: tuple[Mapping[str, Any], ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: ResourceList = field(default_factory=dict)
    ttl_seconds_after_empty: int | None = None
    ttl_seconds_until_expired: int | None = None
    consolidation_enabled: bool = False
    weight: int = 0
    provider: Mapping[str, Any] | None = None
    provider_ref: ProviderRef | None = None
    kubelet: Mapping[str, Any] | None = None
    version: str | None = None
    #: `Provisioner`, or `NodePool` for a v1 NodePool's scheduling view (`api.v1.objects`): its nodes are labelled
    #: `karpenter.sh/nodepool` and never `karpenter.sh/provisioner-name` (`owner_label`).
    kind: str = PROVISIONER_KIND

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], defaulted: bool = True, kind: str = PROVISIONER_KIND) -> Provisioner:
        metadata: Mapping[str, Any] = doc.get("metadata") or {}
        spec: Mapping[str, Any] = doc.get("spec") or {}
        terms = [dict(term) for term in spec.get("requirements") or []]
        if defaulted:
            terms += default_requirements(terms)
        labels: dict[str, str] = dict(spec.get("labels") or {})
        ref = spec.get("providerRef")
        annotations: dict[str, str] = dict(metadata.get("annotations") or {})
        return cls(
            name=str(metadata.get("name")),
            requirements=Requirements.from_node_selector(terms).intersection(Requirements.from_labels(labels)),
            node_selector=tuple(terms),
            labels=labels,
            annotations=dict(spec.get("annotations") or {}),
            taints=taints_of(spec),
            startup_taints=taints_of(spec, "startupTaints"),
            limits=parse_resource_list((spec.get("limits") or {}).get("resources") or {}),
            ttl_seconds_after_empty=spec.get("ttlSecondsAfterEmpty"),
            ttl_seconds_until_expired=spec.get("ttlSecondsUntilExpired"),
            consolidation_enabled=bool((spec.get("consolidation") or {}).get("enabled")),
            weight=int(spec.get("weight") or 0),
            provider=spec.get("provider"),
            provider_ref=ProviderRef(
                name=str(ref["name"]),
                kind=str(ref.get("kind") or NODE_TEMPLATE_KIND),
                api_version=str(ref.get("apiVersion") or "karpenter.k8s.aws/v1alpha1"),
            )
            if isinstance(ref, Mapping)
            else None,
            kubelet=spec.get("kubeletConfiguration"),
            version=annotations.get(VERSION_ANNOTATION),
            kind=kind,
        )

    @property
    def owner_label(self) -> str:
        """The label naming this object on the nodes it launches: `karpenter.sh/provisioner-name`, or
        `karpenter.sh/nodepool` for a NodePool's view."""
        return wk.PROVISIONER_NAME if self.kind == PROVISIONER_KIND else wk.NODEPOOL

    @property
    def min_values(self) -> dict[str, int]:
        """A NodePool view's `minValues` by key (`model.minvalues.merged_min_values`); a Provisioner has none."""
        if self.kind == PROVISIONER_KIND:
            return {}
        return merged_min_values(
            (str(term.get("key", "")), _count(term.get("minValues")))
            for term in self.node_selector
        )


def _count(value: Any) -> int | None:
    """An integer field's value (a bool is not one), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class AWSNodeTemplate:
    """An AWSNodeTemplate: where and how nodes launch (subnets, security groups, AMI, volumes, tags)."""

    name: str
    subnet_selector: Mapping[str, str]
    security_group_selector: Mapping[str, str] | None = None
    ami_family: str | None = None
    ami_selector: Mapping[str, str] | None = None
    instance_profile: str | None = None
    launch_template: str | None = None
    user_data: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    metadata_options: Mapping[str, Any] | None = None
    block_device_mappings: tuple[Mapping[str, Any], ...] = ()
    detailed_monitoring: bool = False

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> AWSNodeTemplate:
        spec: Mapping[str, Any] = doc.get("spec") or {}
        return cls(
            name=str((doc.get("metadata") or {}).get("name")),
            subnet_selector=dict(spec.get("subnetSelector") or {}),
            security_group_selector=spec.get("securityGroupSelector"),
            ami_family=spec.get("amiFamily"),
            ami_selector=spec.get("amiSelector"),
            instance_profile=spec.get("instanceProfile"),
            launch_template=spec.get("launchTemplate"),
            user_data=spec.get("userData"),
            tags=dict(spec.get("tags") or {}),
            metadata_options=spec.get("metadataOptions"),
            block_device_mappings=tuple(spec.get("blockDeviceMappings") or []),
            detailed_monitoring=bool(spec.get("detailedMonitoring")),
        )

    @property
    def kind(self) -> str:
        return NODE_TEMPLATE_KIND
