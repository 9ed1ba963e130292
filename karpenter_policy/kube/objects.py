"""Kubernetes objects as plain JSON dicts (the API's wire form) and the kinds the project talks about.

Objects are never wrapped in generated models: a dict read from a list, a watch or a get is what the API
server sent, with ``apiVersion`` and ``kind`` always filled in (list items lack them on the wire; every
:class:`~karpenter_policy.kube.cluster.Cluster` adds them). The helpers here read metadata without
``KeyError`` noise and are shared by the in-memory cluster, the client adapter and their callers.
"""

import datetime
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
"""One Kubernetes object in its JSON form."""


@dataclass(frozen=True)
class Kind:
    """A resource type: what the API calls it in a body (apiVersion, kind) and in a URL (plural)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool = False  # then writes to the object keep its status, writes to /status only it

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """The API version without its group (`v1` of `policy/v1`)."""
        return self.api_version.rpartition("/")[2]

    def __str__(self) -> str:
        return f"{self.kind}.{self.api_version}"


POD = Kind("v1", "Pod", "pods", namespaced=True, status_subresource=True)
NODE = Kind("v1", "Node", "nodes", namespaced=False, status_subresource=True)
CONFIG_MAP = Kind("v1", "ConfigMap", "configmaps", namespaced=True)
EVENT = Kind("v1", "Event", "events", namespaced=True)
NAMESPACE = Kind("v1", "Namespace", "namespaces", namespaced=False, status_subresource=True)
LEASE = Kind("coordination.k8s.io/v1", "Lease", "leases", namespaced=True)
POD_DISRUPTION_BUDGET = Kind(
    "policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", namespaced=True, status_subresource=True
)
DAEMON_SET = Kind("apps/v1", "DaemonSet", "daemonsets", namespaced=True, status_subresource=True)

KINDS: tuple[Kind, ...] = (POD, NODE, CONFIG_MAP, EVENT, NAMESPACE, LEASE, POD_DISRUPTION_BUDGET, DAEMON_SET)
#: Karpenter's own kinds, served only where its CRDs are installed (what `plan --kubeconfig` reads of them).
NODE_CLAIM = Kind("karpenter.sh/v1", "NodeClaim", "nodeclaims", namespaced=False, status_subresource=True)
NODE_POOL = Kind("karpenter.sh/v1", "NodePool", "nodepools", namespaced=False, status_subresource=True)
MACHINE = Kind("karpenter.sh/v1alpha5", "Machine", "machines", namespaced=False, status_subresource=True)
EC2_NODE_CLASS = Kind("karpenter.k8s.aws/v1", "EC2NodeClass", "ec2nodeclasses", namespaced=False,
                      status_subresource=True)
#: Read by termination only (`kube.volumes`), never watched: a v1 node's VolumeAttachments and the claims of its pods.
VOLUME_ATTACHMENT = Kind("storage.k8s.io/v1", "VolumeAttachment", "volumeattachments", namespaced=False,
                         status_subresource=True)
PERSISTENT_VOLUME_CLAIM = Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims", namespaced=True,
                               status_subresource=True)
PERSISTENT_VOLUME = Kind("v1", "PersistentVolume", "persistentvolumes", namespaced=False, status_subresource=True)
STORAGE_CLASS = Kind("storage.k8s.io/v1", "StorageClass", "storageclasses", namespaced=False)


def metadata(obj: Obj) -> dict[str, Any]:
    """The object's metadata (an empty mapping when it has none, or not a mapping)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def name(obj: Obj) -> str:
    """The object's name (empty when it has none)."""
    return str(metadata(obj).get("name") or "")


def namespace(obj: Obj) -> str | None:
    """The object's namespace, or None for cluster-scoped objects (and namespaced ones not yet defaulted)."""
    value = metadata(obj).get("namespace")
    return str(value) if value else None


def resource_version(obj: Obj) -> str:
    """The object's resourceVersion (empty when it has none)."""
    return str(metadata(obj).get("resourceVersion") or "")


def uid(obj: Obj) -> str:
    """The object's uid (empty when it has none)."""
    return str(metadata(obj).get("uid") or "")


def labels(obj: Obj) -> dict[str, str]:
    """A copy of the object's labels."""
    return dict(metadata(obj).get("labels") or {})


def annotations(obj: Obj) -> dict[str, str]:
    """A copy of the object's annotations."""
    return dict(metadata(obj).get("annotations") or {})


def finalizers(obj: Obj) -> list[str]:
    """A copy of the object's finalizers."""
    return list(metadata(obj).get("finalizers") or [])


def deletion_timestamp(obj: Obj) -> str | None:
    """When a delete was asked (RFC 3339), or None when it was not."""
    value = metadata(obj).get("deletionTimestamp")
    return str(value) if value else None


def creation_timestamp(obj: Obj) -> str | None:
    """When the object was created (RFC 3339), or None when the API has not said."""
    value = metadata(obj).get("creationTimestamp")
    return str(value) if value else None


def is_deleting(obj: Obj) -> bool:
    """True once a delete was requested and the object waits for its finalizers."""
    return deletion_timestamp(obj) is not None


def key(obj: Obj) -> tuple[str | None, str]:
    """(namespace, name): what identifies an object within its kind."""
    return namespace(obj), name(obj)


def object_reference(obj: Obj) -> dict[str, str]:
    """The ObjectReference of an object (as an Event's involvedObject or a Binding's target carries it)."""
    ref = {"apiVersion": str(obj.get("apiVersion", "")), "kind": str(obj.get("kind", "")), "name": name(obj)}
    optional = {"namespace": namespace(obj), "uid": uid(obj), "resourceVersion": resource_version(obj)}
    ref.update({field: value for field, value in optional.items() if value})
    return ref


def with_kind(kind: Kind, obj: Obj) -> Obj:
    """The object with its apiVersion and kind set (list items come without them)."""
    obj["apiVersion"] = kind.api_version
    obj["kind"] = kind.kind
    return obj


def written_part(kind: Kind, subresource: str | None, current: Obj, proposed: Obj) -> Obj:
    """What an update or patch may change: through the object, all but a status kept by a /status
    subresource; through ``/status``, only the status (the API server's split, which the reconciler must
    honour: a pod's phase or a node's conditions written through the object are silently dropped)."""
    if not kind.status_subresource or subresource not in (None, "status"):
        return proposed
    if subresource is None:
        written = {field: value for field, value in proposed.items() if field != "status"}
        if "status" in current:
            written["status"] = current["status"]
        return written
    written = {field: value for field, value in current.items() if field != "status"}
    if "status" in proposed:
        written["status"] = proposed["status"]
    return written


def format_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with second precision, as the API writes Time fields."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with microseconds, as the API writes MicroTime fields (Lease renewTime)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime.datetime:
    """Parse a Time or MicroTime field."""
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
