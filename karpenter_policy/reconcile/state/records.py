"""Pods, Nodes and NodeClaims as typed, validated records: what the controllers read of an object, read once per change.

An object from a watch or a list crosses a boundary: its shape is checked here, once, when it arrives. A record is
immutable and shares the object it came from (never copied; callers treat it as read-only), so passing records
between controllers costs nothing. An object without the fields every record needs (a dict `metadata` with a
non-empty string `name`; a `uid` for pods; dict `spec`/`status` when present; for nodes, lists of taints and
conditions, maps of allocatable and capacity, a string providerID) is *malformed*: :func:`pod_record`
and :func:`node_record` say why instead of returning a record, and the state counts it and leaves the last good
record of that object in place.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from karpenter_policy.api.workloads import DAEMON_SET
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import pool_of_labels
from karpenter_policy.model.taints import Taint
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.scheduling.vectors import Vector


class UnreadableObject(ValueError):
    """An object the controller cannot read (the message says which field and why)."""


def _metadata(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise UnreadableObject(f"not an object but {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise UnreadableObject("metadata is not an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise UnreadableObject("metadata.name is missing")
    for part in ("spec", "status"):
        if obj.get(part) is not None and not isinstance(obj[part], dict):
            raise UnreadableObject(f"{part} is not an object")
    for mapping in ("labels", "annotations"):
        value = meta.get(mapping)
        if value is not None and not (
            isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ):
            raise UnreadableObject(f"metadata.{mapping} is not a map of strings")
    return meta


#: The labels or annotations of an object that has none: one shared, read-only map.
_NONE: Mapping[str, str] = MappingProxyType({})


def _string_map(value: Any) -> Mapping[str, str]:
    """The object's own map (`_metadata` checked it is one of strings), shared as the whole object is, not copied: a
    copy per pod was a second dict of every pod's labels and annotations, kept as long as the pod."""
    return value if isinstance(value, dict) else _NONE


@dataclass(frozen=True, slots=True, eq=False)
class PodRecord:
    """A pod, as the controllers read it (see the module docstring)."""

    uid: str
    namespace: str
    name: str
    node: str  # spec.nodeName ("" while pending)
    phase: str
    deletion_timestamp: str | None
    created: str
    owner: tuple[str, str] | None  # the controller owner reference (kind, name)
    nominated: bool
    marked_unschedulable: bool
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    disruption_cost: float  # Karpenter's eviction cost (`pods.disruption_cost`)
    obj: Obj = field(repr=False)
    #: whether a volume of the pod goes through a PersistentVolumeClaim (`pods.volume_claims`; read once, as every
    #: disruption decision asks it of every candidate's pods)
    claims: bool

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return f"{self.namespace}/{self.name}"

    @property
    def deleting(self) -> bool:
        """Whether a delete was asked."""
        return self.deletion_timestamp is not None

    @property
    def terminal(self) -> bool:
        """Whether the pod finished (Succeeded or Failed)."""
        return self.phase in wk.TERMINAL_PHASES

    @property
    def daemon(self) -> bool:
        """Whether a DaemonSet controls the pod."""
        return self.owner is not None and self.owner[0] == DAEMON_SET

    @property
    def static(self) -> bool:
        """A static pod's mirror, owned by its Node (`pods.is_owned_by_node`)."""
        return pod_info.is_owned_by_node(self.obj)

    @property
    def critical(self) -> bool:
        """Of a critical priority class (`pods.is_critical`): termination evicts it last."""
        return pod_info.is_critical(self.obj)

    @property
    def tolerates_unschedulable(self) -> bool:
        """It tolerates a cordoned node's taint (`pods.tolerates_unschedulable`): termination leaves it."""
        return pod_info.tolerates_unschedulable(self.obj)

    @property
    def tolerates_disrupted(self) -> bool:
        """It tolerates Karpenter v1's disrupted taint (`pods.tolerates_disrupted`): a NodePool node's drain leaves
        it."""
        return pod_info.tolerates_disrupted(self.obj)

    def stuck_terminating(self, now: dt.datetime) -> bool:
        """Deleted more than a minute before `now` (`pods.is_stuck_terminating`)."""
        return pod_info.is_stuck_terminating(self.deletion_timestamp, now)

    @property
    def live_on_node(self) -> bool:
        """Bound and not finished: it uses its node's capacity."""
        return bool(self.node) and not self.terminal

    def provisionable(self, unschedulable_only: bool) -> bool:
        """Karpenter's `IsProvisionable`, the one rule of whether the controller provisions for a pod (see the
        `pods` module docstring)."""
        if self.node or self.deleting or self.terminal or self.nominated:
            return False
        if self.daemon or self.static:
            return False
        return self.marked_unschedulable if unschedulable_only else True


