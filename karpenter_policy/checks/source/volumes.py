"""PersistentVolumes, PersistentVolumeClaims and StorageClasses among the workloads (`check --workloads`), read as
Karpenter v0.31.1 reads a pod's volumes before it schedules the pod (karpenter-core
`pkg/controllers/provisioning/scheduling/volumetopology.go`, `VolumeTopology.Inject` / `getRequirements`).

Which volumes count: `persistentVolumeClaim` (the claim named), `ephemeral` (claim `<pod>-<volume>` of a Pod when
it is among the files; else the claim Kubernetes creates from its `volumeClaimTemplate`, unbound until the pod is
scheduled) and a StatefulSet's `volumeClaimTemplates` (claim `<template>-<statefulset>-<ordinal>`: the one among the
files when there is one, else the template, unbound).
What a claim adds to the pod's node requirements:

- bound (`spec.volumeName`): the first term of its PersistentVolume's `spec.nodeAffinity.required` (terms are ORed;
  Karpenter takes the first, `getPersistentVolumeRequirements`);
- unbound: the first term of its StorageClass's `allowedTopologies` as `In` requirements
  (`getStorageClassRequirements`); no `storageClassName` means the default class (annotation
  `storageclass.kubernetes.io/is-default-class: "true"`, the newest by creationTimestamp, as
  `DiscoverDefaultStorageClassName`). Karpenter v0.31.1 does not look at `volumeBindingMode`; neither does this.

The EBS CSI driver's key `topology.ebs.csi.aws.com/zone` is read as `topology.kubernetes.io/zone` (the AWS
provider adds it to Karpenter's normalized labels, `pkg/cloudprovider/cloudprovider.go` `init`). The requirements
are ANDed into every required node-selector term of the pod (one is made when it has none), so relaxation never
drops them (`Inject`).

A claim, PersistentVolume or StorageClass that is not among the files is an `unresolved-reference` warning and the
volume adds nothing (Karpenter refuses to schedule such a pod; the object may live in the cluster). Volumes whose
requirements leave no value of a key (PersistentVolumes in different zones) are a `volume-zones-conflict` error
naming the volumes, and the workload is not scheduled further (it never fits).

Karpenter v1.14.1 also ignores a pod whose claims fail its `ValidatePersistentVolumeClaims` (core
pkg/controllers/provisioning/scheduling/volumetopology.go; v0.31.1 only checks that the objects exist):
`ignored_v1` says so, for a NodePool (`PodShape.refused_v1`), from the objects among the files — a claim being
deleted or `Lost`, a bound claim whose PersistentVolume is being deleted; and, for a claim copied from a cluster
(it has a `status`: it is read as it is), an unbound one without a class or of an `Immediate` class
(`volumeBindingMode` unset defaults to it), a bound one without the `pv.kubernetes.io/bind-completed` annotation.
A claim as written (no `status`) is read as Kubernetes makes it: bound by its provisioner or the PersistentVolume
controller, annotated when bound, so those three say nothing of it. An object not among the files is not judged
missing (the warning above; docs/v1.md, "PersistentVolumeClaims").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.violations import (
    ERROR,
    INVALID_WORKLOAD,
    UNRESOLVED_REFERENCE,
    VOLUME_ZONES_CONFLICT,
    WARNING,
)
from karpenter_policy.api.violations import Path as FieldPath
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model.labels import EBS_CSI_ZONE, ZONE
from karpenter_policy.model.pods import PodSpecError, node_selector_term
from karpenter_policy.model.requirements import Requirement, Requirements

PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "StorageClass"
KINDS = {PERSISTENT_VOLUME: frozenset({"v1"}), PERSISTENT_VOLUME_CLAIM: frozenset({"v1"}),
         STORAGE_CLASS: frozenset({"storage.k8s.io/v1", "storage.k8s.io/v1beta1"})}  # fmt: skip
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
#: What the PersistentVolume controller annotates a claim with once bound (k8s.io/component-helpers storage/volume
#: `AnnBindCompleted`); a claim's `Lost` phase; the volumeBindingMode the API server defaults a StorageClass to.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
LOST = "Lost"
IMMEDIATE = "Immediate"
#: The EBS CSI driver's zone key, read as the zone (karpenter-provider-aws v0.31.1 cloudprovider.go `init`).
EBS_ZONE = EBS_CSI_ZONE


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim: the volume it is bound to ("" unbound) and its storageClassName (None: unset); what
    Karpenter v1.14.1's validation reads of it (`ignored_v1`): a deletionTimestamp (`deleting`), `status.phase:
    Lost`, whether it is a cluster's copy (`observed`: it has a status) and bears `pv.kubernetes.io/bind-completed`."""

    name: str
    namespace: str
    volume_name: str
    storage_class: str | None
    deleting: bool = False
    lost: bool = False
    observed: bool = False
    bind_completed: bool = False


