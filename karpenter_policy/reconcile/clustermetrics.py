"""Karpenter's gauges that describe the cluster, read from the cluster state at each scrape.

Karpenter v0.31 keeps these in metric stores its controllers refresh (`pkg/controllers/metrics/{node,pod,
provisioner}`); here a collector reads the controller's :class:`~karpenter_policy.reconcile.state.cluster.ClusterState`
(its records and indexes) when Prometheus scrapes — nothing is computed on the way of a watch event:

* per node (every Node the state holds), with Karpenter's labels — every well-known label as its snake-case
  name (`zone`, `instance_type`, `capacity_type`, `instance_family`, `nodepool`, …; "" when the node has none),
  `resource_type`, `node_name`, `provisioner`, `phase`: `karpenter_nodes_allocatable` (status.allocatable),
  `karpenter_nodes_system_overhead` (capacity − allocatable), `karpenter_nodes_total_pod_requests` and
  `karpenter_nodes_total_pod_limits` (its live pods but DaemonSets'), `karpenter_nodes_total_daemon_requests` and
  `karpenter_nodes_total_daemon_limits` (its DaemonSets' pods); requests and limits as Karpenter sums them, with
  `pods` the number of pods;
* per pod, `karpenter_pods_state{name, namespace, owner, node, provisioner, nodepool, zone, arch, capacity_type,
  instance_type, phase}` = 1 (the node's labels; `owner` the API path of its first owner);
* per provisioner in force, `karpenter_provisioner_limit{resource_type, provisioner}` (its limits),
  `karpenter_provisioner_usage{resource_type, provisioner}` (the capacity of its nodes not being deleted, the
  state's index) and `karpenter_provisioner_usage_pct` (usage over limit, in percent, as an integer; 100 for a
  limit of 0); per NodePool in force, Karpenter v1.14.1's `karpenter_nodepools_limit{resource_type, nodepool}` and
  `karpenter_nodepools_usage{resource_type, nodepool}` instead (the same numbers; v1 has no percentage), and
  `karpenter_nodepools_cost_total{nodepool}`: the $/h of its NodeClaims at their offerings' prices (the last
  templates built: no cloud call on a scrape).

cpu is in cores, every other resource in its unit (bytes, counts), `resource_type` the resource's name in lower
case with `_` for `-` (`ephemeral_storage`). Each pod's requests and limits are read once per version of the pod
(kept while the record is the same object). The pods' start-up time (`karpenter_pods_startup_time_seconds`, from
creation to the Ready condition of a pod this controller saw pending) is observed as the state applies the change
(:meth:`ClusterMetrics.on_change`). Only a replica that acts exports them (`Metrics.leading`): two replicas must not
both report the cluster, as Karpenter's standby does not.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pods import PodSpecError, pod_limits, pod_requests
from karpenter_policy.model.pools import pool_key, pool_name
from karpenter_policy.model.resources import ResourceList, parse_quantity
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.state.cluster import Change, ClusterState
from karpenter_policy.reconcile.state.records import ClaimRecord, NodeRecord, PodRecord
from karpenter_policy.scheduling.vectors import CPU_I, RESOURCES

PENDING = "Pending"


def snake(key: str) -> str:
    """A label key as Karpenter's metrics name it: the part after the `/`, lower case, `_` for `-`
    (`karpenter.k8s.aws/instance-cpu` → `instance_cpu`)."""
    return key.rsplit("/", 1)[-1].lower().replace("-", "_")


#: Node label key → the metric label Karpenter gives it (v1alpha5's and v1beta1's well-known labels, with AWS's).
WELL_KNOWN = {key: snake(key) for key in sorted({*wk.WELL_KNOWN_LABELS, wk.NODEPOOL})}
NODE_LABELS = [*sorted(set(WELL_KNOWN.values())), "resource_type", "node_name", "provisioner", "phase"]
POD_LABELS = [
    "name", "namespace", "owner", "node", "provisioner", "nodepool", "zone", "arch", "capacity_type", "instance_type",
    "phase",
]
PROVISIONER_LABELS = ["resource_type", "provisioner"]
NODEPOOL_LABELS = ["resource_type", "nodepool"]
#: The labels a NodeClaim needs to be priced (core v1.14.1 pkg/state/cost/cost.go `NecessaryLabels`).
COST_LABELS = (wk.INSTANCE_TYPE, wk.CAPACITY_TYPE, wk.ZONE, wk.NODEPOOL)


def resource_label(name: str) -> str:
    """Karpenter's `resource_type`: the resource name in lower case, `_` for `-` (`nvidia.com/gpu` kept whole)."""
    return name.lower().replace("-", "_")


