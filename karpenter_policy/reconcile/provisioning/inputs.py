"""What one scheduling run of provisioning reads: the pending pods and the capacity they may join, from the state.

* **pending pods**: the state's provisionable pods, less those planned onto a launch in flight and those this
  pass already placed on existing nodes (`assigned`), in Karpenter's queue order (creation time); pods whose spec
  the scheduler cannot read are set aside with the reason (an Event says why); a pod with a claim carries its
  volumes (`volumed`): their topology in its required terms (v1.14.1's alternatives beside them when they differ),
  the reason Karpenter v0.31.1 leaves it out in its Provisioners' refusal and the one v1.14.1 ignores it for in its
  NodePools' refusal (`model.volumes`, `scheduling.volumes.with_volumes`: what `check --workloads` applies, on the
  cluster's claims, volumes and classes, where an object the cluster lacks is missing); while those cannot be
  read (not listed yet, a list forbidden or failing) the pod is held (`held`), never read as having no claims;
* **pods of nodes being deleted** (`moving`): the pods a node with a deletion timestamp, or marked for deletion (a
  disruption command's from its start: `ClusterState.mark_for_deletion`), will see evicted, placed
  again beside the pending pods so that room is there for them (Karpenter's provisioner `Schedule` adds
  `nodes.Deleting()`'s pods: v1.14.1's `CurrentlyReschedulablePods` on a NodePool's node, v0.31.1's `Pods` —
  `GetNodePods` — on a Provisioner's; `state.rescheduled`); never bound nor nominated (they run until drained);
  the node's own room is not offered (it is no existing node: `ClusterState.existing_nodes`), and its pods count
  in no topology domain where they run — exactly those pods, by uid: the node's other pods (a DaemonSet's, one
  `do-not-disrupt` holds) still count (v1.14.1's topology `excludedPods`: `scheduling.running.WithoutPods`);
* **existing nodes**: only those with room for the smallest pod to place (Karpenter's scheduler tries every node
  for every pod; at 5,000 full nodes that is millions of refusals) — plus the nodes being launched, with the pods
  planned onto them; what every node of a provisioner holds still counts against its limits (`used`; how many
  nodes it runs, `node_counts`, against a NodePool's `limits.nodes`) and every node's labels are still topology
  domains (`node_domains`);
* DaemonSets (their overhead), the running pods indexed for topology, the namespaces' labels.

Built in O(pending pods + nodes) without copying an object; the `version` says when two builds saw the same
cluster; `structure` and `nodes` (the names of every node offered or held back) are what a plan made ahead
compares besides the pods and nodes themselves (`ahead.py`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from karpenter_policy.kube.objects import Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.model.volumes import Volumes, ignored_v1, pod_volumes, requirements_of
from karpenter_policy.model.volumes import ignored_v031 as ignored_v031_of
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.inflight import InFlight
from karpenter_policy.reconcile.state.records import PodRecord, node_record
from karpenter_policy.reconcile.state.rescheduled import rescheduled
from karpenter_policy.scheduling import ExistingNode, Pod, Scheduler, SchedulerOptions
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.running import PodsForTopology, WithoutPods
from karpenter_policy.scheduling.templates import NodeClaimTemplate
from karpenter_policy.scheduling.vectors import ZERO, Vector, add, fits
from karpenter_policy.scheduling.volumes import with_volumes


@dataclass(slots=True)
class SchedulingInputs:
    """See the module docstring."""

    pending: list[Pod] = field(default_factory=list)
    #: the pods of nodes being deleted, placed again beside the pending ones (never bound: they still run)
    moving: list[Pod] = field(default_factory=list)
    records: dict[str, PodRecord] = field(default_factory=dict)  # uid → the pending pod's record
    unreadable: list[tuple[PodRecord, str]] = field(default_factory=list)
    #: pods with a claim held while the volume kinds cannot be read: (record, why)
    held: list[tuple[PodRecord, str]] = field(default_factory=list)
    #: uid → why Karpenter v1.14.1 ignores the pod for its volumes (`model.volumes.ignored_v1`)
    volume_ignored: dict[str, str] = field(default_factory=dict)
    existing: list[ExistingNode] = field(default_factory=list)
    daemons: list[Pod] = field(default_factory=list)
    running: PodsForTopology | None = None
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    used: dict[str, Vector] = field(default_factory=dict)
    node_counts: dict[str, int] = field(default_factory=dict)  # by pool: its nodes, launches in flight included
    state: ClusterState | None = None
    version: object = None
    structure: object = None  # what a plan made ahead cannot check itself (`ClusterState.structure_version`)
    nodes: frozenset[str] = frozenset()  # every node the state shows (not being deleted) and every launch in flight

    def scheduler(self, templates: list[NodeClaimTemplate], options: SchedulerOptions) -> Scheduler:
        state = self.state
        return Scheduler(
            templates,
            self.existing,
            self.daemons,
            self.running or (),
            self.namespace_labels,
            options,
            used=self.used,
            node_domains=state.label_values if state is not None else None,
            node_counts=self.node_counts,
        )


def scheduling_inputs(
    state: ClusterState,
    inflight: InFlight,
    assigned: Mapping[str, tuple[str, Pod]] | None = None,
    only_room: bool = True,
    pdbs: Sequence[Obj] = (),
    now: dt.datetime | None = None,
) -> SchedulingInputs:
    """The inputs of one scheduling run (see the module docstring). `assigned`: pod uid → (node, pod) placed on
    existing nodes this pass, which the state may not show yet. `only_room` False offers every node. `pdbs` (read
    by the caller, outside the state's lock, only when a NodePool's node being deleted has pods:
    :func:`budgets_needed`) and `now` tell which pods of such a node are placed again."""
    assigned = assigned or {}
    inputs = SchedulingInputs(state=state)
    with state.lock:
        planned = inflight.planned()
        overlay: dict[str, list[Pod]] = {}
        for uid, entry in planned.items():
            known = state.pod(uid)
            if known is not None and not (known.node or known.terminal):  # planned, not bound yet: counted there
                overlay.setdefault(entry.name, []).append(entry.pods[uid])
        for uid, (name, pod) in assigned.items():
            known = state.pod(uid)
            if known is None or not known.node:
                overlay.setdefault(name, []).append(pod)
        order = 0
        for record in state.pending():
            if record.uid in planned or record.uid in assigned:
                continue
            try:
                pod = state.scheduling_pod(record, order=order)
            except PodSpecError as error:
                inputs.unreadable.append((record, f"{error.message} (at spec.{'.'.join(map(str, error.path))})"))
                continue
            if record.claims:
                unavailable = state.volumes_unavailable()
                if unavailable is not None:
                    inputs.held.append((record, unavailable))
                    continue
                pod, ignored = volumed(pod, record, state.volumes)
                if ignored is not None:
                    inputs.volume_ignored[record.uid] = ignored
            order += 1
            inputs.pending.append(pod)
            inputs.records[record.uid] = record
        inputs.moving = _moving(state, pdbs, now, order)
        inputs.daemons = state.daemons()
        # the pods placed again count in no topology domain where they run now, the other pods of their nodes (a
        # DaemonSet's, a do-not-disrupt one's) still do: v1.14.1's topology leaves out exactly the pods it
        # schedules, by uid (`excludedPods`)
        moving = frozenset(pod.uid for pod in inputs.moving)
        inputs.running = WithoutPods(state.running_view(), moving) if moving else state.running_view()
        inputs.namespace_labels = state.namespace_labels()
        inputs.used = state.used()
        inputs.node_counts = state.node_counts()
        shown = set()
        smallest = _smallest([*inputs.pending, *inputs.moving])
        for node in state.existing_nodes():
            shown.add(node.name)
            extra = overlay.get(node.name)
            if extra:
                node = _with_pods(node, extra)
            if not only_room or extra or _has_room(node, smallest):
                inputs.existing.append(node)
        launching_names = []
        for entry in inflight:
            if entry.name in shown or state.node(entry.name) is not None:
                continue
            launching_names.append(entry.name)
            launching = node_record(entry.node)
            node = _with_pods(state.launching(launching), overlay.get(entry.name, []))
            inputs.existing.append(node)
            if launching.provisioner is not None:
                used = inputs.used.get(launching.provisioner, ZERO)
                inputs.used[launching.provisioner] = add(used, launching.capacity)
                inputs.node_counts[launching.provisioner] = inputs.node_counts.get(launching.provisioner, 0) + 1
        placed = tuple(sorted(assigned))
        inputs.version = _version(state, inflight, placed)
        inputs.structure = (state.structure_version, placed)
        inputs.nodes = frozenset(shown.union(launching_names))
    return inputs


def budgets_needed(state: ClusterState) -> bool:
    """Whether a scheduling run needs the cluster's PodDisruptionBudgets: a NodePool's node being deleted runs
    pods other than DaemonSets' (v1.14.1 leaves out of its simulation those a budget never lets go)."""
    return any(wk.NODEPOOL in node.labels and state.workload_pods_on(node.name) for node in state.deleting_nodes())


