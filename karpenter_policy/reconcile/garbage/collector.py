"""Garbage collection of the link between instances and Nodes, both ways (Karpenter's machine garbage collection).

A pass of the controller runs it on the first pass after start-up (or after this replica became the leader) and
then every ``interval`` seconds (2 minutes):

* **an instance with no Node** — tagged for the cluster by a provisioner (``CloudProvider.list``), whose instance
  id no Node's ``spec.providerID`` names, that is not a launch of this controller still in flight — is
  **terminated** once it has had no Node for ``instance_grace`` seconds (2 minutes: a launch registers its Node
  within a second; the grace covers another replica's launch under way during a leader change), and only when
  what says "no Node" can be trusted: the cluster state is synced and healthy (every informer listed, none
  failing: `healthy`), the instance was already missing from an earlier healthy look at least ``instance_grace``
  seconds before, and a list of the Nodes read from the API server itself just now (not a watch cache that may
  lag; a list the API answers with anything but a well-formed list is an error, never "no Nodes") does not name
  it either. A Node of that list the controller cannot read (its ``spec`` is not a map, …) is skipped, counted
  (`karpenter_policy_malformed_objects_total{kind="nodes"}`) and logged — and protects every instance whose id
  appears anywhere in it or whose private DNS name is its name: what cannot be read cannot prove an instance
  has no Node. Instances already shutting down are left to finish.
* **a Node of ours whose instance is gone** — not a launch in flight, and its instance missing from
  ``MISSING_READS`` (3) reads of the cloud in a row (each: not listed, and ``CloudProvider.get`` finds it
  absent or terminated) spanning at least ``node_grace`` seconds (5 minutes: EC2 is eventually consistent, and
  DescribeInstances may not return an instance launched seconds ago) — is **deleted**, and its
  ``karpenter.sh/termination`` finalizer removed: there is no instance left to terminate. Just before, the Node
  is read from the API server again and must still be the Node that was watched (same uid, same instance): a
  Node re-registered under the same name (EC2 reuses private DNS names) is another Node. Any read that shows
  the instance resets its count; a read that fails counts for nothing. Its pods are left to Kubernetes' pod
  garbage collector, which deletes the pods of a Node that no longer exists (their controllers then recreate
  them, and the controller provisions for them).

**Ages come only from this controller's own observations**, on the monotonic clock: how long an instance has
been seen without a Node, how long a Node's instance has been seen missing — never the API server's
``creationTimestamp`` or EC2's ``LaunchTime`` against the local clock, so no clock skew between the controller,
the API server and EC2 makes anything look older than this controller saw it. Observations start over when this
replica becomes the leader (:meth:`GarbageCollector.request`): what it saw as a standby is not evidence.
Karpenter v0.31.1 instead compares the NodeClaim's creation time with its clock (aws provider
`pkg/controllers/nodeclaim/garbagecollection/controller.go`, `Reconcile`: 30 s) and deletes a launched machine the
first time ``List`` misses it (core `pkg/controllers/nodeclaim/garbagecollection/controller.go`: 10 s after
launch); both leave a lagging DescribeInstances or a skewed clock room to remove something live.

* **a NodeClaim whose instance is gone and that has no Node** — launched (a providerID), not being deleted, no Node
  of the state on its instance, its instance missing from ``MISSING_READS`` reads in a row over ``node_grace``
  seconds as a Node's is — is **deleted** (Karpenter v1.14.1's core `pkg/controllers/nodeclaim/garbagecollection/
  controller.go` deletes a launched NodeClaim whose instance `List` no longer shows); termination finalizes it
  (nothing to drain, the instance already gone). A claim with a Node is left to the Node's path above.

A Node released this way counts as Karpenter counts a machine garbage collected (`karpenter_machines_terminated
{reason="garbage_collected"}`; a NodePool's node as v1.14.1 counts its NodeClaim, `karpenter_nodeclaims_disrupted_total
{reason="garbage_collected"}`, as a claim deleted without a Node is too) and a node terminated
(`karpenter_nodes_terminated`).

Nodes that are not ours (no constraint-set-hash annotation) are never written to, and only instances carrying the
cluster's and a provisioner's tags are ever terminated. Each pass also lets the cloud delete the launch
templates no launch has needed for their TTL (``CloudProvider.collect_launch_templates``; docs/cloud.md),
counted as `karpenter_policy_garbage_collected_total{object="launch_template"}`.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.provider import STATE_SHUTTING_DOWN, CloudProvider, Instance
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.kube.objects import NODE_CLAIM, Kind, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.reconcile.options import DEFAULT_GC_INTERVAL as DEFAULT_INTERVAL
from karpenter_policy.reconcile.options import DEFAULT_INSTANCE_GRACE, DEFAULT_NODE_GRACE
from karpenter_policy.reconcile.result import Collected
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.records import ClaimRecord, NodeRecord, UnreadableObject, node_record
from karpenter_policy.reconcile.termination.nodedeletion import release

GARBAGE = logs.logger("garbagecollection")
#: Karpenter's reason for what it garbage collects (v0.31's machines, v1.14.1's NodeClaims).
GARBAGE_COLLECTED = "garbage_collected"


#: After a failed collection (the cloud or the API could not be read), try again this soon.
RETRY_INTERVAL = 10.0
#: A Node is deleted only after this many reads of the cloud in a row found its instance missing.
MISSING_READS = 3


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ignore_malformed(kind: Kind, reason: str) -> None:
    return None


@dataclass(slots=True)
class _Missing:
    """A Node's instance seen missing: since when (monotonic) and in how many reads in a row."""

    since: float
    reads: int = 0


