"""Nodes as the controller sees them (capacity to schedule onto) and the Node objects it registers.

Every Node counts for scheduling, whoever made it — managed node groups and static capacity included — as a
:class:`~karpenter_policy.scheduling.ExistingNode`: its labels, the taints pods must tolerate, status.allocatable,
and what its bound pods request. A node is *ours* when it carries the constraint-set-hash annotation the
controller stamps at registration; only ours are ever written to (the `karpenter.sh/initialized` label).

Karpenter's rules for nodes still starting: a node of ours is *initialized* once it is Ready and none of its startup
taints is left (the `karpenter.sh/initialized` label records it); until then its startup taints and the kubelet's
ephemeral taints (not-ready, unreachable, uninitialized; v1's unregistered) are ignored for scheduling — they are
about to go — so pods can be planned onto a node that is being launched. Other nodes are initialized when Ready.

:func:`node_object` is the Node the controller creates when an instance is launched (before the kubelet joins, which
adopts it): named as the kubelet will register (the private DNS name), with the pool's labels (its owner label
`karpenter.sh/provisioner-name`, or a NodePool's `karpenter.sh/nodepool` and `karpenter.k8s.aws/ec2nodeclass`) and
the instance's (type, zone, capacity type — a reserved one's capacity reservation with it,
:func:`reservation_labels` —, arch, OS and the `karpenter.k8s.aws/instance-*` labels, its placement group and
partition — `""` while EC2 has not said which —), taints and startup taints (a NodePool's node also
`karpenter.sh/unregistered:NoExecute` until its claim registers: :func:`awaiting_registration`,
:func:`registered_patch`), the `karpenter.sh/termination` finalizer, the constraint-set hash and node hash (drift),
the provider ID, and capacity and allocatable as the scheduler computed them (the kubelet reports the real figures
when it joins).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.api.v1.statichash import static_hash_annotations
from karpenter_policy.cloud.provider import Instance
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import node_labels
from karpenter_policy.model.pools import pool_of_labels
from karpenter_policy.model.requirements import Operator, Requirements
from karpenter_policy.model.resources import format_quantity, parse_quantity
from karpenter_policy.model.taints import EPHEMERAL_TAINT_KEYS, UNREGISTERED, Taint, is_unregistered, with_unregistered
from karpenter_policy.scheduling import NodeClaimTemplate
from karpenter_policy.scheduling.templates import node_configuration
from karpenter_policy.scheduling.vectors import RESOURCES, Vector, to_decimal, to_vector

ANNOTATION_HASH = "karpenter-policy/constraint-set-hash"
ANNOTATION_STARTUP_TAINTS = "karpenter-policy/startup-taints"
ANNOTATION_INSTANCE = "karpenter-policy/instance-id"
#: The hash of what shapes the node (`ConstraintSet.node_hash`): a node whose hash differs from its set's has drifted.
ANNOTATION_NODE_HASH = "karpenter-policy/node-hash"
#: The image the instance was launched with: a node whose node template now resolves another has drifted.
ANNOTATION_IMAGE = "karpenter-policy/image-id"
_ALWAYS_LISTED = ("cpu", "memory", "ephemeral-storage", "pods")


def resource_vector(resources: Mapping[str, Any] | None) -> tuple[Vector, dict[str, int]]:
    """A ResourceList of the API (quantity strings) as a vector and the other resources; bad entries are 0."""
    parsed: dict[str, Decimal] = {}
    for name, value in (resources or {}).items():
        try:
            parsed[str(name)] = parse_quantity(value)
        except ValueError:
            continue
    return to_vector(parsed)


def format_resource_vector(vector: Vector) -> dict[str, str]:
    """A vector as a ResourceList: cpu, memory, ephemeral-storage and pods always, other resources when > 0."""
    return {
        name: format_quantity(to_decimal(name, value))
        for name, value in zip(RESOURCES, vector, strict=True)
        if value > 0 or name in _ALWAYS_LISTED
    }


def _part(node: Obj, part: str) -> dict[str, Any]:
    """``spec`` or ``status`` when it is a map, else empty: an object of another shape reads as saying nothing
    (the records, :mod:`~karpenter_policy.reconcile.state.records`, refuse such an object as a whole)."""
    value = node.get(part) if isinstance(node, dict) else None
    return value if isinstance(value, dict) else {}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def node_taints(node: Obj) -> tuple[Taint, ...]:
    """The Node's taints (entries that are not objects left out)."""
    return tuple(Taint.from_api(t) for t in _listed(_part(node, "spec").get("taints")) if isinstance(t, dict))