def _moving(state: ClusterState, pdbs: Sequence[Obj], now: dt.datetime | None, order: int) -> list[Pod]:
    """The pods of the nodes being deleted a scheduling run places again (see the module docstring), in node order
    after the pending pods; one whose spec cannot be read, or whose volumes cannot be read, is left out (its
    successor is reported when it is pending)."""
    found: list[Pod] = []
    when = now or dt.datetime.now(dt.UTC)
    for node in state.deleting_nodes():
        if not state.workload_pods_on(node.name):
            continue
        for record in rescheduled(node, state.pods_on(node.name), pdbs, when):
            try:
                pod = state.scheduling_pod(record, order=order)
            except PodSpecError:
                continue
            if record.claims:
                if state.volumes_unavailable() is not None:
                    continue
                pod = volumed(pod, record, state.volumes, ignore=False)[0]
            order += 1
            found.append(pod)
    return found


def volumed(pod: Pod, record: PodRecord, volumes: Volumes, ignore: bool = True) -> tuple[Pod, str | None]:
    """The pod with its volumes applied (their topology as v0.31.1 and v1.14.1 read it, the refusals of both:
    `scheduling.volumes.with_volumes`), and why v1.14.1 ignores it (None: it does not). Neither version's refusal
    is looked at unless `ignore` (a pending pod's, not a running one's that disruption moves). The index is the
    cluster's: an object it lacks is missing."""
    spec = record.obj.get("spec")
    found = pod_volumes(spec if isinstance(spec, Mapping) else {}, record.name)
    ignored = ignored_v1(found, record.namespace, volumes, complete=True) if ignore else None
    ignored_v031 = ignored_v031_of(found, record.namespace, volumes, complete=True) if ignore else None
    wanted = requirements_of(found, record.namespace, volumes)
    alternatives, too_many = wanted.v1_reading()  # too many: a running pod keeps v0.31.1's reading, a pending one
    if ignore and too_many is not None:  # is refused on NodePools with why
        ignored = f"{ignored}; {too_many}" if ignored else too_many
    shape = with_volumes(pod.shape, wanted.combined, ignored, alternatives, ignored_v031)
    return (pod if shape == pod.shape else replace(pod, shape=shape)), ignored