def value(name: str, quantity: Decimal) -> float:
    """A quantity as Karpenter exports it: cpu in cores from its millicores, anything else its value, each rounded
    up (Kubernetes' `MilliValue()` / `Value()`)."""
    if name == "cpu":
        return int((quantity * 1000).to_integral_value(rounding=ROUND_CEILING)) / 1000
    return float(int(quantity.to_integral_value(rounding=ROUND_CEILING)))


def _resources(raw: Any) -> ResourceList:
    found: ResourceList = {}
    for name, quantity in (raw or {}).items() if isinstance(raw, Mapping) else ():
        try:
            found[str(name)] = parse_quantity(quantity)
        except ValueError:
            continue
    return found


class _PodResources:
    """A pod's requests and limits as Karpenter sums them for a node (`pods` 1 in each), or None when its spec
    cannot be read."""

    __slots__ = ("limits", "record", "requests")

    def __init__(self, record: PodRecord) -> None:
        self.record = record
        spec = record.obj.get("spec") or {}
        try:
            self.requests: ResourceList | None = {**pod_requests(spec), "pods": Decimal(1)}
            self.limits: ResourceList | None = {**pod_limits(spec), "pods": Decimal(1)}
        except PodSpecError:
            self.requests = self.limits = None


def _merge(total: ResourceList, more: ResourceList | None) -> None:
    for name, quantity in (more or {}).items():
        total[name] = total.get(name, Decimal(0)) + quantity


def _subtract(whole: ResourceList, part: ResourceList) -> ResourceList:
    return {name: quantity - part.get(name, Decimal(0)) for name, quantity in whole.items()}