@dataclass(frozen=True, slots=True)
class Volumes:
    """The volume objects read: claims by (namespace, name), PersistentVolumes' required terms (the first) by name,
    StorageClasses' first allowed topology by name, and the default class."""

    claims: dict[tuple[str, str], Claim] = field(default_factory=dict)
    persistent_volumes: dict[str, Requirements] = field(default_factory=dict)
    storage_classes: dict[str, Requirements] = field(default_factory=dict)
    #: default classes: (creationTimestamp, name); the newest wins
    defaults: list[tuple[str, str]] = field(default_factory=list)
    #: PersistentVolumes with a deletionTimestamp, and StorageClasses whose volumeBindingMode is Immediate (unset:
    #: the API server's default) — what Karpenter v1.14.1's validation reads of them (`ignored_v1`)
    deleting_volumes: set[str] = field(default_factory=set)
    immediate_classes: set[str] = field(default_factory=set)

    @property
    def default_class(self) -> str:
        return max(self.defaults)[1] if self.defaults else ""


def _normalized(requirements: Requirements) -> Requirements:
    return Requirements(
        Requirement(ZONE, r.complement, r.values, r.greater_than, r.less_than) if r.key == EBS_ZONE else r
        for r in requirements.values()
    )


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def read_volume_object(doc: Document, into: Volumes) -> str | Finding | None:
    """Add the volume object a document is to `into`; its kind, or the `invalid-workload` finding that says why it
    cannot be read, or None when it is no volume object."""
    data = doc.data
    if not isinstance(data, Mapping):
        return None
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str) or api_version not in KINDS.get(kind, ()):
        return None
    metadata = _mapping(data.get("metadata"))
    name = _str(metadata.get("name"))
    spec = _mapping(data.get("spec"))

    def invalid(path: FieldPath, message: str) -> Finding:
        line, column = doc.position(path)
        return Finding(INVALID_WORKLOAD, ERROR, message, doc.file, line, column, f"{kind}/{name}")

    if not name:
        return invalid(("metadata",), f"a {kind} needs metadata.name")
    if kind == PERSISTENT_VOLUME_CLAIM:
        namespace = _str(metadata.get("namespace")) or "default"
        storage_class = spec.get("storageClassName")
        status = data.get("status")
        into.claims[(namespace, name)] = Claim(
            name, namespace, _str(spec.get("volumeName")), storage_class if isinstance(storage_class, str) else None,
            deleting=bool(metadata.get("deletionTimestamp")),
            lost=isinstance(status, Mapping) and status.get("phase") == LOST,
            observed=isinstance(status, Mapping) and bool(status),
            bind_completed=BIND_COMPLETED in _mapping(metadata.get("annotations")),
        )  # fmt: skip
    elif kind == PERSISTENT_VOLUME:
        at: FieldPath = ("spec", "nodeAffinity", "required", "nodeSelectorTerms")
        affinity = spec.get("nodeAffinity")
        required = affinity.get("required") if isinstance(affinity, Mapping) else None
        terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
        try:
            first = node_selector_term(terms[0], (*at, 0)) if isinstance(terms, list) and terms else Requirements()
        except PodSpecError as error:
            return invalid(error.path, error.message)
        into.persistent_volumes[name] = _normalized(first)
        if metadata.get("deletionTimestamp"):
            into.deleting_volumes.add(name)
    else:
        topologies = data.get("allowedTopologies")
        expressions = []
        if isinstance(topologies, list) and topologies and isinstance(topologies[0], Mapping):
            raw = topologies[0].get("matchLabelExpressions") or []
            if not isinstance(raw, list):
                return invalid(("allowedTopologies", 0), "matchLabelExpressions must be a list")
            expressions = [{"key": e.get("key"), "operator": "In", "values": e.get("values")} if isinstance(e, Mapping)
                           else e for e in raw]  # fmt: skip
        try:
            requirements = node_selector_term({"matchExpressions": expressions}, ("allowedTopologies", 0))
        except PodSpecError as error:
            return invalid(("allowedTopologies", 0), error.message)
        into.storage_classes[name] = _normalized(requirements)
        annotations = _mapping(metadata.get("annotations"))
        if str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")) == "true":
            into.defaults.append((str(metadata.get("creationTimestamp") or ""), name))
        if data.get("volumeBindingMode", IMMEDIATE) in (IMMEDIATE, None):
            into.immediate_classes.add(name)
    return kind