def is_ready(node: Obj) -> bool:
    """Whether the Node's Ready condition is True."""
    for condition in _listed(_part(node, "status").get("conditions")):
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


#: The node lifecycle controller's reason for the Ready condition of a Node whose kubelet never posted its status.
NEVER_UPDATED = "NodeStatusNeverUpdated"


def kubelet_joined(node: Obj) -> bool:
    """Whether a kubelet has posted the Node's status (joined it): a Ready condition it reported, True or False,
    or Unknown for another reason than :data:`NEVER_UPDATED` (a kubelet that posted once, then stopped), or
    `status.nodeInfo.kubeletVersion` set. The Node the controller registers at launch has neither, and the node
    lifecycle controller only ever marks it Unknown (`NodeStatusNeverUpdated`): until then it has not joined."""
    status = _part(node, "status")
    info = status.get("nodeInfo")
    if isinstance(info, dict) and info.get("kubeletVersion"):
        return True
    for condition in _listed(status.get("conditions")):
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            state = condition.get("status")
            return state in ("True", "False") or (state == "Unknown" and condition.get("reason") != NEVER_UPDATED)
    return False


def is_ours(node: Obj) -> bool:
    """Registered by this controller (only such nodes are ever written to)."""
    return ANNOTATION_HASH in objects.annotations(node)


def startup_taints(node: Obj) -> tuple[Taint, ...]:
    """The startup taints the controller registered the node with (ours only)."""
    raw = objects.annotations(node).get(ANNOTATION_STARTUP_TAINTS)
    try:
        listed = json.loads(raw) if raw else []
    except ValueError:
        return ()
    return tuple(Taint.from_api(t) for t in listed if isinstance(t, dict))


def labelled_initialized(node: Obj) -> bool:
    """Whether the node carries `karpenter.sh/initialized=true` (what Karpenter's initialization controller writes)."""
    return objects.labels(node).get(wk.INITIALIZED) == "true"


def is_initialized(node: Obj) -> bool:
    """The one rule of whether a node is initialized. Ours: Ready and labelled initialized (or registered — without
    `karpenter.sh/unregistered` — with every startup taint gone); others: Ready."""
    if not is_ready(node):
        return False
    if not is_ours(node) or labelled_initialized(node):
        return True
    if awaiting_registration(node):  # v1.14.1 initializes a registered claim only (initialization.go)
        return False
    remaining = {(t.key, t.effect) for t in node_taints(node)}
    return not any((t.key, t.effect) in remaining for t in startup_taints(node))


def scheduling_taints(node: Obj, initialized: bool) -> tuple[Taint, ...]:
    """The taints a pod must tolerate to be planned onto the node (see the module docstring)."""
    taints = node_taints(node)
    if not is_ours(node):
        return taints
    if initialized:  # v1.14.1's StateNode.Taints: an unregistered node's are its claim's, never the unregistered one
        return tuple(t for t in taints if not is_unregistered(t))
    ignored = {(t.key, t.effect) for t in startup_taints(node)}
    return tuple(t for t in taints if (t.key, t.effect) not in ignored and t.key not in EPHEMERAL_TAINT_KEYS)


def template_of(node: Obj) -> str | None:
    """The pool a node belongs to (its limits count the node), whoever launched it: a Provisioner's name, a
    NodePool's `NodePool/<name>` (`model.pools.pool_of_labels`)."""
    return pool_of_labels(objects.labels(node))


# --- registration ----------------------------------------------------------------------------------------------


def _requirement_labels(requirements: Requirements) -> dict[str, str]:
    """Labels a node launched for these requirements carries: each key pinned to one value, and for custom keys
    with a few allowed values the first of them (Karpenter picks any); never the hostname."""
    labels = {}
    for key in requirements:
        if key == wk.HOSTNAME:
            continue
        requirement = requirements[key]
        if requirement.operator() != Operator.IN or not requirement.values:
            continue
        if len(requirement.values) == 1 or key not in wk.WELL_KNOWN_LABELS:
            labels[key] = min(requirement.values)
    return labels


def node_name_for(instance: Instance) -> str:
    """The name the kubelet registers the instance as: its private DNS name (the instance id when unknown)."""
    return instance.private_dns_name or instance.id


