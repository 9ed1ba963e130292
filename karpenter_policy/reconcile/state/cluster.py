"""The cluster as the controllers know it: records kept up to date event by event, with the indexes they ask.

Karpenter's `state.Cluster`: one object, fed by the watches (`feed`), that every controller reads. Each change costs
O(what changed) — a pod event touches that pod, its node's load and the indexes it is in; a node event that node
and its pods' topology entries — and nothing is copied: records are immutable and shared (`records`).

What it keeps, besides the records:

* **pods by node** and each node's **load** (what its live pods request, their host ports, the DaemonSets with a
  pod there) — incrementally, never summed again;
* the **pending** pods (provisionable: `PodRecord.provisionable`), in arrival order;
* nodes by **instance id** (interruption messages name instances);
* the **scheduler's view** of each node (:class:`~karpenter_policy.scheduling.ExistingNode`), built when asked
  and kept until the node, its pods or the DaemonSets change;
* the **running pods** indexed for topology (:class:`~karpenter_policy.scheduling.RunningPods`) and the label
  values of every node (topology domains);
* DaemonSets (one pod each: their overhead) and the namespaces' labels;
* the NodeClaims (`ClaimRecord`: termination finalizes those being deleted; a cluster without their CRD has none);
* the names and resourceVersions of the NodePools and EC2NodeClasses: a change of one is a `Change` naming it
  (provisioning writes its readiness then: `claims.nodepoolstatus`).
* the PersistentVolumeClaims, PersistentVolumes and StorageClasses the provisioner reads of a pod's volumes
  (:attr:`ClusterState.volumes`, `model.volumes.Volumes`, by key), and whether they can be trusted
  (:meth:`ClusterState.volumes_unavailable`: each kind listed once and not failing — a kind that cannot be listed
  is *unavailable*, never "none"); whether any pod pending or on a node of ours (or one not seen yet) has a claim
  (:attr:`ClusterState.wants_volumes`: their informers start only then — provisioning and disruption read them).

Listeners (:meth:`ClusterState.subscribe`) see every :class:`Change` as it is applied — the controllers use it to
wake on what concerns them (a pod became pending, a node is being deleted, a node lost its last pod). They run
under the state's lock and must only take note (set a flag, wake a thread), never call back into the cluster.

An object that cannot be read (:class:`~.records.UnreadableObject`) is counted by kind and
reason (:attr:`ClusterState.malformed`), logged once per kind and reason, and leaves the last good record of it in
place. Thread-safe: one re-entrant lock (:attr:`ClusterState.lock`) guards everything; readers that need several
answers to agree take it around them.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import Malformed
from karpenter_policy.kube.objects import Kind, Obj
from karpenter_policy.kube.volumes import VOLUME_KINDS, volume_object
from karpenter_policy.model.podtopology import HostPort, NamespaceScope
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.selectors import LabelSelector
from karpenter_policy.model.taints import untolerated
from karpenter_policy.model.volumes import Volumes
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.pods import UNSCHEDULABLE_TAINT, ShapeCache
from karpenter_policy.reconcile.state.records import (
    ClaimRecord,
    NodeRecord,
    PodRecord,
    UnreadableObject,
    claim_record,
    node_record,
    pod_record,
    pod_uid,
)
from karpenter_policy.scheduling import ClusterPod, ExistingNode, Pod, RunningPods
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.running import PodsForTopology
from karpenter_policy.scheduling.vectors import ZERO, Vector, add, subtract

log = logging.getLogger(__name__)

NOTHING_UNDEFINED: frozenset[str] = frozenset()
#: A cordoned node (`spec.unschedulable`) takes only pods that tolerate this (kube-scheduler's NodeUnschedulable).
ChangeKind = Literal["pod", "node", "daemonset", "namespace", "nodeclaim", "nodepool", "ec2nodeclass", "volume"]


@dataclass(frozen=True, slots=True)
class Change:
    """One applied change: `before` and `after` records (None: absent before, or deleted)."""

    kind: ChangeKind
    before: PodRecord | NodeRecord | ClaimRecord | None
    after: PodRecord | NodeRecord | ClaimRecord | None
    name: str = ""  # the NodePool or EC2NodeClass that changed (their changes carry no record)


@dataclass(slots=True)
class _Load:
    requested: Vector = ZERO
    extended: dict[str, int] = field(default_factory=dict)
    host_ports: dict[str, tuple[HostPort, ...]] = field(default_factory=dict)  # uid → ports
    daemon_sets: Counter[tuple[str, str]] = field(default_factory=Counter)  # (namespace, DaemonSet) → pods here
    workload_pods: int = 0  # live pods that are not DaemonSets' (emptiness)

    def change(self, pod: Pod | None, record: PodRecord, sign: int) -> None:
        """Count a pod in (`sign` 1) or out (-1); `pod` None: its spec cannot be read (no requests counted,
        as kube-scheduler placed it)."""
        if pod is not None:
            self.requested = add(self.requested, pod.requests) if sign > 0 else subtract(self.requested, pod.requests)
            for name, count in pod.shape.extended.items():
                self.extended[name] = self.extended.get(name, 0) + sign * count
            if sign > 0:
                if pod.shape.host_ports:
                    self.host_ports[record.uid] = pod.shape.host_ports
            else:
                self.host_ports.pop(record.uid, None)
        if record.daemon and record.owner is not None:
            self.daemon_sets[(record.namespace, record.owner[1])] += sign
            if self.daemon_sets[(record.namespace, record.owner[1])] <= 0:
                del self.daemon_sets[(record.namespace, record.owner[1])]
        else:
            self.workload_pods += sign


def _keeps_others_away(record: PodRecord) -> bool:
    """The pod has a required pod anti-affinity term: it may keep any pending pod off its node's domain."""
    affinity = record.obj.get("spec", {}).get("affinity")
    anti = affinity.get("podAntiAffinity") if isinstance(affinity, dict) else None
    return isinstance(anti, dict) and bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))


