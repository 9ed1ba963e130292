"""Workloads as a cluster runs them: the pods of N replicas of a pod template, and DaemonSet objects.

The simulation has no Deployment or Job controller: :func:`replica_pods` creates the pods those controllers
would, named as they name them (a Deployment's pods `<name>-<template hash>-<suffix>` through its ReplicaSet, a
StatefulSet's `<name>-<ordinal>`, a Job's `<name>-<suffix>`, a bare Pod keeps its name when it runs once), with
the controller owner reference the real ones carry. Names, owners and suffixes derive from the workload and the
replica's ordinal only: the same scenario creates the same pods, and two replicas of a workload never share a name
(the API server would refuse the second: `AlreadyExists`), however many there are. Each pod is annotated with the
workload it belongs to (:data:`WORKLOAD_ANNOTATION`), which is what the report groups by.

DaemonSets are created as DaemonSet objects: the controller takes their pods' requests from every node (the
DaemonSet overhead), as it does on a real cluster.

The scenario's PersistentVolumeClaims, PersistentVolumes and StorageClasses are created as they are written
(:func:`volume_kind` names the kind of each); a pod's generic `ephemeral` volume gets the claim Kubernetes' ephemeral
volume controller makes for it (:func:`ephemeral_claims`: `<pod>-<volume>`, from its `volumeClaimTemplate`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.workloads import WORKLOAD_KINDS, Workload
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Kind, Obj

WORKLOAD_ANNOTATION = "karpenter-policy/simulated-workload"
ORDINAL_ANNOTATION = "karpenter-policy/simulated-ordinal"
#: The characters Kubernetes' generated name suffixes are made of (no vowels, no confusable digits).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_UID_PREFIX = "simulated"
_VOLUME_KINDS = {kind.kind: kind for kind in (objects.PERSISTENT_VOLUME_CLAIM, objects.PERSISTENT_VOLUME,
                                              objects.STORAGE_CLASS)}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ScenarioWorkload(Workload):
    """A workload of the scenario with a run time: `run_seconds`, how long each pod runs once started before it
    completes (phase Succeeded, as a Job's or a Spark executor's pod does); None: it runs until deleted. The
    simulation takes any `api.workloads.Workload` (those `check --workloads` reads: without a run time)."""

    run_seconds: float | None = None


def run_time_of(workload: Workload) -> float | None:
    """How long each pod of the workload runs before it completes (None: until deleted)."""
    return workload.run_seconds if isinstance(workload, ScenarioWorkload) else None


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _suffix(seed: str, length: int = 5) -> str:
    number = int(_digest(seed)[:16], 16)
    chars = []
    for _ in range(length):
        number, index = divmod(number, len(_SUFFIX_ALPHABET))
        chars.append(_SUFFIX_ALPHABET[index])
    return "".join(chars)


def _ordinal_suffix(seed: str, ordinal: int) -> str:
    """The generated-name suffix of replica `ordinal`: distinct for distinct ordinals of one `seed`, and the same
    for the same seed and ordinal. Five characters while the five-character suffixes last (27^5, over 14 million
    replicas), then six, and so on; within a length, a permutation of the suffixes (an affine map modulo their
    number, its factor prime to 3 and so to the number, scrambled by the seed), so that names look as random as the
    API server's and never collide — as drawing each one from a hash would, by the birthday bound, from a few
    thousand replicas on."""
    base = len(_SUFFIX_ALPHABET)
    length = 5
    while ordinal >= base**length:
        ordinal -= base**length
        length += 1
    size = base**length
    digest = int(_digest(seed, str(length))[:32], 16)
    factor, offset = (digest >> 64) % size, digest % size
    if factor % 3 == 0:  # base is 27: a factor prime to 3 is prime to size, and the map a permutation
        factor += 1
    number = (ordinal * factor + offset) % size
    chars = []
    for _ in range(length):
        number, index = divmod(number, base)
        chars.append(_SUFFIX_ALPHABET[index])
    return "".join(chars)


def _template_hash(workload: Workload) -> str:
    """A stand-in for the pod-template-hash of a Deployment's ReplicaSet (10 characters of the alphabet)."""
    return _suffix(json.dumps(workload.template, sort_keys=True, default=str), 10)