class ClusterMetrics(Collector):
    """See the module docstring. `sets` returns the constraint sets in force; `wall_clock` the controller's time
    (a pod start-up whose Ready condition carries no time is taken as seen now)."""

    def __init__(
        self,
        state: ClusterState,
        metrics: Metrics,
        sets: Callable[[], Sequence[ConstraintSet]],
        wall_clock: Callable[[], dt.datetime],
        offering_price: Callable[[str, str, str, str], float | None] = lambda *_: None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.sets = sets
        self.wall_clock = wall_clock
        self.offering_price = offering_price
        self._resources: dict[str, _PodResources] = {}  # uid → what the scrape before read of it
        self._pending: set[str] = set()  # uids seen pending (their start-up is observed when they are Ready)
        metrics.use("cluster", self)
        state.subscribe(self.on_change)

    # --- the pods' start-up time -----------------------------------------------------------------------------

    def on_change(self, change: Change) -> None:
        """Karpenter's pod metrics controller: a pod seen Pending, later not Pending with a Ready condition, has
        started; observe the time from its creation to that condition (runs under the state's lock)."""
        if change.kind != "pod":
            return
        after = change.after
        if not isinstance(after, PodRecord):
            if isinstance(change.before, PodRecord):
                self._pending.discard(change.before.uid)
            return
        if after.phase in (PENDING, ""):  # "" only where no API server defaults it (the in-memory cluster)
            self._pending.add(after.uid)
            return
        ready = _ready_since(after.obj) if after.uid in self._pending else None
        if ready is None:
            return
        self._pending.discard(after.uid)
        created = _time(after.created)
        if created is not None and self.metrics.leading():
            moment = ready if isinstance(ready, dt.datetime) else self.wall_clock()
            self.metrics.pods_startup_time.observe(max((moment - created).total_seconds(), 0.0))

    # --- the gauges ------------------------------------------------------------------------------------------

    def collect(self) -> Iterable[Metric]:
        if not self.metrics.leading():
            return
        with self.state.lock:
            nodes = self.state.nodes()
            pods = self.state.pods()
            on_node = {node.name: self.state.pods_on(node.name) for node in nodes}
            used = self.state.used()
            claims = self.state.claims()
        yield from self._nodes(nodes, on_node)
        yield self._pods(pods, {node.name: node for node in nodes})
        yield from self._provisioners(used)
        yield self._nodepool_costs(claims)

    def _nodepool_costs(self, claims: Sequence[ClaimRecord]) -> Metric:
        """Karpenter v1.14.1's `karpenter_nodepools_cost_total{nodepool}` (core pkg/controllers/metrics/nodepool/
        controller.go, pkg/state/cost/cost.go): per NodePool in force, the $/h of its NodeClaims — each that has the
        four labels cost tracking needs (`NecessaryLabels`), until it is gone — at its offering's price (0 when the
        price is unknown, as v1.14.1 undercounts it)."""
        cost = GaugeMetricFamily(
            "karpenter_nodepools_cost_total",
            "Total cost of the nodepool from Karpenter's perspective. Units are determined by the cloud provider. Not "
            "an authoritative source for billing. Includes modifications due to NodeOverlays",
            labels=["nodepool"],
        )
        totals = {s.pool: 0.0 for s in self.sets() if s.is_nodepool}
        for claim in claims:
            labels = claim.labels
            if any(key not in labels for key in COST_LABELS):
                continue
            pool = pool_key(labels[wk.NODEPOOL], True)
            if pool in totals:
                price = self.offering_price(pool, labels[wk.INSTANCE_TYPE], labels[wk.ZONE], labels[wk.CAPACITY_TYPE])
                totals[pool] += price or 0.0
        for pool, total in sorted(totals.items()):
            cost.add_metric([pool_name(pool)], total)
        return cost

    def _nodes(self, nodes: list[NodeRecord], on_node: Mapping[str, list[PodRecord]]) -> Iterable[Metric]:
        def family(name: str, documentation: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"karpenter_nodes_{name}", documentation, labels=NODE_LABELS)

        allocatable = family("allocatable", "Node allocatable are the resources allocatable by nodes.")
        overhead = family(
            "system_overhead",
            "Node system daemon overhead are the resources reserved for system overhead, the difference between the "
            "node's capacity and allocatable values are reported by the status.",
        )
        pod_requests_ = family(
            "total_pod_requests",
            "Node total pod requests are the resources requested by non-DaemonSet pods bound to nodes.",
        )
        pod_limits_ = family(
            "total_pod_limits", "Node total pod limits are the resources specified by non-DaemonSet pod limits."
        )
        daemon_requests = family(
            "total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
        )
        daemon_limits = family(
            "total_daemon_limits", "Node total daemon limits are the resources specified by DaemonSet pod limits."
        )
        seen: dict[str, _PodResources] = {}
        for node in nodes:
            status = node.obj.get("status") or {}
            capacity, allocated = _resources(status.get("capacity")), _resources(status.get("allocatable"))
            requests: ResourceList = {}
            limits: ResourceList = {}
            daemon_req: ResourceList = {}
            daemon_lim: ResourceList = {}
            for pod in on_node.get(node.name, ()):
                read = self._read(pod)
                seen[pod.uid] = read
                _merge(requests, read.requests)
                _merge(limits, read.limits)
                if pod.daemon:
                    _merge(daemon_req, read.requests)
                    _merge(daemon_lim, read.limits)
            node_labels = {name: node.labels.get(key, "") for key, name in WELL_KNOWN.items()}
            for target, resources in (
                (allocatable, allocated),
                (overhead, _subtract(capacity, allocated)),
                (pod_requests_, _subtract(requests, daemon_req) if requests else {}),
                (pod_limits_, _subtract(limits, daemon_lim) if limits else {}),
                (daemon_requests, daemon_req),
                (daemon_limits, daemon_lim),
            ):
                for resource, quantity in sorted(resources.items()):
                    labels = {
                        **node_labels, "resource_type": resource_label(resource), "node_name": node.name,
                        "provisioner": node.provisioner or "", "phase": str(status.get("phase") or ""),
                    }
                    target.add_metric([labels[name] for name in NODE_LABELS], value(resource, quantity))
        self._resources = seen  # what the next scrape may reuse: the pods of this one
        return allocatable, overhead, pod_requests_, pod_limits_, daemon_requests, daemon_limits

    def _read(self, pod: PodRecord) -> _PodResources:
        cached = self._resources.get(pod.uid)
        if cached is not None and cached.record is pod:
            return cached
        return _PodResources(pod)

    def _pods(self, pods: list[PodRecord], nodes: Mapping[str, NodeRecord]) -> Metric:
        family = GaugeMetricFamily(
            "karpenter_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod "
            "name, namespace, owner, node, provisioner name, zone, architecture, capacity type, instance type and pod "
            "phase.",
            labels=POD_LABELS,
        )
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
            node = nodes.get(pod.node)
            labels = node.labels if node is not None else {}
            family.add_metric(
                [
                    pod.name, pod.namespace, _owner_path(pod), pod.node, labels.get(wk.PROVISIONER_NAME, ""),
                    labels.get(wk.NODEPOOL, ""), labels.get(wk.ZONE, ""), labels.get(wk.ARCH, ""),
                    labels.get(wk.CAPACITY_TYPE, ""), labels.get(wk.INSTANCE_TYPE, ""), pod.phase,
                ],
                1,
            )
        return family

    def _provisioners(self, used: Mapping[str, tuple[int, ...]]) -> Iterable[Metric]:
        limit = GaugeMetricFamily(
            "karpenter_provisioner_limit",
            "The Provisioner Limits are the limits specified on the provisioner that restrict the quantity of "
            "resources provisioned. Labeled by provisioner name and resource type.",
            labels=PROVISIONER_LABELS,
        )
        usage = GaugeMetricFamily(
            "karpenter_provisioner_usage",
            "The Provisioner Usage is the amount of resources that have been provisioned by a particular "
            "provisioner. Labeled by provisioner name and resource type.",
            labels=PROVISIONER_LABELS,
        )
        usage_pct = GaugeMetricFamily(
            "karpenter_provisioner_usage_pct",
            "The Provisioner Usage Percentage is the percentage of each resource used based on the resources "
            "provisioned and the limits that have been configured in the range [0,100].  Labeled by provisioner "
            "name and resource type.",
            labels=PROVISIONER_LABELS,
        )
        nodepool_limit = GaugeMetricFamily(
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by "
            "nodepool name and resource type.",
            labels=NODEPOOL_LABELS,
        )
        nodepool_usage = GaugeMetricFamily(
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and "
            "resource type.",
            labels=NODEPOOL_LABELS,
        )
        for constraint_set in sorted(self.sets(), key=lambda s: s.pool):
            name = constraint_set.pool  # a NodePool's `NodePool/<name>`: apart from a Provisioner of its name
            vector = used.get(name)
            if constraint_set.is_nodepool:
                self._nodepool(constraint_set, vector, nodepool_limit, nodepool_usage)
                continue
            provisioned = {
                resource: (count / 1000 if i == CPU_I else float(count))
                for i, (resource, count) in enumerate(zip(RESOURCES, vector or (), strict=False))
                if count
            }
            for resource, quantity in sorted(provisioned.items()):
                usage.add_metric([resource_label(resource), name], quantity)
            for resource, raw in sorted(constraint_set.limits.items()):
                try:
                    limited = value(resource, parse_quantity(raw))
                except ValueError:
                    continue
                limit.add_metric([resource_label(resource), name], limited)
                in_use = provisioned.get(resource, 0.0)
                usage_pct.add_metric(
                    [resource_label(resource), name], float(int(in_use / limited * 100)) if limited else 100.0
                )
        return limit, usage, usage_pct, nodepool_limit, nodepool_usage

    def _nodepool(
        self,
        constraint_set: ConstraintSet,
        vector: tuple[int, ...] | None,
        limit: GaugeMetricFamily,
        usage: GaugeMetricFamily,
    ) -> None:
        """A NodePool's `karpenter_nodepools_limit` and `…_usage` (Karpenter v1.14.1's, core pkg/controllers/metrics/
        nodepool/controller.go: no usage percentage)."""
        name = pool_name(constraint_set.pool)
        for i, (resource, count) in enumerate(zip(RESOURCES, vector or (), strict=False)):
            if count:
                usage.add_metric([resource_label(resource), name], count / 1000 if i == CPU_I else float(count))
        for resource, raw in sorted(constraint_set.limits.items()):
            try:
                limit.add_metric([resource_label(resource), name], value(resource, parse_quantity(raw)))
            except ValueError:
                continue


def _owner_path(pod: PodRecord) -> str:
    """The API path of the pod's first owner (Karpenter's `owner` label: the selfLink it builds)."""
    owners = objects.metadata(pod.obj).get("ownerReferences") or []
    first = owners[0] if owners and isinstance(owners[0], dict) else None
    if first is None:
        return ""
    kind = str(first.get("kind") or "").lower()
    return f"/apis/{first.get('apiVersion') or ''}/namespaces/{pod.namespace}/{kind}s/{first.get('name') or ''}"


def _time(stamp: str) -> dt.datetime | None:
    try:
        return objects.parse_time(stamp) if stamp else None
    except ValueError:
        return None


def _ready_since(pod: Mapping[str, Any]) -> dt.datetime | bool | None:
    """The time of the pod's Ready condition (True when it has one without a time; None when it has none)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return _time(str(condition.get("lastTransitionTime") or "")) or True
    return None


__all__ = ["NODE_LABELS", "POD_LABELS", "WELL_KNOWN", "ClusterMetrics", "resource_label", "snake", "value"]
