"""Termination: a Node of ours being deleted (`kubectl delete node`, emptiness, disruption, an interruption) goes
through the ``karpenter.sh/termination`` finalizer, as Karpenter v0.31.1's termination controller
(`pkg/controllers/termination/controller.go`, `terminator/terminator.go`) does:

1. **cordon**: ``spec.unschedulable`` and the label ``node.kubernetes.io/exclude-from-external-load-balancers:
   karpenter`` (load balancers stop sending it traffic while it drains), logged once ("Cordoned node"); a
   NodePool's node is tainted ``karpenter.sh/disrupted:NoSchedule`` instead of cordoned (Karpenter v1.14.1's
   `Terminator.Taint`, core pkg/controllers/node/termination/terminator/terminator.go), and its drain leaves the
   pods that tolerate that taint instead of those tolerating the cordon, and drains DaemonSets' pods too, in
   v1.14.1's four groups (`to_evict`);
2. **drain**: the pods it waits for are those bound to the node that are not finished, not stuck terminating
   (deleted more than a minute ago: a kubelet that no longer answers), not content to stay (they tolerate the
   ``node.kubernetes.io/unschedulable:NoSchedule`` taint — DaemonSets' pods do — so evicted they would come
   back), not static pods (mirrors owned by the Node) and not DaemonSets'. Those not being deleted yet are evicted
   (`eviction`: PodDisruptionBudgets hold, a refusal is retried with backoff) — the non-critical ones first, the
   ``system-cluster-critical``/``system-node-critical`` ones once every other one is evicted.
   ``karpenter.sh/do-not-evict`` is not looked at: in v0.31 it keeps a node from being chosen for disruption,
   it does not stop a deletion that was asked for;
3. once no pod is waited for: **terminate** the instance, then **remove the finalizer** ("Deleted node"). While
   pods are still waited for, an instance the cloud no longer knows (or that is terminated: a spot reclaim, a
   termination from the console) releases the node at once: the finalizer goes, nothing is left to drain.

A node still draining is taken a step further at least every second (Karpenter requeues after 1 s): a pod that
became stuck, an instance that vanished, a budget that allows an eviction now. Each step is idempotent, so a
controller that died half-way resumes where the cluster shows it stopped. Nodes without the finalizer, or not
ours, are left alone.

A NodePool's node whose NodeClaim has a `terminationGracePeriod` drains until its termination time at most: its pods
are deleted, their grace shortened, when their time before it comes, whatever their PodDisruptionBudgets and
`karpenter.sh/do-not-disrupt` say (`graceperiod`); such pods are not evicted meanwhile.

A NodePool's node goes through Karpenter v1.14.1's steps after its drain (core pkg/controllers/node/termination/
controller.go `awaitDrain`, `awaitVolumeDetachment`, `awaitInstanceTermination`), each written on its NodeClaim
once: Drained Unknown (`Draining`) at its first step and True no sooner than `MIN_DRAIN_SECONDS` after; then its
VolumeAttachments must be deleted (`volumes`, read from the `kube.attachments` index, brought up to date once per
pass; VolumesDetached Unknown `AwaitingVolumeDetachment` with an Event, True, or False
`TerminationGracePeriodElapsed` past its termination time — attachments that cannot be read hold it as unknown until
then, never as none); then its instance's termination is asked (InstanceTerminating True) and the Node's finalizer
goes only once the cloud no longer knows the instance. Unlike a Provisioner's node (step 3), it is released at once
for an instance gone only while the Node is not Ready (controller.go:114); without a NodeClaim it is released after
its attachments without its instance being terminated (`awaitInstanceTermination` does nothing without a claim):
garbage collection terminates that instance. Its pods' `karpenter.sh/do-not-disrupt` durations are announced as
v1.14.1's `IsEvictable` does (`events.do_not_disrupt`). A Provisioner's node keeps v0.31.1's steps.

A NodePool's node names its NodeClaim as owner (`reconcile.claims`): its first step asks for the claim's deletion
(the claim's `karpenter.sh/termination` finalizer keeps it), and once the Node is released the claim's finalizer is
removed as soon as the cloud no longer knows the instance (Karpenter v1.14.1's NodeClaim `finalize`, core
pkg/controllers/nodeclaim/lifecycle/controller.go: only when `CloudProvider.Delete` says it is not found).

A NodeClaim deleted by hand (`kubectl delete nodeclaim`, or by anything but this controller) is finalized as
Karpenter v1.14.1's lifecycle controller `finalize` does: its Nodes (those on its instance that name no other claim
as owner, or naming it as owner) are deleted and go through the steps above (drained, the instance terminated,
released); then, once the cloud no longer knows the instance, its finalizer goes. A claim without a Node has its
instance terminated at once (`CloudProvider.Delete`), then the same; a claim whose instance has another claim's
Node is released without touching either; a claim without a providerID and without a Node (its launch never
completed) is released at once, and so is one whose instance is not tagged for this cluster (never terminated: a
claim naming an instance proves nothing).
Where v1.14.1 deletes the Nodes only of a claim that is `Registered` (a kubelet-created Node), this controller
writes the Node at launch and so deletes it whether registered or not: an instance with a Node is never terminated
from under it. The claims come from the state's NodeClaim informer (`state.feed`); a claim of another shape is
counted and skipped there.

As Karpenter's, each eviction is an Event `Evicted` on the pod and one a budget refused a Warning `FailedDraining`
on the node (`evicting pod … violates a PDB`), as is every step that leaves pods to wait for; every eviction asked
of the API is counted by its outcome (`karpenter_policy_evictions_total{outcome}`: evicted, gone, refused,
failed); the removal of the finalizer counts `karpenter_nodes_terminated` and observes
`karpenter_nodes_termination_time_seconds` (since the deletion was requested) — a NodePool's node v1.14.1's
`karpenter_nodes_terminated_total{nodepool, zone}` and `karpenter_nodes_termination_duration_seconds{nodepool}`
instead (`Metrics.node_terminated`). The metrics and the recorder are
the `Context`'s.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Mapping, Sequence

from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.cloud.errors import NotFound as InstanceNotFound
from karpenter_policy.cloud.provider import STATE_SHUTTING_DOWN, cluster_tag
from karpenter_policy.kube import objects
from karpenter_policy.kube.attachments import AttachmentIndex
from karpenter_policy.kube.errors import ClusterError, NotFound
from karpenter_policy.kube.objects import NODE
from karpenter_policy.kube.volumes import Attachment, bound_volume
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import is_nodepool
from karpenter_policy.reconcile import events, logs
from karpenter_policy.reconcile.claims import conditions as cond
from karpenter_policy.reconcile.claims.objects import claim_of_node
from karpenter_policy.reconcile.context import Context
from karpenter_policy.reconcile.metrics import TERMINATION as LABEL
from karpenter_policy.reconcile.result import ReconcileResult, Terminated
from karpenter_policy.reconcile.state import nodes as node_info
from karpenter_policy.reconcile.state.cluster import Change
from karpenter_policy.reconcile.state.records import ClaimRecord, NodeRecord, PodRecord
from karpenter_policy.reconcile.termination import graceperiod as grace
from karpenter_policy.reconcile.termination import volumes
from karpenter_policy.reconcile.termination.eviction import Evictions
from karpenter_policy.reconcile.termination.nodedeletion import delete_node, remove_finalizer

TERMINATION = logs.logger("termination")
#: The value of the load-balancer exclusion label on a node Karpenter drains.
EXCLUDED_BY = "karpenter"
#: A node still draining is looked at again this soon (Karpenter's RequeueAfter), and its instance looked up at
#: most this often.
REQUEUE_SECONDS = 1.0
#: v1.14.1's `MinDrainTime`: a NodeClaim's node is drained no sooner than this after its Drained condition turned
#: Unknown (pods the scheduler bound before it saw the taint are drained too).
MIN_DRAIN_SECONDS = 5.0
#: An instance being terminated is looked at again this often (v1.14.1's `awaitInstanceTermination` requeue).
INSTANCE_REQUEUE_SECONDS = 5.0


def waited_for(pods: Sequence[PodRecord], now: dt.datetime, nodepool: bool = False) -> list[PodRecord]:
    """The pods on a draining node that its drain waits for (see the module docstring), `now` by the wall clock; on
    a NodePool's node (`nodepool`) a pod tolerating the disrupted taint is left instead of one tolerating the
    cordon, and a DaemonSet's pod is drained too (v1.14.1's `IsWaitingEviction`)."""
    return [
        p for p in pods
        if not p.terminal and (nodepool or not p.daemon) and not p.static
        and not (p.tolerates_disrupted if nodepool else p.tolerates_unschedulable)
        and not p.stuck_terminating(now)
    ]


def to_evict(pods: Sequence[PodRecord], nodepool: bool = False) -> list[PodRecord]:
    """Of the pods waited for, those to evict now: not being deleted yet, the non-critical ones first — the
    critical ones only once no other is left to evict. On a NodePool's node, v1.14.1's groups (terminator.go
    `groupPodsByPriority`): non-critical pods, non-critical DaemonSets' pods, critical pods, critical DaemonSets'
    pods — a group's pods only once every pod of the groups before it is gone (not merely being deleted)."""
    if nodepool:
        for group in ((False, False), (False, True), (True, False), (True, True)):
            members = [p for p in pods if (p.critical, p.daemon) == group]
            if members:
                return [p for p in members if not p.deleting]
        return []
    pending = [p for p in pods if not p.deleting]
    ordinary = [p for p in pending if not p.critical]
    return ordinary or pending