def _owner(workload: Workload) -> tuple[str, str] | None:
    """(kind, name) of the controller that owns the workload's pods (None: a bare pod)."""
    kind, name = workload.kind, workload.name
    if kind == "Deployment":
        return "ReplicaSet", f"{name}-{_template_hash(workload)}"
    if kind == "CronJob":
        return "Job", f"{name}-{_suffix(workload.ref, 8)}"
    if kind in ("StatefulSet", "ReplicaSet", "ReplicationController", "Job"):
        return kind, name
    return None


def pod_name(workload: Workload, ordinal: int, count: int) -> str:
    """The name the workload's controller gives its pod number `ordinal` (of `count` for a bare Pod)."""
    owner = _owner(workload)
    if workload.kind == "StatefulSet":
        return f"{workload.name}-{ordinal}"
    if owner is None:  # a Pod, a PodTemplate, a pod template file: the name, numbered when it runs more than once
        return workload.name if count == 1 and workload.kind == "Pod" else f"{workload.name}-{ordinal}"
    return f"{owner[1]}-{_ordinal_suffix(workload.ref, ordinal)}"


def replica_pod(workload: Workload, ordinal: int, count: int) -> Obj:
    """The pod object of one replica (see the module docstring)."""
    template = copy.deepcopy(dict(workload.template))
    found_meta = template.get("metadata")
    template_meta: Mapping[str, Any] = found_meta if isinstance(found_meta, Mapping) else {}
    labels = workload.labels
    annotations = {str(k): str(v) for k, v in (template_meta.get("annotations") or {}).items()}
    annotations[WORKLOAD_ANNOTATION] = workload.ref
    annotations[ORDINAL_ANNOTATION] = str(ordinal)
    metadata: dict[str, Any] = {
        "name": pod_name(workload, ordinal, count),
        "namespace": workload.pod_namespace,
        "labels": labels,
        "annotations": annotations,
    }
    owner = _owner(workload)
    if owner is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": WORKLOAD_KINDS[owner[0]].api_version,
                "kind": owner[0],
                "name": owner[1],
                "uid": f"{_UID_PREFIX}-{_digest(owner[0], workload.pod_namespace, owner[1])[:24]}",
                "controller": True,
            }
        ]
    found_spec = template.get("spec")
    spec: Mapping[str, Any] = found_spec if isinstance(found_spec, Mapping) else {}
    return {"metadata": metadata, "spec": dict(spec)}


def volume_kind(obj: Mapping[str, Any]) -> Kind | None:
    """The kind of a scenario's volume object (a claim, a PersistentVolume, a StorageClass), None for another."""
    return _VOLUME_KINDS.get(str(obj.get("kind")))


def ephemeral_claims(pod: Obj) -> list[Obj]:
    """The claims Kubernetes makes for the pod's generic ephemeral volumes: `<pod>-<volume>` in its namespace, the
    template's metadata and spec, owned by the pod (its volume_claim_template, as written: no status)."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    made: list[Obj] = []
    for volume in volumes if isinstance(volumes, list) else []:
        ephemeral = volume.get("ephemeral") if isinstance(volume, Mapping) else None
        template = ephemeral.get("volumeClaimTemplate") if isinstance(ephemeral, Mapping) else None
        if not isinstance(template, Mapping) or not isinstance(volume.get("name"), str):
            continue
        found_meta = template.get("metadata")
        meta = dict(found_meta) if isinstance(found_meta, Mapping) else {}
        meta.update(name=f"{objects.name(pod)}-{volume['name']}", namespace=objects.namespace(pod) or "default")
        made.append({"metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})})
    return made


def daemon_set_object(workload: Workload) -> Obj:
    """The DaemonSet object of a DaemonSet workload."""
    template = copy.deepcopy(dict(workload.template))
    return {
        "metadata": {"name": workload.name, "namespace": workload.pod_namespace},
        "spec": {"selector": {"matchLabels": workload.labels}, "template": template},
    }


__all__ = [
    "ORDINAL_ANNOTATION",
    "WORKLOAD_ANNOTATION",
    "ScenarioWorkload",
    "daemon_set_object",
    "ephemeral_claims",
    "pod_name",
    "replica_pod",
    "run_time_of",
    "volume_kind",
]