def reshapes(change: Change) -> bool:
    """A change a plan made ahead cannot check for itself at the window's close (`provisioning/ahead.py`): a
    DaemonSet or namespace changed, or a pod that keeps others away (required pod anti-affinity) came, went or
    changed. Everything else the plan depends on it compares at the close — the pending pods and their specs, the
    names of the nodes, the room, labels and taints of the nodes it places pods on, what every provisioner uses —
    so pods bound (a burst's earlier batch onto its launches), bound pods replaced, nodes registered, joining or
    sending heartbeats never make it plan again by themselves."""
    if change.kind in ("daemonset", "namespace", "nodepool", "ec2nodeclass"):
        return True  # a NodePool's readiness may have changed: its template may be left out
    if change.kind != "pod":
        return False
    return any(isinstance(r, PodRecord) and _keeps_others_away(r) for r in (change.before, change.after))


class ClusterState:
    """See the module docstring. `unschedulable_only`: pending means kube-scheduler marked the pod Unschedulable."""

    def __init__(self, shapes: ShapeCache | None = None, unschedulable_only: bool = False) -> None:
        self.lock = threading.RLock()
        self.shapes = shapes or ShapeCache()
        self.unschedulable_only = unschedulable_only
        self._pods: dict[str, PodRecord] = {}
        self._uid_by_key: dict[str, str] = {}
        self._scheduling: dict[str, Pod | PodSpecError] = {}  # uid → the scheduler's pod (order 0)
        self._by_node: dict[str, dict[str, None]] = {}  # node → uids of its live pods
        self._loads: dict[str, _Load] = {}
        self._pending: dict[str, None] = {}
        self._nodes: dict[str, NodeRecord] = {}
        #: the names of the nodes being deleted (a deletion timestamp, or marked for deletion: a disruption command
        #: under way disrupts them): what provisioning places the pods of again
        self._deleting: set[str] = set()
        #: the nodes marked for deletion (Karpenter's `MarkForDeletion`: a disruption command's, from its start)
        self._marked: set[str] = set()
        self._by_instance: dict[str, str] = {}
        self._existing: dict[str, ExistingNode] = {}
        self._daemon_sets: dict[tuple[str, str], Obj] = {}
        self._daemons: list[Pod] | None = None
        self._namespaces: dict[str, dict[str, str]] = {}
        self._claims: dict[str, ClaimRecord] = {}
        #: NodePools and EC2NodeClasses by kind and name: their resourceVersion (what a relist compares against)
        self._watched: dict[str, dict[str, str]] = {objects.NODE_POOL.plural: {}, objects.EC2_NODE_CLASS.plural: {}}
        self._label_values: dict[str, Counter[str]] = {}
        self._used: dict[str, Vector] = {}  # provisioner → the capacity of its nodes not being deleted
        self._counts: Counter[str] = Counter()  # pool → how many nodes it runs, not being deleted
        self.running = RunningPods()
        self._listeners: list[Callable[[Change], None]] = []
        self.malformed: Counter[tuple[str, str]] = Counter()
        self.volumes = Volumes()
        self._volumes_listed: set[str] = set()  # the volume kinds (plural) listed at least once
        self._volumes_failing: dict[str, str] = {}  # a volume kind (plural) whose last list failed → why
        #: a pod with a claim was seen (`volumes_wanted`): what starts the volume kinds' informers
        self.wants_volumes = threading.Event()
        self.version = 0  # increases with every applied change
        #: increases with every change a plan made ahead cannot check for itself (:func:`reshapes`)
        self.structure_version = 0

    # --- feeding -------------------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[Change], None]) -> None:
        """Call `listener` with each change applied from now on (under the state's lock: it must only take note)."""
        with self.lock:
            self._listeners.append(listener)

    def apply(self, kind: Kind, event_type: str, obj: Obj) -> None:
        """Apply one watch event (ADDED, MODIFIED, DELETED; BOOKMARKs and other kinds are ignored)."""
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        with self.lock:
            try:
                if kind == objects.POD:
                    self._apply_pod(event_type, obj)
                elif kind == objects.NODE:
                    self._apply_node(event_type, obj)
                elif kind == objects.DAEMON_SET:
                    self._apply_daemon_set(event_type, obj)
                elif kind == objects.NAMESPACE:
                    self._apply_namespace(event_type, obj)
                elif kind == objects.NODE_CLAIM:
                    self._apply_claim(event_type, obj)
                elif kind in (objects.NODE_POOL, objects.EC2_NODE_CLASS):
                    self._apply_watched(kind, event_type, obj)
                elif kind in VOLUME_KINDS:
                    self._apply_volume(kind, event_type, obj)
            except (UnreadableObject, Malformed) as error:
                self.count_malformed(kind, str(error))

    def count_malformed(self, kind: Kind, reason: str) -> None:
        """Count (and log once per kind and reason) an object that could not be read, wherever it was met."""
        key = (kind.plural, reason)
        with self.lock:
            first = not self.malformed[key]
            self.malformed[key] += 1
        if first:
            log.warning("ignoring a malformed %s object (%s); its last good state stays", kind.kind, reason)

    def _notify(self, change: Change) -> None:
        self.version += 1
        if reshapes(change):
            self.structure_version += 1
        for listener in self._listeners:
            try:
                listener(change)
            except Exception:  # a listener's bug must not stop the state from following the cluster
                log.exception("a state listener failed on a %s change", change.kind)

    # --- volumes -------------------------------------------------------------------------------------------

    def _apply_volume(self, kind: Kind, event_type: str, obj: Obj) -> None:
        """One claim, PersistentVolume or StorageClass in or out of the index (O(1)); one of another shape is
        Malformed (counted, its last good reading stays)."""
        if event_type == "DELETED":
            name = objects.name(obj) if isinstance(obj, dict) else ""
            if kind == objects.PERSISTENT_VOLUME_CLAIM:
                self.volumes.drop_claim(objects.namespace(obj) or "default", name)
            elif kind == objects.PERSISTENT_VOLUME:
                self.volumes.drop_volume(name)
            else:
                self.volumes.drop_class(name)
        else:
            self.volumes.put(volume_object(kind, obj))
        self._notify(Change("volume", None, None))

    def _volumes_read_for(self, node: str | None) -> bool:
        """Whether a pod with a claim bound to `node` has its volumes read (O(1)): pending (provisioning), or on a
        node of ours or one not seen yet (disruption moves our nodes' pods; at start pods are listed before nodes)."""
        if not node:
            return True
        record = self._nodes.get(node)
        return record is None or record.ours

    def volumes_listed(self, kind: Kind) -> None:
        """A feed listed `kind` (a volume kind): its objects in the index are the cluster's."""
        with self.lock:
            self._volumes_listed.add(kind.plural)
            self._volumes_failing.pop(kind.plural, None)

    def volumes_failing(self, kind: Kind, why: str) -> None:
        """A feed's list of `kind` (a volume kind) failed: what the index holds of it cannot be trusted."""
        with self.lock:
            self._volumes_failing[kind.plural] = why

    def volumes_unavailable(self) -> str | None:
        """Why the volume index cannot be trusted (a kind not listed yet, or failing), None when it can."""
        with self.lock:
            for kind in VOLUME_KINDS:
                if kind.plural in self._volumes_failing:
                    return f"cannot list {kind.plural}: {self._volumes_failing[kind.plural]}"
                if kind.plural not in self._volumes_listed:
                    return f"{kind.plural} not listed yet"
            return None

    # --- pods ----------------------------------------------------------------------------------------------

    def _apply_pod(self, event_type: str, obj: Obj) -> None:
        if event_type == "DELETED":  # only the uid is read of a deleted pod (checked as a record would be)
            before = self._pods.get(pod_uid(obj))
            if before is None:
                return  # never known: nothing to undo
            self._unindex_pod(before, keep_scheduling=False)
            self._notify(Change("pod", before, None))
            return
        after = pod_record(obj)
        if not self.wants_volumes.is_set() and after.claims and self._volumes_read_for(after.node):
            self.wants_volumes.set()
        before = self._pods.get(after.uid)
        if before is not None:
            self._unindex_pod(before, keep_scheduling=_same_spec(before, after))
        self._pods[after.uid] = after
        self._uid_by_key[after.key] = after.uid
        self._index_pod(after)
        self._notify(Change("pod", before, after))

    def _unindex_pod(self, record: PodRecord, keep_scheduling: bool) -> None:
        uid = record.uid
        self._pods.pop(uid, None)
        if self._uid_by_key.get(record.key) == uid:
            del self._uid_by_key[record.key]
        self._pending.pop(uid, None)
        if record.live_on_node:
            on_node = self._by_node.get(record.node)
            if on_node is not None:
                on_node.pop(uid, None)
                if not on_node:
                    del self._by_node[record.node]
            pod = self._scheduling.get(uid)
            load = self._loads.get(record.node)
            if load is not None:
                load.change(pod if isinstance(pod, Pod) else None, record, -1)
                if not self._by_node.get(record.node):
                    del self._loads[record.node]
            self._existing.pop(record.node, None)
            self.running.remove(uid)
        if not keep_scheduling:
            self._scheduling.pop(uid, None)

    def _index_pod(self, record: PodRecord) -> None:
        uid = record.uid
        if record.live_on_node:
            self._by_node.setdefault(record.node, {})[uid] = None
            pod = self._scheduling_pod(record)
            self._loads.setdefault(record.node, _Load()).change(pod if isinstance(pod, Pod) else None, record, +1)
            if isinstance(pod, Pod):
                node = self._nodes.get(record.node)
                if node is not None:
                    self.running.add(ClusterPod(pod, record.node, node.labels))
            self._existing.pop(record.node, None)
        elif record.provisionable(self.unschedulable_only):
            self._pending[uid] = None

    def _scheduling_pod(self, record: PodRecord) -> Pod | PodSpecError:
        found = self._scheduling.get(record.uid)
        if found is None:
            try:
                found = self.shapes.pod(record.obj, daemon=record.daemon)
            except PodSpecError as error:
                found = error
            self._scheduling[record.uid] = found
        return found

    # --- nodes ---------------------------------------------------------------------------------------------

    def _apply_node(self, event_type: str, obj: Obj) -> None:
        record = node_record(obj)
        before = self._nodes.get(record.name)
        after: NodeRecord | None = None if event_type == "DELETED" else record
        if before is None and after is None:
            return
        if before is not None:
            self._count_labels(before.labels, -1)
            self._use(before, -1)
            if self._by_instance.get(before.instance_id) == before.name:
                del self._by_instance[before.instance_id]
        if after is not None:
            self._nodes[after.name] = after
            self._count_labels(after.labels, +1)
            self._use(after, +1)
            if after.instance_id:
                self._by_instance[after.instance_id] = after.name
        else:
            del self._nodes[record.name]
            self._marked.discard(record.name)  # a mark goes with its node (Karpenter's state node goes too)
        if after is not None and self._gone(after):
            self._deleting.add(record.name)
        else:
            self._deleting.discard(record.name)
        self._existing.pop(record.name, None)
        if before is None or after is None or before.labels != after.labels:
            self._refresh_running(record.name, after)
        self._notify(Change("node", before, after))

    def _gone(self, node: NodeRecord) -> bool:
        """Whether the node is being deleted: a deletion timestamp, or marked for deletion (v1.14.1's and
        v0.31.1's `StateNode.MarkedForDeletion`)."""
        return node.deleting or node.name in self._marked

    def mark_for_deletion(self, names: Iterable[str], marked: bool = True) -> None:
        """Mark the nodes as being deleted (`marked` False: no longer — a command abandoned), as Karpenter's
        `Cluster.MarkForDeletion` (`UnmarkForDeletion`) when a disruption command starts: from then on provisioning
        places their pods again and offers not their room, and they no longer count in their pool's use and node
        count (v1.14.1's `updateNodePoolResources`), before any deletion timestamp. A node the state does not show
        is not marked."""
        with self.lock:
            for name in sorted(set(names)):
                node = self._nodes.get(name)
                if node is None or (name in self._marked) == marked:
                    continue
                if marked:
                    self._use(node, -1)
                    self._marked.add(name)
                else:
                    self._marked.discard(name)
                    self._use(node, +1)
                if self._gone(node):
                    self._deleting.add(name)
                else:
                    self._deleting.discard(name)
                self._existing.pop(name, None)
                self._notify(Change("node", node, node))

    def marked_for_deletion(self, name: str) -> bool:
        """Whether the node is marked for deletion (:meth:`mark_for_deletion`)."""
        with self.lock:
            return name in self._marked

    def _use(self, node: NodeRecord, sign: int) -> None:
        provisioner = node.provisioner
        if provisioner is None or self._gone(node):
            return
        self._counts[provisioner] += sign
        if self._counts[provisioner] <= 0:
            del self._counts[provisioner]
        total = self._used.get(provisioner, ZERO)
        total = add(total, node.capacity) if sign > 0 else subtract(total, node.capacity)
        if any(total):
            self._used[provisioner] = total
        else:
            self._used.pop(provisioner, None)

    def _count_labels(self, labels: Mapping[str, str], sign: int) -> None:
        for key, value in labels.items():
            counts = self._label_values.setdefault(key, Counter())
            counts[value] += sign
            if counts[value] <= 0:
                del counts[value]
                if not counts:
                    del self._label_values[key]

    def _refresh_running(self, name: str, node: NodeRecord | None) -> None:
        """The topology entries of the node's pods follow its labels (or leave with it)."""
        for uid in self._by_node.get(name, ()):
            self.running.remove(uid)
            pod = self._scheduling.get(uid)
            if node is not None and isinstance(pod, Pod):
                self.running.add(ClusterPod(pod, name, node.labels))

    # --- DaemonSets and namespaces -------------------------------------------------------------------------

    def _apply_daemon_set(self, event_type: str, obj: Obj) -> None:
        if not isinstance(obj, dict) or not objects.name(obj):
            raise UnreadableObject("metadata.name is missing")
        key = (objects.namespace(obj) or "default", objects.name(obj))
        if event_type == "DELETED":
            self._daemon_sets.pop(key, None)
        else:
            self._daemon_sets[key] = obj
        self._daemons = None
        self._existing.clear()  # what DaemonSets still have to run on each node changed
        self._notify(Change("daemonset", None, None))

    def _apply_namespace(self, event_type: str, obj: Obj) -> None:
        if not isinstance(obj, dict) or not objects.name(obj):
            raise UnreadableObject("metadata.name is missing")
        if event_type == "DELETED":
            self._namespaces.pop(objects.name(obj), None)
        else:
            self._namespaces[objects.name(obj)] = objects.labels(obj)
        self._notify(Change("namespace", None, None))

    def _apply_watched(self, kind: Kind, event_type: str, obj: Obj) -> None:
        """A NodePool or EC2NodeClass changed: only its name and resourceVersion are kept (its readiness is read from
        the cluster when written: `claims.nodepoolstatus`); listeners are told which one, unless a relist brought
        the same version again. One whose spec is not an object is malformed (counted, logged once, skipped)."""
        name = objects.name(obj) if isinstance(obj, dict) else ""
        if not isinstance(name, str) or not name:
            raise UnreadableObject("metadata.name is missing")
        if event_type != "DELETED" and not isinstance(obj.get("spec", {}), dict):
            raise UnreadableObject("spec is not an object")
        known = self._watched[kind.plural]
        version = objects.resource_version(obj)
        if event_type == "DELETED":
            if known.pop(name, None) is None:
                return
        elif version and known.get(name) == version:
            return
        else:
            known[name] = version
        self._notify(Change("nodepool" if kind == objects.NODE_POOL else "ec2nodeclass", None, None, name))

    def _apply_claim(self, event_type: str, obj: Obj) -> None:
        record = claim_record(obj)
        before = self._claims.get(record.name)
        after = None if event_type == "DELETED" else record
        if before is not None and after is not None and objects.resource_version(before.obj) and (
            objects.resource_version(before.obj) == objects.resource_version(after.obj)
        ):
            self._claims[record.name] = after  # a relist's copy of what is held: nothing changed
            return
        if after is None:
            if before is None:
                return
            del self._claims[record.name]
        else:
            self._claims[record.name] = after
        self._notify(Change("nodeclaim", before, after))

    # --- reading -------------------------------------------------------------------------------------------

    def keys_of(self, kind: Kind) -> list[tuple[str | None, str]]:
        """(namespace, name) of the DaemonSets, namespaces or NodeClaims held (what a relist compares against)."""
        with self.lock:
            if kind == objects.DAEMON_SET:
                return [(namespace, name) for namespace, name in self._daemon_sets]
            if kind == objects.NAMESPACE:
                return [(None, name) for name in self._namespaces]
            if kind == objects.NODE_CLAIM:
                return [(None, name) for name in self._claims]
            if kind.plural in self._watched:
                return [(None, name) for name in self._watched[kind.plural]]
            if kind == objects.PERSISTENT_VOLUME_CLAIM:
                return [(namespace, name) for namespace, name in self.volumes.claims]
            if kind == objects.PERSISTENT_VOLUME:
                return [(None, name) for name in self.volumes.volumes]
            if kind == objects.STORAGE_CLASS:
                return [(None, name) for name in self.volumes.classes]
            return []

    def claim(self, name: str) -> ClaimRecord | None:
        """The NodeClaim of that name, as last read (None: none)."""
        with self.lock:
            return self._claims.get(name)

    def claims(self) -> list[ClaimRecord]:
        """Every NodeClaim held, by name."""
        with self.lock:
            return [self._claims[name] for name in sorted(self._claims)]

    def pod(self, uid: str) -> PodRecord | None:
        """The record of the pod of that uid, None when there is none."""
        with self.lock:
            return self._pods.get(uid)

    def pods(self) -> list[PodRecord]:
        """Every pod (a list of the records, not copies of the objects)."""
        with self.lock:
            return list(self._pods.values())

    def pods_on(self, node: str) -> list[PodRecord]:
        """The live pods bound to `node` (DaemonSets' included), by namespace and name."""
        with self.lock:
            found = [self._pods[uid] for uid in self._by_node.get(node, ())]
        return sorted(found, key=lambda p: (p.namespace, p.name))

    def workload_pods_on(self, node: str) -> int:
        """How many live pods other than DaemonSets' the node runs."""
        with self.lock:
            load = self._loads.get(node)
            return load.workload_pods if load is not None else 0

    def node(self, name: str) -> NodeRecord | None:
        """The record of the Node of that name, None when there is none."""
        with self.lock:
            return self._nodes.get(name)

    def nodes(self) -> list[NodeRecord]:
        """Every node, by name."""
        with self.lock:
            return [self._nodes[name] for name in sorted(self._nodes)]

    def deleting_nodes(self) -> list[NodeRecord]:
        """The nodes being deleted (a deletion timestamp, or marked for deletion), by name — from an index, not a
        scan of every node."""
        with self.lock:
            return [self._nodes[name] for name in sorted(self._deleting)]

    def node_names(self) -> list[str]:
        """The names of the nodes, sorted."""
        with self.lock:
            return sorted(self._nodes)

    def node_of_instance(self, instance_id: str) -> NodeRecord | None:
        """The record of the Node of that instance id, None when there is none."""
        with self.lock:
            name = self._by_instance.get(instance_id)
            return self._nodes.get(name) if name is not None else None

    def pending(self) -> list[PodRecord]:
        """The provisionable pods, by creation time, then namespace and name (Karpenter's queue ties)."""
        with self.lock:
            found = [self._pods[uid] for uid in self._pending]
        return sorted(found, key=lambda p: (p.created, p.namespace, p.name))

    def is_pending(self, uid: str) -> bool:
        """Whether the pod of that uid is one the controller provisions for."""
        with self.lock:
            return uid in self._pending

    def scheduling_pod(self, record: PodRecord, order: int = 0) -> Pod:
        """The scheduler's pod for a record (raises PodSpecError for a spec it cannot read)."""
        with self.lock:
            found = self._scheduling_pod(record)
        if isinstance(found, PodSpecError):
            raise found
        if order == 0:
            return found
        return Pod(found.name, found.shape, owner=found.owner, order=order, daemon=found.daemon, uid=found.uid)

    def daemons(self) -> list[Pod]:
        """One pod per DaemonSet whose pod template the scheduler can read."""
        with self.lock:
            if self._daemons is None:
                found = []
                for _, obj in sorted(self._daemon_sets.items()):
                    try:
                        found.append(self.shapes.daemon_pod(obj))
                    except PodSpecError:
                        continue
                self._daemons = found
            return list(self._daemons)

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """The labels of every namespace, by name (what namespace selectors match)."""
        with self.lock:
            return dict(self._namespaces)

    def label_values(self, key: str) -> Collection[str]:
        """The values the nodes carry for a label key (topology domains of the existing nodes)."""
        with self.lock:
            return tuple(self._label_values.get(key, ()))

    def running_view(self) -> LockedRunningPods:
        """The running pods for topology, safe to read from another thread while the state changes."""
        return LockedRunningPods(self.running, self.lock)

    def used(self) -> dict[str, Vector]:
        """By provisioner, the capacity of its nodes not being deleted (what counts against its limits)."""
        with self.lock:
            return dict(self._used)

    def node_counts(self) -> dict[str, int]:
        """By pool, how many of its nodes are not being deleted (what a NodePool's `limits.nodes` counts)."""
        with self.lock:
            return dict(self._counts)

    def existing(self, name: str, *, marked: bool = False) -> ExistingNode | None:
        """The scheduler's view of a node that is not being deleted (None: unknown or being deleted); `marked`: a
        node only marked for deletion too (what runs on it, for a measurement of the fleet)."""
        with self.lock:
            node = self._nodes.get(name)
            if node is None or node.deleting or (not marked and name in self._marked):
                return None
            found = self._existing.get(name)
            if found is None:
                found = self._existing[name] = self._build_existing(node)
            return found

    def launching(self, node: NodeRecord) -> ExistingNode:
        """The scheduler's view of a node being launched, which the state may not show yet: with whatever pods the
        state already shows bound to its name (a binding's watch event may come before the Node's)."""
        with self.lock:
            return self._build_existing(node)

    def existing_nodes(self, *, marked: bool = False) -> Iterator[ExistingNode]:
        """The scheduler's view of every node not being deleted, by name (`marked`: as :meth:`existing`)."""
        for name in self.node_names():
            found = self.existing(name, marked=marked)
            if found is not None:
                yield found

    def _build_existing(self, node: NodeRecord) -> ExistingNode:
        load = self._loads.get(node.name) or _Load()
        return existing_node(
            node, load.requested, load.extended, [p for ports in load.host_ports.values() for p in ports],
            frozenset(load.daemon_sets), self.daemons(),
        )