@dataclass(frozen=True, slots=True)
class PodVolume:
    """One volume of a pod that goes through a claim: the volume's name, the claim's name (None: the claim does not
    exist yet), and for a claim made from a template (`from_template`: an ephemeral volume, a StatefulSet's
    volumeClaimTemplates) the template's storageClassName (`template_class`, None when unset)."""

    volume: str
    claim: str | None
    template_class: str | None = None
    from_template: bool = False


def pod_volumes(spec: Mapping[str, Any], pod_name: str = "", claim_templates: Sequence[Any] = (),
                stateful_set: str = "", ordinal: int = 0) -> list[PodVolume]:  # fmt: skip
    """The volumes of a pod that go through a claim. `pod_name`: a Pod's name (its ephemeral volumes' claims are
    `<pod>-<volume>`; a controller's pods have generated names, so theirs are read from the template);
    `claim_templates`, `stateful_set`, `ordinal`: a StatefulSet's volumeClaimTemplates, name and the pod's ordinal."""
    found: list[PodVolume] = []
    volumes = spec.get("volumes")
    for volume in volumes if isinstance(volumes, list) else []:
        if not isinstance(volume, Mapping):
            continue
        name = _str(volume.get("name"))
        claim = volume.get("persistentVolumeClaim")
        ephemeral = volume.get("ephemeral")
        if isinstance(claim, Mapping) and _str(claim.get("claimName")):
            found.append(PodVolume(name, _str(claim.get("claimName"))))
        elif isinstance(ephemeral, Mapping):
            claim_name = f"{pod_name}-{name}" if pod_name else None
            found.append(PodVolume(name, claim_name, _template_class(ephemeral.get("volumeClaimTemplate")), True))
    for template in claim_templates:
        if isinstance(template, Mapping):
            metadata = _mapping(template.get("metadata"))
            name = _str(metadata.get("name"))
            claim_name = f"{name}-{stateful_set}-{ordinal}"
            found.append(PodVolume(name, claim_name, _template_class(template), True))
    return found


