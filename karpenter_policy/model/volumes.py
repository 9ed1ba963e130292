"""A pod's volumes as Karpenter reads them before it schedules the pod: the one definition `check --workloads`, the
controller and `simulate` share (docs/scheduling.md "Volume topology", docs/v1.md "PersistentVolumeClaims").

* **Reading the objects** (:func:`claim_of`, :func:`persistent_volume_of`, :func:`storage_class_of`): what is read
  of a PersistentVolumeClaim, a PersistentVolume and a StorageClass, from a manifest or an API answer alike; a
  field of another shape raises :class:`~karpenter_policy.model.pods.PodSpecError` (path and message), which the
  callers turn into their own error (a finding at the line, a malformed object counted).
* **An index** (:class:`Volumes`) of what was read, by key, updated one object at a time (O(1) an event).
* **A pod's volumes** (:func:`pod_volumes`): `persistentVolumeClaim` (the claim named), `ephemeral` (claim
  `<pod>-<volume>`) and a StatefulSet's `volumeClaimTemplates` (`<template>-<statefulset>-<ordinal>`).
* **Their topology** (:func:`requirements_of`, core pkg/controllers/provisioning/scheduling/volumetopology.go),
  as each version reads it: a bound claim brings its PersistentVolume's `spec.nodeAffinity.required` terms, an
  unbound one its StorageClass's `allowedTopologies` terms as `In` requirements (no `storageClassName`: the
  default class, the newest annotated `storageclass.kubernetes.io/is-default-class: "true"`). Karpenter v0.31.1
  (`getRequirements`, a Provisioner's reading: `VolumeRequirements.combined`) takes the first term of each and
  reads `""` as the default class; v1.14.1 (`GetRequirements`, a NodePool's: `VolumeRequirements.alternatives`)
  keeps every term as an alternative, drops `kubernetes.io/hostname` from a local or hostPath volume's terms,
  reads `""` as no class, and takes the cross product across the volumes, incompatible branches pruned
  (:func:`merge_alternatives`). The EBS CSI driver's zone key is read as the zone (karpenter-provider-aws
  cloudprovider.go `init`).
* **Which pods each version ignores** (:func:`ignored_v1`, v1.14.1's `ValidatePersistentVolumeClaims`;
  :func:`ignored_v031`, v0.31.1's, and its `injectTopology`).

`complete` says whether the index is the whole cluster (the controller, `simulate`): an object it lacks is then
missing, and both versions ignore the pod ("… not found"). A repository's files are not the cluster (`check
--workloads`): an object they lack is not judged, and a claim as written (no `status`) is read as Kubernetes
makes it (bound by its provisioner, annotated once bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.model.labels import EBS_CSI_ZONE, HOSTNAME, ZONE
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
    """A PersistentVolume: the first term of its required node affinity (`requirements`, v0.31.1's reading),
    whether it is being deleted, every term (`terms`: ORed, v1.14.1's alternatives) and whether it is a `local` or
    `hostPath` volume (`local`: v1.14.1 ignores the hostname in its terms)."""

    name: str
    requirements: Requirements
    deleting: bool = False
    terms: tuple[Requirements, ...] | None = None  # None: the first term alone (`requirements`, when not empty)
    local: bool = False

    @property
    def alternatives(self) -> tuple[Requirements, ...]:
        """Karpenter v1.14.1's `getPersistentVolumeRequirements`: each term an alternative; a local or hostPath
        volume's terms without `kubernetes.io/hostname` (a term of the hostname alone: one that allows any node)."""
        terms = self.terms if self.terms is not None else ((self.requirements,) if self.requirements else ())
        if not self.local:
            return tuple(term for term in terms if term)
        kept = []
        for term in terms:
            without = Requirements(r for r in term.values() if r.key != HOSTNAME)
            if without or term:
                kept.append(without)
        return tuple(kept)


@dataclass(frozen=True, slots=True)
class StorageClass:
    """A StorageClass: the first term of its allowedTopologies (`topology`, v0.31.1's reading), whether its
    volumeBindingMode is Immediate (unset: the API server's default), its creationTimestamp when it is annotated
    the default class (None: it is not), and each term with expressions (`topologies`: ORed, v1.14.1's
    alternatives, `getStorageClassRequirements`)."""

    name: str
    topology: Requirements
    immediate: bool
    default_since: str | None = None
    topologies: tuple[Requirements, ...] | None = None  # None: the first term alone (`topology`, when not empty)

    @property
    def alternatives(self) -> tuple[Requirements, ...]:
        """Each term with expressions, an alternative (v1.14.1)."""
        if self.topologies is not None:
            return self.topologies
        return (self.topology,) if self.topology else ()


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
    """What is read of a PersistentVolume: every required node-affinity term (the first is v0.31.1's reading),
    and whether it is `local` or `hostPath`. Raises PodSpecError."""
    metadata = _mapping(data.get("metadata"))
    spec = _mapping(data.get("spec"))
    at: tuple[str | int, ...] = ("spec", "nodeAffinity", "required", "nodeSelectorTerms")
    affinity = spec.get("nodeAffinity")
    required = affinity.get("required") if isinstance(affinity, Mapping) else None
    raw = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    terms = tuple(_normalized(node_selector_term(term, (*at, i))) for i, term in enumerate(raw)) if isinstance(
        raw, list) else ()  # fmt: skip
    local = spec.get("local") is not None or spec.get("hostPath") is not None
    first = terms[0] if terms else Requirements()
    return PersistentVolume(_str(metadata.get("name")), first, bool(metadata.get("deletionTimestamp")),
                            terms if len(terms) > 1 else None, local)  # fmt: skip


def _allowed_topology(term: object, at: tuple[str | int, ...]) -> Requirements:
    """One allowedTopologies term as `In` requirements (a term of another shape: none)."""
    expressions = []
    if isinstance(term, Mapping):
        raw = term.get("matchLabelExpressions") or []
        if not isinstance(raw, list):
            raise PodSpecError(at, "matchLabelExpressions must be a list")
        expressions = [{"key": e.get("key"), "operator": "In", "values": e.get("values")} if isinstance(e, Mapping)
                       else e for e in raw]  # fmt: skip
    try:
        return _normalized(node_selector_term({"matchExpressions": expressions}, at))
    except PodSpecError as error:
        raise PodSpecError(at, error.message) from None


def storage_class_of(data: Mapping[str, Any]) -> StorageClass:
    """What is read of a StorageClass: each allowed topology as `In` requirements (the first is v0.31.1's
    reading). Raises PodSpecError."""
    metadata = _mapping(data.get("metadata"))
    raw = data.get("allowedTopologies")
    terms = [_allowed_topology(term, ("allowedTopologies", i)) for i, term in enumerate(raw)] if isinstance(
        raw, list) else []  # fmt: skip
    annotations = _mapping(metadata.get("annotations"))
    default = str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")) == "true"
    immediate = data.get("volumeBindingMode", IMMEDIATE) in (IMMEDIATE, None)
    since = str(metadata.get("creationTimestamp") or "") if default else None
    first = terms[0] if terms else Requirements()
    alternatives = tuple(term for term in terms if term)
    several = alternatives if alternatives != ((first,) if first else ()) else None
    return StorageClass(_str(metadata.get("name")), first, immediate, since, several)


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


#: At most this many alternatives are crossed from a pod's volumes (`VolumeRequirements.too_many`).
MAX_VOLUME_ALTERNATIVES = 256

@dataclass(frozen=True, slots=True)
class VolumeRequirements:
    """What a pod's volumes require of its node: each volume's requirements as v0.31.1 reads them (`per_volume`,
    with what they come from), each volume's alternatives as v1.14.1 reads them (`alternatives_per_volume`), and
    the names of objects not among those read (claims, PersistentVolumes, StorageClasses)."""

    per_volume: tuple[tuple[str, str, Requirements], ...] = ()  # (volume, "PersistentVolume pv-a", requirements)
    missing: tuple[str, ...] = ()
    alternatives_per_volume: tuple[tuple[Requirements, ...], ...] = ()

    @property
    def combined(self) -> Requirements:
        """v0.31.1's `Inject`: every volume's requirements ANDed."""
        combined = Requirements()
        for _, _, requirements in self.per_volume:
            combined = combined.intersection(requirements)
        return combined

    @property
    def alternatives(self) -> tuple[Requirements, ...]:
        """v1.14.1's `GetRequirements`: the cross product of the volumes' alternatives (see
        :func:`merge_alternatives`); () when no volume constrains the node."""
        return self._merged()[0]

    @property
    def alternatives_conflict(self) -> bool:
        """Whether some volume's alternatives were compatible with none so far (v1.14.1 then keeps every branch,
        and no node holds the pod)."""
        return self._merged()[1]

    @property
    def too_many(self) -> str | None:
        """Why the pod is not provisioned for on a NodePool when crossing its volumes' alternatives would pass
        :data:`MAX_VOLUME_ALTERNATIVES` (None: it does not) — a bound of this project's: v1.14.1 crosses them all,
        and a pod of a few volumes whose PersistentVolumes each have several terms would hold every provisioning
        pass for minutes (eight volumes of eight terms: 16.7 million)."""
        return self._merged()[2]

    def v1_reading(self) -> tuple[tuple[Requirements, ...] | None, str | None]:
        """What a NodePool reads of the volumes: their alternatives when they differ from v0.31.1's reading (None:
        they do not), and :attr:`too_many`."""
        alternatives, _, too_many = self._merged()
        if too_many is not None:
            return None, too_many
        return (alternatives if alternatives != ((self.combined,) if self.combined else ()) else None), None

    def _merged(self) -> tuple[tuple[Requirements, ...], bool, str | None]:
        merged: tuple[Requirements | None, ...] = (None,)
        conflict = False
        for alternatives in self.alternatives_per_volume:
            if not alternatives:
                continue
            if len(merged) * len(alternatives) > MAX_VOLUME_ALTERNATIVES:
                bound = math.prod(max(len(a), 1) for a in self.alternatives_per_volume)
                return (), False, (
                    f"its volumes' topology terms cross into {bound} alternatives, more than the "
                    f"{MAX_VOLUME_ALTERNATIVES} this controller tries (each PersistentVolume's nodeAffinity and "
                    "StorageClass's allowedTopologies term is one alternative; Karpenter v1.14.1 would try them all)"
                )
            conflict = conflict or not _compatible(merged, alternatives)
            merged = merge_alternatives(merged, alternatives)
        return (() if merged == (None,) else tuple(Requirements() if a is None else a for a in merged)), conflict, None

    @property
    def differs_v1(self) -> bool:
        """Whether v1.14.1's alternatives say something else than v0.31.1's requirements (several terms, a local
        volume's hostname): the scheduler then reads them per kind of pool."""
        alternatives, too_many = self.v1_reading()
        return alternatives is not None or too_many is not None


def merge_alternatives(alternatives: Sequence[Requirements | None],
                       volume: Sequence[Requirements]) -> tuple[Requirements | None, ...]:  # fmt: skip
    """Karpenter v1.14.1's `mergeVolumeRequirementAlternatives` (core pkg/controllers/provisioning/scheduling/
    volumetopology.go): each alternative so far with each of a volume's, in that order, only the compatible pairs
    (`Intersects`: no key shared without a common value); every pair when none is (the all-pruned case is kept, and
    the pod fits nowhere). None: the empty start, compatible with everything."""
    compatible = [
        _merged(existing, requirements) for existing in alternatives for requirements in volume
        if existing is None or not existing.disjoint(requirements)
    ]  # fmt: skip
    if compatible:
        return tuple(compatible)
    return tuple(_merged(existing, requirements) for existing in alternatives for requirements in volume)


def _compatible(alternatives: Sequence[Requirements | None], volume: Sequence[Requirements]) -> bool:
    return any(existing is None or not existing.disjoint(r) for existing in alternatives for r in volume)


def _merged(existing: Requirements | None, requirements: Requirements) -> Requirements:
    return requirements if existing is None else existing.intersection(requirements)


def requirements_of(volumes: Sequence[PodVolume], namespace: str, known: Volumes) -> VolumeRequirements:
    """Karpenter's `getRequirements` for each volume, v0.31.1's reading and v1.14.1's; a claim made from a template
    that is not among those read is read as the template (unbound), not as missing."""
    per_volume: list[tuple[str, str, Requirements]] = []
    alternatives: list[tuple[Requirements, ...]] = []
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
                continue
            if pv.requirements:
                per_volume.append((volume.volume, f"PersistentVolume {claim.volume_name}", pv.requirements))
            alternatives.append(pv.alternatives)
            continue
        declared = claim.storage_class if claim is not None else volume.template_class
        # unset: the admission plugin gives the claim the default class; "" (no class) is read as the default
        # class by v0.31.1 (`getRequirements`: `storageClassName == ""` → `DiscoverDefaultStorageClassName`), as
        # none by v1.14.1 (`if sc := lo.FromPtr(…); sc != ""`)
        class_name = declared if declared is not None else known.default_class
        class_v031 = declared or known.default_class
        storage_class = known.classes.get(class_name) if class_name else None
        if class_name and storage_class is None:
            missing.append(f"StorageClass {class_name}")
            continue
        if storage_class is not None:
            alternatives.append(storage_class.alternatives)
        read_v031 = known.classes.get(class_v031) if class_v031 else None
        if read_v031 is not None and read_v031.topology:
            per_volume.append((volume.volume, f"StorageClass {class_v031}", read_v031.topology))
    return VolumeRequirements(tuple(per_volume), tuple(missing), tuple(alternatives))


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


def ignored_v031(volumes: Sequence[PodVolume], namespace: str, known: Volumes, complete: bool = False) -> str | None:
    """Why Karpenter v0.31.1 leaves a pod with these volumes out (None: it does not), in its words: its
    `ValidatePersistentVolumeClaims` (core pkg/controllers/provisioning/scheduling/volumetopology.go; provisioner.go
    `GetPendingPods` logs "ignoring pod, …") asks only that a `persistentVolumeClaim`'s claim, its
    `storageClassName` and its volume, and an ephemeral volume's template class, exist; then `injectTopology` drops
    a pod whose topology it cannot read ("getting volume topology requirements, …": an ephemeral volume's claim
    missing, or its volume or class). Only `complete` (a cluster) judges: an object the files lack is not missing."""
    if not complete:
        return None
    for volume in volumes:  # Validate: every volume, class then volume, before any topology is read
        claim = known.claims.get((namespace, volume.claim)) if volume.claim else None
        if not volume.from_template:
            if claim is None:
                return (f"getting persistent volume claim \"{volume.claim}\", persistentvolumeclaims "
                        f"\"{volume.claim}\" not found")  # fmt: skip
            class_name, volume_name = claim.storage_class or "", claim.volume_name
        else:
            class_name, volume_name = volume.template_class or "", ""
        if class_name and class_name not in known.classes:
            return f"storageclasses.storage.k8s.io \"{class_name}\" not found"
        if volume_name and volume_name not in known.volumes:
            return f"persistentvolumes \"{volume_name}\" not found"
    prefix = "getting volume topology requirements, "
    for volume in volumes:  # Inject: an ephemeral volume's claim, its volume or its class
        if not volume.from_template or not volume.claim:
            continue
        claim = known.claims.get((namespace, volume.claim))
        if claim is None:
            return (f"{prefix}discovering persistent volume claim for ephemeral volume, persistentvolumeclaims "
                    f"\"{volume.claim}\" not found")  # fmt: skip
        if claim.volume_name:
            if claim.volume_name not in known.volumes:
                return (f"{prefix}getting existing requirements, getting persistent volume \"{claim.volume_name}\", "
                        f"persistentvolumes \"{claim.volume_name}\" not found")  # fmt: skip
            continue
        class_name = claim.storage_class or known.default_class
        if class_name and class_name not in known.classes:
            return (f"{prefix}getting storage class \"{class_name}\", storageclasses.storage.k8s.io "
                    f"\"{class_name}\" not found")  # fmt: skip
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
    "ignored_v031",
    "ignored_v1",
    "MAX_VOLUME_ALTERNATIVES",
    "merge_alternatives",
    "persistent_volume_of",
    "pod_volumes",
    "requirements_of",
    "storage_class_of",
]