class LockedRunningPods:
    """The state's running pods, each question asked under the state's lock: a scheduling run on another thread
    reads them while the state follows the cluster."""

    def __init__(self, running: PodsForTopology, lock: threading.RLock) -> None:
        self.running = running
        self.lock = lock

    def anti_affine(self) -> list[ClusterPod]:
        """The running pods' anti-affine ones, read under the state's lock."""
        with self.lock:
            return self.running.anti_affine()

    def candidates(
        self, scope: NamespaceScope, selector: LabelSelector, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> list[ClusterPod]:
        """The pods a topology group may select, read under the state's lock."""
        with self.lock:
            return self.running.candidates(scope, selector, namespace_labels)


def existing_node(
    node: NodeRecord,
    requested: Vector,
    extended: Mapping[str, int],
    host_ports: list[HostPort],
    daemon_sets_present: frozenset[tuple[str, str]],
    daemons: list[Pod],
) -> ExistingNode:
    """The scheduler's view of a node: what its pods request, and what the DaemonSets that will run there but have
    no pod there yet will."""
    taints = node_info.scheduling_taints(node.obj, node.initialized)
    if node.unschedulable and UNSCHEDULABLE_TAINT not in taints:  # cordoned: the taint the node controller adds
        taints = (*taints, UNSCHEDULABLE_TAINT)
    requirements = Requirements.from_labels(node.labels)
    remaining = ZERO
    for daemon in daemons:
        if (daemon.namespace, daemon.name) in daemon_sets_present:
            continue
        attempt = daemon.shape.attempts(False)[0]
        if taints and untolerated(taints, attempt.tolerations):
            continue
        if requirements.admits(attempt.requirements, NOTHING_UNDEFINED):
            remaining = add(remaining, daemon.requests)
    return ExistingNode(
        name=node.name,
        labels=node.labels,
        taints=taints,
        allocatable=node.allocatable,
        requested=requested,
        extended_allocatable=node.extended_allocatable,
        extended_requested=dict(extended),
        host_ports=list(host_ports),
        template=node.provisioner,
        initialized=node.initialized,
        capacity=node.capacity,
        daemon_remaining=remaining,
    )


def _same_spec(before: PodRecord, after: PodRecord | None) -> bool:
    """The scheduler's pod of `before` still holds for `after` (same node, spec and labels)."""
    return (
        after is not None
        and before.node == after.node
        and before.labels == after.labels
        and before.obj.get("spec") == after.obj.get("spec")
    )


__all__ = ["Change", "ClusterState", "LockedRunningPods", "existing_node", "reshapes"]