def _template_class(template: object) -> str | None:
    spec = template.get("spec") if isinstance(template, Mapping) else None
    value = spec.get("storageClassName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class VolumeRequirements:
    """What a pod's volumes require of its node: each volume's requirements (with what they come from), and the
    names of objects not among the files (claims, PersistentVolumes, StorageClasses)."""

    per_volume: tuple[tuple[str, str, Requirements], ...] = ()  # (volume, "PersistentVolume pv-a", requirements)
    missing: tuple[str, ...] = ()

    @property
    def combined(self) -> Requirements:
        combined = Requirements()
        for _, _, requirements in self.per_volume:
            combined = combined.intersection(requirements)
        return combined


def requirements_of(volumes: Sequence[PodVolume], namespace: str, known: Volumes) -> VolumeRequirements:
    """Karpenter's `getRequirements` for each volume; a claim made from a template that is not among the files is
    read as the template (unbound), not as missing."""
    per_volume: list[tuple[str, str, Requirements]] = []
    missing: list[str] = []
    for volume in volumes:
        claim = known.claims.get((namespace, volume.claim)) if volume.claim else None
        if claim is None and not volume.from_template:
            missing.append(f"PersistentVolumeClaim {volume.claim}")
            continue
        if claim is not None and claim.volume_name:
            pv = known.persistent_volumes.get(claim.volume_name)
            if pv is None:
                missing.append(f"PersistentVolume {claim.volume_name}")
            elif pv:
                per_volume.append((volume.volume, f"PersistentVolume {claim.volume_name}", pv))
            continue
        class_name = claim.storage_class if claim is not None else volume.template_class
        class_name = class_name if class_name is not None else known.default_class
        if not class_name:
            continue
        topology = known.storage_classes.get(class_name)
        if topology is None:
            missing.append(f"StorageClass {class_name}")
        elif topology:
            per_volume.append((volume.volume, f"StorageClass {class_name}", topology))
    return VolumeRequirements(tuple(per_volume), tuple(missing))


def ignored_v1(volumes: Sequence[PodVolume], namespace: str, known: Volumes) -> str | None:
    """Why Karpenter v1.14.1 ignores a pod with these volumes (`ValidatePersistentVolumeClaims`, core
    pkg/controllers/provisioning/scheduling/volumetopology.go: the first volume that fails, in its words, the
    objects named after them), None when the files show nothing it refuses. Only claims among the files are read
    (see the module docstring): a claim not among them, or still to be made from a template, is not judged."""
    for volume in volumes:
        claim = known.claims.get((namespace, volume.claim)) if volume.claim else None
        if claim is None:
            continue
        named = f"PersistentVolumeClaim {namespace}/{claim.name}"
        if claim.deleting:
            return f"persistentvolumeclaim is being deleted ({named})"
        if claim.lost:
            return f"persistentvolumeclaim bound to non-existent persistentvolume ({named})"
        if claim.volume_name:
            if claim.volume_name in known.deleting_volumes:
                return (f"failed to validate pvc, persistentvolume is being deleted ({named}, PersistentVolume "
                        f"{claim.volume_name})")  # fmt: skip
            if claim.observed and not claim.bind_completed:
                return (f"pvc is considered unbound because it does not contain annotation {BIND_COMPLETED} "
                        f"({named})")  # fmt: skip
        elif claim.observed:
            if not claim.storage_class:  # a cluster's copy: the admission plugin gave it the default class already
                return f"unbound pvc must define a storage class ({named})"
            if claim.storage_class in known.immediate_classes:
                return (f"failed to validate pvc, pvc with immediate volume binding mode must be bound ({named}, "
                        f"StorageClass {claim.storage_class})")  # fmt: skip
    return None


def conflict_message(found: VolumeRequirements) -> str | None:
    """The `volume-zones-conflict` message when the volumes' requirements, each satisfiable, leave no value of a key
    together, else None (a volume's own `DoesNotExist` is no conflict)."""
    combined = found.combined
    for key in combined:
        if not combined[key].is_empty() or any(r[key].is_empty() for _, _, r in found.per_volume if key in r):
            continue
        parts = [f"{volume} ({source}: {r[key]})" for volume, source, r in found.per_volume if key in r]
        return (
            f"its volumes leave no {key}: {', '.join(parts)}; Karpenter adds each volume's topology to the pod's "
            "required node affinity, so no node can hold it"
        )
    return None


def unresolved_message(missing: str) -> str:
    """The `unresolved-reference` message of a volume object that is not among the files."""
    return (
        f"{missing} is not among the files read; the volume's topology is not counted (Karpenter does not schedule "
        "the pod until it exists)"
    )


def conflict_finding(message: str, file: str, line: int, column: int, ref: str) -> Finding:
    return Finding(VOLUME_ZONES_CONFLICT, ERROR, message, file, line, column, ref)


def unresolved_finding(missing: str, file: str, line: int, column: int, ref: str) -> Finding:
    return Finding(UNRESOLVED_REFERENCE, WARNING, unresolved_message(missing), file, line, column, ref)


__all__ = [
    "EBS_ZONE",
    "KINDS",
    "Claim",
    "PodVolume",
    "VolumeRequirements",
    "Volumes",
    "conflict_finding",
    "conflict_message",
    "ignored_v1",
    "pod_volumes",
    "read_volume_object",
    "requirements_of",
    "unresolved_finding",
]
