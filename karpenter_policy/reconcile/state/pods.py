"""Pods as the controller sees them: which ones to provision for, and their scheduling shapes.

A pod is *provisionable* (Karpenter v0.31's `IsProvisionable`) when it is not bound to a node, not being deleted,
not finished, not owned by a DaemonSet (the DaemonSet controller places those) or a Node (static pods), and not
nominated to a node for a preemption. Karpenter also waits until kube-scheduler has marked the pod
`PodScheduled=False` with reason `Unschedulable`, so that it never launches a node for a pod an existing node
could take; that is `unschedulable_only` (on for a real cluster; off where no kube-scheduler runs, as in the
in-memory cluster and simulations).

What termination asks of a pod (Karpenter v0.31's `pkg/utils/pod` and termination's `terminator.go`): whether it
is a static pod's mirror (:func:`is_owned_by_node`), critical to the node (:func:`is_critical`, evicted last),
content to stay on a cordoned node (:func:`tolerates_unschedulable`), or stuck terminating
(:func:`is_stuck_terminating`).

What the state keeps of a pod (:func:`trim_pod`, applied by every feed before a pod is cached or applied): its
containers only with the fields a shape reads (name kept for messages), of `spec.volumes` only the claims
termination reads (:func:`volume_claims`: a volume's name and its `persistentVolumeClaim.claimName` or that it is
`ephemeral`), without the status's container statuses, which no reader here looks at — half a typical pod's
decoded size. A reader of another container field, of other volume fields or of container statuses must be added
here first.

Shapes are what the scheduler reads of a pod spec (requests, node selection, tolerations, topology, host
ports). Replicas share one: :class:`ShapeCache` keys them by those fields alone (not by the pod's own volume
names or environment), so converting a thousand replicas parses one spec.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from karpenter_policy.api.workloads import DAEMON_SET, WORKLOAD_KINDS, get_path, template_labels
from karpenter_policy.kube import objects
from karpenter_policy.kube.evictioncost import disruption_cost
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.taints import NO_SCHEDULE, Taint, Toleration
from karpenter_policy.scheduling import Pod, PodShape, shape_of
from karpenter_policy.scheduling.pods import PodSpecError

NODE = "Node"
#: The priority classes whose pods termination evicts last (Karpenter's `terminator.evict`).
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
#: The taint of a cordoned node; a pod that tolerates it would be put back on the node it is evicted from.
UNSCHEDULABLE_TAINT = Taint(wk.TAINT_UNSCHEDULABLE, NO_SCHEDULE)
#: Karpenter v1's `DisruptedNoScheduleTaint`, on a NodePool's node being disrupted or drained.
DISRUPTED_TAINT = Taint(wk.TAINT_DISRUPTED, NO_SCHEDULE)
#: A pod deleted longer ago than this is stuck terminating (its kubelet no longer answers): nothing waits for it.
STUCK_TERMINATING_AFTER = dt.timedelta(minutes=1)
#: The pod-spec fields a shape depends on (what `shape_of` reads); for containers only these of their fields.
SHAPE_FIELDS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "overhead")
CONTAINER_FIELDS = ("resources", "ports", "restartPolicy")
#: Distinct shapes kept (least recently used dropped first): replicas share one, but a StatefulSet's pods differ by
#: their pod-name label, and every bound pod of the cluster is converted too (topology counts it).
_CACHE_LIMIT = 16384


#: What :func:`trim_pod` keeps of each container (CONTAINER_FIELDS, and the name for messages).
KEPT_CONTAINER_FIELDS = frozenset({"name", *CONTAINER_FIELDS})
#: What :func:`trim_pod` drops of a pod's spec and status.
DROPPED_SPEC_FIELDS = ("volumes",)
DROPPED_STATUS_FIELDS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _claim_volume(volume: Any) -> Any:
    """What `volume_claims` reads of one volume (None: nothing, a volume of no claim). Total."""
    if not isinstance(volume, dict):
        return volume  # another shape: left for the reader to judge
    claim = volume.get("persistentVolumeClaim")
    if claim is not None:
        kept = {"claimName": claim.get("claimName")} if isinstance(claim, dict) else claim
        return {"name": volume.get("name"), "persistentVolumeClaim": kept}
    if volume.get("ephemeral") is not None:
        return {"name": volume.get("name"), "ephemeral": {}}
    return None


def trim_pod(pod: Obj) -> None:
    """Drop in place what no reader of the state looks at (see the module docstring). Total: a part of another
    shape than Kubernetes gives is left as it is, for the readers to judge."""
    spec = pod.get("spec")
    if isinstance(spec, dict):
        volumes = spec.get("volumes")
        claims = [v for v in map(_claim_volume, volumes) if v is not None] if isinstance(volumes, list) else None
        for field in DROPPED_SPEC_FIELDS:
            spec.pop(field, None)
        if claims or (volumes is not None and not isinstance(volumes, list)):
            spec["volumes"] = claims if claims is not None else volumes
        for field in _CONTAINER_LISTS:
            containers = spec.get(field)
            if isinstance(containers, list):
                for container in containers:  # in place, and only what is there to drop: this runs per event
                    if isinstance(container, dict) and not container.keys() <= KEPT_CONTAINER_FIELDS:
                        for key in container.keys() - KEPT_CONTAINER_FIELDS:
                            del container[key]
    status = pod.get("status")
    if isinstance(status, dict):
        for field in DROPPED_STATUS_FIELDS:
            status.pop(field, None)


def controller_of(pod: Obj) -> tuple[str, str] | None:
    """(kind, name) of the object that controls the pod (its controller owner reference), if any."""
    for reference in objects.metadata(pod).get("ownerReferences") or []:
        if isinstance(reference, dict) and reference.get("controller"):
            return str(reference.get("kind") or ""), str(reference.get("name") or "")
    return None


def is_daemon_pod(pod: Obj) -> bool:
    """Whether a DaemonSet controls the pod."""
    owner = controller_of(pod)
    return owner is not None and owner[0] == DAEMON_SET


def is_owned_by_node(pod: Obj) -> bool:
    """A static pod's mirror, which the kubelet owns through its Node: an owner reference of apiVersion `v1` and kind
    `Node`, controller or not (Karpenter's `IsOwnedByNode`). Never provisioned for, never evicted."""
    for reference in objects.metadata(pod).get("ownerReferences") or []:
        if isinstance(reference, dict) and reference.get("apiVersion") == "v1" and reference.get("kind") == NODE:
            return True
    return False


def is_critical(pod: Obj) -> bool:
    """Its priority class is `system-cluster-critical` or `system-node-critical`: evicted after every other pod."""
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def tolerates_unschedulable(pod: Obj) -> bool:
    """It tolerates `node.kubernetes.io/unschedulable:NoSchedule` (Karpenter's `ToleratesUnschedulableTaint`):
    evicted, it could be scheduled back onto the cordoned node, so a drain leaves it (DaemonSets' pods carry this
    toleration). A toleration that is not a map is ignored."""
    return _tolerates(pod, UNSCHEDULABLE_TAINT)


def tolerates_disrupted(pod: Obj) -> bool:
    """It tolerates `karpenter.sh/disrupted:NoSchedule` (Karpenter v1.14.1's `ToleratesDisruptedNoScheduleTaint`,
    core pkg/utils/pod/scheduling.go): the drain of a NodePool's node leaves it, as v0.31's leaves a pod tolerating
    the cordon."""
    return _tolerates(pod, DISRUPTED_TAINT)


def _tolerates(pod: Obj, taint: Taint) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations")
    if not isinstance(tolerations, list):
        return False
    return any(isinstance(t, dict) and Toleration.from_api(t).tolerates(taint) for t in tolerations)


def volume_claims(pod: Obj) -> list[str]:
    """The PersistentVolumeClaims the pod's volumes use, as Karpenter v1.14.1's `GetPersistentVolumeClaim` (core
    pkg/utils/volume/volume.go) names them: a `persistentVolumeClaim` volume's `claimName`, a generic `ephemeral`
    volume's `<pod>-<volume>` (the claim Kubernetes makes for it). A volume of another shape names none."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, dict) else None
    found: list[str] = []
    for volume in volumes if isinstance(volumes, list) else []:
        if not isinstance(volume, dict):
            continue
        claim = volume.get("persistentVolumeClaim")
        name = volume.get("name")
        if claim is not None:
            if isinstance(claim, dict) and isinstance(claim.get("claimName"), str) and claim["claimName"]:
                found.append(claim["claimName"])
        elif volume.get("ephemeral") is not None and isinstance(name, str) and name:
            found.append(f"{objects.name(pod)}-{name}")
    return found


def is_stuck_terminating(deletion_timestamp: str | None, now: dt.datetime) -> bool:
    """Deleted more than a minute before `now` (Karpenter's `isStuckTerminating`): the kubelet that should end it
    no longer answers, so a drain stops waiting for it. An unreadable timestamp is not stuck."""
    if deletion_timestamp is None:
        return False
    try:
        deleted = objects.parse_time(deletion_timestamp)
    except ValueError:
        return False
    if deleted.tzinfo is None:
        deleted = deleted.replace(tzinfo=dt.UTC)
    return now > deleted + STUCK_TERMINATING_AFTER


def node_name(pod: Obj) -> str:
    """The node the pod is bound to (empty when pending)."""
    return str((pod.get("spec") or {}).get("nodeName") or "")


def phase(pod: Obj) -> str:
    """The pod's phase (empty when it has none yet)."""
    return str((pod.get("status") or {}).get("phase") or "")


def is_terminal(pod: Obj) -> bool:
    """Whether the pod finished (Succeeded or Failed)."""
    return phase(pod) in wk.TERMINAL_PHASES


def marked_unschedulable(pod: Obj) -> bool:
    """kube-scheduler found no node for it: PodScheduled is False with reason Unschedulable."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            return condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
    return False


def owner_text(pod: Obj) -> str:
    """`Kind/name` of the pod's controller (empty when it has none)."""
    owner = controller_of(pod)
    return f"{owner[0]}/{owner[1]}" if owner is not None else ""


def pod_key(pod: Obj) -> str:
    """`namespace/name` (namespace `default` when not set)."""
    return f"{objects.namespace(pod) or 'default'}/{objects.name(pod)}"


def _relevant(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a pod spec its shape depends on (see SHAPE_FIELDS)."""
    relevant: dict[str, Any] = {field: spec[field] for field in SHAPE_FIELDS if spec.get(field) is not None}
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        if isinstance(containers, list):
            relevant[field] = [
                {k: c[k] for k in CONTAINER_FIELDS if k in c} if isinstance(c, dict) else c for c in containers
            ]
        elif containers is not None:
            relevant[field] = containers
    return relevant


class ShapeCache:
    """Pod specs to scheduling shapes, parsed once per distinct (namespace, labels, relevant fields)."""

    def __init__(self) -> None:
        self._shapes: OrderedDict[str, PodShape | PodSpecError] = OrderedDict()

    def shape(self, spec: Mapping[str, Any], namespace: str, labels: Mapping[str, Any]) -> PodShape:
        """The shape; raises PodSpecError for a spec the scheduler cannot read."""
        relevant = _relevant(spec)
        # repr, not a sorted JSON dump (twice as dear, and this runs for every new pod): the same content written
        # in another key order only costs a parse of its own, and an API server writes one pod spec in one order.
        key = repr((namespace, labels, relevant))
        found = self._shapes.get(key)
        if found is None:
            try:
                found = shape_of(relevant, namespace, labels)
            except PodSpecError as error:
                found = error
            self._shapes[key] = found
            if len(self._shapes) > _CACHE_LIMIT:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(key)
        if isinstance(found, PodSpecError):
            raise found
        return found

    def pod(self, obj: Obj, order: int = 0, daemon: bool = False) -> Pod:
        """The scheduler's view of a pod object; raises PodSpecError."""
        meta = objects.metadata(obj)
        shape = self.shape(obj.get("spec") or {}, objects.namespace(obj) or "default", meta.get("labels") or {})
        return Pod(objects.name(obj), shape, owner=owner_text(obj), order=order, daemon=daemon, uid=objects.uid(obj))

    def daemon_pod(self, daemon_set: Obj) -> Pod:
        """One pod of a DaemonSet, from its pod template (for the overhead its pods add to every node)."""
        template = get_path(daemon_set, WORKLOAD_KINDS[DAEMON_SET].template) or {}
        namespace = objects.namespace(daemon_set) or "default"
        shape = self.shape(template.get("spec") or {}, namespace, template_labels(template))
        name = objects.name(daemon_set)
        return Pod(name, shape, owner=f"{DAEMON_SET}/{name}", daemon=True, uid=objects.uid(daemon_set))


__all__ = [
    "CRITICAL_PRIORITY_CLASSES",
    "STUCK_TERMINATING_AFTER",
    "UNSCHEDULABLE_TAINT",
    "ShapeCache",
    "controller_of",
    "disruption_cost",
    "is_critical",
    "is_daemon_pod",
    "is_owned_by_node",
    "is_stuck_terminating",
    "is_terminal",
    "volume_claims",
    "marked_unschedulable",
    "node_name",
    "owner_text",
    "pod_key",
    "tolerates_unschedulable",
]
