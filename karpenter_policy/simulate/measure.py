"""What the simulated cluster shows at one moment: its pods by state and its nodes with their packing and price.

Utilisation is what the scheduler counts (the controller's own cluster state): the requests of the pods
bound to the node plus those of the DaemonSets that run there, over the node's allocatable — the figure of
`check --workloads`' capacity table. A node's price is the one of the offering it was launched on (the
controller's `LaunchedNode.price`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import pool_of_labels
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state import pods as pod_info
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import replace
from karpenter_policy.reconcile.state.pods import ShapeCache
from karpenter_policy.scheduling.pods import PodSpecError
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, Vector
from karpenter_policy.simulate.workloads import WORKLOAD_ANNOTATION

#: The packing share of the DaemonSets that run on a node.
DAEMON_SETS = "DaemonSets"


@dataclass(frozen=True, slots=True)
class Share:
    """What one workload (or the DaemonSets) takes of a node: millicores and bytes."""

    workload: str
    cpu: int
    memory: int
    pods: int


def placement_text(labels: Mapping[str, str]) -> str:
    """A node's placement group as the node table shows it: its id, then `/` and its partition (`?`: not said yet)
    when it has a partition label; "" outside a group."""
    group = labels.get(wk.PLACEMENT_GROUP_ID, "")
    if not group or wk.PLACEMENT_GROUP_PARTITION not in labels:
        return group
    return f"{group}/{labels[wk.PLACEMENT_GROUP_PARTITION] or '?'}"


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A node as the table and the report show it."""

    name: str
    provisioner: str
    instance_type: str
    zone: str
    capacity_type: str
    ready: bool
    pods: int
    cpu_requested: int  # millicores
    cpu_allocatable: int
    memory_requested: int  # bytes
    memory_allocatable: int
    price: float | None  # $/h; None: no price data
    shares: tuple[Share, ...] = ()
    #: its placement group's id and partition (`pg-…/2`; `pg-…/?` while EC2 has not said; "" outside a group)
    placement: str = ""

    @property
    def cpu(self) -> float:
        return self.cpu_requested / self.cpu_allocatable if self.cpu_allocatable else 0.0

    @property
    def memory(self) -> float:
        return self.memory_requested / self.memory_allocatable if self.memory_allocatable else 0.0


@dataclass(frozen=True, slots=True)
class Sample:
    """The cluster at virtual time `at`: pods waiting for a node, bound to a node that is not ready yet, running;
    nodes (and how many are ready); the fleet's $/h."""

    at: float
    pending: int
    starting: int
    running: int
    nodes: int
    ready_nodes: int
    cost: float


@dataclass(frozen=True, slots=True)
class Measurement:
    sample: Sample
    nodes: tuple[NodeRow, ...]


def _shares(pods: list[tuple[str, Vector]], daemons: Vector) -> tuple[Share, ...]:
    grouped: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for workload, requests in pods:
        entry = grouped[workload]
        entry[0] += requests[CPU_I]
        entry[1] += requests[MEMORY_I]
        entry[2] += 1
    shares = [Share(w, cpu, memory, count) for w, (cpu, memory, count) in sorted(grouped.items())]
    if daemons[CPU_I] or daemons[MEMORY_I]:
        shares.append(Share(DAEMON_SETS, daemons[CPU_I], daemons[MEMORY_I], 0))
    return tuple(shares)


def measure(cluster: Cluster, at: float, prices: Mapping[str, float | None], shapes: ShapeCache) -> Measurement:
    """The cluster at `at`; `prices`: node name → $/h of the offering it was launched on (None: no price data)."""
    listed = {kind: cluster.list(kind).items for kind in (objects.NODE, objects.POD, objects.DAEMON_SET)}
    state = ClusterState(shapes)
    for kind, items in listed.items():
        replace(state, kind, items)
    nodes = {objects.name(n): n for n in listed[objects.NODE]}
    ready = {name for name, node in nodes.items() if node_info.is_ready(node)}
    pending = starting = running = 0
    on_node: dict[str, list[tuple[str, Vector]]] = defaultdict(list)
    for pod in listed[objects.POD]:
        if pod_info.is_terminal(pod) or pod_info.is_daemon_pod(pod):
            continue
        node = pod_info.node_name(pod)
        if not node:
            pending += 1
            continue
        if node in ready and pod_info.phase(pod) == "Running":
            running += 1
        else:
            starting += 1
        workload = objects.annotations(pod).get(WORKLOAD_ANNOTATION) or pod_info.owner_text(pod) or objects.name(pod)
        try:
            requests = shapes.pod(pod).requests
        except PodSpecError:
            continue
        on_node[node].append((workload, requests))
    rows = []
    for existing in state.existing_nodes(marked=True):  # a command's nodes still run until deleted
        node_object = nodes.get(existing.name)
        if node_object is None or objects.is_deleting(node_object):
            continue
        labels = objects.labels(node_object)
        daemons = existing.daemon_remaining or tuple(0 for _ in existing.requests)
        rows.append(
            NodeRow(
                name=existing.name,
                provisioner=pool_of_labels(labels) or "",
                instance_type=labels.get(wk.INSTANCE_TYPE, ""),
                zone=labels.get(wk.ZONE, ""),
                capacity_type=labels.get(wk.CAPACITY_TYPE, ""),
                ready=existing.name in ready,
                pods=len(on_node.get(existing.name, ())),
                cpu_requested=existing.requests[CPU_I],
                cpu_allocatable=existing.allocatable[CPU_I],
                memory_requested=existing.requests[MEMORY_I],
                memory_allocatable=existing.allocatable[MEMORY_I],
                price=prices.get(existing.name),
                shares=_shares(on_node.get(existing.name, []), daemons),
                placement=placement_text(labels),
            )
        )
    rows.sort(key=lambda r: (r.provisioner, r.instance_type, r.zone, r.name))
    sample = Sample(
        at=at,
        pending=pending,
        starting=starting,
        running=running,
        nodes=len(rows),
        ready_nodes=sum(1 for r in rows if r.ready),
        cost=round(sum(r.price for r in rows if r.price is not None), 6),
    )
    return Measurement(sample, tuple(rows))


__all__ = ["DAEMON_SETS", "Measurement", "NodeRow", "Sample", "Share", "measure"]
