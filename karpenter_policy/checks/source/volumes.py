"""PersistentVolumes, PersistentVolumeClaims and StorageClasses among the workloads (`check --workloads`): each
document read into the index the controller shares (`model/volumes.py` defines the reading, the topology and
v1.14.1's validation once; this module adds the files' findings). Karpenter reads a pod's volumes before it
schedules the pod (core `pkg/controllers/provisioning/scheduling/volumetopology.go`: v0.31.1's
`VolumeTopology.Inject` / `getRequirements` for a Provisioner, v1.14.1's `GetRequirements` for a NodePool).

Which volumes count: `persistentVolumeClaim` (the claim named), `ephemeral` (claim `<pod>-<volume>` of a Pod when
it is among the files; else the claim Kubernetes creates from its `volumeClaimTemplate`, unbound until the pod is
scheduled) and a StatefulSet's `volumeClaimTemplates` (claim `<template>-<statefulset>-<ordinal>`: the one among the
files when there is one, else the template, unbound).
What a claim adds to the pod's node requirements, for a Provisioner (v0.31.1):

- bound (`spec.volumeName`): the first term of its PersistentVolume's `spec.nodeAffinity.required` (terms are ORed;
  Karpenter takes the first, `getPersistentVolumeRequirements`);
- unbound: the first term of its StorageClass's `allowedTopologies` as `In` requirements
  (`getStorageClassRequirements`); no `storageClassName` means the default class (annotation
  `storageclass.kubernetes.io/is-default-class: "true"`, the newest by creationTimestamp, as
  `DiscoverDefaultStorageClassName`). Karpenter v0.31.1 does not look at `volumeBindingMode`; neither does this.

For a NodePool (v1.14.1) every term is an alternative, a local or hostPath volume's hostname is ignored, and the
alternatives of the pod's volumes are crossed (`model.volumes.VolumeRequirements.alternatives`); the shape keeps
them beside v0.31.1's requirements when they differ (`scheduling.volumes.with_volumes`).

The EBS CSI driver's key `topology.ebs.csi.aws.com/zone` is read as `topology.kubernetes.io/zone` (the AWS
provider adds it to Karpenter's normalized labels, `pkg/cloudprovider/cloudprovider.go` `init`). The requirements
are ANDed into every required node-selector term of the pod (one is made when it has none), so relaxation never
drops them (`Inject`).

A claim, PersistentVolume or StorageClass that is not among the files is an `unresolved-reference` warning and the
volume adds nothing (Karpenter refuses to schedule such a pod; the object may live in the cluster). Volumes whose
requirements leave no value of a key (PersistentVolumes in different zones) are a `volume-zones-conflict` error
naming the volumes, and the workload is not scheduled further (it never fits) — unless v1.14.1's alternatives
leave one (`VolumeRequirements.alternatives_conflict`): a NodePool may take it, a Provisioner refuses it.

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

from collections.abc import Mapping
from typing import Any

from karpenter_policy.api.violations import (
    ERROR,
    INVALID_WORKLOAD,
    UNRESOLVED_REFERENCE,
    VOLUME_ZONES_CONFLICT,
    WARNING,
)
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.model.labels import EBS_CSI_ZONE
from karpenter_policy.model.pods import PodSpecError
from karpenter_policy.model.volumes import (
    READERS,
    Claim,
    PodVolume,
    VolumeRequirements,
    Volumes,
    ignored_v1,
    pod_volumes,
    requirements_of,
)

PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "StorageClass"
KINDS = {PERSISTENT_VOLUME: frozenset({"v1"}), PERSISTENT_VOLUME_CLAIM: frozenset({"v1"}),
         STORAGE_CLASS: frozenset({"storage.k8s.io/v1", "storage.k8s.io/v1beta1"})}  # fmt: skip
#: The EBS CSI driver's zone key, read as the zone (karpenter-provider-aws v0.31.1 cloudprovider.go `init`).
EBS_ZONE = EBS_CSI_ZONE


def read_volume_object(doc: Document, into: Volumes) -> str | Finding | None:
    """Add the volume object a document is to `into`; its kind, or the `invalid-workload` finding that says why it
    cannot be read, or None when it is no volume object."""
    data: Any = doc.data
    if not isinstance(data, Mapping):
        return None
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str) or api_version not in KINDS.get(kind, ()):
        return None
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    name = name if isinstance(name, str) else ""

    def invalid(path: tuple[str | int, ...], message: str) -> Finding:
        line, column = doc.position(path)
        return Finding(INVALID_WORKLOAD, ERROR, message, doc.file, line, column, f"{kind}/{name}")

    if not name:
        return invalid(("metadata",), f"a {kind} needs metadata.name")
    try:
        into.put(READERS[kind](data))
    except PodSpecError as error:
        return invalid(error.path, error.message)
    return kind


def conflict_message(found: VolumeRequirements) -> str | None:
    """The `volume-zones-conflict` message when the volumes' requirements, each satisfiable, leave no value of a key
    together, else None (a volume's own `DoesNotExist` is no conflict). None too when Karpenter v1.14.1's
    alternatives leave one (a volume with several terms: a NodePool's node may be in another term's zone)."""
    if found.differs_v1 and not found.alternatives_conflict:
        return None
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
