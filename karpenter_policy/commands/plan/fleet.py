"""The fleet a plan reasons about, from a snapshot: nodes with what Karpenter reads of them, pods by node with the
workload each belongs to and whether it can be evicted, the PodDisruptionBudgets over them, and the DaemonSets'
pods (the overhead every new node carries).

A pod is *moved* by a node's replacement when it is neither a DaemonSet's (the DaemonSet controller places those)
nor a static pod's mirror (owned by its Node), nor finished, nor being deleted — Karpenter v0.31's
`IsReschedulable`/`IsOwnedBy…`
(`pkg/utils/pod/scheduling.go`). Its scheduling shape is what the scheduler reads (`scheduling.shape_of`),
converted once per distinct spec: replicas share one. A moved pod with a claim carries its volumes' topology, and
its pending form Karpenter v1.14.1's refusal of its claims (`commands/plan/volumes.py`). A pod spec the scheduler
cannot read is a snapshot :class:`~karpenter_policy.commands.plan.snapshot.Problem` (an error), never a pod left out.

A node's NodeClaim or Machine is the one whose `status.providerID` is the node's `spec.providerID`, as Karpenter's
cluster state pairs them (`commands/plan/pairing.py`; a claim's `status.nodeName` is not read for it). A node's
Karpenter annotations are its own and those of its NodeClaim or Machine (Karpenter v0.31 copies a Machine's
annotations to its Node at registration; a snapshot may hold either). A node of
a Karpenter v1 NodePool (`karpenter.sh/nodepool`) keeps its NodeClaim's own facts apart (:class:`Claim`): v1 reads
the hash annotations, labels, `expireAfter` and `terminationGracePeriod` of the NodeClaim, not of the Node. Such a
node is not registered while it carries `karpenter.sh/unregistered:NoExecute` or its NodeClaim's `Registered`
condition is not "True", and not initialized before that or while its `Initialized` condition is not "True"
(v1.14.1 `StateNode.Registered`/`Initialized`; a snapshot without the conditions reads as initialized); the taints of
one not initialized leave out Karpenter's `KnownEphemeralTaints` (`StateNode.Taints`). A NodeClaim whose
`spec.nodeClassRef` is not an EC2NodeClass is not the AWS provider's (`Claim.not_managed`, `api.v1.managed`): its
class is never read as an EC2NodeClass of the same name.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.v1.donotdisrupt import do_not_disrupt, start_time
from karpenter_policy.api.v1.goduration import parse_go_duration
from karpenter_policy.api.v1.managed import ref_not_managed
from karpenter_policy.api.v1.objects import NodeClassRef
from karpenter_policy.api.workloads import template_labels
from karpenter_policy.commands.plan.pairing import claims_by_node
from karpenter_policy.commands.plan.snapshot import Problem, Snapshot
from karpenter_policy.commands.plan.volumes import SnapshotVolumes
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import pool_key
from karpenter_policy.model.resources import parse_quantity
from karpenter_policy.model.taints import EPHEMERAL_TAINT_KEYS, Taint, is_unregistered
from karpenter_policy.scheduling import Pod, PodShape, shape_of
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.vectors import ZERO, Vector, to_vector

__all__ = ["Claim", "Fleet", "FleetNode", "FleetPod", "fleet_of", "is_true"]

POD_TEMPLATE_HASH = "pod-template-hash"
#: The pod-spec fields a scheduling shape depends on, and of each container only these.
_SHAPE_FIELDS = ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "overhead")
_CONTAINER_FIELDS = ("resources", "ports", "restartPolicy")


def is_true(value: str | None) -> bool:
    """An annotation set to "true" (Karpenter compares the string)."""
    return value == "true"


#: `spec.expireAfter: Never` (Karpenter's NillableDuration without a duration).
NEVER = "Never"


@dataclass(frozen=True, slots=True)
class Claim:
    """What Karpenter v1 reads of a node's NodeClaim (the snapshot checked the shapes): its name, creation time,
    labels and annotations, `spec.expireAfter` (None: not set or `Never`), `spec.terminationGracePeriod` (None: not
    set), the EC2NodeClass its `spec.nodeClassRef` names (None: none, or another provider's class), and whether its
    `Drifted` condition is true already."""

    name: str
    created: dt.datetime | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    expire_after: dt.timedelta | None
    termination_grace: dt.timedelta | None
    node_class: str | None
    drifted: bool = False
    #: when its Drifted condition turned true (its `lastTransitionTime`; None: not drifted, or no readable time)
    drifted_since: dt.datetime | None = None
    #: the AMI it was launched with (`status.imageID`; None: not there)
    image_id: str | None = None
    #: when a pod was last bound to it or left it (`status.lastPodEventTime`; None: not there)
    last_pod_event: dt.datetime | None = None
    #: its `Registered` and `Initialized` conditions (None: not there; a snapshot without them reads as initialized)
    registered: bool | None = None
    initialized: bool | None = None
    #: why Karpenter's AWS provider does not manage it — its `spec.nodeClassRef` is not an EC2NodeClass
    #: (`api.v1.managed.ref_not_managed`; `node_class` is then None) —; None: it does
    not_managed: str | None = None


@dataclass(frozen=True, slots=True)
class FleetNode:
    """One Node of the snapshot: its `provisioner` (the `karpenter.sh/provisioner-name` label) or `nodepool` (the
    `karpenter.sh/nodepool` label; neither: not Karpenter's), type, zone and capacity type from its labels,
    creation time, labels and annotations (its NodeClaim's merged in), and its v1 NodeClaim (`claim`)."""

    name: str
    provisioner: str | None
    instance_type: str
    zone: str
    capacity_type: str
    created: dt.datetime | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    deleting: bool = False
    nodepool: str | None = None
    claim: Claim | None = None
    #: False when the Node's Ready condition is there and not "True" (a node without conditions counts as Ready)
    ready: bool = True
    #: `spec.taints`, and `node.kubernetes.io/unschedulable` when the node is cordoned (what keeps pods off it)
    taints: tuple[Taint, ...] = ()
    #: `status.allocatable` (None: the snapshot does not say; the room the plan gives it comes from its type)
    allocatable: Vector | None = None
    #: False for a NodePool's node not registered yet: it carries `karpenter.sh/unregistered:NoExecute`, or its
    #: NodeClaim's `Registered` condition is there and not "True" (v1.14.1 `StateNode.Registered`)
    registered: bool = True
    #: False for a NodePool's node not registered, or whose NodeClaim's `Initialized` condition is there and not
    #: "True" (v1.14.1 `StateNode.Initialized`): no disruption candidate, no room counted as initialized
    initialized: bool = True

    @property
    def owner(self) -> str | None:
        """What the node belongs to as the scheduler names it: a Provisioner's name, `NodePool/<name>` (None: not
        Karpenter's)."""
        return pool_key(self.nodepool, True) if self.nodepool is not None else self.provisioner


@dataclass(frozen=True, slots=True)
class FleetPod:
    """One pod bound to a node: `key` (namespace/name), the `workload` it belongs to (`namespace/Kind/name`), whether
    a replacement moves it (`moved`), whether it forbids eviction (`do_not_evict`: `karpenter.sh/do-not-evict` or
    `karpenter.sh/do-not-disrupt`, as v0.31 reads them; `do_not_disrupt`: v1's), and its scheduling form (`pod`,
    for moved pods)."""

    key: str
    node: str
    workload: str
    moved: bool
    do_not_evict: bool
    obj: Obj = field(repr=False)
    pod: Pod | None = field(default=None, repr=False)
    #: `karpenter.sh/do-not-disrupt` "true", or a positive duration not run out at the rollout's start
    #: (`api.v1.donotdisrupt`): what holds a pod in Karpenter v1 (do-not-evict is v1alpha5's)
    do_not_disrupt: bool = False
    #: what it takes of its node (one pod slot included; a finished pod: nothing)
    requests: Vector = ZERO
    #: the pod as the provisioner reads it once evicted, when that differs from `pod`: with the reason Karpenter
    #: v1.14.1 ignores it for its claims (`commands.plan.volumes`)
    pending_pod: Pod | None = field(default=None, repr=False)

    @property
    def provisioned(self) -> Pod | None:
        """The pod as provisioning reads it, pending after its node went (None: not moved)."""
        return self.pending_pod if self.pending_pod is not None else self.pod


@dataclass(slots=True)
class Fleet:
    """The snapshot's nodes by name, the pods bound to each, every pod object (PDB arithmetic counts them all), the
    PodDisruptionBudgets, and one pod per DaemonSet."""

    nodes: dict[str, FleetNode] = field(default_factory=dict)
    pods_on: dict[str, list[FleetPod]] = field(default_factory=dict)
    pod_objects: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    daemons: list[Pod] = field(default_factory=list)
    #: what the plan says of the pods' volumes (None: nothing; `SnapshotVolumes.note`)
    volume_note: str | None = None

    def moved_pods(self, node: str) -> list[FleetPod]:
        return [p for p in self.pods_on.get(node, []) if p.moved]


def workload_of(pod: Obj) -> str:
    """`namespace/Kind/name` of what controls the pod: a ReplicaSet's Deployment (its name less the pod-template-hash),
    else the controller owner, else the pod itself."""
    namespace = objects.namespace(pod) or "default"
    for reference in objects.metadata(pod).get("ownerReferences") or []:
        if isinstance(reference, dict) and reference.get("controller"):
            kind, name = str(reference.get("kind") or ""), str(reference.get("name") or "")
            suffix = objects.labels(pod).get(POD_TEMPLATE_HASH)
            if kind == "ReplicaSet" and suffix and name.endswith("-" + suffix):
                return f"{namespace}/Deployment/{name[: -len(suffix) - 1]}"
            return f"{namespace}/{kind}/{name}"
    return f"{namespace}/Pod/{objects.name(pod)}"


def _owner_kind(pod: Obj) -> str:
    for reference in objects.metadata(pod).get("ownerReferences") or []:
        if isinstance(reference, dict) and reference.get("controller"):
            return str(reference.get("kind") or "")
    return ""


class _Shapes:
    """Scheduling shapes by the spec fields they depend on, namespace and labels: replicas convert once."""

    def __init__(self) -> None:
        self._cache: dict[str, PodShape | PodSpecError] = {}

    def shape(self, spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodShape:
        containers = [
            [{k: c.get(k) for k in _CONTAINER_FIELDS} if isinstance(c, dict) else c for c in spec.get(part) or []]
            if isinstance(spec.get(part), list) else spec.get(part)
            for part in ("containers", "initContainers")
        ]
        try:
            key = json.dumps([[spec.get(f) for f in _SHAPE_FIELDS], containers, namespace, sorted(labels.items())],
                             sort_keys=True, default=str)
        except RecursionError:  # JSON nested nearly as deep as the decoder allows
            raise PodSpecError((), "the pod spec is nested too deeply") from None
        cached = self._cache.get(key)
        if cached is None:
            try:
                cached = shape_of(spec, namespace, labels)
            except PodSpecError as error:
                cached = error
            except RecursionError:
                cached = PodSpecError((), "the pod spec is nested too deeply")
            self._cache[key] = cached
        if isinstance(cached, PodSpecError):
            raise cached
        return cached


def _created(obj: Obj) -> dt.datetime | None:
    """The creation time (the snapshot checked it parses; one without a zone, which the API never writes, is UTC)."""
    stamp = objects.creation_timestamp(obj)
    if not stamp:
        return None
    moment = objects.parse_time(stamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _claim_annotations(paired: Mapping[str, list[Obj]]) -> dict[str, dict[str, str]]:
    """Node name → the annotations of its NodeClaim and Machine (`paired`: `pairing.claims_by_node`)."""
    by_node: dict[str, dict[str, str]] = {}
    for node, claims in paired.items():
        for claim in claims:
            by_node.setdefault(node, {}).update(objects.annotations(claim))
    return by_node


def _ready(node: Obj) -> bool:
    status = node.get("status")
    return _condition(status.get("conditions") if isinstance(status, dict) else None, "Ready") is not False


#: The taint the node controller puts on a cordoned node (`spec.unschedulable`).
UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "NoSchedule")


def _taints(node: Obj) -> tuple[Taint, ...]:
    spec = node.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    listed = spec.get("taints")
    taints = tuple(Taint.from_api(t) for t in listed if isinstance(t, dict)) if isinstance(listed, list) else ()
    if spec.get("unschedulable") is True and UNSCHEDULABLE not in taints:
        taints = (*taints, UNSCHEDULABLE)
    return taints


def _allocatable(node: Obj) -> Vector | None:
    """`status.allocatable` as a vector (None: absent or empty; an entry that is no quantity counts 0)."""
    status = node.get("status")
    listed = status.get("allocatable") if isinstance(status, dict) else None
    if not isinstance(listed, dict) or not listed:
        return None
    parsed = {}
    for name, value in listed.items():
        try:
            parsed[str(name)] = parse_quantity(value)
        except ValueError:
            continue
    return to_vector(parsed)[0]


def _time(value: object) -> dt.datetime | None:
    """An RFC 3339 time of a condition (not checked at the edge: one that does not parse is no time)."""
    if not isinstance(value, str):
        return None
    try:
        moment = objects.parse_time(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _duration(value: object) -> dt.timedelta | None:
    return parse_go_duration(value) if isinstance(value, str) and value != NEVER else None


def _claims(paired: Mapping[str, list[Obj]]) -> dict[str, Claim]:
    """Each node's v1 NodeClaim by the node's name (`paired`: `pairing.claims_by_node`, by providerID)."""
    by_node: dict[str, Claim] = {}
    for node, claims in paired.items():
        claim = next((c for c in claims if c.get("kind") == "NodeClaim"), None)
        if claim is None:
            continue
        status, spec = claim.get("status") or {}, claim.get("spec") or {}
        ref = spec.get("nodeClassRef")
        class_ref = NodeClassRef.from_api(ref) if isinstance(ref, dict) else None
        conditions = status.get("conditions") or []
        drifted = next((c for c in conditions if c.get("type") == "Drifted" and c.get("status") == "True"), None)
        by_node[node] = Claim(
            name=objects.name(claim),
            created=_created(claim),
            labels=objects.labels(claim),
            annotations=objects.annotations(claim),
            expire_after=_duration(spec.get("expireAfter")),
            termination_grace=_duration(spec.get("terminationGracePeriod")),
            node_class=(class_ref.name or None) if class_ref is not None and class_ref.is_ec2_node_class else None,
            drifted=drifted is not None,
            drifted_since=_time(drifted.get("lastTransitionTime")) if drifted is not None else None,
            image_id=status.get("imageID") or None,
            last_pod_event=_time(status.get("lastPodEventTime")),
            registered=_condition(conditions, "Registered"),
            initialized=_condition(conditions, "Initialized"),
            not_managed=ref_not_managed(class_ref),
        )
    return by_node


def _condition(conditions: Any, kind: str) -> bool | None:
    """Whether the condition of type `kind` is "True" (None: not there)."""
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return bool(condition.get("status") == "True")
    return None


def fleet_of(snapshot: Snapshot, now: dt.datetime | None = None) -> Fleet:
    """The fleet of a snapshot that has no errors; a pod spec the scheduler cannot read is added to its problems.
    `now` (the rollout's start) is when a pod's do-not-disrupt duration is read (None: a valid duration holds, as
    for a pod without a startTime)."""
    fleet = Fleet(pdbs=list(snapshot.pdbs))
    paired = claims_by_node(snapshot.nodes, snapshot.node_claims)
    claims = _claim_annotations(paired)
    v1_claims = _claims(paired)
    for node in snapshot.nodes:
        labels = objects.labels(node)
        name = objects.name(node)
        claim = v1_claims.get(name)
        taints = _taints(node)
        managed = wk.NODEPOOL in labels
        registered = not managed or (not any(is_unregistered(t) for t in taints)
                                     and (claim is None or claim.registered is not False))
        initialized = registered and (claim is None or claim.initialized is not False)
        if not initialized:  # v1.14.1 `StateNode.Taints`: a starting node's ephemeral taints are not read
            taints = tuple(t for t in taints if t.key not in EPHEMERAL_TAINT_KEYS)
        fleet.nodes[name] = FleetNode(
            name=name,
            provisioner=labels.get(wk.PROVISIONER_NAME),
            instance_type=labels.get(wk.INSTANCE_TYPE, ""),
            zone=labels.get(wk.ZONE, ""),
            capacity_type=labels.get(wk.CAPACITY_TYPE, wk.CAPACITY_ON_DEMAND),
            created=_created(node),
            labels=labels,
            annotations={**claims.get(name, {}), **objects.annotations(node)},
            deleting=objects.is_deleting(node),
            nodepool=labels.get(wk.NODEPOOL),
            claim=claim,
            ready=_ready(node),
            taints=taints,
            allocatable=_allocatable(node),
            registered=registered,
            initialized=initialized,
        )
    shapes = _Shapes()
    volumes = SnapshotVolumes.of(snapshot)
    pods_on: dict[str, list[FleetPod]] = defaultdict(list)
    file = ", ".join(snapshot.files)
    for order, obj in enumerate(snapshot.pods):
        fleet.pod_objects.append(obj)
        spec = obj["spec"]
        node = spec.get("nodeName")
        if not node:
            continue  # pending already: not on a node the plan disrupts
        phase = (obj.get("status") or {}).get("phase")
        owner = _owner_kind(obj)
        moved = owner not in ("DaemonSet", "Node") and phase not in wk.TERMINAL_PHASES
        moved = moved and not objects.is_deleting(obj)
        annotations = objects.annotations(obj)
        namespace = objects.namespace(obj) or "default"
        workload = workload_of(obj)
        pod: Pod | None = None
        pending: Pod | None = None
        requests = ZERO
        if moved:
            try:
                shape = shapes.shape(spec, namespace, objects.labels(obj))
            except PodSpecError as error:
                snapshot.problems.append(Problem(file, None, "error", f"Pod {namespace}/{objects.name(obj)}: {error}"))
                continue
            pod = Pod(objects.name(obj), shape, owner=workload, order=order, uid=objects.uid(obj))
            pod, pending = volumes.volumed(pod, spec, objects.name(obj), namespace)
            requests = pod.requests
        elif phase not in wk.TERMINAL_PHASES:  # a DaemonSet's or mirror pod takes room too; the plan never moves it
            try:
                requests = shapes.shape(spec, namespace, objects.labels(obj)).requests
            except PodSpecError:
                requests = ZERO  # not the plan's to read: it is never scheduled
        pods_on[node].append(FleetPod(
            key=f"{namespace}/{objects.name(obj)}",
            node=node,
            workload=workload,
            moved=moved,
            do_not_evict=is_true(annotations.get(wk.DO_NOT_EVICT)) or is_true(annotations.get(wk.DO_NOT_DISRUPT)),
            obj=obj,
            pod=pod,
            do_not_disrupt=do_not_disrupt(
                annotations, start_time(obj) if now is not None else None, now or dt.datetime.min.replace(tzinfo=dt.UTC)
            ).active,
            requests=requests,
            pending_pod=pending,
        ))
    fleet.pods_on = dict(pods_on)
    for absent in sorted(set(pods_on) - set(fleet.nodes)):
        # a partial snapshot, or a node deleted while kubectl listed: the plan cannot drain or count what it cannot see
        count = len(pods_on[absent])
        snapshot.problems.append(Problem(file, None, "warning", (
            f"Node {absent} is not in the snapshot, but {count} {'pods name' if count != 1 else 'pod names'} it as "
            "spec.nodeName: left out of the plan (take the snapshot with the nodes listed)"), ("Node", "", absent)))
    fleet.volume_note = volumes.note()
    for daemon_set in snapshot.daemon_sets:
        template = daemon_set["spec"]["template"]
        namespace = objects.namespace(daemon_set) or "default"
        try:
            shape = shapes.shape(template["spec"], namespace, template_labels(template))
        except PodSpecError as error:
            snapshot.problems.append(
                Problem(file, None, "error", f"DaemonSet {namespace}/{objects.name(daemon_set)}: {error}"))
            continue
        name = objects.name(daemon_set)
        fleet.daemons.append(Pod(name, shape, owner=f"{namespace}/DaemonSet/{name}", daemon=True))
    return fleet