def inputs_version(state: ClusterState, inflight: InFlight) -> object:
    """The `version` inputs built now, with nothing assigned, would have: equal to a build's when the cluster and
    the launches in flight are as that build saw them (read without building anything)."""
    with state.lock:
        return _version(state, inflight, ())


def _version(state: ClusterState, inflight: InFlight, placed: tuple[str, ...]) -> object:
    return (state.version, inflight.fingerprint(), placed)


def _smallest(pods: Collection[Pod]) -> Vector | None:
    smallest: Vector | None = None
    for pod in pods:
        smallest = pod.requests if smallest is None else tuple(map(min, smallest, pod.requests))
    return smallest


def _has_room(node: ExistingNode, smallest: Vector | None) -> bool:
    return smallest is None or fits(add(node.requests, smallest), node.allocatable)


def _with_pods(node: ExistingNode, pods: list[Pod]) -> ExistingNode:
    """The node with pods the state does not show on it yet (planned onto it, or placed this pass)."""
    if not pods:
        return node
    requested = node.requested
    extended = dict(node.extended_requested)
    for pod in pods:
        requested = add(requested, pod.requests)
        for name, count in pod.shape.extended.items():
            extended[name] = extended.get(name, 0) + count
    ports = [*node.host_ports, *(port for pod in pods for port in pod.shape.host_ports)]
    return replace(node, requested=requested, extended_requested=extended, host_ports=ports, pods=[])


__all__ = ["SchedulingInputs", "scheduling_inputs", "volumed"]