class GarbageCollector:
    """See the module docstring. ``interval`` 0 turns collection off; ``count_malformed(kind, reason)`` counts an
    object of the API's Node list that could not be read (the state's counter, exported as a metric)."""

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
        count_malformed: Callable[[Kind, str], None] = _ignore_malformed,
    ) -> None:
        if interval < 0 or instance_grace < 0 or node_grace < 0:
            raise ValueError("garbage collection interval and grace periods must be >= 0")
        self.cluster = cluster
        self.cloud = cloud
        self.cluster_name = cluster_name
        self.metrics = metrics
        self.clock = clock
        self.wall_clock = wall_clock  # log times only: never an age
        self.interval = interval
        self.instance_grace = instance_grace
        self.node_grace = node_grace
        self.count_malformed = count_malformed
        self._next: float | None = None  # None: at the next pass
        self._missing_since: dict[str, float] = {}  # instance id → when a healthy look first found no Node for it
        self._node_missing: dict[tuple[str, str, str], _Missing] = {}  # (node, uid, instance id) → reads
        self._claim_missing: dict[tuple[str, str, str], _Missing] = {}  # (claim, uid, instance id) → reads

    def due(self) -> bool:
        return self.interval > 0 and (self._next is None or self.clock() >= self._next)

    def request(self) -> None:
        """Collect at the next pass (start-up, or this replica just became the leader). Observations start
        over: what was seen before this replica led proves nothing about now."""
        self._next = None
        self._missing_since.clear()
        self._node_missing.clear()
        self._claim_missing.clear()

    def collect(
        self, nodes: Sequence[NodeRecord], in_flight: Collection[str], healthy: bool = True,
        claims: Sequence[ClaimRecord] = (),
    ) -> Collected:
        """One collection. ``nodes``: the Nodes as the state shows them; ``in_flight``: the provider IDs of the
        controller's launches not settled yet (never collected, either way); ``healthy``: the state follows the
        cluster (else no instance is terminated); ``claims``: the NodeClaims as the state shows them."""
        now = self.clock()
        result = Collected()
        self._next = now + self.interval
        flying = {node_info.instance_id_of(p) for p in in_flight} - {""}
        try:
            instances = self.cloud.list(self.cluster_name)
        except CloudError as error:
            self._error(result, f"could not list the cluster's instances, {error}")
        else:
            if healthy:
                self._instances_without_node(instances, nodes, flying, result)
            else:
                self._missing_since.clear()  # what was missing under an unhealthy look proves nothing
                self._error(
                    result, "the cluster state is not synced or a watch is failing: no instance is terminated"
                )
            self._nodes_without_instance(nodes, {i.id for i in instances}, flying, result)
            self._claims_without_instance(claims, nodes, {i.id for i in instances}, flying, result)
        self._launch_templates(result)
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
            if now - first >= self.instance_grace:
                candidates.append(instance)
        if not candidates:
            return
        try:  # a watch cache may not show a Node another replica registered a moment ago: ask the API server
            listed = self.cluster.list(objects.NODE).items
        except ClusterError as error:
            self._error(result, f"could not list nodes, {error}")
            return
        unreadable: list[Obj] = []
        for obj in listed:
            try:
                known.add(node_record(obj).instance_id)
            except UnreadableObject as error:
                self.count_malformed(objects.NODE, str(error))
                unreadable.append(obj)
        for instance in candidates:
            if instance.id in known or self._named_by_unreadable(instance, unreadable):
                continue
            try:
                self.cloud.delete(instance.id)
            except CloudError as error:
                self._error(result, f"could not terminate instance {instance.id}, {error}", instance=instance.id)
                continue
            result.terminated.append(instance.id)
            self.metrics.garbage_collected.labels("instance").inc()
            GARBAGE.info(
                "garbage collected instance %s with no node, seen without one for %.0fs", instance.id,
                now - self._missing_since[instance.id],
                extra=self._fields(instance=instance.id, provisioner=instance.provisioner or ""),
            )

    @staticmethod
    def _named_by_unreadable(instance: Instance, unreadable: Sequence[Obj]) -> bool:
        """Whether a Node that could not be read may be this instance's: it mentions the instance id anywhere,
        or it is named as the kubelet names the instance's Node."""
        for obj in unreadable:
            try:
                text = json.dumps(obj, default=str)
            except (TypeError, ValueError):  # cannot even be written out: it may be anyone's
                return True
            if instance.id in text or (instance.private_dns_name and instance.private_dns_name in text):
                return True
        return False

    # --- Nodes without an instance -------------------------------------------------------------------------

    def _nodes_without_instance(
        self, nodes: Sequence[NodeRecord], listed: set[str], in_flight: set[str], result: Collected
    ) -> None:
        now = self.clock()
        watched: dict[tuple[str, str, str], _Missing] = {}
        for node in nodes:
            instance_id = node.instance_id
            if not node.ours or not instance_id or instance_id in listed or instance_id in in_flight:
                continue
            key = (node.name, node.uid, instance_id)
            try:
                if self.cloud.get(instance_id) is not None:
                    continue  # not listed (tags removed?) but alive: not ours to judge
            except CloudError as error:  # a read that failed proves nothing either way: the count stays
                self._error(result, f"could not look up instance {instance_id}, {error}", node=node.name)
                if key in self._node_missing:
                    watched[key] = self._node_missing[key]
                continue
            missing = watched[key] = self._node_missing.get(key) or _Missing(now)
            missing.reads += 1
            confirmed = missing.reads >= MISSING_READS and now - missing.since >= self.node_grace
            if confirmed and self._release(node, instance_id, now - missing.since, result):
                del watched[key]
        self._node_missing = watched
        for missing in watched.values():  # enough reads by the end of the window: read again right then
            ends = missing.since + self.node_grace
            if missing.reads + 1 >= MISSING_READS and self._next is not None and now < ends < self._next:
                self._next = ends

    def _claims_without_instance(
        self, claims: Sequence[ClaimRecord], nodes: Sequence[NodeRecord], listed: set[str], in_flight: set[str],
        result: Collected,
    ) -> None:
        now = self.clock()
        with_node = {n.instance_id for n in nodes if n.instance_id}
        watched: dict[tuple[str, str, str], _Missing] = {}
        for claim in claims:
            instance_id = claim.instance_id
            if (not instance_id or claim.deletion_timestamp is not None or instance_id in listed
                    or instance_id in in_flight or instance_id in with_node):
                continue
            key = (claim.name, claim.uid, instance_id)
            try:
                if self.cloud.get(instance_id) is not None:
                    continue
            except CloudError as error:
                self._error(result, f"could not look up instance {instance_id}, {error}", nodeclaim=claim.name)
                if key in self._claim_missing:
                    watched[key] = self._claim_missing[key]
                continue
            missing = watched[key] = self._claim_missing.get(key) or _Missing(now)
            missing.reads += 1
            if missing.reads < MISSING_READS or now - missing.since < self.node_grace:
                continue
            try:
                self.cluster.delete(NODE_CLAIM, claim.name)
            except NotFound:
                pass
            except ClusterError as error:
                self._error(result, f"could not delete nodeclaim {claim.name}, {error}", nodeclaim=claim.name)
                continue
            del watched[key]
            result.deleted.append(claim.name)
            self.metrics.garbage_collected.labels("nodeclaim").inc()
            self.metrics.nodeclaims_disrupted.labels(  # v1.14.1's garbagecollection/controller.go
                GARBAGE_COLLECTED, claim.labels.get(wk.NODEPOOL, ""), claim.labels.get(wk.CAPACITY_TYPE, "")
            ).inc()
            GARBAGE.info(
                "garbage collected nodeclaim %s, its instance %s missing from %d reads over %.0fs", claim.name,
                instance_id, MISSING_READS, now - missing.since, extra=self._fields(nodeclaim=claim.name),
            )
        self._claim_missing = watched

    def _release(self, node: NodeRecord, instance_id: str, missing_for: float, result: Collected) -> bool:
        """Delete the Node if the API server still shows the same Node on the same instance; whether it is done
        (released, or found gone or changed: nothing left to watch)."""
        name = node.name
        try:
            current = self.cluster.get(objects.NODE, name)
        except ClusterError as error:
            self._error(result, f"could not read node {name}, {error}", node=name)
            return False
        if current is None:
            return True
        try:
            record = node_record(current)
        except UnreadableObject as error:
            self.count_malformed(objects.NODE, str(error))
            return True  # what cannot be read is not deleted
        if record.uid != node.uid or record.instance_id != instance_id or not record.ours:
            return True  # another Node now: it is watched afresh at the next pass
        try:
            release(self.cluster, name)
        except ClusterError as error:
            self._error(result, f"could not delete node {name}, {error}", node=name)
            return False
        result.deleted.append(name)
        self.metrics.garbage_collected.labels("node").inc()
        self.metrics.claim_disrupted(
            node.provisioner or "", GARBAGE_COLLECTED, GARBAGE_COLLECTED, node.labels.get(wk.CAPACITY_TYPE, "")
        )
        # released at once: nothing to time
        self.metrics.node_terminated(node.provisioner or "", None, zone=node.labels.get(wk.ZONE, ""))
        GARBAGE.info(
            "garbage collected node %s, its instance %s missing from %d reads over %.0fs", name, instance_id,
            MISSING_READS, missing_for, extra=self._fields(node=name, instance=instance_id),
        )
        return True

    # --- launch templates ----------------------------------------------------------------------------------

    def _launch_templates(self, result: Collected) -> None:
        try:
            deleted = self.cloud.collect_launch_templates(self.cluster_name)
        except CloudError as error:
            self._error(result, f"could not clean up launch templates, {error}")
            return
        result.launch_templates.extend(deleted)
        if deleted:
            self.metrics.garbage_collected.labels("launch_template").inc(len(deleted))

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
    "MISSING_READS",
    "GarbageCollector",
]
