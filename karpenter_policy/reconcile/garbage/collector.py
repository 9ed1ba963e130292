"""Garbage collection of the link between instances and Nodes, both ways (Karpenter's machine garbage collection).

A pass of the controller runs it on the first pass after start-up (or after this replica became the leader) and
then every ``interval`` seconds (2 minutes):

* **an instance with no Node** — tagged for the cluster by a provisioner (``CloudProvider.list``), whose instance
  id no Node's ``spec.providerID`` names, that is not a launch of this controller still in flight, and that was
  launched more than ``instance_grace`` seconds ago (2 minutes: a launch registers its Node within a second; the
  grace covers another replica's launch under way during a leader change) — is **terminated**, but only when
  what says "no Node" can be trusted: the cluster state is synced and healthy (every informer listed, none
  failing: `healthy`), the instance was already missing from an earlier healthy look at least ``instance_grace``
  seconds before, and a list of the Nodes read from the API server itself just now (not a watch cache that may
  lag; a list the API answers with anything but a well-formed list is an error, never "no Nodes") does not name
  it either. Instances already shutting down are left to finish.
* **a Node of ours whose instance is gone** — its instance is not listed and ``CloudProvider.get`` confirms it
  does not exist (or is terminated), and the Node is older than ``node_grace`` seconds (EC2 is eventually
  consistent: a just-launched instance may not be described yet) — is **deleted**, and its
  ``karpenter.sh/termination`` finalizer removed: there is no instance left to terminate. Its pods are left to
  Kubernetes' pod garbage collector, which deletes the pods of a Node that no longer exists (their controllers
  then recreate them, and the controller provisions for them).

A Node released this way counts as Karpenter counts a machine garbage collected (`karpenter_machines_terminated
{reason="garbage_collected"}`) and a node terminated (`karpenter_nodes_terminated`).

Nodes that are not ours (no constraint-set-hash annotation) are never written to, and only instances carrying the
cluster's and a provisioner's tags are ever terminated. Ages come from the instance's launch time and the Node's
creationTimestamp against the injected wall clock; an instance whose launch time is unknown ages from when this
collector first saw it, by the monotonic clock.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Collection, Sequence

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import STATE_SHUTTING_DOWN, CloudProvider, Instance
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.options import DEFAULT_GC_INTERVAL as DEFAULT_INTERVAL
from karpenter_policy.reconcile.options import DEFAULT_INSTANCE_GRACE, DEFAULT_NODE_GRACE
from karpenter_policy.reconcile.result import Collected
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.records import NodeRecord
from karpenter_policy.reconcile.termination.nodedeletion import release

GARBAGE = logs.logger("garbagecollection")


#: After a failed collection (the cloud or the API could not be read), try again this soon.
RETRY_INTERVAL = 10.0


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class GarbageCollector:
    """See the module docstring. ``interval`` 0 turns collection off."""

    def __init__(
        self,
        cluster: Cluster,
        cloud: CloudProvider,
        cluster_name: str,
        *,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = _utc_now,
        interval: float = DEFAULT_INTERVAL,
        instance_grace: float = DEFAULT_INSTANCE_GRACE,
        node_grace: float = DEFAULT_NODE_GRACE,
    ) -> None:
        if interval < 0 or instance_grace < 0 or node_grace < 0:
            raise ValueError("garbage collection interval and grace periods must be >= 0")
        self.cluster = cluster
        self.cloud = cloud
        self.cluster_name = cluster_name
        self.metrics = metrics
        self.clock = clock
        self.wall_clock = wall_clock
        self.interval = interval
        self.instance_grace = instance_grace
        self.node_grace = node_grace
        self._next: float | None = None  # None: at the next pass
        self._first_seen: dict[str, float] = {}  # instance id → monotonic time (instances without a launch time)
        self._missing_since: dict[str, float] = {}  # instance id → when a healthy look first found no Node for it

    def due(self) -> bool:
        return self.interval > 0 and (self._next is None or self.clock() >= self._next)

    def request(self) -> None:
        """Collect at the next pass (start-up, or this replica just became the leader)."""
        self._next = None

    def collect(
        self, nodes: Sequence[NodeRecord], in_flight: Collection[str], healthy: bool = True
    ) -> Collected:
        """One collection. ``nodes``: the Nodes as the state shows them; ``in_flight``: the provider IDs of the
        controller's launches not settled yet (never collected); ``healthy``: the state follows the cluster (else
        no instance is terminated)."""
        now = self.clock()
        result = Collected()
        self._next = now + self.interval
        try:
            instances = self.cloud.list(self.cluster_name)
        except CloudError as error:
            self._error(result, f"could not list the cluster's instances, {error}")
            return result
        seen = {i.id for i in instances}
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in seen}
        if healthy:
            self._instances_without_node(instances, nodes, {node_info.instance_id_of(p) for p in in_flight}, result)
        else:
            self._missing_since.clear()  # what was missing under an unhealthy look proves nothing
            self._error(result, "the cluster state is not synced or a watch is failing: no instance is terminated")
        self._nodes_without_instance(nodes, seen, result)
        if result.errors:
            self._next = now + min(self.interval, RETRY_INTERVAL)
        return result

    # --- instances without a Node --------------------------------------------------------------------------

    def _instances_without_node(
        self, instances: Sequence[Instance], nodes: Sequence[NodeRecord], in_flight: set[str], result: Collected
    ) -> None:
        known = {n.instance_id for n in nodes} | in_flight
        now = self.clock()
        missing = {i.id for i in instances if i.id not in known}
        self._missing_since = {k: v for k, v in self._missing_since.items() if k in missing}
        candidates = []
        for instance in instances:
            if instance.id not in missing or instance.state == STATE_SHUTTING_DOWN:
                continue
            first = self._missing_since.setdefault(instance.id, now)
            if self._instance_age(instance) > self.instance_grace and now - first >= self.instance_grace:
                candidates.append(instance)
        if not candidates:
            return
        try:  # a watch cache may not show a Node another replica registered a moment ago: ask the API server
            known |= {node_info.instance_id(n) for n in self.cluster.list(objects.NODE).items}
        except ClusterError as error:
            self._error(result, f"could not list nodes, {error}")
            return
        for instance in candidates:
            if instance.id in known:
                continue
            try:
                self.cloud.delete(instance.id)
            except CloudError as error:
                self._error(result, f"could not terminate instance {instance.id}, {error}", instance=instance.id)
                continue
            result.terminated.append(instance.id)
            self.metrics.garbage_collected.labels("instance").inc()
            GARBAGE.info(
                "garbage collected instance %s with no node, launched %.0fs ago", instance.id,
                self._instance_age(instance),
                extra=self._fields(instance=instance.id, provisioner=instance.provisioner or ""),
            )

    def _instance_age(self, instance: Instance) -> float:
        if instance.launch_time is not None:
            return (self.wall_clock() - instance.launch_time).total_seconds()
        now = self.clock()
        return now - self._first_seen.setdefault(instance.id, now)

    # --- Nodes without an instance -------------------------------------------------------------------------

    def _nodes_without_instance(self, nodes: Sequence[NodeRecord], listed: set[str], result: Collected) -> None:
        for node in nodes:
            instance_id = node.instance_id
            if not node.ours or not instance_id or instance_id in listed:
                continue
            if self._node_age(node) <= self.node_grace:
                continue
            name = node.name
            try:
                if self.cloud.get(instance_id) is not None:
                    continue  # not listed (tags removed?) but alive: not ours to judge
            except CloudError as error:
                self._error(result, f"could not look up instance {instance_id}, {error}", node=name)
                continue
            try:
                release(self.cluster, name)
            except ClusterError as error:
                self._error(result, f"could not delete node {name}, {error}", node=name)
                continue
            result.deleted.append(name)
            self.metrics.garbage_collected.labels("node").inc()
            self.metrics.machines_terminated.labels("garbage_collected", node.provisioner or "").inc()
            self.metrics.node_terminated(node.provisioner or "", None)  # released at once: nothing to time
            GARBAGE.info(
                "garbage collected node %s, its instance %s is gone", name, instance_id,
                extra=self._fields(node=name, instance=instance_id),
            )

    def _node_age(self, node: NodeRecord) -> float:
        created = node.created
        if not created:
            return 0.0
        try:
            return (self.wall_clock() - objects.parse_time(created)).total_seconds()
        except ValueError:
            return 0.0

    # --- helpers -------------------------------------------------------------------------------------------

    def _fields(self, **values: object) -> dict[str, object]:
        return logs.fields(self.wall_clock(), **values)

    def _error(self, result: Collected, message: str, **values: object) -> None:
        result.errors.append(message)
        GARBAGE.error(message, extra=self._fields(**values))


__all__ = [
    "DEFAULT_INSTANCE_GRACE",
    "DEFAULT_INTERVAL",
    "DEFAULT_NODE_GRACE",
    "GarbageCollector",
]