def reservation_labels(instance: Instance) -> dict[str, str]:
    """A reserved instance's capacity-reservation labels: its reservation's id, type and interruptibility (`"true"`,
    `"false"`), as v1.14.1 labels its NodeClaim; none on another capacity type, even one launched with requirements
    naming a reservation (they say where it might have gone, not where it went)."""
    if instance.capacity_type != wk.CAPACITY_RESERVED:
        return {}
    return {
        wk.CAPACITY_RESERVATION_ID: instance.reservation_id,
        wk.CAPACITY_RESERVATION_TYPE: instance.reservation_type,
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "true" if instance.reservation_interruptible else "false",
    }


def node_object(
    instance: Instance,
    template: NodeClaimTemplate,
    constraint_set: ConstraintSet,
    requirements: Requirements,
) -> Obj:
    """The Node registered for a launched instance (see the module docstring)."""
    name = node_name_for(instance)
    labels = _requirement_labels(requirements)
    labels.update(constraint_set.node_labels())
    table = template.table
    position = table.position.get(instance.instance_type)
    capacity: dict[str, str] = {}
    allocatable: dict[str, str] = {}
    if position is not None:
        configuration = node_configuration(constraint_set.kubelet, constraint_set.node_template)
        labels.update(node_labels(table.types[position], configuration))
        capacity = format_resource_vector(template.shapes.capacity[position])
        allocatable = format_resource_vector(template.shapes.allocatable[position])
        if not instance.efa_interfaces:  # launched without EFA interfaces: none advertised (cloudprovider.go:440)
            capacity.pop(wk.EFA, None)
            allocatable.pop(wk.EFA, None)
    else:
        labels[wk.INSTANCE_TYPE] = instance.instance_type
    labels.update(
        {
            wk.ZONE: instance.zone,
            wk.CAPACITY_TYPE: instance.capacity_type,
            wk.HOSTNAME: name,
        }
    )
    if instance.capacity_type == wk.CAPACITY_RESERVED:  # v1.14.1's `instanceToNodeClaim` (cloudprovider.go:465-470)
        labels.update(reservation_labels(instance))
    if instance.placement_group:  # v1.14.1's `instanceToNodeClaim` (cloudprovider.go:472-488)
        labels[wk.PLACEMENT_GROUP_ID] = instance.placement_group
        if instance.placement_partition is not None:
            labels[wk.PLACEMENT_GROUP_PARTITION] = instance.placement_partition
    if constraint_set.region:
        labels[wk.REGION] = constraint_set.region
    registering = (*constraint_set.taints, *constraint_set.startup_taints)
    if constraint_set.is_nodepool:  # v1: with `karpenter.sh/unregistered` until its claim registers
        registering = with_unregistered(registering)
    taints = [t.to_api() for t in registering]
    annotations = {
        ANNOTATION_HASH: constraint_set.hash,
        ANNOTATION_NODE_HASH: constraint_set.node_hash,
        ANNOTATION_INSTANCE: instance.id,
        ANNOTATION_STARTUP_TAINTS: json.dumps([t.to_api() for t in constraint_set.startup_taints], sort_keys=True),
        **static_hash_annotations(constraint_set),  # a NodePool's node: Karpenter v1's static-drift hashes
    }
    if instance.image_id:
        annotations[ANNOTATION_IMAGE] = instance.image_id
    node: Obj = {
        "apiVersion": objects.NODE.api_version,
        "kind": objects.NODE.kind,
        "metadata": {
            "name": name,
            "labels": dict(sorted(labels.items())),
            "annotations": annotations,
            "finalizers": [wk.TERMINATION_FINALIZER],
        },
        "spec": {"providerID": instance.provider_id},
        "status": {"capacity": capacity, "allocatable": allocatable},
    }
    if taints:
        node["spec"]["taints"] = taints
    return node


def registration_patch(registered: Obj, existing: Obj) -> dict[str, Any]:
    """The strategic-merge patch that gives a Node the kubelet registered first the controller's labels,
    annotations and finalizer (and a NodePool's node its NodeClaim as owner)."""
    meta = objects.metadata(registered)
    patch: dict[str, Any] = {
        "metadata": {
            "labels": {k: v for k, v in meta["labels"].items() if objects.labels(existing).get(k) != v},
            "annotations": meta["annotations"],
            "finalizers": sorted({*objects.finalizers(existing), wk.TERMINATION_FINALIZER}),
        }
    }
    if meta.get("ownerReferences"):
        patch["metadata"]["ownerReferences"] = meta["ownerReferences"]
    return patch


