"""The cluster as one disruption decision sees it: its nodes taken from the state at the decision's start, their
pods read when the decision first asks, while the state goes on changing.

A decision runs on its own thread for up to its budget; the state keeps following the cluster meanwhile. The
nodes (immutable records, shared) and the scheduler's view of each are taken under the state's lock in one go —
O(nodes) references, no copies; a node's pods are read when the decision looks at that node, and every pod only
when a PodDisruptionBudget must be counted (a decision that moves nothing at 100,000 pods reads few of them); the
running pods for topology are read through :meth:`ClusterState.running_view`, which takes the lock for each
question. A decision that acts is validated again later, so the small skew between what it read first and last
changes nothing it does.

A pod with a claim — a candidate's or a pending one — is simulated with its volumes, as Karpenter's disruption
simulation runs the provisioner's scheduler on them (v0.31.1 `VolumeTopology.Inject`, v1.14.1
`getVolumeTopologyRequirements`): its PersistentVolume's zone, or its unbound claim's StorageClass topology, in its
required terms (:meth:`DisruptionView.scheduling_pod`, the provisioner's `inputs.volumed`, on the state's volume
index). While the volume kinds cannot be read (:meth:`DisruptionView.volumes_unavailable`), such a pod's volumes
are unknown, never "none": the decider does not disrupt its node.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile.provisioning.inputs import volumed
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord
from karpenter_policy.scheduling import ExistingNode, Pod
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.running import PodsForTopology
from karpenter_policy.scheduling.vectors import Vector, add, fits


@dataclass(slots=True)
class DisruptionView:
    """See the module docstring."""

    state: ClusterState
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    existing: dict[str, ExistingNode] = field(default_factory=dict)  # the nodes not being deleted
    deleting: frozenset[str] = frozenset()  # the nodes with a deletion timestamp
    running: PodsForTopology | None = None
    daemons: list[Pod] = field(default_factory=list)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    used: dict[str, Vector] = field(default_factory=dict)
    label_values: dict[str, Collection[str]] = field(default_factory=dict)
    _pods_on: dict[str, list[PodRecord]] = field(default_factory=dict)
    _pods: list[Obj] | None = None
    _room: dict[Vector, list[tuple[str, ExistingNode]]] = field(default_factory=dict)
    #: the pods a decision's simulations place again off the nodes being deleted (`Decider.deleting_pods`): the
    #: same nodes, PodDisruptionBudgets and time at every simulation of one decision, so worked out once
    deleting_pods: dict[tuple[frozenset[str], int, object], list[Pod]] = field(default_factory=dict)

    def with_room(self, smallest: Vector) -> list[tuple[str, ExistingNode]]:
        """The existing nodes (name, node), in :attr:`existing`'s order, with room for a pod of `smallest`
        requests: worked out once per decision for each size, not once per simulation (a decision's simulations
        ask of a few sizes, their pods' workloads', over every node)."""
        found = self._room.get(smallest)
        if found is None:
            found = self._room[smallest] = [
                (name, node) for name, node in self.existing.items()
                if fits(add(node.requests, smallest), node.allocatable)
            ]
        return found

    def pods_on(self, node: str) -> list[PodRecord]:
        """The live pods of a node (read from the state the first time a decision asks)."""
        found = self._pods_on.get(node)
        if found is None:
            found = self._pods_on[node] = self.state.pods_on(node)
        return found

    def scheduling_pod(self, record: PodRecord) -> Pod | None:
        """The scheduler's pod of a record, with its volumes' topology when it has a claim (None: a spec it cannot
        read). The caller checks :meth:`volumes_unavailable` first for a pod with a claim."""
        try:
            pod = self.state.scheduling_pod(record)
        except PodSpecError:
            return None
        return volumed_pod(self.state, record, pod)

    def volumes_unavailable(self) -> str | None:
        """Why the state's volume index cannot be trusted now (None: it can)."""
        return self.state.volumes_unavailable()

    @property
    def pods(self) -> list[Obj]:
        """Every pod object (what PodDisruptionBudgets count; read once, only when there is a budget)."""
        if self._pods is None:
            self._pods = [record.obj for record in self.state.pods()]
        return self._pods

    def domains(self, key: str) -> Collection[str]:
        return self.label_values.get(key, ())


def volumed_pod(state: ClusterState, record: PodRecord, pod: Pod, pending: bool = False) -> Pod:
    """`pod` with its volumes' topology when it has a claim. A running pod gets its volumes' requirements only
    (v1.14.1's `ValidatePersistentVolumeClaims` filters the pending pods alone; an object the index lacks adds
    none, as Karpenter logs the lookup's error and goes on); a `pending` one also v1.14.1's refusal."""
    if not record.claims:
        return pod
    with state.lock:
        return volumed(pod, record, state.volumes, ignore=pending)[0]


def disruption_view(state: ClusterState) -> DisruptionView:
    """The view of one decision (see the module docstring): O(nodes) at the start; a node's pods, and every pod
    only when a PodDisruptionBudget needs them, when first asked."""
    view = DisruptionView(state)
    with state.lock:
        for record in state.nodes():
            view.nodes[record.name] = record
            existing = state.existing(record.name)
            if existing is not None:
                view.existing[record.name] = existing
        view.deleting = frozenset(name for name, record in view.nodes.items() if record.deleting)
        view.running = state.running_view()
        view.daemons = state.daemons()
        view.namespace_labels = state.namespace_labels()
        view.used = state.used()
        keys = {key for record in view.nodes.values() for key in record.labels}
        view.label_values = {key: state.label_values(key) for key in keys}
    return view


__all__ = ["DisruptionView", "disruption_view", "volumed_pod"]