def _pod_identity(obj: Any) -> tuple[dict[str, Any], str, str, str]:
    """What every pod record needs, checked: the metadata, the uid, the node (spec.nodeName, "" while pending) and
    the namespace; UnreadableObject says why not."""
    meta = _metadata(obj)
    uid = meta.get("uid")
    if not isinstance(uid, str) or not uid:
        raise UnreadableObject("metadata.uid is missing")
    node = (obj.get("spec") or {}).get("nodeName") or ""
    if not isinstance(node, str):
        raise UnreadableObject("spec.nodeName is not a string")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise UnreadableObject("metadata.namespace is not a string")
    return meta, uid, node, namespace


def pod_uid(obj: Any) -> str:
    """The uid of a pod object checked as :func:`pod_record` checks it (UnreadableObject for the same objects),
    without reading the rest: what a deletion needs to find the pod's record."""
    return _pod_identity(obj)[1]


def pod_record(obj: Any) -> PodRecord:
    """The record of a pod object; UnreadableObject says why there is none."""
    meta, uid, node, namespace = _pod_identity(obj)
    status = obj.get("status") or {}
    return PodRecord(
        uid=uid,
        namespace=namespace,
        name=meta["name"],
        node=node,
        phase=str(status.get("phase") or ""),
        deletion_timestamp=objects.deletion_timestamp(obj),
        created=str(meta.get("creationTimestamp") or ""),
        owner=pod_info.controller_of(obj),
        nominated=bool(status.get("nominatedNodeName")),
        marked_unschedulable=pod_info.marked_unschedulable(obj),
        labels=_string_map(meta.get("labels")),
        annotations=_string_map(meta.get("annotations")),
        disruption_cost=pod_info.disruption_cost(obj),
        obj=obj,
        claims=bool(pod_info.volume_claims(obj)),
    )


@dataclass(frozen=True, slots=True, eq=False)
class NodeRecord:
    """A node, as the controllers read it (see the module docstring)."""

    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    deletion_timestamp: str | None
    finalizers: tuple[str, ...]
    provider_id: str
    instance_id: str
    ready: bool
    initialized: bool  # Karpenter's rule (`nodes.is_initialized`)
    joined: bool  # a kubelet posted its status (`nodes.kubelet_joined`)
    created: str
    allocatable: Vector
    extended_allocatable: Mapping[str, int]
    capacity: Vector
    obj: Obj = field(repr=False)

    @property
    def deleting(self) -> bool:
        """Whether a delete was asked."""
        return self.deletion_timestamp is not None

    def same_as_read(self, other: NodeRecord) -> bool:
        """Equal in everything the controllers read of a node (all but the raw object): `other` differs at most by
        a status heartbeat or another field nothing here looks at."""
        return all(getattr(self, name) == getattr(other, name) for name in _NODE_FIELDS_READ)

    @property
    def ours(self) -> bool:
        """Whether the controller launched it (it carries the constraint-set hash annotation)."""
        return node_info.ANNOTATION_HASH in self.annotations

    @property
    def provisioner(self) -> str | None:
        """The pool it was launched for (None when not labelled): a Provisioner's name, a NodePool's
        `NodePool/<name>` (`model.pools.pool_of_labels`)."""
        return pool_of_labels(self.labels)

    @property
    def labelled_initialized(self) -> bool:
        """Whether it carries `karpenter.sh/initialized=true`."""
        return node_info.labelled_initialized(self.obj)

    @property
    def terminating(self) -> bool:
        """Ours, being deleted and held by the termination finalizer: the termination controller's."""
        return self.ours and self.deleting and wk.TERMINATION_FINALIZER in self.finalizers