class Terminator:
    """See the module docstring. It follows the state: a node of ours that gets a deletionTimestamp joins the
    nodes it drains (and `wake` is set), one that leaves the cluster leaves them."""

    def __init__(self, context: Context, attachments: AttachmentIndex) -> None:
        self.context = context
        #: The VolumeAttachments by node (`kube.attachments`: an informer, or a watch drained step by step), brought
        #: up to date once per pass, the first time a node needs them.
        self.attachments = attachments
        self.cluster = context.cluster
        self.cloud = context.cloud
        self.state = context.state
        self.evictions = Evictions(context.cluster, context.clock)
        self.metrics = context.metrics
        self.events = context.events
        self._told: set[tuple[str, str]] = set()  # (what, whom) already logged
        self._terminating: set[str] = set()
        self._finished: set[str] = set()  # uids whose finalizer we removed (a late event must not drain them again)
        self._looked_up: dict[str, float] = {}  # node name → when its instance was last looked up
        self._claims_asked: set[str] = set()  # NodeClaims whose deletion was asked
        #: NodeClaim → its instance and its node's labels: released (and counted) once the instance is gone
        self._claims_waiting: dict[str, tuple[str, Mapping[str, str]]] = {}
        self._claims_deleted: set[str] = set()  # NodeClaims deleted (not through their Node) being finalized
        self._deadlines: dict[str, dt.datetime | None] = {}  # node uid → its termination time (`graceperiod`)
        self._drain_began: dict[str, dt.datetime | None] = {}  # node uid → its claim's Drained Unknown since
        self._written: dict[str, dict[str, tuple[str, str]]] = {}  # node uid → claim condition → (status, reason)
        self._instance_asked: dict[str, float] = {}  # node name → when its instance's termination was last asked
        self._attachments_synced = False  # this pass has brought `attachments` up to date
        self._lock = threading.Lock()
        self.wake = threading.Event()
        self.state.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        if change.kind == "node":
            after = change.after
            with self._lock:
                if isinstance(after, NodeRecord) and after.terminating:
                    if after.name not in self._terminating and after.uid not in self._finished:
                        self._terminating.add(after.name)
                        self.wake.set()
                elif isinstance(change.before, NodeRecord):
                    self._terminating.discard(change.before.name)
                    if after is None:
                        self._finished.discard(change.before.uid)
        elif change.kind == "nodeclaim":
            claim = change.after
            with self._lock:
                if isinstance(claim, ClaimRecord) and claim.terminating:
                    if claim.name not in self._claims_deleted:
                        self._claims_deleted.add(claim.name)
                        self.wake.set()
                elif isinstance(change.before, ClaimRecord):
                    self._claims_deleted.discard(change.before.name)
        elif change.kind == "pod":
            before, after = change.before, change.after
            node = (before.node if isinstance(before, PodRecord) else "") or (
                after.node if isinstance(after, PodRecord) else ""
            )
            if node and node in self._terminating:
                self.wake.set()  # a pod of a draining node moved: the drain may go on

    @property
    def draining(self) -> bool:
        return bool(self._terminating)

    def draining_other_than(self, names: frozenset[str]) -> bool:
        """A node is draining that is not one of `names`."""
        return not self._terminating <= names  # one comparison: the set is changed by another thread

    def _once(self, what: str, whom: str, message: str, *args: object, **extra: object) -> None:
        if (what, whom) not in self._told:
            self._told.add((what, whom))
            TERMINATION.info(message, *args, extra=self.context.fields(**extra))

    # --- as a controller (`reconcile.steps.Reconciler`) ------------------------------------------------------

    name = "termination"
    label = LABEL

    def step(self, now: float, result: ReconcileResult) -> float | None:
        """A pass over the nodes being deleted; due again while one drains."""
        done = self.reconcile()
        result.terminated = done
        result.errors.extend(done.errors)
        return done.due

    def poll(self) -> float | None:
        return None

    def reconcile(self) -> Terminated:
        """Take every node being deleted one step further; `due` says when the next step is needed."""
        done = Terminated()
        self._attachments_synced = False
        with self._lock:
            names = sorted(self._terminating)
        waiting: set[str] = set()
        for name in names:
            node = self.state.node(name)
            if node is None or not node.terminating:
                continue
            try:
                waiting.update(p.uid for p in self._step(node, done))
            except (ClusterError, CloudError) as error:
                done.errors.append(f"terminating node {name}: {error}")
        self.evictions.keep_only(waiting)
        with self._lock:
            deleted = sorted(self._claims_deleted)
        for claim in deleted:
            try:
                self._finalize_claim(claim, done)
            except (ClusterError, CloudError) as error:
                done.errors.append(f"finalizing nodeclaim {claim}: {error}")
        self._finish_claims(done)
        if self.draining or self._claims_waiting or self._claims_deleted:
            done.due = self.context.clock() + REQUEUE_SECONDS
        return done

    def _finish_claims(self, done: Terminated) -> None:
        """Remove the finalizer of each NodeClaim whose Node is released once its instance is gone."""
        for claim, (instance, labels) in sorted(self._claims_waiting.items()):
            try:
                if instance and self.cloud.get(instance) is not None:
                    continue
                if self.context.claims.release(claim):
                    del self._claims_waiting[claim]
                    self._claims_asked.discard(claim)
                    self.metrics.nodeclaims_terminated.labels(  # v1.14.1's lifecycle controller.go `finalize`
                        labels.get(wk.NODEPOOL, ""), labels.get(wk.CAPACITY_TYPE, ""), labels.get(wk.ZONE, "")
                    ).inc()
            except (ClusterError, CloudError) as error:
                done.errors.append(f"releasing nodeclaim {claim}: {error}")

    def _finalize_claim(self, name: str, done: Terminated) -> None:
        """One step of a deleted NodeClaim's finalization (see the module docstring): delete its Nodes, or, with
        none left, terminate its instance and hand it to `_finish_claims`."""
        claim = self.state.claim(name)
        if claim is None or not claim.terminating or name in self._claims_waiting:
            with self._lock:
                self._claims_deleted.discard(name)
            return
        nodes = self._nodes_of(claim)
        if nodes:
            for node in nodes:
                if not node.deleting:
                    delete_node(self.cluster, node.obj)
                    self._once("claim-node", f"{name}/{node.name}", "deleting node %s of deleted nodeclaim %s",
                               node.name, name, node=node.name, nodeclaim=name)
            return  # their termination releases the claim (`_release`)
        late = self.cluster.get(NODE, claim.node_name) if claim.node_name else None
        if late is not None and claim_of_node(late) == name:
            return  # the state has not seen its Node yet: never terminate an instance from under a Node
        instance = claim.instance_id
        if instance and self.state.node_of_instance(instance) is not None:
            self._once("claim-other", name, "instance %s of deleted nodeclaim %s has another claim's node: not "
                       "terminated", instance, name, nodeclaim=name, instance=instance)
            instance = ""  # never an instance from under a Node
        found = self.cloud.get(instance) if instance else None
        if found is not None and found.tags.get(cluster_tag(self.context.options.cluster_name)) != "owned":
            self._once("claim-foreign", name, "instance %s of deleted nodeclaim %s is not this cluster's: not "
                       "terminated", instance, name, nodeclaim=name, instance=instance)
            instance = ""  # what a claim names is not proof that the instance is ours: released, never terminated
        elif found is not None:
            with contextlib.suppress(InstanceNotFound):
                self.cloud.delete(instance)
            self._once("claim-instance", name, "terminating instance %s of deleted nodeclaim %s", instance, name,
                       nodeclaim=name, instance=instance)
        self._claims_asked.add(name)
        self._claims_waiting[name] = (instance, dict(claim.labels))
        with self._lock:
            self._claims_deleted.discard(name)

    def _nodes_of(self, claim: ClaimRecord) -> list[NodeRecord]:
        """The Nodes of a NodeClaim: on its instance (`AllNodesForNodeClaim`: by providerID), the one its status
        names if that Node names it as owner, or (no instance known) any naming it as owner — never a Node only
        because a claim names it."""
        name = claim.name
        named = self.state.node(claim.node_name) if claim.node_name else None
        on_instance = self.state.node_of_instance(claim.instance_id) if claim.instance_id else None
        found = {
            node.name: node
            for node in (
                on_instance if on_instance is not None and claim_of_node(on_instance.obj) in (None, name) else None,
                named if named is not None and claim_of_node(named.obj) == name else None,
            )
            if node is not None
        }
        if not found and not claim.instance_id:
            found = {node.name: node for node in self.state.nodes() if claim_of_node(node.obj) == claim.name}
        return [found[name] for name in sorted(found)]

    def _step(self, node: NodeRecord, done: Terminated) -> list[PodRecord]:
        """One step for one node; the pods it still waits for."""
        self._cordon(node, done)
        claim = claim_of_node(node.obj)
        if claim is not None and claim not in self._claims_asked:
            self.context.claims.delete(claim)
            self._claims_asked.add(claim)
        nodepool = is_nodepool(node.provisioner or "")
        if nodepool and not node.ready and self._instance_gone(node):
            # v1.14.1 (controller.go:114): a NotReady node whose instance is gone is released at once, drained or
            # not; a Ready one is not — its kubelet still posts, something runs there — and goes through every step
            self._once("gone", node.name, "instance %s of node %s is already gone and the node is not Ready: "
                       "releasing it", node.instance_id, node.name, node=node.name, instance=node.instance_id)
            self._release(node, done)
            return []
        now = self.context.wall_clock()
        on_node = self.state.pods_on(node.name)
        self._note_stuck(node, on_node, now)
        pods = waited_for(on_node, now, nodepool)
        if nodepool and claim is not None and node.uid not in self._drain_began:
            self._drain_began[node.uid] = self._begin_drain(claim, now)
        deadline = self._termination_time(node, claim) if claim is not None else None
        deleted = self._delete_expiring(pods, deadline, now, done) if deadline is not None else set()
        evictable = []  # v1.14.1's groups are of the pods waited for; those it evicts, of one group
        for pod in to_evict(pods, nodepool):
            if pod.uid in deleted:
                continue
            if nodepool:  # `IsEvictable`: do-not-disrupt read with the recorder, its Event published (deduped)
                held = grace.do_not_disrupt(pod, now)
                event = events.do_not_disrupt(pod.obj, held)
                if event is not None:
                    self.events.publish(event)
                if held.active:
                    continue
            evictable.append(pod)
        for pod in evictable:
            self._evict(node, pod, done)
        if pods:
            if not nodepool and self._instance_gone(node):
                self._once("gone", node.name, "instance %s of node %s is already gone: not waiting for %d pod(s)",
                           node.instance_id, node.name, len(pods), node=node.name, instance=node.instance_id)
                self._release(node, done)
                return []
            self.events.publish(events.failed_draining(node.obj, f"{len(pods)} pods are waiting to be evicted"))
            return pods
        if nodepool:
            v1_claim = claim if node.uid in self._drain_began else None
            if not self._drained(node, v1_claim, now) or not self._volumes_detached(node, v1_claim, deadline,
                                                                                     on_node, now, done):
                return []
            if v1_claim is not None:  # v1.14.1: the instance gone first, then the finalizer
                if self._instance_terminated(node, v1_claim):
                    self._release(node, done)
                return []
            # v1.14.1's `awaitInstanceTermination` does nothing without a claim: the finalizer goes, the instance is
            # left to garbage collection (an instance no Node names; the aws provider's, one no NodeClaim names)
            self._once("claimless", node.name, "node %s has no NodeClaim: its instance %s is left to garbage "
                       "collection", node.name, node.instance_id, node=node.name, instance=node.instance_id)
            self._release(node, done)
            return []
        instance = node.instance_id
        if instance:
            with contextlib.suppress(InstanceNotFound):
                self.cloud.delete(instance)
        self._release(node, done)
        return []

    # --- v1.14.1's steps after the drain (core pkg/controllers/node/termination/controller.go) -----------------

    def _begin_drain(self, claim: str, now: dt.datetime) -> dt.datetime | None:
        """Mark the claim Drained Unknown (`Draining`) unless it has a Drained condition already; when the drain
        began (None: the claim is gone or was drained before — nothing to wait for)."""
        found = self.context.claims.read(claim)
        if found is None:
            return None
        status = found.get("status")
        held = status.get("conditions") if isinstance(status, dict) else None
        held = held if isinstance(held, list) else []
        drained = cond.status_of(held, cond.DRAINED)
        if drained is None:
            self.context.claims.set_unknown(claim, cond.DRAINED, cond.DRAINING)
            return now
        return (cond.transition_time(held, cond.DRAINED) or now) if drained == "Unknown" else None

    def _condition(self, node: NodeRecord, claim: str | None, kind: str, status: str, reason: str = "") -> None:
        """Write a condition on the node's claim once (None: no claim, nothing written)."""
        if claim is None:
            return
        written = self._written.setdefault(node.uid, {})
        if written.get(kind) == (status, reason):
            return
        if status == "True":
            self.context.claims.set_true(claim, kind)
        elif status == "Unknown":
            self.context.claims.set_unknown(claim, kind, reason)
        else:
            self.context.claims.set_false(claim, kind, reason)
        written[kind] = (status, reason)

    def _drained(self, node: NodeRecord, claim: str | None, now: dt.datetime) -> bool:
        """`awaitDrain`'s end: no pod waited for, and MinDrainTime since the drain began; the claim Drained."""
        began = self._drain_began.get(node.uid)
        if began is not None and (now - began).total_seconds() < MIN_DRAIN_SECONDS:
            return False
        # v1.14.1 counts it once, when the claim turns Drained (controller.go:172): `began` is None for a claim
        # found Drained already (before a restart) or gone
        if began is not None and self._written.get(node.uid, {}).get(cond.DRAINED) != ("True", ""):
            self.metrics.node_drained(node.labels.get(wk.NODEPOOL, ""))
        self._condition(node, claim, cond.DRAINED, "True")
        return True

    def _volumes_detached(
        self, node: NodeRecord, claim: str | None, deadline: dt.datetime | None, on_node: Sequence[PodRecord],
        now: dt.datetime, done: Terminated,
    ) -> bool:
        """`awaitVolumeDetachment`: no VolumeAttachment holds the node (`volumes`), or its termination time has
        passed; unknown attachments (the list forbidden, failing or of another shape) hold it until then too."""
        pending = self._pending_volumes(node, on_node, now, done)
        if pending == []:
            self._condition(node, claim, cond.VOLUMES_DETACHED, "True")
            return True
        if deadline is not None and now > deadline:
            self._condition(node, claim, cond.VOLUMES_DETACHED, "False", cond.TERMINATION_GRACE_PERIOD_ELAPSED)
            self._once("volumes-elapsed", node.name, "node %s reached its termination time: not waiting for its "
                       "volume attachments", node.name, node=node.name)
            return True
        if pending is not None:
            names = sorted(a.name for a in pending)
            self.events.publish(events.awaiting_volume_detachment(node.obj, names))
            self._condition(node, claim, cond.VOLUMES_DETACHED, "Unknown", cond.AWAITING_VOLUME_DETACHMENT)
            self._once("volumes", node.name, "waiting for %d volume attachment(s) of node %s to be deleted",
                       len(names), node.name, node=node.name)
        return False

    def _pending_volumes(
        self, node: NodeRecord, on_node: Sequence[PodRecord], now: dt.datetime, done: Terminated
    ) -> list[Attachment] | None:
        """The VolumeAttachments that hold the node (the index, brought up to date once per pass: no list per node);
        None when they cannot be known."""
        try:
            if not self._attachments_synced:
                self._attachments_synced = True
                self.attachments.sync()
            found = self.attachments.on(node.name)
            return volumes.pending(found, on_node, now, lambda ns, claim: bound_volume(self.cluster, ns, claim))
        except ClusterError as error:
            message = f"the volume attachments of node {node.name} cannot be read ({error}): not terminating it"
            done.errors.append(message)
            if ("volumes-unknown", node.name) not in self._told:
                self._told.add(("volumes-unknown", node.name))
                TERMINATION.error(message, extra=self.context.fields(node=node.name))
            return None

    def _instance_terminated(self, node: NodeRecord, claim: str) -> bool:
        """`awaitInstanceTermination`: ask for the instance's termination (unless it is shutting down already), the
        claim InstanceTerminating; True once the cloud no longer knows it (looked at again every
        INSTANCE_REQUEUE_SECONDS)."""
        instance = node.instance_id
        if not instance:
            return True
        now = self.context.clock()
        last = self._instance_asked.get(node.name)
        if last is not None and now - last < INSTANCE_REQUEUE_SECONDS:
            return False
        found = self.cloud.get(instance)
        if found is not None and found.state != STATE_SHUTTING_DOWN:  # once: as aws's Delete skips a shutting-down one
            with contextlib.suppress(InstanceNotFound):
                self.cloud.delete(instance)
            found = self.cloud.get(instance)
        self._condition(node, claim, cond.INSTANCE_TERMINATING, "True")
        if found is None:
            return True
        self._instance_asked[node.name] = now
        self._once("instance", node.name, "waiting for instance %s of node %s to terminate", instance, node.name,
                   node=node.name, instance=instance)
        return False

    def _termination_time(self, node: NodeRecord, claim: str) -> dt.datetime | None:
        """The node's termination time from its NodeClaim (`graceperiod`), written on the claim once and remembered
        per node; None when the claim has no terminationGracePeriod (or is gone)."""
        if node.uid in self._deadlines:
            return self._deadlines[node.uid]
        found = self.context.claims.read(claim)
        deadline = None
        if found is not None:
            asked = objects.deletion_timestamp(found) or node.deletion_timestamp
            try:
                requested = objects.parse_time(asked) if asked else self.context.wall_clock()
            except ValueError:
                requested = self.context.wall_clock()
            deadline = grace.termination_time(found, requested)
            if deadline is not None:
                stamp = objects.format_time(deadline)
                if grace.TERMINATION_TIMESTAMP not in objects.annotations(found):
                    self.context.claims.annotate(claim, {grace.TERMINATION_TIMESTAMP: stamp})
                self.events.publish(events.termination_grace_period_expiring(node.obj, stamp))
                self._once("deadline", node.name, "all pods of node %s will be deleted by %s", node.name, stamp,
                           node=node.name, nodeclaim=claim)
        if len(self._deadlines) > 100_000:
            self._deadlines.clear()
        self._deadlines[node.uid] = deadline
        return deadline

    def _delete_expiring(
        self, pods: Sequence[PodRecord], deadline: dt.datetime, now: dt.datetime, done: Terminated
    ) -> set[str]:
        """Delete the pods whose time has come before the termination time (`graceperiod`); their uids."""
        deleted = set()
        stamp = objects.format_time(deadline)
        for pod in pods:
            if not grace.due_for_deletion(pod, deadline, now):
                continue
            seconds = grace.shortened_grace(deadline, now)
            with contextlib.suppress(NotFound):
                self.cluster.delete(objects.POD, pod.name, pod.namespace, grace_period_seconds=seconds)
            deleted.add(pod.uid)
            done.evicted.append(pod.key)
            self.events.publish(events.disrupt_pod_delete(pod.obj, seconds, grace.pod_grace_seconds(pod.obj), stamp))
            self._once("graceperiod", pod.key, "deleting pod %s with %ds of grace: its node terminates at %s",
                       pod.key, seconds, stamp, pod=pod.key)
        return deleted

    def _cordon(self, node: NodeRecord, done: Terminated) -> None:
        label = wk.EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS
        if is_nodepool(node.provisioner or ""):  # v1.14.1's `Terminator.Taint`: the disrupted taint, no cordon
            taint = node_info.disrupted_taint_patch(node.obj, True)
            if taint is None and node.labels.get(label) == EXCLUDED_BY:
                return
            patch = taint or {"metadata": {}}
            patch["metadata"]["labels"] = {label: EXCLUDED_BY}
            self.cluster.patch(objects.NODE, node.name, patch)
            done.cordoned.append(node.name)
            self._once("cordon", node.name, "tainted node", node=node.name, taint=f"{wk.TAINT_DISRUPTED}:NoSchedule")
            return
        if node.unschedulable and node.labels.get(label) == EXCLUDED_BY:
            return
        patch = {"spec": {"unschedulable": True}, "metadata": {"labels": {label: EXCLUDED_BY}}}
        self.cluster.patch(objects.NODE, node.name, patch)
        done.cordoned.append(node.name)
        self._once("cordon", node.name, "Cordoned node", node=node.name)

    def _note_stuck(self, node: NodeRecord, pods: Sequence[PodRecord], now: dt.datetime) -> None:
        for pod in pods:
            if pod.stuck_terminating(now):
                self._once("stuck", pod.key, "pod %s is stuck terminating (deleted at %s): not waiting for it",
                           pod.key, pod.deletion_timestamp, node=node.name)

    def _evict(self, node: NodeRecord, pod: PodRecord, done: Terminated) -> None:
        attempt = self.evictions.evict(pod)
        if attempt.outcome != "waiting":  # an eviction asked of the API
            self.metrics.evictions.labels(attempt.outcome).inc()
        if attempt.outcome == "evicted":
            done.evicted.append(pod.key)
            self.events.publish(events.evicted(pod.obj))
        elif attempt.outcome in ("refused", "waiting"):
            done.blocked[pod.key] = attempt.detail
            if attempt.outcome == "refused":
                self.events.publish(events.failed_draining(node.obj, f"evicting pod {pod.key} violates a PDB"))
                self._once("pdb", pod.key, "eviction of pod %s refused (a PodDisruptionBudget): retrying", pod.key,
                           node=node.name)
        elif attempt.outcome == "failed":
            done.blocked[pod.key] = attempt.detail
            done.errors.append(attempt.detail)

    def _instance_gone(self, node: NodeRecord) -> bool:
        """The cloud no longer knows the node's instance (looked up at most every REQUEUE_SECONDS per node)."""
        instance = node.instance_id
        if not instance:
            return False
        now = self.context.clock()
        last = self._looked_up.get(node.name)
        if last is not None and now - last < REQUEUE_SECONDS:
            return False
        self._looked_up[node.name] = now
        return self.cloud.get(instance) is None

    def _release(self, node: NodeRecord, done: Terminated) -> None:
        remove_finalizer(self.cluster, node.name)
        claim = claim_of_node(node.obj)
        if claim is not None:
            self._claims_waiting[claim] = (node.instance_id, dict(node.labels))
        self._deadlines.pop(node.uid, None)
        self._drain_began.pop(node.uid, None)
        self._written.pop(node.uid, None)
        self._instance_asked.pop(node.name, None)
        with self._lock:
            self._terminating.discard(node.name)  # done: the state showing it a moment longer changes nothing
            self._finished.add(node.uid)
        self._looked_up.pop(node.name, None)
        done.deleted.append(node.name)
        self.metrics.node_terminated(node.provisioner or "", self._since(node.deletion_timestamp),
                                     self._since(objects.creation_timestamp(node.obj)), node.labels.get(wk.ZONE, ""))
        TERMINATION.info("Deleted node", extra=self.context.fields(node=node.name, instance=node.instance_id))

    def _since(self, stamp: str | None) -> float | None:
        """Seconds from an API timestamp to now by the wall clock (None: no readable timestamp)."""
        try:
            return (self.context.wall_clock() - objects.parse_time(stamp)).total_seconds() if stamp else None
        except ValueError:
            return None


__all__ = [
    "EXCLUDED_BY", "INSTANCE_REQUEUE_SECONDS", "MIN_DRAIN_SECONDS", "REQUEUE_SECONDS", "Terminator", "to_evict",
    "waited_for",
]
