"""The cluster as one disruption decision sees it: taken from the state at the decision's start, then read while
the state goes on changing.

A decision runs on its own thread for up to its budget; the state keeps following the cluster meanwhile. What the
decision reads is taken under the state's lock in one go — the records (immutable, shared), the scheduler's view of
every node, the pods of each node — so the decision sees one consistent cluster; the running pods for topology
are read through :meth:`ClusterState.running_view`, which takes the lock for each question. Building the view
costs O(nodes + pods) references, no copies of objects.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from karpenter_policy.kube.objects import Obj
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.records import NodeRecord, PodRecord
from karpenter_policy.scheduling import ExistingNode, Pod
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.running import PodsForTopology
from karpenter_policy.scheduling.vectors import Vector


@dataclass(slots=True)
class DisruptionView:
    """See the module docstring."""

    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    pods_on: dict[str, list[PodRecord]] = field(default_factory=dict)  # node → its live pods
    scheduling: dict[str, Pod] = field(default_factory=dict)  # uid → the scheduler's pod (readable ones)
    existing: dict[str, ExistingNode] = field(default_factory=dict)  # the nodes not being deleted
    running: PodsForTopology | None = None
    daemons: list[Pod] = field(default_factory=list)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    used: dict[str, Vector] = field(default_factory=dict)
    pods: list[Obj] = field(default_factory=list)  # every pod object (PodDisruptionBudgets count them)
    label_values: dict[str, Collection[str]] = field(default_factory=dict)

    def domains(self, key: str) -> Collection[str]:
        return self.label_values.get(key, ())


def disruption_view(state: ClusterState) -> DisruptionView:
    """The view of one decision (see the module docstring)."""
    view = DisruptionView()
    with state.lock:
        for record in state.nodes():
            view.nodes[record.name] = record
            existing = state.existing(record.name)
            if existing is not None:
                view.existing[record.name] = existing
        for pod in state.pods():
            view.pods.append(pod.obj)
            if not pod.live_on_node:
                continue
            view.pods_on.setdefault(pod.node, []).append(pod)
            try:
                view.scheduling[pod.uid] = state.scheduling_pod(pod)
            except PodSpecError:
                continue
        for pods in view.pods_on.values():
            pods.sort(key=lambda p: (p.namespace, p.name))
        view.running = state.running_view()
        view.daemons = state.daemons()
        view.namespace_labels = state.namespace_labels()
        view.used = state.used()
        keys = {key for record in view.nodes.values() for key in record.labels}
        view.label_values = {key: state.label_values(key) for key in keys}
    return view


__all__ = ["DisruptionView", "disruption_view"]