def node_record(obj: Any) -> NodeRecord:
    """The record of a Node object; UnreadableObject says why there is none."""
    meta = _metadata(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    for part, value in (("spec.taints", spec.get("taints")), ("status.conditions", status.get("conditions"))):
        if value is not None and not isinstance(value, list):
            raise UnreadableObject(f"{part} is not a list")
    for part, value in (("status.allocatable", status.get("allocatable")), ("status.capacity", status.get("capacity"))):
        if value is not None and not isinstance(value, dict):
            raise UnreadableObject(f"{part} is not an object")
    if spec.get("providerID") is not None and not isinstance(spec["providerID"], str):
        raise UnreadableObject("spec.providerID is not a string")
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list):
        raise UnreadableObject("metadata.finalizers is not a list")
    allocatable, extended = node_info.resource_vector(status.get("allocatable"))
    capacity, _ = node_info.resource_vector(status.get("capacity") or status.get("allocatable"))
    provider_id = str(spec.get("providerID") or "")
    try:
        taints = node_info.node_taints(obj)
    except (TypeError, ValueError) as error:
        raise UnreadableObject(f"spec.taints: {error}") from error
    return NodeRecord(
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        labels=_string_map(meta.get("labels")),
        annotations=_string_map(meta.get("annotations")),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        deletion_timestamp=objects.deletion_timestamp(obj),
        finalizers=tuple(str(f) for f in finalizers),
        provider_id=provider_id,
        instance_id=node_info.instance_id(obj),
        ready=node_info.is_ready(obj),
        initialized=node_info.is_initialized(obj),
        joined=node_info.kubelet_joined(obj),
        created=str(meta.get("creationTimestamp") or ""),
        allocatable=allocatable,
        extended_allocatable=extended,
        capacity=capacity,
        obj=obj,
    )


@dataclass(frozen=True, slots=True, eq=False)
class ClaimRecord:
    """A NodeClaim (`karpenter.sh/v1`), as termination reads it: whether it is being deleted and held by the
    termination finalizer, and which Node and instance are its (`status.nodeName`, `status.providerID`)."""

    name: str
    uid: str
    labels: Mapping[str, str]
    deletion_timestamp: str | None
    finalizers: tuple[str, ...]
    node_name: str
    provider_id: str
    obj: Obj = field(repr=False)

    @property
    def instance_id(self) -> str:
        """The instance its launch made ("" before the launch)."""
        return node_info.instance_id_of(self.provider_id)

    @property
    def terminating(self) -> bool:
        """Being deleted and held by the termination finalizer: the termination controller's to finalize."""
        return self.deletion_timestamp is not None and wk.TERMINATION_FINALIZER in self.finalizers


def claim_record(obj: Any) -> ClaimRecord:
    """The record of a NodeClaim object; UnreadableObject says why there is none."""
    meta = _metadata(obj)
    status = obj.get("status") or {}
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        raise UnreadableObject("metadata.finalizers is not a list of strings")
    for part in ("nodeName", "providerID"):
        if status.get(part) is not None and not isinstance(status[part], str):
            raise UnreadableObject(f"status.{part} is not a string")
    return ClaimRecord(
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        labels=_string_map(meta.get("labels")),
        deletion_timestamp=objects.deletion_timestamp(obj),
        finalizers=tuple(finalizers),
        node_name=str(status.get("nodeName") or ""),
        provider_id=str(status.get("providerID") or ""),
        obj=obj,
    )


#: The fields of a :class:`NodeRecord` the controllers read (every one but the raw object).
_NODE_FIELDS_READ = tuple(f.name for f in fields(NodeRecord) if f.name != "obj")


__all__ = [
    "ClaimRecord", "UnreadableObject", "NodeRecord", "PodRecord", "claim_record", "node_record", "pod_record",
    "pod_uid",
]