def _is_unregistered(taint: Mapping[str, Any]) -> bool:
    """v1.14.1's `MatchTaint(&UnregisteredNoExecuteTaint)`: its key and effect."""
    return (taint.get("key"), taint.get("effect")) == (UNREGISTERED.key, UNREGISTERED.effect)


def awaiting_registration(node: Obj) -> bool:
    """Whether the Node still carries `karpenter.sh/unregistered:NoExecute`: its NodeClaim has not registered, and no
    pod may be bound there (registration.go:93-103)."""
    return any(isinstance(t, dict) and _is_unregistered(t) for t in _listed(_part(node, "spec").get("taints")))


def registered_patch(node: Obj) -> dict[str, Any] | None:
    """The merge patch v1.14.1's registration writes once every hook is ready (registration.go:96-103): the
    unregistered taint removed and `karpenter.sh/registered=true`, the node's resourceVersion as its precondition
    (a merge patch replaces the whole list: `MergeFromWithOptimisticLock`); None when the node is already so."""
    taints = [t for t in _listed(_part(node, "spec").get("taints")) if isinstance(t, dict)]
    kept = [t for t in taints if not _is_unregistered(t)]
    labelled = objects.labels(node).get(wk.REGISTERED) == "true"
    if labelled and len(kept) == len(taints):
        return None
    patch: dict[str, Any] = {"metadata": {"resourceVersion": objects.resource_version(node)}}
    if not labelled:
        patch["metadata"]["labels"] = {wk.REGISTERED: "true"}
    if len(kept) != len(taints):
        patch["spec"] = {"taints": kept or None}
    return patch


def disrupted_taint_patch(node: Obj, present: bool) -> dict[str, Any] | None:
    """The merge patch that adds (`present`) or removes Karpenter v1's `karpenter.sh/disrupted:NoSchedule` taint
    (`RequireNoScheduleTaint`, core pkg/controllers/state/statenode.go at v1.14.1: another effect under that key is
    replaced), the node's resourceVersion as its precondition (a merge patch replaces the whole list); None when the
    node is already so."""
    taints = [t for t in _listed(_part(node, "spec").get("taints")) if isinstance(t, dict)]
    matching = [t for t in taints if t.get("key") == wk.TAINT_DISRUPTED]
    has = any(t.get("effect") == "NoSchedule" for t in matching)
    if has == present and (not present or len(matching) == 1):
        return None
    kept = [t for t in taints if t.get("key") != wk.TAINT_DISRUPTED]
    if present:
        kept.append({"key": wk.TAINT_DISRUPTED, "effect": "NoSchedule"})
    return {"metadata": {"resourceVersion": objects.resource_version(node)}, "spec": {"taints": kept or None}}


def provider_ids(nodes: Iterable[Obj]) -> set[str]:
    """The providerIDs of the Nodes (those without one left out)."""
    return {str(_part(n, "spec").get("providerID") or "") for n in nodes} - {""}


def instance_id_of(provider_id: str) -> str:
    """``aws:///us-east-1a/i-0abc…`` → ``i-0abc…`` (the last segment; "" for an empty providerID)."""
    return provider_id.rstrip("/").rpartition("/")[2]


def instance_id(node: Obj) -> str:
    """The EC2 instance a node runs on: from its providerID, else the controller's annotation ("" if neither)."""
    provider_id = str(_part(node, "spec").get("providerID") or "")
    if instance_id_of(provider_id):
        return instance_id_of(provider_id)
    annotations = objects.metadata(node).get("annotations") if isinstance(node, dict) else None
    named = annotations.get(ANNOTATION_INSTANCE) if isinstance(annotations, dict) else None
    return named if isinstance(named, str) else ""


__all__ = [
    "ANNOTATION_HASH",
    "ANNOTATION_IMAGE",
    "ANNOTATION_INSTANCE",
    "ANNOTATION_NODE_HASH",
    "ANNOTATION_STARTUP_TAINTS",
    "NEVER_UPDATED",
    "awaiting_registration",
    "registered_patch",
    "registration_patch",
    "instance_id",
    "instance_id_of",
    "is_initialized",
    "labelled_initialized",
    "is_ours",
    "is_ready",
    "kubelet_joined",
    "node_name_for",
    "node_object",
    "node_taints",
    "provider_ids",
    "format_resource_vector",
    "resource_vector",
    "scheduling_taints",
    "startup_taints",
    "template_of",
]
