"""The Kubernetes manifests `compile` writes: the policy objects as Karpenter's webhook defaults them
(v1alpha5), or their `karpenter.sh/v1` NodePool / `karpenter.k8s.aws/v1` EC2NodeClass equivalents, and the
constraint sets as a ConfigMap; serialised deterministically as YAML.

v1alpha5 → v1 (field names checked against the v1 CRDs of aws/karpenter-provider-aws):

Provisioner → NodePool
  requirements (defaulted, beta keys → GA)  → spec.template.spec.requirements
  labels / annotations                      → spec.template.metadata.labels / .annotations
  taints / startupTaints                    → spec.template.spec.taints / .startupTaints
  ttlSecondsUntilExpired: N                 → spec.template.spec.expireAfter: N as h/m/s (absent → Never;
                                              v1's default would be 720h)
  ttlSecondsAfterEmpty: N                   → spec.disruption {consolidationPolicy: WhenEmpty, consolidateAfter: N}
  consolidation.enabled: true               → spec.disruption {consolidationPolicy: WhenEmptyOrUnderutilized,
                                              consolidateAfter: 0s}
  neither                                   → spec.disruption {consolidationPolicy: WhenEmpty,
                                              consolidateAfter: Never} (v1alpha5 never removed such nodes)
  (v0.31 disrupted one node at a time)      → spec.disruption.budgets [{nodes: N}] when V1Options.budget_nodes
                                              is N (`migrate` writes "1" by default); else none (v1: 10 %)
  limits.resources                          → spec.limits
  weight (0 omitted: v1 allows 1-100)       → spec.weight
  providerRef / provider                    → spec.template.spec.nodeClassRef {group, kind: EC2NodeClass, name}
  kubeletConfiguration                      → the EC2NodeClass's spec.kubelet (v1 moved it there; provisioners
                                              sharing a template with different kubelet settings get a class
                                              `<template>-<provisioner>` each); containerRuntime is dropped

AWSNodeTemplate (or inline provider, as an EC2NodeClass named after the provisioner) → EC2NodeClass
  subnetSelector / securityGroupSelector    → subnetSelectorTerms / securityGroupSelectorTerms (aws-ids → one
                                              {id} term per id; tags → {tags} terms, comma-separated values
                                              expanded into one term per combination, as v0.31 matched them)
  amiSelector                               → amiSelectorTerms (ids → {id}; aws::name × aws::owners (default
                                              self, amazon) with the remaining keys as tags), amiFamily kept
  no amiSelector                            → amiSelectorTerms [{alias: <family>@latest}] (v0.31 used the latest
                                              EKS-optimised AMI), amiFamily omitted (the alias implies it)
  amiFamily Ubuntu                          → with amiSelector: amiFamily AL2 (v1 dropped Ubuntu; its AMIs boot
                                              with the AL2 bootstrap); without: an error
  instanceProfile                           → instanceProfile; absent → --default-instance-profile or
                                              --node-role (role), else an error (v1 requires one)
  launchTemplate                            → an error: v1 has no launch templates
  userData, tags, detailedMonitoring,
  blockDeviceMappings, context              → the same fields (volume sizes respelled to Gi/G/Ti/T when needed)
  metadataOptions                           → metadataOptions with v1alpha5's defaults filled in (v1 would default
                                              the hop limit to 1 instead of 2)

Flux post-build substitution would rewrite `${...}` in user data (or anywhere). By default an object containing
`${` is annotated `kustomize.toolkit.fluxcd.io/substitute: disabled` (harmless for kubectl / Argo CD);
`flux_escape=True` instead writes `$${...}`, which Flux turns back into `${...}` (use it only with Flux). An object
its author marked `kustomize.toolkit.fluxcd.io/substitute: enabled` is Flux's to substitute: its selectors' and
tags' `${...}` are left for Flux, its other `${` escaped.

`V1Options.target` v1beta1 (`migrate --to v1beta1`, for clusters on Karpenter v0.32–v0.37) writes the same
mapping in the `karpenter.sh/v1beta1` / `karpenter.k8s.aws/v1beta1` shapes (the CRDs of aws/karpenter-provider-aws
v0.32.10, pkg/apis/crds/): ttlSecondsUntilExpired → spec.disruption.expireAfter; consolidation → consolidationPolicy
WhenUnderutilized without consolidateAfter (v1beta1's CEL rule forbids the pair); kubeletConfiguration →
spec.template.spec.kubelet (no class per kubelet); nodeClassRef {name}; amiFamily kept (Ubuntu included) and no
alias (v1beta1 has none: without amiSelector, the family's latest AMI, as v0.31). Budgets are written as for v1;
Karpenter reads them from v0.34 (v0.32–v0.33 prune the field).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any

import yaml

from karpenter_policy.api.aws import ID_SELECTOR_KEYS
from karpenter_policy.api.defaults import default_provisioner
from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PROVISIONER_KIND
from karpenter_policy.api.placeholders import FLUX_SUBSTITUTE, MATCHED_FIELDS, marked_for_flux
from karpenter_policy.api.v1.crds import (
    EC2NODECLASS_API_VERSION,
    EC2NODECLASS_GROUP,
    EC2NODECLASS_KIND,
    NODEPOOL_API_VERSION,
    NODEPOOL_KIND,
)
from karpenter_policy.api.violations import ERROR, V1_CONVERSION, WARNING, Path, Violation
from karpenter_policy.commands.flags import API_VERSIONS
from karpenter_policy.model.labels import normalize_key
from karpenter_policy.model.resources import parse_quantity

API_V1ALPHA5, API_V1 = API_VERSIONS  # compile --api

NODEPOOL_V1BETA1_API_VERSION = "karpenter.sh/v1beta1"
NODECLASS_V1BETA1_API_VERSION = f"{EC2NODECLASS_GROUP}/v1beta1"
TARGET_V1 = "v1"
TARGET_V1BETA1 = "v1beta1"

FLUX_SUBSTITUTE_ANNOTATION = FLUX_SUBSTITUTE
FLUX_SUBSTITUTE_DISABLED = "disabled"
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF = "karpenter-policy"

NEVER = "Never"
V1ALPHA5_METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 2,
    "httpTokens": "required",
}
V1_AMI_ALIASES = {
    "AL2": "al2",
    "AL2023": "al2023",
    "Bottlerocket": "bottlerocket",
    "Windows2019": "windows2019",
    "Windows2022": "windows2022",
}
V1_RESTRICTED_TAGS = ("karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass")
V1_MAX_SELECTOR_TERMS = 30
_V1_VOLUME_SIZE = re.compile(
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}"
    r"|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)
_SERVER_METADATA = ("creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink")
_GIB = Decimal(2**30)
_GB = Decimal(10**9)


# --- v1alpha5 (as defaulted) --------------------------------------------------------------------------------


def _clean(data: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy without status and server-populated metadata (a policy repo should not carry them)."""
    out = copy.deepcopy(dict(data))
    out.pop("status", None)
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        for key in _SERVER_METADATA:
            metadata.pop(key, None)
    return out


