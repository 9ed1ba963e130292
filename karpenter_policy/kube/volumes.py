"""What the controller reads of storage, checked at the edge.

* The PersistentVolumeClaims, PersistentVolumes and StorageClasses the provisioner reads of a pod's volumes (their
  informers feed the state's index): :func:`volume_object` reads one as `model/volumes.py` defines (the reading
  `check --workloads` shares), and an object of another shape (`spec.volumeName` not a string, a node-affinity
  term that is no term …) is :class:`~karpenter_policy.kube.errors.Malformed` (`bad-spec`): the state skips it,
  counts it and logs it once.
* What termination reads: a VolumeAttachment (`storage.k8s.io/v1`: its node and volume; kept by node in
  `kube.attachments`) and the PersistentVolume a PersistentVolumeClaim is bound to.

Karpenter v1.14.1's node termination waits for the VolumeAttachments of a node to be deleted before it terminates
the instance (core pkg/utils/node/node.go `GetVolumeAttachments`, pkg/utils/volume/volume.go
`GetPersistentVolumeClaim`). Only the fields it reads are checked: an attachment's `spec.nodeName` (a non-empty
string) and `spec.source.persistentVolumeName` (a string, or absent: an inline volume), a claim's
`spec.volumeName` (a string, or absent: not bound yet). An answer of another shape is
:class:`~karpenter_policy.kube.errors.Malformed` — the caller's "unknown", never "none" — as is every other
:class:`~karpenter_policy.kube.errors.ClusterError` (a 403 where the role lacks the verb, an API server down).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import Malformed
from karpenter_policy.kube.objects import (
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    Kind,
    Obj,
)
from karpenter_policy.model.pods import PodSpecError
from karpenter_policy.model.volumes import READERS, Claim, PersistentVolume, StorageClass

#: `Malformed.problem` of a spec this module cannot read.
BAD_SPEC: Final = "bad-spec"


@dataclass(frozen=True, slots=True)
class Attachment:
    """One VolumeAttachment: its name, its node, and the PersistentVolume it attaches (None: an inline volume)."""

    name: str
    node: str
    volume: str | None


def _spec(obj: Any, what: str) -> dict[str, Any]:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not isinstance(spec, dict):
        raise Malformed(f"{what}: spec is not an object", BAD_SPEC)
    return spec


def attachment(obj: Any) -> Attachment:
    """The attachment an object read back says; Malformed when a field read is of another shape."""
    name = objects.name(obj) if isinstance(obj, dict) else ""
    what = f"volumeattachment {name or '?'}"
    spec = _spec(obj, what)
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node:
        raise Malformed(f"{what}: spec.nodeName is not a node name: {str(node)[:80]}", BAD_SPEC)
    source = spec.get("source")
    if not isinstance(source, dict):
        raise Malformed(f"{what}: spec.source is not an object", BAD_SPEC)
    volume = source.get("persistentVolumeName")
    if volume is not None and not isinstance(volume, str):
        raise Malformed(f"{what}: spec.source.persistentVolumeName is not a string", BAD_SPEC)
    return Attachment(name, node, volume or None)


def bound_volume(cluster: Cluster, namespace: str, claim: str) -> str | None:
    """The PersistentVolume claim `namespace/claim` is bound to (`spec.volumeName`); None when the claim does not
    exist or is not bound. Raises ClusterError, Malformed for a claim of another shape."""
    obj = cluster.get(PERSISTENT_VOLUME_CLAIM, claim, namespace)
    if obj is None:
        return None
    volume = _spec(obj, f"persistentvolumeclaim {namespace}/{claim}").get("volumeName")
    if volume is not None and not isinstance(volume, str):
        raise Malformed(f"persistentvolumeclaim {namespace}/{claim}: spec.volumeName is not a string", BAD_SPEC)
    return volume or None


#: The kinds the provisioner reads of a pod's volumes, each with its reader.
VOLUME_KINDS: Final = (PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME, STORAGE_CLASS)


def volume_object(kind: Kind, obj: Obj) -> Claim | PersistentVolume | StorageClass:
    """What the provisioner reads of a claim, a PersistentVolume or a StorageClass (`kind`: one of
    :data:`VOLUME_KINDS`); Malformed when a field read is of another shape."""
    try:
        return READERS[kind.kind](obj)
    except PodSpecError as error:
        where = ".".join(map(str, error.path))
        name = objects.name(obj) if isinstance(obj, dict) else "?"
        raise Malformed(f"{kind.kind.lower()} {name}: {where}: {error.message}", BAD_SPEC) from None


__all__ = ["BAD_SPEC", "VOLUME_KINDS", "Attachment", "attachment", "bound_volume", "volume_object"]
