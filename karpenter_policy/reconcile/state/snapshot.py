"""The scheduling inputs of one pass, from what the cluster shows and the launches still in flight.

* pending pods: the provisionable ones (`pods.is_provisionable`), less those planned onto an in-flight node;
* existing nodes: every Node that is not being deleted (ours or not), plus the in-flight nodes the cluster does
  not show yet; each with what its bound pods request, the planned pods of an in-flight launch whose binding the
  cluster does not show yet, and the DaemonSet pods that will run there but are not there yet;
* DaemonSets, one pod each (their overhead on new nodes), and the bound pods with their node's labels (what
  topology spread and pod affinity count).

Pods whose spec the scheduler cannot read are set aside with the reason (an Event says why).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import Obj
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.taints import Taint, untolerated
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.reconcile.state.inflight import InFlight
from karpenter_policy.reconcile.state.view import Snapshot
from karpenter_policy.scheduling import ClusterPod, ExistingNode, Pod
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.vectors import ZERO, Vector, add

NOTHING_UNDEFINED: frozenset[str] = frozenset()


@dataclass(slots=True)
class ClusterState:
    pending: list[Pod] = field(default_factory=list)
    pending_objects: dict[str, Obj] = field(default_factory=dict)  # uid → pod object
    unreadable: list[tuple[Obj, str]] = field(default_factory=list)  # provisionable pods with a bad spec, why
    existing: list[ExistingNode] = field(default_factory=list)
    daemons: list[Pod] = field(default_factory=list)
    cluster_pods: list[ClusterPod] = field(default_factory=list)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    nodes: dict[str, Obj] = field(default_factory=dict)  # by name, as the cluster shows them
    bound_uids: set[str] = field(default_factory=set)
    live_uids: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _NodeLoad:
    requested: Vector = ZERO
    extended: dict[str, int] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    daemon_sets: set[tuple[str, str]] = field(default_factory=set)  # (namespace, DaemonSet) with a pod here

    def add(self, pod: Pod) -> None:
        self.requested = add(self.requested, pod.requests)
        for name, count in pod.shape.extended.items():
            self.extended[name] = self.extended.get(name, 0) + count
        self.pods.append(pod)


def _daemon_fits(daemon: Pod, labels: Requirements, taints: tuple[Taint, ...]) -> bool:
    attempt = daemon.shape.attempts(False)[0]
    if taints and untolerated(taints, attempt.tolerations):
        return False
    return labels.admits(attempt.requirements, NOTHING_UNDEFINED)


def _existing(node: Obj, load: _NodeLoad, daemons: list[Pod]) -> ExistingNode:
    initialized = node_info.is_initialized(node)
    taints = node_info.scheduling_taints(node, initialized)
    labels = objects.labels(node)
    status = node.get("status") or {}
    allocatable, extended_allocatable = node_info.resource_vector(status.get("allocatable"))
    capacity, _ = node_info.resource_vector(status.get("capacity") or status.get("allocatable"))
    requirements = Requirements.from_labels(labels)
    remaining = ZERO
    for daemon in daemons:
        if (daemon.namespace, daemon.name) not in load.daemon_sets and _daemon_fits(daemon, requirements, taints):
            remaining = add(remaining, daemon.requests)
    ports = [port for pod in load.pods for port in pod.shape.host_ports]
    return ExistingNode(
        name=objects.name(node),
        labels=labels,
        taints=taints,
        allocatable=allocatable,
        requested=load.requested,
        extended_allocatable=extended_allocatable,
        extended_requested=dict(load.extended),
        host_ports=ports,
        template=node_info.template_of(node),
        initialized=initialized,
        capacity=capacity,
        daemon_remaining=remaining,
    )


def build_state(
    snapshot: Snapshot,
    inflight: InFlight,
    shapes: pod_info.ShapeCache,
    unschedulable_only: bool,
    assigned: Mapping[str, str] | None = None,
) -> ClusterState:
    """`assigned`: pods (by uid) this pass already placed on existing nodes, which the cluster may not show yet."""
    state = ClusterState()
    assigned = assigned or {}
    state.nodes = {objects.name(n): n for n in snapshot.nodes}
    state.namespace_labels = {objects.name(ns): objects.labels(ns) for ns in snapshot.namespaces}
    planned = inflight.planned()
    loads: dict[str, _NodeLoad] = defaultdict(_NodeLoad)
    provisionable: list[Obj] = []
    for obj in snapshot.pods:
        uid = objects.uid(obj)
        if pod_info.is_terminal(obj):
            continue
        state.live_uids.add(uid)
        bound_to = pod_info.node_name(obj) or assigned.get(uid, "")
        if bound_to:
            state.bound_uids.add(uid)
            try:
                pod = shapes.pod(obj, daemon=pod_info.is_daemon_pod(obj))
            except PodSpecError:
                continue  # kube-scheduler placed it; what it asks cannot be counted
            load = loads[bound_to]
            load.add(pod)
            owner = pod_info.controller_of(obj)
            if owner is not None and owner[0] == pod_info.DAEMON_SET:
                load.daemon_sets.add((pod.namespace, owner[1]))
            node = state.nodes.get(bound_to)
            if node is not None:
                state.cluster_pods.append(ClusterPod(pod, bound_to, objects.labels(node)))
            continue
        entry = planned.get(uid)
        if entry is not None:  # planned onto a launch in flight: counted there, not pending
            loads[entry.name].add(entry.pods[uid])
            continue
        if pod_info.is_provisionable(obj, unschedulable_only):
            provisionable.append(obj)
    for order, obj in enumerate(pod_info.creation_order(provisionable)):
        try:
            pod = shapes.pod(obj, order=order)
        except PodSpecError as error:
            state.unreadable.append((obj, f"{error.message} (at spec.{'.'.join(map(str, error.path))})"))
            continue
        state.pending.append(pod)
        state.pending_objects[pod.uid] = obj
    for daemon_set in snapshot.daemon_sets:
        try:
            state.daemons.append(shapes.daemon_pod(daemon_set))
        except PodSpecError:
            continue
    shown = set(state.nodes)
    for name, node in sorted(state.nodes.items()):
        if not objects.is_deleting(node):
            state.existing.append(_existing(node, loads[name], state.daemons))
    for entry in inflight:
        if entry.name not in shown:
            state.existing.append(_existing(entry.node, loads[entry.name], state.daemons))
    return state


__all__ = ["ClusterState", "build_state"]