def provisioner_manifest(data: Mapping[str, Any]) -> dict[str, Any]:
    """The Provisioner as Karpenter's webhook stores it (requirement defaults added)."""
    return default_provisioner(_clean(data))


def v1_manifest(data: Mapping[str, Any]) -> dict[str, Any]:
    """A Karpenter v1 NodePool or EC2NodeClass as written (the API server applies its CRD's defaults)."""
    return _clean(data)


def node_template_manifest(data: Mapping[str, Any]) -> dict[str, Any]:
    """The AWSNodeTemplate as stored (Karpenter v0.31's webhook adds nothing to it)."""
    return _clean(data)


# --- v1 -----------------------------------------------------------------------------------------------------


def duration(seconds: int) -> str:
    """Seconds as a v1 duration (`^(([0-9]+(s|m|h))+)|(Never)$`): 2592000 → 720h, 90 → 1m30s, 0 → 0s."""
    if seconds <= 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if value)


@dataclass(frozen=True, slots=True)
class Issue:
    """A conversion finding about one source object (`kind`/`name`), at `violation.path` in it."""

    kind: str
    name: str
    violation: Violation


@dataclass(slots=True)
class V1Options:
    """What v1 needs that v1alpha5 took from Karpenter's global settings."""

    default_instance_profile: str | None = None
    node_role: str | None = None
    #: The disruption budget every NodePool gets (`nodes`: a count or a percentage); None: none (v1's 10 %).
    budget_nodes: str | None = None
    #: The API written: v1 (`karpenter.sh/v1`) or v1beta1 (Karpenter v0.32–v0.37; module doc).
    target: str = TARGET_V1

    @property
    def v1beta1(self) -> bool:
        return self.target == TARGET_V1BETA1


