"""A pod's volumes as Karpenter reads them before it schedules the pod: the one definition `check --workloads`, the
controller and `simulate` share (docs/scheduling.md "Volume topology", docs/v1.md "PersistentVolumeClaims").

* **Reading the objects** (:func:`claim_of`, :func:`persistent_volume_of`, :func:`storage_class_of`): what is read
  of a PersistentVolumeClaim, a PersistentVolume and a StorageClass, from a manifest or an API answer alike; a
  field of another shape raises :class:`~karpenter_policy.model.pods.PodSpecError` (path and message), which the
  callers turn into their own error (a finding at the line, a malformed object counted).
* **An index** (:class:`Volumes`) of what was read, by key, updated one object at a time (O(1) an event).
* **A pod's volumes** (:func:`pod_volumes`): `persistentVolumeClaim` (the claim named), `ephemeral` (claim
  `<pod>-<volume>`) and a StatefulSet's `volumeClaimTemplates` (`<template>-<statefulset>-<ordinal>`).
* **Their topology** (:func:`requirements_of`, Karpenter v0.31.1's `VolumeTopology.getRequirements`, core
  pkg/controllers/provisioning/scheduling/volumetopology.go): a bound claim brings the first term of its
  PersistentVolume's `spec.nodeAffinity.required`, an unbound one the first term of its StorageClass's
  `allowedTopologies` as `In` requirements (no `storageClassName`: the default class, the newest annotated
  `storageclass.kubernetes.io/is-default-class: "true"`; `""`: none). The EBS CSI driver's zone key is read as
  the zone (karpenter-provider-aws cloudprovider.go `init`).
* **Which pods v1.14.1 ignores** (:func:`ignored_v1`, its `ValidatePersistentVolumeClaims`).

`complete` says whether the index is the whole cluster (the controller, `simulate`): an object it lacks is then
missing, and v1.14.1 ignores the pod ("… not found"). A repository's files are not the cluster (`check
--workloads`): an object they lack is not judged, and a claim as written (no `status`) is read as Kubernetes
makes it (bound by its provisioner, annotated once bound).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.model.labels import EBS_CSI_ZONE, ZONE
from karpenter_policy.model.pods import PodSpecError, node_selector_term
from karpenter_policy.model.requirements import Requirement, Requirements

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
#: What the PersistentVolume controller annotates a claim with once bound (k8s.io/component-helpers storage/volume
#: `AnnBindCompleted`); a claim's `Lost` phase; the volumeBindingMode the API server defaults a StorageClass to.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
LOST = "Lost"
IMMEDIATE = "Immediate"


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
class PersistentVolume:
    """A PersistentVolume: the first term of its required node affinity, and whether it is being deleted."""

    name: str
    requirements: Requirements
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class StorageClass:
    """A StorageClass: the first term of its allowedTopologies, whether its volumeBindingMode is Immediate (unset:
    the API server's default), and its creationTimestamp when it is annotated the default class (None: it is not)."""

    name: str
    topology: Requirements
    immediate: bool
    default_since: str | None = None


@dataclass(slots=True)
class Volumes:
    """The volume objects read, by key: claims by (namespace, name), PersistentVolumes and StorageClasses by name.
    Updated one object at a time (`put`, `drop_*`)."""

    claims: dict[tuple[str, str], Claim] = field(default_factory=dict)
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    _defaults: dict[str, str] = field(default_factory=dict)  # default classes: name → creationTimestamp

    def put(self, read: Claim | PersistentVolume | StorageClass) -> None:
        """Add or replace one object."""
        if isinstance(read, Claim):
            self.claims[(read.namespace, read.name)] = read
        elif isinstance(read, PersistentVolume):
            self.volumes[read.name] = read
        else:
            self.classes[read.name] = read
            self._defaults.pop(read.name, None)
            if read.default_since is not None:
                self._defaults[read.name] = read.default_since

    def drop_claim(self, namespace: str, name: str) -> None:
        self.claims.pop((namespace, name), None)

    def drop_volume(self, name: str) -> None:
        self.volumes.pop(name, None)

    def drop_class(self, name: str) -> None:
        self.classes.pop(name, None)
        self._defaults.pop(name, None)

    @property
    def default_class(self) -> str:
        """The default StorageClass's name (the newest by creationTimestamp, then name), "" when none is."""
        return max((since, name) for name, since in self._defaults.items())[1] if self._defaults else ""


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _normalized(requirements: Requirements) -> Requirements:
    return Requirements(
        Requirement(ZONE, r.complement, r.values, r.greater_than, r.less_than) if r.key == EBS_CSI_ZONE else r
        for r in requirements.values()
    )


def _optional_str(value: object, path: tuple[str | int, ...]) -> str | None:
    if value is not None and not isinstance(value, str):
        raise PodSpecError(path, f"{'.'.join(map(str, path))} must be a string")
    return value


def claim_of(data: Mapping[str, Any]) -> Claim:
    """What is read of a PersistentVolumeClaim (its name must be there already). Raises PodSpecError."""
    metadata = _mapping(data.get("metadata"))
    spec = data.get("spec", {})
    if not isinstance(spec, Mapping):
        raise PodSpecError(("spec",), "spec must be a mapping")
    status = data.get("status")
    if status is not None and not isinstance(status, Mapping):
        raise PodSpecError(("status",), "status must be a mapping")
    return Claim(
        _str(metadata.get("name")), _str(metadata.get("namespace")) or "default",
        _optional_str(spec.get("volumeName"), ("spec", "volumeName")) or "",
        _optional_str(spec.get("storageClassName"), ("spec", "storageClassName")),
        deleting=bool(metadata.get("deletionTimestamp")),
        lost=isinstance(status, Mapping) and status.get("phase") == LOST,
        observed=isinstance(status, Mapping) and bool(status),
        bind_completed=BIND_COMPLETED in _mapping(metadata.get("annotations")),
    )  # fmt: skip


def persistent_volume_of(data: Mapping[str, Any]) -> PersistentVolume:
    """What is read of a PersistentVolume: the first required node-affinity term. Raises PodSpecError."""
    metadata = _mapping(data.get("metadata"))
    spec = _mapping(data.get("spec"))
    at: tuple[str | int, ...] = ("spec", "nodeAffinity", "required", "nodeSelectorTerms")
    affinity = spec.get("nodeAffinity")
    required = affinity.get("required") if isinstance(affinity, Mapping) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    first = node_selector_term(terms[0], (*at, 0)) if isinstance(terms, list) and terms else Requirements()
    return PersistentVolume(_str(metadata.get("name")), _normalized(first), bool(metadata.get("deletionTimestamp")))


def storage_class_of(data: Mapping[str, Any]) -> StorageClass:
    """What is read of a StorageClass: the first allowed topology as `In` requirements. Raises PodSpecError."""
    metadata = _mapping(data.get("metadata"))
    at: tuple[str | int, ...] = ("allowedTopologies", 0)
    topologies = data.get("allowedTopologies")
    expressions = []
    if isinstance(topologies, list) and topologies and isinstance(topologies[0], Mapping):
        raw = topologies[0].get("matchLabelExpressions") or []
        if not isinstance(raw, list):
            raise PodSpecError(at, "matchLabelExpressions must be a list")
        expressions = [{"key": e.get("key"), "operator": "In", "values": e.get("values")} if isinstance(e, Mapping)
                       else e for e in raw]  # fmt: skip
    try:
        topology = node_selector_term({"matchExpressions": expressions}, at)
    except PodSpecError as error:
        raise PodSpecError(at, error.message) from None
    annotations = _mapping(metadata.get("annotations"))
    default = str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")) == "true"
    immediate = data.get("volumeBindingMode", IMMEDIATE) in (IMMEDIATE, None)
    since = str(metadata.get("creationTimestamp") or "") if default else None
    return StorageClass(_str(metadata.get("name")), _normalized(topology), immediate, since)


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
    names of objects not among those read (claims, PersistentVolumes, StorageClasses)."""

    per_volume: tuple[tuple[str, str, Requirements], ...] = ()  # (volume, "PersistentVolume pv-a", requirements)
    missing: tuple[str, ...] = ()

    @property
    def combined(self) -> Requirements:
        combined = Requirements()
        for _, _, requirements in self.per_volume:
            combined = combined.intersection(requirements)
        return combined


def requirements_of(volumes: Sequence[PodVolume], namespace: str, known: Volumes) -> VolumeRequirements:
    """Karpenter's `getRequirements` for each volume; a claim made from a template that is not among those read is
    read as the template (unbound), not as missing."""
    per_volume: list[tuple[str, str, Requirements]] = []
    missing: list[str] = []
    for volume in volumes:
        claim = known.claims.get((namespace, volume.claim)) if volume.claim else None
        if claim is None and not volume.from_template:
            missing.append(f"PersistentVolumeClaim {volume.claim}")
            continue
        if claim is not None and claim.volume_name:
            pv = known.volumes.get(claim.volume_name)
            if pv is None:
                missing.append(f"PersistentVolume {claim.volume_name}")
            elif pv.requirements:
                per_volume.append((volume.volume, f"PersistentVolume {claim.volume_name}", pv.requirements))
            continue
        class_name = claim.storage_class if claim is not None else volume.template_class
        class_name = class_name if class_name is not None else known.default_class
        if not class_name:
            continue
        storage_class = known.classes.get(class_name)
        if storage_class is None:
            missing.append(f"StorageClass {class_name}")
        elif storage_class.topology:
            per_volume.append((volume.volume, f"StorageClass {class_name}", storage_class.topology))
    return VolumeRequirements(tuple(per_volume), tuple(missing))


def ignored_v1(volumes: Sequence[PodVolume], namespace: str, known: Volumes, complete: bool = False) -> str | None:
    """Why Karpenter v1.14.1 ignores a pod with these volumes (`ValidatePersistentVolumeClaims`, core
    pkg/controllers/provisioning/scheduling/volumetopology.go: the first volume that fails, in its words, the
    objects named after them), None when nothing it refuses is seen. Not `complete` (files, not a cluster): only
    claims among those read are judged, and one as written (no status) is read as Kubernetes makes it (see the
    module docstring); `complete`: an object not read is missing."""
    for volume in volumes:
        claim = known.claims.get((namespace, volume.claim)) if volume.claim else None
        if claim is None:
            if complete and volume.claim:
                return (f"getting persistent volume claim, persistentvolumeclaims \"{volume.claim}\" not found "
                        f"(PersistentVolumeClaim {namespace}/{volume.claim})")  # fmt: skip
            continue
        named = f"PersistentVolumeClaim {namespace}/{claim.name}"
        if claim.deleting:
            return f"persistentvolumeclaim is being deleted ({named})"
        if claim.lost:
            return f"persistentvolumeclaim bound to non-existent persistentvolume ({named})"
        if claim.volume_name:
            pv = known.volumes.get(claim.volume_name)
            if pv is None and complete:
                return (f"failed to validate pvc, persistentvolumes \"{claim.volume_name}\" not found ({named}, "
                        f"PersistentVolume {claim.volume_name})")  # fmt: skip
            if pv is not None and pv.deleting:
                return (f"failed to validate pvc, persistentvolume is being deleted ({named}, PersistentVolume "
                        f"{claim.volume_name})")  # fmt: skip
            if claim.observed and not claim.bind_completed:
                return (f"pvc is considered unbound because it does not contain annotation {BIND_COMPLETED} "
                        f"({named})")  # fmt: skip
        elif claim.observed:
            if not claim.storage_class:  # a cluster's copy: the admission plugin gave it the default class already
                return f"unbound pvc must define a storage class ({named})"
            storage_class = known.classes.get(claim.storage_class)
            if storage_class is None and complete:
                return (f"failed to validate pvc, failed to get storage class, storageclasses.storage.k8s.io "
                        f"\"{claim.storage_class}\" not found ({named}, StorageClass {claim.storage_class})")
            if storage_class is not None and storage_class.immediate:
                return (f"failed to validate pvc, pvc with immediate volume binding mode must be bound ({named}, "
                        f"StorageClass {claim.storage_class})")  # fmt: skip
    return None


#: What reads one object of a volume kind (by its `kind`).
Reader = Callable[[Mapping[str, Any]], "Claim | PersistentVolume | StorageClass"]
READERS: dict[str, Reader] = {"PersistentVolumeClaim": claim_of, "PersistentVolume": persistent_volume_of,
                              "StorageClass": storage_class_of}  # fmt: skip


__all__ = [
    "READERS",
    "BIND_COMPLETED",
    "DEFAULT_CLASS_ANNOTATION",
    "IMMEDIATE",
    "LOST",
    "Claim",
    "PersistentVolume",
    "PodVolume",
    "StorageClass",
    "VolumeRequirements",
    "Volumes",
    "claim_of",
    "ignored_v1",
    "persistent_volume_of",
    "pod_volumes",
    "requirements_of",
    "storage_class_of",
]