@dataclass(slots=True)
class _Converter:
    options: V1Options
    issues: list[Issue] = field(default_factory=list)

    def issue(self, kind: str, name: str, path: Path, message: str, severity: str = ERROR, **kw: Any) -> None:
        self.issues.append(Issue(kind, name, Violation(V1_CONVERSION, path, message, severity, **kw)))

    # -- EC2NodeClass --

    def selector_terms(
        self, selector: Mapping[str, Any], field_name: str, base: Path, kind: str, name: str
    ) -> list[dict[str, Any]]:
        ids = [key for key in selector if key in ID_SELECTOR_KEYS]
        if ids:
            return [{"id": value} for value in _split(str(selector[ids[0]]))]
        keys = sorted(selector)
        choices = [_split(str(selector[key])) or [str(selector[key])] for key in keys]
        terms = [{"tags": dict(zip(keys, combo, strict=True))} for combo in itertools.product(*choices)]
        if len(terms) > V1_MAX_SELECTOR_TERMS:
            self.issue(
                kind,
                name,
                (*base, field_name),
                f"{field_name} expands to {len(terms)} v1 selector terms (comma-separated values, one term per "
                f"combination); v1 allows at most {V1_MAX_SELECTOR_TERMS}",
            )
        return terms

    def ami_terms(self, selector: Mapping[str, Any]) -> list[dict[str, Any]]:
        ids = [key for key in selector if key in ID_SELECTOR_KEYS]
        if ids:
            return [{"id": value} for value in _split(str(selector[ids[0]]))]
        tags = {k: str(v) for k, v in sorted(selector.items()) if k not in ("aws::name", "aws::owners")}
        names: list[str | None] = list(_split(str(selector["aws::name"]))) if "aws::name" in selector else [None]
        owners = _split(str(selector["aws::owners"])) if "aws::owners" in selector else ["self", "amazon"]
        terms: list[dict[str, Any]] = []
        for owner, ami_name in itertools.product(owners, names):
            term: dict[str, Any] = {"owner": owner}
            if ami_name is not None:
                term["name"] = ami_name
            if tags:
                term["tags"] = dict(tags)
            terms.append(term)
        return terms

    def node_class(
        self,
        class_name: str,
        spec: Mapping[str, Any],
        source_kind: str,
        source_name: str,
        base: Path,
        kubelet: Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        where = (source_kind, source_name)
        if "launchTemplate" in spec:
            self.issue(
                *where,
                (*base, "launchTemplate"),
                "v1 has no launchTemplate: put its AMI (amiSelector), security groups, instance profile and user "
                "data into the node template before converting",
                at_key=True,
            )
        out["subnetSelectorTerms"] = self.selector_terms(
            spec.get("subnetSelector") or {}, "subnetSelector", base, *where
        )
        if spec.get("securityGroupSelector"):
            out["securityGroupSelectorTerms"] = self.selector_terms(
                spec["securityGroupSelector"], "securityGroupSelector", base, *where
            )
        elif "launchTemplate" not in spec:
            self.issue(*where, base, "v1 requires securityGroupSelectorTerms: add a securityGroupSelector")
        family = str(spec.get("amiFamily") or "AL2")
        if self.options.v1beta1:  # v1beta1 keeps amiFamily (Ubuntu too) and has no aliases
            if spec.get("amiSelector"):
                out["amiSelectorTerms"] = self.ami_terms(spec["amiSelector"])
            elif family == "Custom":
                self.issue(*where, (*base, "amiFamily"), "amiFamily Custom needs an amiSelector naming the AMIs")
            out["amiFamily"] = family
        elif spec.get("amiSelector"):
            out["amiSelectorTerms"] = self.ami_terms(spec["amiSelector"])
            if family == "Ubuntu":
                self.issue(
                    *where,
                    (*base, "amiFamily"),
                    "v1 has no Ubuntu AMI family: the selected Ubuntu AMIs are launched with amiFamily AL2 "
                    "(the same bootstrap); check the user data",
                    WARNING,
                )
                family = "AL2"
            out["amiFamily"] = family
        elif family in V1_AMI_ALIASES:
            out["amiSelectorTerms"] = [{"alias": f"{V1_AMI_ALIASES[family]}@latest"}]
        elif family == "Ubuntu":
            self.issue(
                *where,
                (*base, "amiFamily"),
                "v1 has no Ubuntu AMI family nor alias: name the Ubuntu AMIs with an amiSelector (v1 launches them "
                "with amiFamily AL2, the same bootstrap), or move to AL2023 or Bottlerocket",
            )
        else:
            self.issue(
                *where,
                (*base, "amiFamily") if "amiFamily" in spec else base,
                f"v1 has no alias for amiFamily {family}: add an amiSelector naming the AMIs to convert this "
                "node template",
            )
        profile = spec.get("instanceProfile") or self.options.default_instance_profile
        if profile:
            out["instanceProfile"] = profile
        elif self.options.node_role:
            out["role"] = self.options.node_role
        else:
            self.issue(
                *where,
                base,
                "v1 requires role or instanceProfile, and v1alpha5 took the instance profile from Karpenter's "
                "settings: set instanceProfile here or pass --default-instance-profile NAME or --node-role ROLE",
            )
        for key in ("userData", "detailedMonitoring", "context"):
            if key in spec:
                out[key] = spec[key]
        tags = dict(spec.get("tags") or {})
        for key in tags:
            if key in V1_RESTRICTED_TAGS:
                message = f"tag {key} is restricted in v1 (Karpenter sets it)"
                self.issue(*where, (*base, "tags", key), message, at_key=True)
        if tags:
            out["tags"] = tags
        out["metadataOptions"] = {**V1ALPHA5_METADATA_OPTIONS, **dict(spec.get("metadataOptions") or {})}
        if spec.get("blockDeviceMappings"):
            out["blockDeviceMappings"] = [
                self.block_device(m, (*base, "blockDeviceMappings", i), *where)
                for i, m in enumerate(spec["blockDeviceMappings"])
            ]
        converted = _kubelet(kubelet)
        if converted and not self.options.v1beta1:
            out["kubelet"] = converted
        meta: dict[str, Any] = {"name": class_name}
        for key in ("labels", "annotations"):
            if metadata and metadata.get(key):
                meta[key] = dict(metadata[key])
        api_version = NODECLASS_V1BETA1_API_VERSION if self.options.v1beta1 else EC2NODECLASS_API_VERSION
        return {"apiVersion": api_version, "kind": EC2NODECLASS_KIND, "metadata": meta, "spec": out}

    def block_device(self, mapping: Mapping[str, Any], path: Path, kind: str, name: str) -> dict[str, Any]:
        out = copy.deepcopy(dict(mapping))
        ebs = out.get("ebs")
        size = ebs.get("volumeSize") if isinstance(ebs, dict) else None
        if isinstance(ebs, dict) and size is not None and not _V1_VOLUME_SIZE.match(str(size)):
            respelled = _volume_size(str(size))
            if respelled is None:
                self.issue(
                    kind, name, (*path, "ebs", "volumeSize"), f"volumeSize {size} has no v1 spelling (Gi, G, Ti or T)"
                )
            else:
                if parse_quantity(respelled) != parse_quantity(str(size)):
                    self.issue(
                        kind,
                        name,
                        (*path, "ebs", "volumeSize"),
                        f"volumeSize {size} rounded up to {respelled}: v1 sizes are whole Gi, G, Ti or T",
                        WARNING,
                    )
                ebs["volumeSize"] = respelled
        return out

    # -- NodePool --

    def node_pool(self, data: Mapping[str, Any], class_name: str) -> dict[str, Any]:
        metadata: Mapping[str, Any] = data.get("metadata") or {}
        spec: Mapping[str, Any] = default_provisioner(data).get("spec") or {}
        requirements = []
        for term in spec.get("requirements") or []:
            converted: dict[str, Any] = {"key": normalize_key(str(term["key"])), "operator": term["operator"]}
            if term["operator"] not in ("Exists", "DoesNotExist"):
                converted["values"] = [str(v) for v in term.get("values") or []]
            requirements.append(converted)
        v1beta1 = self.options.v1beta1
        template_spec: dict[str, Any] = {
            "requirements": requirements,
            "nodeClassRef": {"name": class_name}
            if v1beta1
            else {"group": EC2NODECLASS_GROUP, "kind": EC2NODECLASS_KIND, "name": class_name},
        }
        for key in ("taints", "startupTaints"):
            if spec.get(key):
                template_spec[key] = copy.deepcopy(list(spec[key]))
        kubelet = _kubelet(spec.get("kubeletConfiguration"))
        if v1beta1 and kubelet:
            template_spec["kubelet"] = kubelet
        expire = spec.get("ttlSecondsUntilExpired")
        expire_after = NEVER if expire is None else duration(int(expire))
        if not v1beta1:
            template_spec["expireAfter"] = expire_after
        template: dict[str, Any] = {"spec": template_spec}
        template_metadata: dict[str, Any] = {}
        if spec.get("labels"):
            template_metadata["labels"] = {normalize_key(k): v for k, v in spec["labels"].items()}
        if spec.get("annotations"):
            template_metadata["annotations"] = dict(spec["annotations"])
        if template_metadata:
            template["metadata"] = template_metadata
        empty = spec.get("ttlSecondsAfterEmpty")
        if (spec.get("consolidation") or {}).get("enabled") and v1beta1:
            disruption: dict[str, Any] = {"consolidationPolicy": "WhenUnderutilized"}
        elif (spec.get("consolidation") or {}).get("enabled"):
            disruption = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        elif empty is not None:
            disruption = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": duration(int(empty))}
        else:
            disruption = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": NEVER}
        if v1beta1:
            disruption["expireAfter"] = expire_after
        if self.options.budget_nodes is not None:
            disruption["budgets"] = [{"nodes": self.options.budget_nodes}]
        pool_spec: dict[str, Any] = {"template": template, "disruption": disruption}
        limits = (spec.get("limits") or {}).get("resources")
        if limits:
            pool_spec["limits"] = dict(limits)
        if spec.get("weight"):
            pool_spec["weight"] = spec["weight"]
        meta: dict[str, Any] = {"name": metadata.get("name")}
        for key in ("labels", "annotations"):
            if metadata.get(key):
                meta[key] = dict(metadata[key])
        api_version = NODEPOOL_V1BETA1_API_VERSION if v1beta1 else NODEPOOL_API_VERSION
        return {"apiVersion": api_version, "kind": NODEPOOL_KIND, "metadata": meta, "spec": pool_spec}


def _kubelet(kubelet: Mapping[str, Any] | None) -> dict[str, Any]:
    """The kubelet settings v1 and v1beta1 carry (containerRuntime dropped: their nodes always run containerd)."""
    return {k: copy.deepcopy(v) for k, v in (kubelet or {}).items() if k != "containerRuntime"}


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _volume_size(size: str) -> str | None:
    """A v1 spelling of a v1alpha5 volume size (exact Gi or G when possible, else rounded up to Gi)."""
    try:
        quantity = parse_quantity(size)
    except ValueError:
        return None
    for unit, scale in (("Gi", _GIB), ("G", _GB)):
        count = quantity / scale
        if count == count.to_integral_value() and _V1_VOLUME_SIZE.match(f"{int(count)}{unit}"):
            return f"{int(count)}{unit}"
    rounded = f"{int((quantity / _GIB).to_integral_value(rounding=ROUND_CEILING))}Gi"
    return rounded if _V1_VOLUME_SIZE.match(rounded) else None


def to_v1(
    provisioners: Sequence[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    options: V1Options | None = None,
) -> tuple[list[dict[str, Any]], list[Issue]]:
    """NodePools and EC2NodeClasses equivalent to `provisioners` and the node `templates` (by name), and what
    could not be converted exactly. Node templates no provisioner references are converted too."""
    converter = _Converter(options or V1Options())
    by_template: dict[str, list[Mapping[str, Any]]] = {}
    for data in provisioners:
        ref = (data.get("spec") or {}).get("providerRef")
        if isinstance(ref, Mapping):
            by_template.setdefault(str(ref.get("name")), []).append(data)
    objects: list[dict[str, Any]] = []
    class_names: dict[str, str] = {}  # provisioner name → EC2NodeClass name
    made_from: dict[str, tuple[str, str]] = {}  # EC2NodeClass name → the (kind, name) it was made from

    def add_class(node_class: dict[str, Any], source_kind: str, source_name: str, path: Path) -> None:
        """Two sources must not make one EC2NodeClass name: the second would replace the first."""
        class_name = str(node_class["metadata"]["name"])
        first = made_from.setdefault(class_name, (source_kind, source_name))
        if first != (source_kind, source_name):
            converter.issue(
                source_kind,
                source_name,
                path,
                f"this becomes EC2NodeClass {class_name!r}, and so does {first[0]} {first[1]!r}: rename one of them",
            )
            return
        objects.append(node_class)

    for template_name in sorted(templates):
        users = by_template.get(template_name, [])
        kubelets = [_spec(d).get("kubeletConfiguration") for d in users]
        shared = kubelets[0] if kubelets and all(k == kubelets[0] for k in kubelets) else None
        if converter.options.v1beta1:  # kubelet settings stay on each NodePool: one class per template
            shared = None
        template = templates[template_name]
        add_class(
            converter.node_class(
                template_name,
                _spec(template),
                NODE_TEMPLATE_KIND,
                template_name,
                ("spec",),
                shared,
                template.get("metadata"),
            ),
            NODE_TEMPLATE_KIND,
            template_name,
            ("metadata", "name"),
        )
        for data in users:
            name = str(data["metadata"]["name"])
            kubelet = _spec(data).get("kubeletConfiguration")
            if kubelet is None or kubelet == shared or converter.options.v1beta1:
                class_names[name] = template_name
                continue
            class_name = f"{template_name}-{name}"
            class_names[name] = class_name
            add_class(
                converter.node_class(
                    class_name, _spec(template), NODE_TEMPLATE_KIND, template_name, ("spec",), kubelet, None
                ),
                PROVISIONER_KIND,
                name,
                ("spec", "kubeletConfiguration"),
            )
    for data in provisioners:
        name = str(data["metadata"]["name"])
        spec = _spec(data)
        if isinstance(spec.get("provider"), Mapping):
            add_class(
                converter.node_class(
                    name,
                    spec["provider"],
                    PROVISIONER_KIND,
                    name,
                    ("spec", "provider"),
                    spec.get("kubeletConfiguration"),
                ),
                PROVISIONER_KIND,
                name,
                ("spec", "provider"),
            )
            class_names[name] = name
        elif name not in class_names:
            ref_name = str((spec.get("providerRef") or {}).get("name"))
            class_names[name] = ref_name
            if spec.get("kubeletConfiguration") and not converter.options.v1beta1:
                converter.issue(
                    PROVISIONER_KIND,
                    name,
                    ("spec", "kubeletConfiguration"),
                    f"v1 keeps kubelet settings in the EC2NodeClass, but AWSNodeTemplate {ref_name!r} is not among "
                    "the compiled files",
                    at_key=True,
                )
        kubelet = spec.get("kubeletConfiguration") or {}
        if kubelet.get("containerRuntime") not in (None, "containerd"):
            converter.issue(
                PROVISIONER_KIND,
                name,
                ("spec", "kubeletConfiguration", "containerRuntime"),
                f"containerRuntime {kubelet['containerRuntime']} is dropped: v1 nodes always run containerd",
                WARNING,
            )
        objects.append(converter.node_pool(data, class_names[name]))
    return objects, converter.issues


def _spec(data: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = data.get("spec")
    return spec if isinstance(spec, Mapping) else {}


# --- the ConfigMap ------------------------------------------------------------------------------------------

#: The API server refuses objects over ~1.5 MiB (etcd) and ConfigMaps whose data exceeds 1 MiB.
MAX_CONFIGMAP_DATA_BYTES = 1024 * 1024


def configmap(namespace: str, name: str, data: Mapping[str, str]) -> dict[str, Any]:
    """The constraint sets (one key per set, `<name>.json`, plus `index.json`) as a ConfigMap."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {PART_OF_LABEL: PART_OF}},
        "data": dict(sorted(data.items())),
    }


KUSTOMIZATION_HEADER = (
    "# Written by `karpenter-policy compile`, which rewrites it with the manifests it writes: do not edit.\n"
    "# `kubectl apply -k` this directory, or list it as a resource of another kustomization (Flux: deploy/flux/).\n"
)


def kustomization(resources: Iterable[str]) -> str:
    """The kustomization.yaml of a compile output: `resources` (paths relative to it) in name order, under a
    comment that says who writes it."""
    document = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": sorted(resources),
    }
    return KUSTOMIZATION_HEADER + dump_yaml(document)


_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")


def invalid_name(value: str, namespace: bool) -> str | None:
    """Why the API server would refuse `value` as a namespace (a DNS label) or object name (a DNS subdomain)."""
    pattern, limit, kind = (
        (re.compile(_DNS_LABEL), 63, "namespace (a DNS label)")
        if namespace
        else (_DNS_SUBDOMAIN, 253, "name (a DNS subdomain)")
    )
    if pattern.fullmatch(value) and len(value) <= limit:
        return None
    return f"{value!r} is not a valid {kind}: lower case letters, digits and '-', at most {limit} characters"


def configmap_data_bytes(data: Mapping[str, str]) -> int:
    return sum(len(k.encode("utf-8")) + len(v.encode("utf-8")) for k, v in data.items())


# --- Flux ---------------------------------------------------------------------------------------------------


def _contains_substitution(value: Any) -> bool:
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, Mapping):
        return any(_contains_substitution(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_substitution(v) for v in value)
    return False


#: Where a marked object's `${...}` are Flux's to fill in: its selectors and tags (v1alpha5 and v1 spellings).
_FLUX_FIELDS = frozenset(
    {*MATCHED_FIELDS, "subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms"}
)


def _escape(value: Any, keep: frozenset[str] = frozenset()) -> Any:
    """`value` with every `${` written `$${`, except under the mapping keys `keep`."""
    if isinstance(value, str):
        return value.replace("${", "$${")
    if isinstance(value, Mapping):
        return {k: v if k in keep else _escape(v, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape(v, keep) for v in value]
    return value


def protect_from_flux(obj: Mapping[str, Any], escape: bool = False) -> dict[str, Any]:
    """`obj` safe from Flux post-build substitution: unchanged without `${`; else annotated
    `kustomize.toolkit.fluxcd.io/substitute: disabled`, or with `escape` every `${` written `$${`. An object marked
    `kustomize.toolkit.fluxcd.io/substitute: enabled` keeps its mark and the `${...}` of its selectors and tags for
    Flux to fill in; its other `${` (userData's, the shell's) are written `$${`."""
    out = copy.deepcopy(dict(obj))
    if not _contains_substitution({k: v for k, v in out.items() if k != "metadata"}):
        return out
    if marked_for_flux(out.get("metadata")):
        return {k: (v if k in ("apiVersion", "kind", "metadata") else _escape(v, _FLUX_FIELDS)) for k, v in out.items()}
    if escape:
        return {k: (v if k in ("apiVersion", "kind", "metadata") else _escape(v)) for k, v in out.items()}
    metadata = out.setdefault("metadata", {})
    annotations = metadata.setdefault("annotations", {})
    annotations[FLUX_SUBSTITUTE_ANNOTATION] = FLUX_SUBSTITUTE_DISABLED
    return out


# --- YAML ---------------------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, sorted keys, multi-line strings as literal blocks, no line folding, no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(obj: Any) -> str:
    """One YAML document, byte-stable: sorted keys, LF, UTF-8 text, no folding of long lines."""
    text: str = yaml.dump(
        obj,
        Dumper=_Dumper,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=2**31 - 1,
        indent=2,
        line_break="\n",
        explicit_start=False,
    )
    return text


def yaml_stream(objects: Iterable[Mapping[str, Any]]) -> str:
    """Several objects as one multi-document YAML stream (each document starts with `---`)."""
    return "".join("---\n" + dump_yaml(obj) for obj in objects)


_ORDER = {"ConfigMap": 0, NODE_TEMPLATE_KIND: 1, EC2NODECLASS_KIND: 1, PROVISIONER_KIND: 2, NODEPOOL_KIND: 2}


def sort_objects(objects: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Stable apply order: the ConfigMap, node classes/templates, then provisioners/node pools, each by name."""
    return sorted(objects, key=lambda o: (_ORDER.get(str(o.get("kind")), 3), str(o.get("kind")), _name(o)))


def _name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("name")) if isinstance(metadata, Mapping) else ""


def manifest_file_name(obj: Mapping[str, Any]) -> str:
    """`<kind>-<name>.yaml`, lower case (names are DNS subdomains, safe as file names)."""
    return f"{str(obj.get('kind')).lower()}-{_name(obj)}.yaml"
